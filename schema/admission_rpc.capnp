@0xec62898b6bcfab7d;
# admitd's RPC API (Cap'n Proto RPC over a Unix socket or TLS). See docs/admitd.md.
#
# The caller's identity is never a field: the daemon takes it from the connection (TLS client
# certificate's common name, or the Unix peer's uid) and hands the connection a `Ledger`
# capability bound to that principal. Every method checks the principal's roles in the
# daemon's policy before it reads or writes anything.
#
# Errors are values: a failed call returns an `Error` (our Status code and its message) and
# writes nothing. Transport failures arrive as Cap'n Proto exceptions (DISCONNECTED, ...).
#
# How this schema may evolve: fields and methods are only ever appended.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("admission::rpc");

struct Error {
  code @0 :UInt8;          # admission::Code (schema/result.h); 0 never appears here
  message @1 :Text;
  retryAfterMs @2 :UInt32; # Overloaded: wait at least this long before retrying
}

struct RecordRequest {
  requestId @0 :Text;      # the client's id for this call; a retry sends the same one
  inputs @1 :List(Data);   # serialized Events: body and, optionally, idempotencyKey
  hasAt @2 :Bool;          # the caller fixed the logical time (admitctl --at)
  atNs @3 :Int64;
}

struct Outcome {
  sequences @0 :List(UInt64);    # per input: its sequence (the original one if a no-op)
  unchanged @1 :List(Bool);      # per input: already recorded, or identical to the current
  notes @2 :List(Text);
  decisions @3 :List(Data);      # stored bytes of the decisions the inputs caused
  firstDecisionSequence @4 :UInt64;
  retried @5 :Bool;              # the request id was answered before: this is that answer
  configured @6 :List(Bool);     # per input: a definition that replaced another
}

struct StoredEvent {
  sequence @0 :UInt64;
  bytes @1 :Data;                # the stored canonical bytes, exactly as in the ledger
}

struct Head {
  sequence @0 :UInt64;
  hash @1 :Data;
  recordedAtNs @2 :Int64;
}

struct WorkloadInfo {
  namespace @0 :Text;
  name @1 :Text;
  uid @2 :Text;
  generation @3 :UInt64;
  fencingToken @4 :Text;
}

# One workload's state as a client acts on it (the Kubernetes bridge): what the decider decided,
# typed, and Kueue's Workload status the client mirrors. `Ledger.workloadStates`.
struct WorkloadState {
  enum Phase {
    pending @0;
    quotaReserved @1;
    admitted @2;
    evicting @3;
    finished @4;
    rejected @5;
    deactivated @6;
    deleted @7;
  }
  namespace @0 :Text;
  name @1 :Text;
  uid @2 :Text;
  phase @3 :Phase;
  generation @4 :UInt64;         # the admission's generation (0: never reserved)
  fencingToken @5 :Text;         # the current admission's token (schema/fencing_token.h); "" none
  evictingToken @6 :Text;        # the token of the admission being evicted; "" unless evicting
  clusterQueue @7 :Text;         # of the admission; "" unless the workload holds quota
  podSets @8 :List(PodSetAssignment);
  checks @9 :List(AdmissionCheckState);
  pendingReason @10 :Text;       # when pending: Kueue's reason and message
  pendingMessage @11 :Text;
  podsReady @12 :Bool;           # the runtime reported the current admission's pods ready
  podsReleased @13 :Bool;        # evicting: the evicted admission's pods had been released
  status @14 :Text;              # Kueue's Workload .status as JSON (`get workloads -o json`)
  active @15 :Bool = true;       # Kueue's spec.active: false once deactivated or being so
  importedAdmission @16 :Bool;   # generation 1 is an admission imported from Kueue (pods released
                                 # before the ledger: none carries its token; docs/k8s.md)
}

struct PodSetAssignment {
  name @0 :Text;
  count @1 :Int32;
  flavors @2 :List(ResourceFlavor);  # by resource name
}

struct ResourceFlavor {
  resource @0 :Text;
  flavor @1 :Text;
}

struct AdmissionCheckState {
  name @0 :Text;
  state @1 :Text;                # Kueue's: Pending, Ready, Retry, Rejected
  message @2 :Text;
  reportSequence @3 :UInt64;     # the report this state came from (0: none yet)
  retryCount @4 :UInt32;
  podSetUpdates @5 :List(PodSetUpdate);
}

struct PodSetUpdate {
  podSet @0 :Text;
  labels @1 :List(KeyValue);
  annotations @2 :List(KeyValue);
  nodeSelector @3 :List(KeyValue);
  tolerations @4 :List(Toleration);
}

struct KeyValue {
  key @0 :Text;
  value @1 :Text;
}

