#pragma once
// admitctl's side of admitd: one connection (Unix socket or TLS with a client certificate),
// driven by its own event-loop thread so that any thread may call through it (replay reads
// the ledger from helper threads). On top of it, the interfaces the commands already use:
// an EventLog and a SnapshotStore that read through the daemon (log, verify, replay, get --at
// run here, over the daemon's bytes, exactly as on an embedded ledger), and AdmissionApi.

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "ops/service/api.h"
#include "ops/rpc/transport.h"


namespace admission::ops::rpc {

struct ClientOptions {
  Endpoint endpoint;
  TlsFiles tls;  // required for tls: addresses
  // How long connecting, and then each call, may wait for the daemon (admitctl --timeout); a
  // call past it fails with kDeadlineExceeded. 0: no limit. A watch's stream is not bounded.
  uint64_t call_timeout_ms = 0;
};

// A filter and a starting point for Watch.
struct WatchRequest {
  uint64_t from = 1;
  std::vector<std::string> kinds, namespaces, cluster_queues, checks;
};

class RpcClient {
 public:
  // Connects and completes the TLS handshake. Errors: kInvalidArgument (bad files; admitctl
  // refused the daemon's certificate), kPermissionDenied (the daemon refused this client's
  // certificate: another CA, expired, a reserved name), kOverloaded (the daemon is at a
  // connection limit), kUnavailable (cannot connect, the connection dropped),
  // kDeadlineExceeded (no answer within call_timeout_ms).
  static Result<std::unique_ptr<RpcClient>> Connect(const ClientOptions& options);
  ~RpcClient();

  // Runs `call` on the connection's thread and waits for the promise it returns, at most
  // call_timeout_ms (then kDeadlineExceeded); a transport failure (disconnected, refused)
  // becomes kUnavailable. Any thread.
  Status Run(const std::function<kj::Promise<Status>(Ledger::Client&)>& call);

  // Streams events to `on_events` (called on the connection's thread) until the daemon ends
  // the stream (its resume sequence and reason go to *resume and *reason), `on_events` returns
  // false, the connection drops, or `cancelled` (asked every 200 ms on the connection's
  // thread, when given) returns true.
  Status Watch(const WatchRequest& request,
               const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
               uint64_t* resume, std::string* reason,
               const std::function<bool()>& cancelled = nullptr);

 private:
  RpcClient() = default;
  // The connection thread: connects, sets connect_status_, signals `ready`, then serves calls
  // until the destructor stops it.
  void Loop(const ClientOptions& options, std::promise<void>* ready);
  // Run, bounded by timeout_ms (0: not bounded).
  Status RunFor(const std::function<kj::Promise<Status>(Ledger::Client&)>& call,
                uint64_t timeout_ms);

  std::thread thread_;
  const kj::Executor* executor_ = nullptr;     // the connection thread's
  kj::PromiseFulfiller<void>* stop_ = nullptr;  // owned by the connection thread
  Ledger::Client* ledger_ = nullptr;           // lives on the connection thread
  kj::Timer* timer_ = nullptr;                 // the connection thread's
  Status connect_status_;
  uint64_t call_timeout_ms_ = 0;
  std::string address_;  // as given, for messages
};

// EventLog over admitd's read and head (auditor or operator). Appends are refused: a
// connected client records through AdmissionApi.
class RemoteLog final : public ledger::EventLog {
 public:
  explicit RemoteLog(std::shared_ptr<RpcClient> client) : owned_(std::move(client)), client_(*owned_) {}
  Result<ledger::AppendAck> Append(std::span<const std::string> batch) override;
  Result<std::vector<ledger::StoredEvent>> Read(ledger::Sequence from, size_t max_count) override;
  ledger::Head GetHead() override;
  Result<std::optional<ledger::Sequence>> FindKey(std::string_view key) override;
  // The head, or why the daemon will not give it (EventLog::GetHead cannot say).
  Result<ledger::Head> Head();

 private:
  std::shared_ptr<RpcClient> owned_;
  RpcClient& client_;
};

// The daemon's snapshots, read only.
class RemoteSnapshotStore final : public ledger::SnapshotStore {
 public:
  explicit RemoteSnapshotStore(std::shared_ptr<RpcClient> client) : owned_(std::move(client)), client_(*owned_) {}
  Result<std::vector<ledger::Sequence>> List() override;
  Result<ledger::StoredSnapshot> Read(ledger::Sequence after) override;
  Result<schema::Hash> Write(ledger::Sequence after, std::string_view bytes) override;
  Status Remove(ledger::Sequence after) override;

 private:
  std::shared_ptr<RpcClient> owned_;
  RpcClient& client_;
};

class RemoteApi final : public AdmissionApi {
 public:
  explicit RemoteApi(std::shared_ptr<RpcClient> client) : owned_(std::move(client)), client_(*owned_) {}
  // options.actor is ignored: the daemon records the connection's principal.
  Result<RecordOutcome> Record(std::vector<std::string> inputs, const IntakeOptions& options,
                               const std::string& request_id) override;
  Result<WorkloadInfo> Workload(const std::string& ns_name) override;
  Result<ledger::Head> GetHead() override;
  Result<std::string> Get(const std::string& kind, const std::string& format,
                          const GetQuery& query) override;
  Result<std::string> Definition(const std::string& key) override;
  Result<std::string> Explain(const std::string& ns_name, uint64_t at,
                              const std::string& format) override;
  Result<std::string> Snapshot(const std::string& format) override;
  // The principal and roles the daemon took this connection to be.
  Result<std::pair<std::string, std::vector<std::string>>> WhoAmI();
  Status Ping();

 private:
  std::shared_ptr<RpcClient> owned_;
  RpcClient& client_;
};

}  // namespace admission::ops::rpc
