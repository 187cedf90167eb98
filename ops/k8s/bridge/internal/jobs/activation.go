package jobs

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"admission-ledger/bridge/internal/ledger"
	"admission-ledger/bridge/internal/ledgerevents"
)

// ActiveAnnotation holds the spec.active of a Workload object that the bridge last agreed with
// the ledger on ("true" when absent). A spec.active that differs from it is a user's change
// (kubectl patch, kueuectl stop|resume workload) to forward; the same one with a ledger that
// changed (a check's rejection deactivated it, admitctl resume reactivated it) is the ledger's
// change to write into the object, as Kueue's controller sets spec.active itself.
const ActiveAnnotation = "admission-ledger.io/active"

// specActive is the object's spec.active (Kueue's default: true) and the annotation's value.
func specActive(wl *unstructured.Unstructured) (desired, agreed bool) {
	desired, found, _ := unstructured.NestedBool(wl.Object, "spec", "active")
	if !found {
		desired = true
	}
	agreed = true
	if v, err := strconv.ParseBool(wl.GetAnnotations()[ActiveAnnotation]); err == nil {
		agreed = v
	}
	return desired, agreed
}

// syncActivation brings a Workload object's spec.active and the ledger's together (engine
// v21's workloadActivationSet). done: it recorded or wrote something, and the reconcile ends
// here (the ledger's decision or the object's change triggers the next).
func (r *Reconciler) syncActivation(ctx context.Context, wl *unstructured.Unstructured,
	state *LedgerWorkload) (bool, error) {
	desired, agreed := specActive(wl)
	ended := state.Phase.Ended() && state.Phase != ledger.PhaseDeactivated
	switch {
	case desired != agreed:
		if !ended && desired != state.Active {
			event, err := ActivationEvent(state.Namespace, state.Name, state.UID, desired)
			if err != nil {
				return true, err
			}
			id := fmt.Sprintf("by/admit-k8s/activate/%s/%s/%s/%d/%t", state.Namespace, state.Name,
				state.UID, wl.GetGeneration(), desired)
			if _, err := r.Ledger.Record(ctx, id, [][]byte{event}); err != nil {
				return true, err
			}
			log.FromContext(ctx).Info("forwarded spec.active", "workload", wl.GetName(), "active", desired)
		}
		return true, r.setActive(ctx, wl, desired)
	case ended || desired == state.Active:
		return false, nil
	default:
		// The ledger changed it: Kueue's controller writes spec.active itself.
		return true, r.setActive(ctx, wl, state.Active)
	}
}

// setActive patches spec.active and the annotation to active.
func (r *Reconciler) setActive(ctx context.Context, wl *unstructured.Unstructured, active bool) error {
	before := wl.DeepCopy()
	if err := unstructured.SetNestedField(wl.Object, active, "spec", "active"); err != nil {
		return err
	}
	annotations := wl.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ActiveAnnotation] = strconv.FormatBool(active)
	wl.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, wl, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing spec.active of Workload %s/%s: %w", wl.GetNamespace(), wl.GetName(), err)
	}
	return nil
}

// ActivationEvent is the input `admitctl stop|resume workload NAMESPACE/NAME` records.
func ActivationEvent(namespace, name, uid string, active bool) ([]byte, error) {
	return ledger.BuildEvent(func(event ledgerevents.Event) error {
		a, err := event.Body().NewWorkloadActivationSet()
		if err != nil {
			return err
		}
		if err := ledger.SetNewWorkloadRef(a, namespace, name, uid); err != nil {
			return err
		}
		a.SetActive(active)
		return a.SetMessage_("spec.active " + strconv.FormatBool(active) + " on the Workload object")
	})
}