struct Toleration {
  key @0 :Text;
  operator @1 :Text;
  value @2 :Text;
  effect @3 :Text;
}

# What a watcher wants to see; an empty list matches everything.
struct WatchFilter {
  kinds @0 :List(Text);          # event kinds as `admitctl log` prints them (quotaReserved, ...)
  namespaces @1 :List(Text);
  clusterQueues @2 :List(Text);
  checks @3 :List(Text);         # check reports for it, and reservations that need it
}

# Implemented by the watcher. The daemon sends one push at a time and waits for its return
# before the next (the watcher's pace), and ends the stream with `end`.
# A Kubernetes object as a client read it (YAML or JSON; a kind: List for several), parsed by
# the daemon with the ledger's own parser (ops/kueue_yaml/kueue_yaml.h), so that a client in another
# language (the Kubernetes bridge, docs/k8s.md) neither writes a second parser nor builds events.
struct ManifestRequest {
  requestId @0 :Text;      # as in RecordRequest
  mode @1 :Text;           # "apply": definitions (ParseApplyYaml); "submit": Workloads and Jobs;
                           # "import": Workloads with Kueue's status (ParseImportYaml, lenient);
                           # "delete": deletions of definitions (ParseDeleteYaml)
  manifest @2 :Text;
}

interface EventSink {
  push @0 (events :List(StoredEvent)) -> ();
  # The stream is over: shutting down, the watcher fell too far behind, or the daemon's
  # limits. `resumeSequence` is the first sequence the watcher has not been sent.
  end @1 (resumeSequence :UInt64, reason :Text) -> ();
}

# Dropping the handle stops the watch.
interface WatchHandle {}

interface Ledger {
  # Who the daemon took this connection to be, and the roles its policy gives that principal.
  whoami @0 () -> (principal :Text, roles :List(Text));

  # Records inputs as one atomic batch through the Service (the embedded CLI's path).
  record @1 (request :RecordRequest) -> (outcome :Outcome, error :Error);

  head @2 () -> (head :Head, error :Error);
  read @3 (from :UInt64, maxCount :UInt32) -> (events :List(StoredEvent), error :Error);

  # The current state of one workload, for a client that builds an input about it.
  workload @4 (name :Text) -> (workload :WorkloadInfo, error :Error);

  # A read model at the head, rendered as `admitctl get KIND -o FORMAT` prints it.
  get @5 (kind :Text, format :Text, name :Text, namespace :Text, selector :Text,
          clusterQueue :Text, localQueue :Text, limit :UInt64, offset :UInt64)
      -> (text :Text, error :Error);
  # name, namespace, selector: as admitctl get's NAME, -n and -l; clusterQueue, localQueue,
  # limit (0: 1000), offset: pendingworkloads' (ops/views/query.h); empty: all.

  # `admitctl explain NAME [--at N] -o FORMAT`, rendered by the daemon.
  explain @6 (name :Text, at :UInt64, format :Text) -> (text :Text, error :Error);

  # Takes a snapshot at the head (operator), rendered as `admitctl snapshot -o FORMAT` prints it.
  snapshot @7 (format :Text) -> (text :Text, error :Error);
  listSnapshots @8 () -> (sequences :List(UInt64), error :Error);
  readSnapshot @9 (after :UInt64) -> (bytes :Data, storedHash :Data, error :Error);

  # Pushes every event from `fromSequence` on that matches `filter`, in order, then every
  # event as it is appended, to `sink`, until the handle is dropped or the stream ends.
  watch @10 (fromSequence :UInt64, filter :WatchFilter, sink :EventSink)
      -> (handle :WatchHandle, error :Error);

  # Does nothing: the transport's round trip, for admitd_bench.
  ping @11 () -> ();

  # Parses the manifest as admitctl apply (submit, import) does and records its objects as `record`
  # would record those events, with the same checks, policy and answer. A manifest the parser
  # refuses is an InvalidArgument naming document, line, field path and reason.
  recordManifest @12 (request :ManifestRequest) -> (outcome :Outcome, error :Error);

  # The states of the named workloads ("NAMESPACE/NAME") at the head, in the order asked; a name
  # the ledger does not hold is in `missing`. `head` is the sequence they were read at.
  workloadStates @13 (names :List(Text))
      -> (states :List(WorkloadState), missing :List(Text), head :UInt64, error :Error);

  # The current body of a definition (projections/definitions.h: "KIND/NAMESPACE/NAME", the event
  # with its envelope cleared), for a client that changes one field of it (admitctl stop and
  # resume). NotFound when the ledger does not define it.
  definition @14 (key :Text) -> (body :Data, error :Error);
}
