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
  get @5 (kind :Text, format :Text) -> (text :Text, error :Error);

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

  # Parses the manifest as admitctl apply (or submit) does and records its objects as `record`
  # would record those events, with the same checks, policy and answer. A manifest the parser
  # refuses is an InvalidArgument naming document, line, field path and reason.
  recordManifest @12 (request :ManifestRequest) -> (outcome :Outcome, error :Error);
}
