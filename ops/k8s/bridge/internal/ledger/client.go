// Package ledger is the bridge's client of admitd: Cap'n Proto RPC (schema/admission_rpc.capnp)
// over a Unix socket or TLS with the bridge's own client certificate, whose common name is the
// principal admitd's policy gives roles to (docs/admitd.md, docs/k8s.md).
package ledger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"capnproto.org/go/capnp/v3"
	"capnproto.org/go/capnp/v3/rpc"

	"admission-ledger/bridge/internal/ledgerevents"
	"admission-ledger/bridge/internal/ledgerrpc"
)

// DialTimeout bounds one connection attempt, handshake included.
const DialTimeout = 10 * time.Second

// Codes of admitd's Error (schema/result.h's admission::Code) that the bridge reacts to.
const (
	CodeInvalidArgument  = 1
	CodeNotFound         = 2
	CodeConflict         = 3
	CodeIoError          = 6
	CodeBusy             = 7
	CodePermissionDenied = 8
	CodeOverloaded       = 9
	CodeUnavailable      = 10
	CodeNoSpace          = 11
	// The call is well formed but the ledger's state forbids it now (a definition still in
	// use); only a change elsewhere lets the same call pass.
	CodeFailedPrecondition = 12
)

// Options say where admitd is and how to prove who we are.
type Options struct {
	// Address is unix:PATH or tls:HOST:PORT, as admitctl --connect takes it.
	Address string
	// CertFile, KeyFile and CAFile are required for tls: addresses: our certificate and key,
	// and the CA that signed admitd's certificate.
	CertFile, KeyFile, CAFile string
}

// Refused is admitd's answer to a call that it refused: nothing was written.
type Refused struct {
	Code    uint8
	Message string
}

func (r *Refused) Error() string {
	return fmt.Sprintf("admitd refused the call (code %d): %s", r.Code, r.Message)
}

// Retryable says whether the same call may succeed later (admitd overloaded, shutting down, out
// of disk, or its storage failing); otherwise the call itself is wrong (invalid, not allowed, a
// conflicting retry) and only a changed call can succeed, or (FailedPrecondition) the ledger's
// state forbids it until something else changes, which the caller decides how to wait for.
func (r *Refused) Retryable() bool {
	switch r.Code {
	case CodeIoError, CodeBusy, CodeOverloaded, CodeUnavailable, CodeNoSpace:
		return true
	}
	return false
}

// Outcome of a recorded call: per input, its sequence and whether it was already recorded (or
// identical to the current definition); Retried when the request id was answered before.
type Outcome struct {
	Sequences []uint64
	Unchanged []bool
	Retried   bool
	// Last: the highest sequence of the call's inputs and of the decisions they caused, which
	// the ledger appends right after them (0: not known).
	Last uint64
	// Decided: the workloads (Key) the call's decisions are about, one entry a decision about
	// one (a workload may repeat). DecidedKnown: every decision was read (false: which
	// workloads they changed is not known).
	Decided      []string
	DecidedKnown bool
}

// ManifestCallsMax bounds the RecordManifest calls of one Client under way at once; the others
// wait for a slot, in the caller. admitd parses manifests one at a time and refuses (Overloaded)
// a call beyond the 16 it queues; the reconciles would retry a refused one only after seconds (a
// large-scale run's sixty at once held its workloads' submissions back for ten).
const ManifestCallsMax = 8

// Client holds one connection to admitd and dials again after the connection fails.
// Safe for concurrent use.
type Client struct {
	opts Options
	tls  *tls.Config // nil for unix: addresses
	// manifests: a slot for each RecordManifest call under way (ManifestCallsMax).
	manifests chan struct{}

	mu     sync.Mutex
	conn   *rpc.Conn        // nil: not connected
	ledger ledgerrpc.Ledger // valid while conn is not nil
}

