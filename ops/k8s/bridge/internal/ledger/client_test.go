package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"capnproto.org/go/capnp/v3"
	"capnproto.org/go/capnp/v3/rpc"

	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/ledgerrpc"
)

// refusingLedger answers every recordManifest with one refusal, as admitd answers a call it
// refused. The other methods are not served (the embedded interface is nil).
type refusingLedger struct {
	ledgerrpc.Ledger_Server
	code    uint8
	message string
}

func (l *refusingLedger) RecordManifest(_ context.Context, call ledgerrpc.Ledger_recordManifest) error {
	results, err := call.AllocResults()
	if err != nil {
		return err
	}
	refusal, err := results.NewError()
	if err != nil {
		return err
	}
	refusal.SetCode(l.code)
	return refusal.SetMessage_(l.message)
}

// serve answers Cap'n Proto RPC connections on a Unix socket with server as the bootstrap
// capability, until the test ends; it returns the socket's unix: address.
func serve(t *testing.T, server ledgerrpc.Ledger_Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admitd.sock")
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Close() })
	go func() {
		for {
			stream, err := listener.Accept()
			if err != nil {
				return
			}
			conn := rpc.NewConn(rpc.NewStreamTransport(stream), &rpc.Options{
				BootstrapClient: capnp.Client(ledgerrpc.Ledger_ServerToClient(server)),
			})
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	return "unix:" + path
}

// A refusal reaches the caller as a *Refused with admitd's code and message as sent: the
// bridge decides by the code (a definition still in use is FailedPrecondition, retried later by
// the definitions reconciler; InvalidArgument is final), never by the message's text.
func TestRefusedCarriesAdmitdsCode(t *testing.T) {
	for _, tc := range []struct {
		code      uint8
		message   string
		retryable bool
	}{
		{CodeFailedPrecondition, "input 0 refused: cannot delete ResourceFlavor 'default-flavor': " +
			"in use by ClusterQueue cluster-queue (delete it or remove the reference first); nothing recorded", false},
		{CodeInvalidArgument, "input 0 refused: cannot delete ClusterQueue 'nosuch': the ledger " +
			"does not define it; nothing recorded", false},
		{CodeNoSpace, "the ledger's disk is full", true},
	} {
		client, err := New(Options{Address: serve(t, &refusingLedger{code: tc.code, message: tc.message})})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.RecordManifest(context.Background(), "bridge/deleted/1", "delete", "{}")
		client.Close()
		var refused *Refused
		if !errors.As(err, &refused) {
			t.Fatalf("code %d: want a *Refused, got %v", tc.code, err)
		}
		if refused.Code != tc.code || refused.Message != tc.message {
			t.Errorf("got code %d %q, want code %d %q", refused.Code, refused.Message, tc.code, tc.message)
		}
		if refused.Retryable() != tc.retryable {
			t.Errorf("code %d: Retryable() = %v, want %v", tc.code, refused.Retryable(), tc.retryable)
		}
	}
}

// countingLedger answers every recordManifest with a refusal after a pause, counting the calls
// under way at once.
type countingLedger struct {
	ledgerrpc.Ledger_Server
	mu        sync.Mutex
	now, most int
}

func (l *countingLedger) RecordManifest(_ context.Context, call ledgerrpc.Ledger_recordManifest) error {
	call.Go() // answer calls concurrently, as admitd does
	l.mu.Lock()
	l.now++
	l.most = max(l.most, l.now)
	l.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	l.mu.Lock()
	l.now--
	l.mu.Unlock()
	return (&refusingLedger{code: CodeInvalidArgument, message: "no"}).RecordManifest(context.Background(), call)
}

// However many reconciles forward manifests at once, at most ManifestCallsMax reach admitd at
// once: admitd parses them one at a time and refuses (Overloaded) a call beyond its queue of
// 16, which the bridge would retry only after seconds.
func TestManifestCallsAreBounded(t *testing.T) {
	server := &countingLedger{}
	client, err := New(Options{Address: serve(t, server)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var wg sync.WaitGroup
	for i := range 4 * ManifestCallsMax {
		wg.Go(func() {
			_, err := client.RecordManifest(context.Background(), fmt.Sprint("r/", i), "apply", "{}")
			var refused *Refused
			if !errors.As(err, &refused) {
				t.Errorf("call %d: %v, want the refusal", i, err)
			}
		})
	}
	wg.Wait()
	if server.most > ManifestCallsMax || server.most < 2 {
		t.Fatalf("%d calls at once reached admitd, want 2 to %d", server.most, ManifestCallsMax)
	}
}

// An outcome names the workloads its decisions are about (an event about none adds nothing),
// and says so only when it could read every decision.
func TestOutcomeNamesTheWorkloadsOfItsDecisions(t *testing.T) {
	event := func(fill func(ledgerevents.Event_body) error) []byte {
		bytes, err := BuildEvent(func(e ledgerevents.Event) error { return fill(e.Body()) })
		if err != nil {
			t.Fatal(err)
		}
		return bytes
	}
	admitted := event(func(b ledgerevents.Event_body) error {
		a, err := b.NewAdmitted()
		if err != nil {
			return err
		}
		return SetNewWorkloadRef(a, "ml", "a", "uid-a")
	})
	tick := event(func(b ledgerevents.Event_body) error { _, err := b.NewClockAdvanced(); return err })
	outcome := func(decisions ...[]byte) Outcome {
		_, segment, err := capnp.NewMessage(capnp.SingleSegment(nil))
		if err != nil {
			t.Fatal(err)
		}
		o, err := ledgerrpc.NewRootOutcome(segment)
		if err != nil {
			t.Fatal(err)
		}
		list, _ := o.NewDecisions(int32(len(decisions)))
		for i, d := range decisions {
			if err := list.Set(i, d); err != nil {
				t.Fatal(err)
			}
		}
		o.SetFirstDecisionSequence(8)
		out, err := outcomeOf("record", func() bool { return false }, nil,
			func() (ledgerrpc.Outcome, error) { return o, nil })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := outcome(admitted, tick, admitted); !got.DecidedKnown || got.Last != 10 ||
		fmt.Sprint(got.Decided) != "[ml/a ml/a]" {
		t.Fatalf("outcome: %+v", got)
	}
	if got := outcome(); !got.DecidedKnown || len(got.Decided) != 0 {
		t.Fatalf("no decisions: %+v", got)
	}
	if got := outcome(admitted, []byte{1, 2, 3}); got.DecidedKnown {
		t.Fatalf("a decision that cannot be read: %+v", got)
	}
}
