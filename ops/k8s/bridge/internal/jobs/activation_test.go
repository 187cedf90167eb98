package jobs

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"admission-ledger/bridge/internal/ledger"
)

// spec.active goes both ways, as in Kueue: a user's change of the Workload object is forwarded
// to the ledger; the ledger's own (a check deactivated it, admitctl resume reactivated it) is
// written into the object; neither is sent back where it came from.
func TestSpecActiveFollowsTheUserAndTheLedger(t *testing.T) {
	wl, c, l, r, req := ownedWorkloadFixture(nil)
	stored := func() *unstructured.Unstructured {
		got := newWorkloadObject()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(wl), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	setSpecActive := func(active bool) {
		obj := stored()
		_ = unstructured.SetNestedField(obj.Object, active, "spec", "active")
		if err := c.Update(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	step := func(name string, wantInputs string, wantActive bool) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got, _ := specActive(stored())
		if strings.Join(l.inputs, ";") != wantInputs || got != wantActive {
			t.Fatalf("%s: inputs %q, spec.active %v; want %q, %v", name, l.inputs, got, wantInputs, wantActive)
		}
	}
	l.setPhase(ledger.PhasePending, map[string]any{})
	step("active on both sides", "", true)
	setSpecActive(false)
	step("the user stops it", "activate false", false)
	l.setPhase(ledger.PhaseDeactivated, map[string]any{})
	step("the ledger agrees: nothing more", "activate false", false)
	l.setPhase(ledger.PhasePending, map[string]any{})
	step("admitctl resume in the ledger: written into the object", "activate false", true)
	l.setPhase(ledger.PhaseDeactivated, map[string]any{})
	step("deactivated by the ledger (a check): written into the object", "activate false", false)
	setSpecActive(true)
	step("the user resumes it", "activate false;activate true", true)
	l.setPhase(ledger.PhaseFinished, map[string]any{})
	setSpecActive(false)
	step("an ended workload: only the annotation follows", "activate false;activate true", false)
}