// New checks the options and loads the certificates; it does not connect yet.
func New(opts Options) (*Client, error) {
	c := &Client{opts: opts, manifests: make(chan struct{}, ManifestCallsMax)}
	switch {
	case strings.HasPrefix(opts.Address, "unix:"):
	case strings.HasPrefix(opts.Address, "tls:"):
		if opts.CertFile == "" || opts.KeyFile == "" || opts.CAFile == "" {
			return nil, errors.New("a tls: address of admitd needs --admitd-cert, --admitd-key and --admitd-ca")
		}
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate: %w", err)
		}
		caPEM, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading admitd's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%s holds no PEM certificate", opts.CAFile)
		}
		host, _, err := net.SplitHostPort(strings.TrimPrefix(opts.Address, "tls:"))
		if err != nil {
			return nil, fmt.Errorf("admitd address %q: %w", opts.Address, err)
		}
		c.tls = &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
			ServerName:   host,
			MinVersion:   tls.VersionTLS12,
		}
	default:
		return nil, fmt.Errorf("admitd address %q is neither unix:PATH nor tls:HOST:PORT", opts.Address)
	}
	return c, nil
}

// Close drops the connection.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
}

func (c *Client) dropLocked() {
	if c.conn != nil {
		c.ledger.Release()
		_ = c.conn.Close()
		c.conn = nil
	}
}

// connected returns the Ledger capability of the current connection, dialing first if needed.
func (c *Client) connected(ctx context.Context) (ledgerrpc.Ledger, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		select {
		case <-c.conn.Done():
			c.dropLocked()
		default:
			return c.ledger.AddRef(), nil
		}
	}
	conn, ledger, err := c.dial(ctx)
	if err != nil {
		return ledgerrpc.Ledger{}, err
	}
	c.conn, c.ledger = conn, ledger
	return c.ledger.AddRef(), nil
}

// dial opens a new connection to admitd and returns it with its Ledger capability.
func (c *Client) dial(ctx context.Context) (*rpc.Conn, ledgerrpc.Ledger, error) {
	dialer := net.Dialer{Timeout: DialTimeout}
	var stream net.Conn
	var err error
	if c.tls == nil {
		stream, err = dialer.DialContext(ctx, "unix", strings.TrimPrefix(c.opts.Address, "unix:"))
	} else {
		tlsDialer := tls.Dialer{NetDialer: &dialer, Config: c.tls}
		stream, err = tlsDialer.DialContext(ctx, "tcp", strings.TrimPrefix(c.opts.Address, "tls:"))
	}
	if err != nil {
		return nil, ledgerrpc.Ledger{}, fmt.Errorf("connecting to admitd at %s: %w", c.opts.Address, err)
	}
	conn := rpc.NewConn(rpc.NewStreamTransport(stream), nil)
	return conn, ledgerrpc.Ledger(conn.Bootstrap(ctx)), nil
}

// failed drops the connection after a transport error, so that the next call dials again.
func (c *Client) failed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked()
}

// WhoAmI returns the principal admitd sees for this connection and its roles.
func (c *Client) WhoAmI(ctx context.Context) (string, []string, error) {
	ledger, err := c.connected(ctx)
	if err != nil {
		return "", nil, err
	}
	defer ledger.Release()
	future, release := ledger.Whoami(ctx, nil)
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return "", nil, fmt.Errorf("whoami: %w", err)
	}
	principal, err := results.Principal()
	if err != nil {
		return "", nil, fmt.Errorf("whoami: %w", err)
	}
	list, err := results.Roles()
	if err != nil {
		return "", nil, fmt.Errorf("whoami: %w", err)
	}
	roles := make([]string, 0, list.Len())
	for i := 0; i < list.Len(); i++ {
		role, err := list.At(i)
		if err != nil {
			return "", nil, fmt.Errorf("whoami: %w", err)
		}
		roles = append(roles, role)
	}
	return principal, roles, nil
}

