#pragma once
// admitd's RPC side: listeners (Unix socket, TLS), one capability per connection bound to the
// principal the connection proved, the policy check of every call, group commit of record
// calls through the Service, watch streams, limits and graceful shutdown. The semantics are
// all the Service's; see docs/admitd.md.
//
// Thread safety: everything runs on the thread of the kj event loop it was made on.

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <kj/async-io.h>
#include <kj/compat/tls.h>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "ops/rpc/policy.h"
#include "ops/rpc/stream_guard.h"
#include "ops/rpc/transport.h"
#include "ops/service/service.h"

namespace admission::ops::rpc {

// The checks admitd makes of a record call before it waits for a group commit, and the call
// they give: a request id of 1 to kRequestIdBytesMax bytes, 1 to kAppendBatchEventsMax / 2
// inputs, each one decoded (schema::DecodeEvent) and allowed to `principal` by `policy`
// (MayRecord); the actor forced to the principal. Pure (no I/O, no event loop), so the fuzz
// target of RPC messages runs the daemon's own checks (tests/fuzz/rpc_fuzz.cc).
// Errors: kInvalidArgument, kPermissionDenied.
Result<RecordCall> RecordCallOf(const Policy& policy, const std::string& principal,
                                ::admission::rpc::RecordRequest::Reader request,
                                const projections::Engine& engine);

// The checks of a recordManifest call, in the order the daemon makes them: ManifestPreCheck
// (before any parsing), ParseManifest, then ManifestRecordCall. Pure, like RecordCallOf.
// Errors: ManifestPreCheck's, ParseManifest's and RecordCallOf's.
Result<RecordCall> ManifestCallOf(const Policy& policy, const std::string& principal,
                                  ::admission::rpc::ManifestRequest::Reader request,
                                  const projections::Engine& engine, const std::string& name_seed);

// What a recordManifest call must pass before its manifest is parsed (the parser's time and
// memory are spent only for a principal that could record what it gives): a known mode
// ("apply", "submit", "import" or "delete"), at most kManifestBytesMax bytes, and a principal
// whose roles may record that mode's events (Policy::MayRecordManifest). Pure and cheap.
// Errors: kInvalidArgument (mode, size), kPermissionDenied.
Status ManifestPreCheck(const Policy& policy, const std::string& principal, std::string_view mode,
                        size_t manifest_bytes);

// A manifest parsed into the inputs of a record call: recordManifest's step that needs neither
// the policy nor the engine, so that the daemon runs it on a worker thread.
struct ParsedManifest {
  std::string request_id;
  std::vector<std::string> inputs;  // encoded events; a submit's keyed "submit/NS/NAME/UID"
};
// Parses with the ledger's parser (ParseApplyYaml for mode "apply", ParseSubmitYaml for
// "submit", whose workloads are keyed "submit/NS/NAME/UID" as admitctl submit keys them and whose
// generated names take `name_seed`, ParseImportYaml for "import", lenient and keyed
// "import/NS/NAME/UID" as admitctl import keys them, ParseDeleteYaml for "delete"). Any thread.
// Errors: kInvalidArgument (an unknown mode, a manifest over kManifestBytesMax, without objects,
// with more than kAppendBatchEventsMax / 2, or refused by the parser).
Result<ParsedManifest> ParseManifest(std::string_view mode, std::string_view manifest,
                                     std::string request_id, const std::string& name_seed);
// recordManifest's last step, on the event loop (it reads the engine): RecordCallOf on the
// parsed inputs, so that every check of `record` applies unchanged.
Result<RecordCall> ManifestRecordCall(const Policy& policy, const std::string& principal,
                                      const ParsedManifest& parsed,
                                      const projections::Engine& engine);

struct DaemonOptions {
  std::vector<Endpoint> listen;
  // The daemon's certificate and key, and the CA whose client certificates it accepts
  // (--tls-cert, --tls-key, --client-ca); required when a tls: address is listened on.
  TlsFiles tls;
  std::string policy_path;  // empty: only admin
  // The file of a snapshot, for `admitctl snapshot`'s output.
  std::function<std::string(uint64_t)> snapshot_path;
  // Tests only: wraps each listener (a forwarding wrapper that injects accept failures,
  // tests/rpc/accept_errors_test.cc). Empty: the listeners as bound.
  std::function<kj::Own<kj::ConnectionReceiver>(kj::Own<kj::ConnectionReceiver>)> wrap_receiver;
};

// Durations in microseconds, counted per bucket of kBoundsUs (one more: longer).
struct DurationHistogram {
  static constexpr uint64_t kBoundsUs[] = {500,    1000,   2500,   5000,   10000,   25000,
                                           50000,  100000, 250000, 500000, 1000000, 2500000};
  std::vector<uint64_t> buckets;
  uint64_t sum_us = 0;
  uint64_t count = 0;
  void Observe(uint64_t us) {
    if (buckets.empty()) buckets.assign(std::size(kBoundsUs) + 1, 0);
    ++buckets[static_cast<size_t>(std::lower_bound(std::begin(kBoundsUs), std::end(kBoundsUs), us) -
                                  std::begin(kBoundsUs))];
    sum_us += us;
    ++count;
  }
};

struct DaemonStats {
  uint64_t record_calls = 0;       // answered record calls
  uint64_t groups = 0;             // RecordGroup runs
  uint64_t group_calls = 0;        // calls in them
  // Why groups were flushed: as many calls as expected, the wait limit, no arrival for the
  // idle limit (or shutting down).
  uint64_t flushes_full = 0, flushes_waited = 0, flushes_idle = 0;
  uint64_t refused_calls = 0;      // permission denied
  uint64_t overloaded_calls = 0;
  uint64_t connections = 0;        // open now
  uint64_t watchers = 0;           // open now
  uint64_t tls_handshakes = 0;     // in progress now
  // Connections closed by the daemon's limits, by reason: "global_limit", "principal_limit",
  // "unknown_peers_limit", "admin_reserve", "handshake_timeout", "handshake_evicted",
  // "handshake_failed", "reserved_name", "no_credentials", "shutting_down", "stalled",
  // "slow_message", "partial_bytes_limit".
  std::map<std::string, uint64_t> connections_closed;
  // Accepts that failed (file descriptors exhausted, ...) and were retried; whether the last
  // one failed (the daemon is not ready while it does).
  uint64_t accept_errors = 0;
  bool accept_failing = false;
  uint64_t partial_message_bytes = 0;  // received of messages not complete, now
  uint64_t manifest_parse_bytes = 0;   // manifests queued or being parsed, now
  // Calls refused before any work, by method and reason (the Status code's name:
  // PermissionDenied, InvalidArgument, Overloaded, ...).
  std::map<std::pair<std::string, std::string>, uint64_t> refusals;
  // Calls answered, by method, and how long each took to answer (a record call's time
  // includes its wait for the group commit).
  std::map<std::string, DurationHistogram> call_duration;
  // Appends (RecordGroup runs): the events they wrote, and how long each took.
  uint64_t appended_events = 0;
  DurationHistogram append_duration;
};

class Daemon {
 public:
  // REQUIRES: io, service, log and snapshots outlive the Daemon.
  Daemon(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
         ledger::SnapshotStore& snapshots, Policy policy, DaemonOptions options);
  ~Daemon();

