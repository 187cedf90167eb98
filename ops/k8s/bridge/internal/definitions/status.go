package definitions

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/checks"
)

// StatusInterval is how often ClusterQueue and LocalQueue status is copied from the ledger's
// read models without a reason: a safety resync. The ledger watch (Notify) makes the writer copy
// it as soon as a decision or a definition changed it, after StatusDebounce.
const StatusInterval = 45 * time.Second

// StatusDebounce is how long the writer waits after a notification before it copies, so that
// the decisions of one admission cycle make one copy.
const StatusDebounce = 200 * time.Millisecond

// StatusKinds are the ledger's events that change a ClusterQueue's or a LocalQueue's status.
var StatusKinds = []string{
	"flavorDefined", "cohortDefined", "clusterQueueDefined", "localQueueDefined", "objectDeleted",
	"workloadSubmitted", "workloadImported", "workloadDeleted", "workloadFinished",
	"quotaReserved", "admitted", "evictionStarted", "quotaReleased", "requeued", "rejected",
	"deactivated", "preempted",
	// Admission fair sharing's consumed usage (status.fairSharing of a LocalQueue): its
	// configuration, and the sampling ticks that logical time brings (the ticks that another
	// input brings show at that input's copy, or at the next resync).
	"engineConfigDefined", "clockAdvanced",
}

// Reader is what the status writer needs of the ledger client.
type Reader interface {
	Get(ctx context.Context, kind, format string) (string, error)
}

// StatusWriter writes the ledger's status of every ClusterQueue and LocalQueue (`admitctl get
// clusterqueues|localqueues -o json`: pending, reserving and admitted workloads, flavors'
// reservation and usage, conditions, a LocalQueue's admission fair sharing status) into the objects of the same name in the cluster. Runs
// only on the leader.
type StatusWriter struct {
	Client client.Client
	Ledger Reader
	notify chan struct{}
}

// AddStatusWriter registers the writer with the manager.
func AddStatusWriter(mgr ctrl.Manager, l Reader) (*StatusWriter, error) {
	w := &StatusWriter{Client: mgr.GetClient(), Ledger: l, notify: make(chan struct{}, 1)}
	return w, mgr.Add(w)
}

// NeedLeaderElection: only the leader writes.
func (w *StatusWriter) NeedLeaderElection() bool { return true }

// Notify asks for a copy soon (the ledger watch saw a change); never blocks.
func (w *StatusWriter) Notify() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Start copies the status at once, on each Notify (debounced) and every StatusInterval, until
// ctx ends. A failed round is logged and retried after RetryAfterTransportError.
func (w *StatusWriter) Start(ctx context.Context) error {
	logger := ctrl.Log.WithName("queue-status")
	ticker := time.NewTicker(StatusInterval)
	defer ticker.Stop()
	var retry <-chan time.Time
	for {
		failed := false
		for _, kind := range []string{"ClusterQueue", "LocalQueue"} {
			if err := w.copyStatus(ctx, kind); err != nil && ctx.Err() == nil {
				logger.Error(err, "copying the ledger's status failed; will retry", "kind", kind)
				failed = true
			}
		}
		retry = nil
		if failed {
			retry = time.After(RetryAfterTransportError)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-retry:
		case <-w.notify:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(StatusDebounce):
			}
			select { // the notifications of the wait are covered by this copy
			case <-w.notify:
			default:
			}
		}
	}
}

// copyStatus copies the ledger's status of every object of kind that exists in the cluster.
func (w *StatusWriter) copyStatus(ctx context.Context, kind string) error {
	plural := map[string]string{"ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}[kind]
	text, err := w.Ledger.Get(ctx, plural, "json")
	if err != nil {
		return err
	}
	// utiljson keeps integers as int64, as objects read from the API server have them.
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := utiljson.Unmarshal([]byte(text), &list); err != nil {
		return fmt.Errorf("the ledger's %s are not a JSON List: %w", plural, err)
	}
	for _, item := range list.Items {
		from := unstructured.Unstructured{Object: item}
		status, found, _ := unstructured.NestedMap(item, "status")
		if !found {
			continue
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: StoredVersion, Kind: kind})
		key := types.NamespacedName{Namespace: from.GetNamespace(), Name: from.GetName()}
		if err := w.Client.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue // in the ledger, not (or no longer) in the cluster
			}
			return err
		}
		current, _, _ := unstructured.NestedMap(obj.Object, "status")
		status = keepRecordedCondition(status, current)
		if equality.Semantic.DeepEqual(current, status) {
			continue
		}
		obj.Object["status"] = runtime.DeepCopyJSONValue(status)
		// As the bridge's field manager, which AfsSeed tells from a foreign writer's.
		if err := w.Client.Status().Update(ctx, obj, client.FieldOwner(checks.BridgeFieldManager)); err != nil {
			return fmt.Errorf("writing the status of %s %s: %w", kind, key, err)
		}
	}
	return nil
}