// RecordManifest has admitd parse `manifest` (YAML or JSON) with the ledger's own parser and
// record it: mode "apply" for definitions, "submit" for Workloads and Jobs. A retry with the
// same requestID is answered with the first outcome and writes nothing. Errors: *Refused when
// admitd refused it (nothing written, retrying the same call gets the same answer); any other
// error is the transport's (retry).
func (c *Client) RecordManifest(ctx context.Context, requestID, mode, manifest string) (Outcome, error) {
	select {
	case c.manifests <- struct{}{}:
		defer func() { <-c.manifests }()
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
	ledger, err := c.connected(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer ledger.Release()
	future, release := ledger.RecordManifest(ctx, func(p ledgerrpc.Ledger_recordManifest_Params) error {
		request, err := p.NewRequest()
		if err != nil {
			return err
		}
		if err := request.SetRequestId(requestID); err != nil {
			return err
		}
		if err := request.SetMode(mode); err != nil {
			return err
		}
		return request.SetManifest(manifest)
	})
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return Outcome{}, fmt.Errorf("recordManifest: %w", err)
	}
	return outcomeOf("recordManifest", results.HasError, results.Error, results.Outcome)
}

// Record records serialized events (canonical Cap'n Proto bytes of schema/events.capnp's Event,
// body and optionally idempotencyKey set) as one atomic batch, as admitctl does; the actor is
// our principal. Errors as RecordManifest's.
func (c *Client) Record(ctx context.Context, requestID string, inputs [][]byte) (Outcome, error) {
	ledger, err := c.connected(ctx)
	if err != nil {
		return Outcome{}, err
	}
	defer ledger.Release()
	future, release := ledger.Record(ctx, func(p ledgerrpc.Ledger_record_Params) error {
		request, err := p.NewRequest()
		if err != nil {
			return err
		}
		if err := request.SetRequestId(requestID); err != nil {
			return err
		}
		list, err := request.NewInputs(int32(len(inputs)))
		if err != nil {
			return err
		}
		for i, input := range inputs {
			if err := list.Set(i, input); err != nil {
				return err
			}
		}
		return nil
	})
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return Outcome{}, fmt.Errorf("record: %w", err)
	}
	return outcomeOf("record", results.HasError, results.Error, results.Outcome)
}

// Query narrows a read as admitctl get's arguments do; its zero value reads everything.
// ClusterQueue, LocalQueue (NAMESPACE/NAME), Limit (0: 1000) and Offset are those of
// pendingworkloads.
type Query struct {
	Name, Namespace, Selector string
	ClusterQueue, LocalQueue  string
	Limit, Offset             uint64
}

// Get returns a read model at the head as `admitctl get KIND -o FORMAT` prints it.
// Errors: *Refused (not allowed, unknown kind), or the transport's.
func (c *Client) Get(ctx context.Context, kind, format string) (string, error) {
	return c.GetWith(ctx, kind, format, Query{})
}

// GetWith is Get narrowed by q. Errors: as Get's, and *Refused with CodeNotFound for a named
// object the ledger does not know.
func (c *Client) GetWith(ctx context.Context, kind, format string, q Query) (string, error) {
	ledger, err := c.connected(ctx)
	if err != nil {
		return "", err
	}
	defer ledger.Release()
	future, release := ledger.Get(ctx, func(p ledgerrpc.Ledger_get_Params) error {
		for _, field := range []struct {
			set   func(string) error
			value string
		}{{p.SetKind, kind}, {p.SetFormat, format}, {p.SetName, q.Name},
			{p.SetNamespace, q.Namespace}, {p.SetSelector, q.Selector},
			{p.SetClusterQueue, q.ClusterQueue}, {p.SetLocalQueue, q.LocalQueue}} {
			if err := field.set(field.value); err != nil {
				return err
			}
		}
		p.SetLimit(q.Limit)
		p.SetOffset(q.Offset)
		return nil
	})
	defer release()
	results, err := future.Struct()
	if err != nil {
		c.failed()
		return "", fmt.Errorf("get: %w", err)
	}
	if results.HasError() {
		e, err := results.Error()
		if err != nil {
			return "", fmt.Errorf("get: %w", err)
		}
		return "", refusedOf(e)
	}
	text, err := results.Text()
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	return text, nil
}

func refusedOf(e ledgerrpc.Error) error {
	// capnpc-go names the field `message` Message_: Message() is the struct's capnp.Message.
	message, err := e.Message_()
	if err != nil {
		return err
	}
	return &Refused{Code: e.Code(), Message: message}
}