  // Binds every address (a stale Unix socket file is replaced) and starts accepting.
  // Returns the bound addresses (with the port a tls:HOST:0 got). Errors: kInvalidArgument
  // (TLS files), kIoError (cannot bind).
  Result<std::vector<std::string>> Listen(kj::WaitScope& wait_scope);

  // Reloads the policy file; an invalid file is refused (the message names the field) and
  // the running policy stays.
  Status ReloadPolicy();

  // Stops accepting, answers the calls in flight after their append, ends every watcher with
  // its resume sequence, and resolves when the replies are on their way (bounded by
  // kShutdownMaxMs).
  kj::Promise<void> Shutdown();

  DaemonStats stats() const;

  // The policy in force (reloaded on SIGHUP). Event loop thread only.
  const Policy& policy() const { return policy_; }
  // False while accepting connections fails (retried with a backoff): /readyz says not ready.
  bool accepting() const { return listeners_failing_ == 0; }
  // `explain` of a workload, rendered on the daemon's read worker (it folds the ledger from
  // the genesis): what the RPC's explain and the dashboard's timeline answer. kOverloaded
  // when kReadQueueMax explains wait already. Event loop thread only.
  kj::Promise<kj::Own<Result<std::string>>> Explain(const std::string& name, uint64_t at,
                                                     const std::string& format);
  // Runs `job` on the same read worker (whole-ledger reads: the dashboard's verify and replay).
  kj::Promise<kj::Own<Result<std::string>>> OnReadWorker(std::function<Result<std::string>()> job);

  // The ledger grew by events this daemon did not append (a standby following the Kafka
  // ledger's writer): watchers are shown them. Event loop thread only.
  void LedgerAdvanced(uint64_t head_before, uint64_t head) { AfterAppend(head_before, head); }

  class LedgerImpl;
  class ReadWorker;
  class WatchHandleImpl;
  struct Connection;
  struct PendingCall;
  struct Watcher;

 private:
  friend class LedgerImpl;
  friend class WatchHandleImpl;

