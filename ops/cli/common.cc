#include "ops/cli/common.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ops/render.h"
#include "ops/rpc/client.h"
#include "schema/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {


int Fail(const Status& status) {
  std::cerr << "admitctl: " << status.ToString() << "\n";
  return 1;
}

Result<std::shared_ptr<rpc::RpcClient>> Connect(const GlobalOptions& global) {
  auto endpoint = rpc::ParseEndpoint(global.connect);
  if (!endpoint.ok()) return endpoint.status();
  rpc::ClientOptions options;
  options.endpoint = *endpoint;
  options.tls = {global.cert, global.key, global.ca};
  auto client = rpc::RpcClient::Connect(options);
  if (!client.ok()) return client.status();
  return std::shared_ptr<rpc::RpcClient>(std::move(*client));
}

std::string NewRequestId() {
  std::random_device random;
  char buf[33];
  for (int i = 0; i < 4; ++i) {
    std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(random()));
  }
  return buf;
}

Result<std::unique_ptr<ledger::EventLog>> OpenLedger(const GlobalOptions& global, bool create) {
  if (global.connected()) {
    auto client = Connect(global);
    if (!client.ok()) return client.status();
    auto log = std::make_unique<rpc::RemoteLog>(*client);
    auto head = log->Head();
    if (!head.ok()) return head.status();
    return std::unique_ptr<ledger::EventLog>(std::move(log));
  }
  auto log = OpenLocalLedger(global, create);
  if (!log.ok()) return log.status();
  return std::unique_ptr<ledger::EventLog>(std::move(*log));
}

Result<std::unique_ptr<ledger::SnapshotStore>> OpenSnapshots(const GlobalOptions& global) {
  if (global.connected()) {
    auto client = Connect(global);
    if (!client.ok()) return client.status();
    return std::unique_ptr<ledger::SnapshotStore>(
        std::make_unique<rpc::RemoteSnapshotStore>(*client));
  }
  return std::unique_ptr<ledger::SnapshotStore>(
      std::make_unique<ledger::FileSnapshotStore>(global.ledger_dir));
}

Result<std::unique_ptr<ledger::RocksDbLog>> OpenLocalLedger(const GlobalOptions& global,
                                                             bool create) {
  if (global.connected()) {
    return Status(Code::kInvalidArgument,
                  "this command writes the embedded ledger directly; it does not run through "
                  "admitd (--connect)");
  }
  ledger::RocksDbLogOptions options;
  options.create_if_missing = create;
  spdlog::debug("opening ledger at {}", global.ledger_dir);
  return ledger::RocksDbLog::Open(global.ledger_dir, options);
}


Result<std::string> ReadAll(const std::string& path) {
  std::ostringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return Status(Code::kInvalidArgument, "cannot read " + path);
    buffer << in.rdbuf();
  }
  return buffer.str();
}

Result<IntakeOptions> IntakeFrom(const GlobalOptions& global, const std::string& default_actor) {
  IntakeOptions options;
  if (!global.at.empty()) {
    auto at = ParseRfc3339(global.at);
    if (!at.ok()) return at.status();
    options.at_ns = *at;
  }
  options.actor = global.actor.empty() ? default_actor : global.actor;
  return options;
}


Result<std::unique_ptr<Session>> OpenSession(const GlobalOptions& global, bool create) {
  auto session = std::make_unique<Session>();
  if (global.connected()) {
    if (!global.actor.empty()) {
      return Status(Code::kInvalidArgument,
                    "--as '" + global.actor + "': a connected admitctl has no --as; admitd "
                    "records the principal the connection proved (its certificate's common "
                    "name, or the Unix peer's uid)");
    }
    auto client = Connect(global);
    if (!client.ok()) return client.status();
    session->api = std::make_unique<rpc::RemoteApi>(*client);
    return session;
  }
  auto log = OpenLocalLedger(global, create);
  if (!log.ok()) return log.status();
  session->log = std::move(*log);
  session->snapshots = std::make_unique<ledger::FileSnapshotStore>(global.ledger_dir);
  ServiceOptions options;
  options.snapshots = session->snapshots.get();
  options.snapshot_every_events = global.snapshot_every;
  Progress progress("loading the ledger");
  auto service = Service::Open(
      *session->log, session->clock,
      [&](uint64_t done, uint64_t total) {
        if (total > 100000) progress.Update(done, total);
      },
      options);
  if (!service.ok()) return service.status();
  session->service = std::move(*service);
  ledger::FileSnapshotStore* snapshots = session->snapshots.get();
  session->api = std::make_unique<LocalApi>(
      *session->service, *session->log,
      [snapshots](uint64_t after) { return snapshots->PathOf(after); });
  return session;
}

void PrintOutcome(const std::vector<std::string>& labels, const RecordOutcome& outcome,
                  const std::string& format) {
  if (format == "json") {
    Json out;
    Json objects = Json::array();
    for (size_t i = 0; i < labels.size(); ++i) {
      objects.push_back({{"object", labels[i]},
                         {"sequence", outcome.sequences[i]},
                         {"unchanged", static_cast<bool>(outcome.unchanged[i])}});
    }
    out["inputs"] = objects;
    out["notes"] = outcome.notes;
    Json decisions = Json::array();
    uint64_t seq = outcome.first_decision_sequence;
    for (const std::string& bytes : outcome.decisions) {
      auto d = schema::DecodeEvent(bytes);
      if (!d.ok()) continue;
      decisions.push_back({{"sequence", seq++},
                           {"type", schema::BodyName(d->root())},
                           {"summary", DescribeDecision(d->root())}});
    }
    out["decisions"] = decisions;
    if (outcome.retried) out["retried"] = true;
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    std::cout << labels[i] << (outcome.unchanged[i] ? " unchanged" : " recorded");
    if (outcome.sequences[i] != 0) std::cout << " (sequence " << outcome.sequences[i] << ")";
    std::cout << "\n";
  }
  for (const std::string& note : outcome.notes) std::cout << "  no-op: " << note << "\n";
  if (outcome.retried) {
    std::cout << "  (a retry: this request was recorded before; its decisions were)\n";
  }
  uint64_t seq = outcome.first_decision_sequence;
  for (const std::string& bytes : outcome.decisions) {
    auto d = schema::DecodeEvent(bytes);
    if (d.ok()) std::cout << "  " << seq << "  " << DescribeDecision(d->root()) << "\n";
    ++seq;
  }
}

Result<std::pair<std::string, std::string>> SplitName(const std::string& ns_name) {
  auto slash = ns_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ns_name.size()) {
    return Status(Code::kInvalidArgument,
                  "workload '" + ns_name + "': expected NAMESPACE/NAME, e.g. default/job-sample");
  }
  return std::make_pair(ns_name.substr(0, slash), ns_name.substr(slash + 1));
}


}  // namespace admission::ops
