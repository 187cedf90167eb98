#include "ops/admitctl/common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ledger/kafka_log.h"
#include "ops/views/render.h"
#include "ops/rpc/client.h"
#include "schema/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {


int Fail(const Status& status) {
  std::cerr << "admitctl: " << status.ToString() << "\n";
  return status.code() == Code::kDeadlineExceeded ? kExitTimedOut : 1;
}

Result<std::shared_ptr<rpc::RpcClient>> Connect(const GlobalOptions& global) {
  auto endpoint = rpc::ParseEndpoint(global.connect);
  if (!endpoint.ok()) return endpoint.status();
  rpc::ClientOptions options;
  options.endpoint = *endpoint;
  options.tls = {global.cert, global.key, global.ca};
  options.call_timeout_ms = global.timeout_ms;
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

bool GlobalOptions::kafka() const { return ledger::IsKafkaLedger(ledger_dir); }

namespace {

// The local copy of a Kafka ledger read without --state: one temporary folder per run, removed
// at exit (after main's locals, the logs among them, are gone).
class TemporaryState {
 public:
  ~TemporaryState() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  Result<std::string> Path() {
    if (!path_.empty()) return path_;
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/admitctl-kafka-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      return Status(Code::kIoError, "cannot make a temporary folder for the Kafka ledger's "
                                    "local copy (" + pattern + "); give one with --state");
    }
    path_ = pattern;
    return path_;
  }

 private:
  std::string path_;
};
TemporaryState temporary_state;

Result<std::string> KafkaStateDir(const GlobalOptions& global) {
  if (!global.state_dir.empty()) return global.state_dir;
  return temporary_state.Path();
}

// A Kafka ledger for reading: admitctl never writes one (admitd is its one writer).
Result<std::unique_ptr<ledger::EventLog>> OpenKafkaReader(const GlobalOptions& global) {
  auto address = ledger::ParseKafkaLedger(global.ledger_dir);
  if (!address.ok()) return address.status();
  auto state = KafkaStateDir(global);
  if (!state.ok()) return state.status();
  ledger::KafkaLogOptions options;
  options.address = *address;
  options.state_dir = *state;
  options.writer = false;
  options.operation_timeout_ms = global.kafka_timeout_ms;
  spdlog::debug("reading the Kafka ledger {} into {}", address->ToString(), *state);
  auto log = ledger::KafkaLog::Open(options);
  if (!log.ok()) return log.status();
  return std::unique_ptr<ledger::EventLog>(std::move(*log));
}

}  // namespace

Result<std::unique_ptr<ledger::EventLog>> OpenLedger(const GlobalOptions& global, bool create,
                                                     bool read_only) {
  if (global.connected()) {
    auto client = Connect(global);
    if (!client.ok()) return client.status();
    auto log = std::make_unique<rpc::RemoteLog>(*client);
    auto head = log->Head();
    if (!head.ok()) return head.status();
    return std::unique_ptr<ledger::EventLog>(std::move(log));
  }
  if (global.kafka()) return OpenKafkaReader(global);
  auto log = OpenLocalLedger(global, create, read_only);
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
  if (global.kafka()) {
    auto state = KafkaStateDir(global);
    if (!state.ok()) return state.status();
    return std::unique_ptr<ledger::SnapshotStore>(
        std::make_unique<ledger::FileSnapshotStore>(*state));
  }
  return std::unique_ptr<ledger::SnapshotStore>(
      std::make_unique<ledger::FileSnapshotStore>(global.ledger_dir));
}

Result<std::unique_ptr<ledger::RocksDbLog>> OpenLocalLedger(const GlobalOptions& global,
                                                             bool create, bool read_only) {
  if (global.connected()) {
    return Status(Code::kInvalidArgument,
                  "this command writes the embedded ledger directly; it does not run through "
                  "admitd (--connect)");
  }
  if (global.kafka()) {
    return Status(Code::kInvalidArgument,
                  "--ledger " + global.ledger_dir +
                      ": this command writes the ledger, and a Kafka ledger has one writer, "
                      "admitd (admitd --ledger kafka://... --state DIR); write through it with "
                      "--connect");
  }
  ledger::RocksDbLogOptions options;
  options.create_if_missing = create && !read_only;
  options.read_only = read_only;
  options.min_free_bytes = global.min_free_bytes;
  options.history_progress = [](uint64_t done, uint64_t total) {
    spdlog::info("indexing the ledger's history (once, for this version): {} of {} events", done,
                 total);
  };
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


Result<std::unique_ptr<Session>> OpenSession(const GlobalOptions& global, bool create,
                                             bool read_only) {
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
  // A Kafka ledger is read here; the service refuses writes to it (admitd writes it).
  auto log = OpenLedger(global, create, read_only);
  if (!log.ok()) return log.status();
  session->log = std::move(*log);
  auto snapshot_dir = global.kafka() ? KafkaStateDir(global) : Result<std::string>(global.ledger_dir);
  if (!snapshot_dir.ok()) return snapshot_dir.status();
  session->snapshots = std::make_unique<ledger::FileSnapshotStore>(*snapshot_dir);
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
                  const std::string& format, const char* kubectl_verb, bool action) {
  if (format == "json") {
    Json out;
    Json objects = Json::array();
    for (size_t i = 0; i < labels.size(); ++i) {
      objects.push_back({{"object", labels[i]},
                         {"sequence", outcome.sequences[i]},
                         {"unchanged", static_cast<bool>(outcome.unchanged[i])}});
      if (i < outcome.configured.size() && outcome.configured[i]) {
        objects.back()["configured"] = true;
      }
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
    if (kubectl_verb != nullptr) {
      const bool configured =
          !action && i < outcome.configured.size() && outcome.configured[i];
      std::cout << labels[i] << " "
                << (outcome.unchanged[i] ? "unchanged" : configured ? "configured" : kubectl_verb)
                << "\n";
      continue;
    }
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