  kj::Promise<void> AcceptLoop(kj::ConnectionReceiver& receiver, bool tls, uint64_t retry_ms);
  void Handshake(kj::AuthenticatedStream stream);
  void Serve(kj::AuthenticatedStream stream, bool tls);
  // Which budget a new connection of `principal` takes (set in `connection`, counted), or why
  // it is refused (kOverloaded; *reason: the stats' name of the limit).
  Status AdmitConnection(const std::string& principal, Connection& connection,
                         std::string* reason);
  void ReleaseConnection(const Connection& connection);
  // Closes a stream past a limit: counts and logs (throttled) the refusal, and tells the peer
  // why in an RPC Abort message when few such writes are in flight.
  void Refuse(kj::Own<kj::AsyncIoStream> stream, const std::string& reason, const Status& why,
              const std::string& peer);
  // Resolves when a TLS handshake may start: fewer than kTlsHandshakesMax are in progress, or
  // the oldest has taken kTlsHandshakeEvictAfterMs (Handshake then drops it).
  kj::Promise<void> HandshakeSlot();
  void HandshakeDone(uint64_t id);
  // After a failed TLS handshake: lets the alert reach the peer (SharedSocket).
  void Linger(kj::Own<SharedSocket> socket);
  // Ends the watches the policy in force no longer allows as they are.
  void RecheckWatches();
  void Enqueue(kj::Own<PendingCall> call);
  void ScheduleFlush();
  void Flush();
  void AfterAppend(uint64_t head_before, uint64_t head);
  void Pump(Watcher& watcher);
  void EndWatch(uint64_t id, const std::string& reason);
  void StopWatch(uint64_t id);
  bool Matches(const Watcher& watcher, schema::Event::Reader event) const;

  kj::AsyncIoContext& io_;
  Service& service_;
  ledger::EventLog& log_;
  ledger::SnapshotStore& snapshots_;
  Policy policy_;
  const DaemonOptions options_;
  kj::Own<kj::TaskSet::ErrorHandler> error_handler_;
  kj::Own<kj::TaskSet> tasks_;
  kj::Own<kj::TlsCertificate> client_ca_;
  kj::Own<kj::TlsKeypair> keypair_;
  kj::Own<kj::TlsContext> tls_;
  std::vector<kj::Own<kj::ConnectionReceiver>> receivers_;
  kj::Own<kj::Canceler> accepting_;

  // Group commit (docs/admitd.md, "Group commit").
  std::vector<kj::Own<PendingCall>> pending_;
  // Callers (distinct connections) of the last two groups: the next one waits for as many.
  size_t gather_target_ = 1;
  std::vector<const void*> previous_callers_;  // sorted; those of the last group
  bool flush_scheduled_ = false;
  bool timer_armed_ = false;
  kj::TimePoint first_pending_ = kj::origin<kj::TimePoint>();
  kj::TimePoint last_arrival_ = kj::origin<kj::TimePoint>();
  bool shutting_down_ = false;

  std::map<uint64_t, kj::Own<Watcher>> watchers_;
  uint64_t next_watch_id_ = 1;
  // Open connections by budget (docs/admitd.md, "Limits"): per principal the policy names (and
  // admin), all unknown principals together, admin's past kConnectionsMax.
  std::map<std::string, size_t> connections_by_principal_;
  size_t unknown_connections_ = 0;
  size_t admin_reserve_connections_ = 0;
  // TLS handshakes in progress, oldest first: fulfilling one's `evict` drops it.
  struct PendingHandshake {
    kj::Own<kj::PromiseFulfiller<void>> evict;
    kj::TimePoint started = kj::origin<kj::TimePoint>();
  };
  std::map<uint64_t, PendingHandshake> handshakes_;
  // TLS accept loops waiting for a handshake slot (HandshakeSlot).
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> slot_waiters_;
  uint64_t next_handshake_id_ = 1;
  std::shared_ptr<size_t> refusals_in_flight_ = std::make_shared<size_t>(0);
  size_t listeners_failing_ = 0;  // listeners whose last accept failed
  LogThrottle refusal_log_{1000};
  LogThrottle accept_log_{1000};
  PartialMessageBudget partial_messages_;
  // Bytes of manifests queued for the parser or being parsed (added on the loop, taken off by
  // the worker when it is done with one).
  std::shared_ptr<std::atomic<uint64_t>> manifest_bytes_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  DaemonStats stats_;
  std::unique_ptr<ReadWorker> readers_;    // explain calls
  std::unique_ptr<ReadWorker> manifests_;  // recordManifest's parsing
  // Last: connections are torn down first, while the watchers they may end still exist.
  std::map<Connection*, kj::Own<Connection>> connections_;
};

}  // namespace admission::ops::rpc
