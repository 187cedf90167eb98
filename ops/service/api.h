#pragma once
// The admission service as a command sees it: what admitctl's commands (and the demo) call,
// whether the service runs in this process on an embedded ledger (LocalApi) or in admitd
// (ops/rpc/client.h's RemoteApi). Both end in the same Service; the daemon's side of each
// method is ops/rpc/server.cc, which calls the same functions declared here.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ops/service/service.h"
#include "ops/views/query.h"
#include "schema/result.h"

namespace admission::ops {

// What a client needs of a workload to build an input about it.
struct WorkloadInfo {
  std::string ns, name, uid;
  uint64_t generation = 0;
  std::string fencing_token;
};

// A caller's scope for read models: empty means every namespace.
struct NamespaceScope {
  std::vector<std::string> namespaces;
  bool Allows(const std::string& ns) const;
};

// Interface: no fields.
class AdmissionApi {
 public:
  virtual ~AdmissionApi() = default;

  // Records the inputs as one atomic batch (Service::Record). `request_id`, when not empty,
  // gives every input without an idempotency key one derived from it (RequestInputKey), so a
  // retry returns the first outcome.
  virtual Result<RecordOutcome> Record(std::vector<std::string> inputs,
                                       const IntakeOptions& options,
                                       const std::string& request_id) = 0;
  // kNotFound when there is no such workload.
  virtual Result<WorkloadInfo> Workload(const std::string& ns_name) = 0;
  virtual Result<ledger::Head> GetHead() = 0;
  // `admitctl get KIND -o FORMAT` at the head, rendered.
  virtual Result<std::string> Get(const std::string& kind, const std::string& format,
                                  const GetQuery& query) = 0;
  // `admitctl explain NS/NAME --at N -o FORMAT`, rendered.
  virtual Result<std::string> Explain(const std::string& ns_name, uint64_t at,
                                      const std::string& format) = 0;
  // `admitctl snapshot -o FORMAT`: takes one at the head, rendered.
  virtual Result<std::string> Snapshot(const std::string& format) = 0;
  // The current body of the definition `key` ("KIND/NAMESPACE/NAME"); kNotFound if none.
  virtual Result<std::string> Definition(const std::string& key) = 0;
};

// The read models rendered as `admitctl get` prints them, limited to `scope`.
// Errors: kInvalidArgument (unknown kind or format).
// `query` selects by name, namespace and labels (ops/views/query.h); formats: table, wide, json,
// yaml, name. kNotFound when a name was asked for and is not there.
Result<std::string> RenderGet(const projections::Engine& engine, const std::string& kind,
                              const std::string& format, const NamespaceScope& scope = {},
                              const GetQuery& query = {});

// The current body of the definition `key` in `service`; kNotFound naming it when there is none.
Result<std::string> DefinitionOf(const Service& service, const std::string& key);

// replay::Explain over `log` (and `snapshots`, if any), rendered (text, json or html).
Result<std::string> RenderExplain(ledger::EventLog& log, const std::string& ns_name, uint64_t at,
                                  const std::string& format,
                                  const std::function<void(uint64_t, uint64_t)>& progress,
                                  ledger::SnapshotStore* snapshots = nullptr);

// Takes a snapshot through `service` and renders what `admitctl snapshot` prints; `path_of`
// gives the file of a snapshot (empty: none shown).
Result<std::string> RenderSnapshot(Service& service,
                                   const std::function<std::string(uint64_t)>& path_of,
                                   const std::string& format);

WorkloadInfo InfoOf(const projections::WorkloadState& wl);

// The embedded service: a Service on a ledger this process opened.
// REQUIRES: service and log outlive it.
class LocalApi final : public AdmissionApi {
 public:
  LocalApi(Service& service, ledger::EventLog& log,
           std::function<std::string(uint64_t)> snapshot_path)
      : service_(service), log_(log), snapshot_path_(std::move(snapshot_path)) {}
  Result<RecordOutcome> Record(std::vector<std::string> inputs, const IntakeOptions& options,
                               const std::string& request_id) override;
  Result<WorkloadInfo> Workload(const std::string& ns_name) override;
  Result<ledger::Head> GetHead() override { return log_.GetHead(); }
  Result<std::string> Get(const std::string& kind, const std::string& format,
                          const GetQuery& query) override;
  Result<std::string> Explain(const std::string& ns_name, uint64_t at,
                              const std::string& format) override;
  Result<std::string> Snapshot(const std::string& format) override;
  Result<std::string> Definition(const std::string& key) override;

 private:
  Service& service_;
  ledger::EventLog& log_;
  std::function<std::string(uint64_t)> snapshot_path_;
};

}  // namespace admission::ops
