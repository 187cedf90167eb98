package jobs

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// TestPauseEnv names the test-only switch that makes the bridge stop at a named point of a
// Job's flow, so that a test can SIGKILL it exactly there (tests/k8s/bridge_jobs_test.sh). Off
// unless set; never set it in a deployment: a paused bridge does nothing more until restarted.
//
//	ADMIT_K8S_TEST_PAUSE_AT=STEP:NAMESPACE/WORKLOAD
//
// STEP is one of TestPauseSteps. At that point, for that workload, the bridge prints
// "admit-k8s: test pause at STEP NAMESPACE/WORKLOAD" to stderr and blocks until it is stopped.
const TestPauseEnv = "ADMIT_K8S_TEST_PAUSE_AT"

// TestPauseSteps: where a pause can be.
var TestPauseSteps = map[string]string{
	"evicted-before-suspend": "the ledger evicts the workload; its Job still runs (not yet suspended)",
	"before-terminated":      "the evicted Job has no pods left; `terminated` not yet reported",
	"before-pods-released":   "the ledger admitted the workload; `pods released` (or failedToStart) not yet reported",
	"before-unsuspend":       "`pods released` is in the ledger and the admission is on the Job; not yet unsuspended",
}

var testPause = parseTestPause(os.Getenv(TestPauseEnv))

type testPauseAt struct{ step, namespace, name string }

func parseTestPause(value string) *testPauseAt {
	if value == "" {
		return nil
	}
	step, workload, _ := strings.Cut(value, ":")
	namespace, name, _ := strings.Cut(workload, "/")
	if _, known := TestPauseSteps[step]; !known || namespace == "" || name == "" {
		fmt.Fprintf(os.Stderr, "admit-k8s: %s=%q is not STEP:NAMESPACE/WORKLOAD with STEP one of %v; exiting\n",
			TestPauseEnv, value, stepNames())
		os.Exit(2)
	}
	return &testPauseAt{step: step, namespace: namespace, name: name}
}

func stepNames() []string {
	names := make([]string, 0, len(TestPauseSteps))
	for name := range TestPauseSteps {
		names = append(names, name)
	}
	return names
}

// pauseAt blocks (until ctx ends) when the test pause names this step and workload.
func pauseAt(ctx context.Context, step string, state *LedgerWorkload) {
	p := testPause
	if p == nil || p.step != step || p.namespace != state.Namespace || p.name != state.Name {
		return
	}
	fmt.Fprintf(os.Stderr, "admit-k8s: test pause at %s %s/%s\n", step, state.Namespace, state.Name)
	<-ctx.Done()
}