// outcomeOf reads the (outcome, error) results of record and recordManifest.
func outcomeOf(method string, hasError func() bool, errorOf func() (ledgerrpc.Error, error),
	outcomeOf func() (ledgerrpc.Outcome, error)) (Outcome, error) {
	if hasError() {
		e, err := errorOf()
		if err != nil {
			return Outcome{}, fmt.Errorf("%s: %w", method, err)
		}
		if err := refusedOf(e); err != nil {
			var refused *Refused
			if errors.As(err, &refused) {
				return Outcome{}, refused
			}
			return Outcome{}, fmt.Errorf("%s: %w", method, err)
		}
	}
	o, err := outcomeOf()
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", method, err)
	}
	var out Outcome
	sequences, err := o.Sequences()
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", method, err)
	}
	for i := 0; i < sequences.Len(); i++ {
		out.Sequences = append(out.Sequences, sequences.At(i))
	}
	unchanged, err := o.Unchanged()
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", method, err)
	}
	for i := 0; i < unchanged.Len(); i++ {
		out.Unchanged = append(out.Unchanged, unchanged.At(i))
	}
	out.Retried = o.Retried()
	for _, sequence := range out.Sequences {
		out.Last = max(out.Last, sequence)
	}
	decisions, err := o.Decisions()
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", method, err)
	}
	if decisions.Len() > 0 {
		out.Last = max(out.Last, o.FirstDecisionSequence()+uint64(decisions.Len())-1)
	}
	out.Decided, out.DecidedKnown = decidedWorkloads(o.FirstDecisionSequence(), decisions)
	return out, nil
}

// decidedWorkloads: the workloads the decisions (stored bytes, from sequence first on) are
// about, and whether every decision could be read.
func decidedWorkloads(first uint64, decisions capnp.DataList) ([]string, bool) {
	var keys []string
	for i := 0; i < decisions.Len(); i++ {
		stored, err := decisions.At(i)
		if err != nil {
			return nil, false
		}
		event, err := DecodeWatched(first+uint64(i), stored)
		if err != nil {
			return nil, false
		}
		if event.Name != "" {
			keys = append(keys, Key(event.Namespace, event.Name))
		}
	}
	return keys, true
}

// SetWorkloadRef names a workload in an input, as the inputs about a workload do.
func SetWorkloadRef(ref ledgerevents.WorkloadRef, namespace, name, uid string) error {
	if err := ref.SetNamespace(namespace); err != nil {
		return err
	}
	if err := ref.SetName(name); err != nil {
		return err
	}
	return ref.SetUid(uid)
}

// WorkloadReferrer is an event body that names a workload (WorkloadDeleted, PodsReported, ...).
type WorkloadReferrer interface {
	NewWorkload() (ledgerevents.WorkloadRef, error)
}

// SetNewWorkloadRef gives body a new workload reference to namespace/name with uid.
func SetNewWorkloadRef(body WorkloadReferrer, namespace, name, uid string) error {
	ref, err := body.NewWorkload()
	if err != nil {
		return err
	}
	return SetWorkloadRef(ref, namespace, name, uid)
}

// ReadEvent reads an Event from its canonical bytes (BuildEvent's, or a stored event's), over
// a copy of them, so the Event outlives the buffer it came in. Bytes that are not whole words
// are refused (capnp panics on a segment shorter than its root pointer).
func ReadEvent(canonical []byte) (ledgerevents.Event, error) {
	if len(canonical) < 8 || len(canonical)%8 != 0 {
		return ledgerevents.Event{}, fmt.Errorf("an event of %d bytes: not whole 8-byte words", len(canonical))
	}
	msg, _, err := capnp.NewMessage(capnp.SingleSegment(append([]byte(nil), canonical...)))
	if err != nil {
		return ledgerevents.Event{}, err
	}
	return ledgerevents.ReadRootEvent(msg)
}

// BuildEvent returns the canonical bytes (one segment, no segment table: schema/event_codec.h)
// of an Event that fill sets up, as `record` takes its inputs.
func BuildEvent(fill func(ledgerevents.Event) error) ([]byte, error) {
	_, segment, err := capnp.NewMessage(capnp.SingleSegment(nil))
	if err != nil {
		return nil, err
	}
	event, err := ledgerevents.NewRootEvent(segment)
	if err != nil {
		return nil, err
	}
	if err := fill(event); err != nil {
		return nil, err
	}
	return capnp.Canonicalize(capnp.Struct(event))
}
