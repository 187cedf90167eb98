#pragma once
// Pieces every admitctl command uses: global options, opening the ledger and the decider,
// progress on a terminal, printing outcomes. Command groups live in their own files and
// register themselves with main (see admitctl.cc).

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ops/service/clock.h"
#include "ops/service/api.h"
#include "ops/service/service.h"
#include "schema/result.h"

namespace admission::ops {

namespace rpc {
class RpcClient;
}

struct GlobalOptions {
  // A directory (the embedded RocksDB ledger) or kafka://HOST:PORT/TOPIC (the Kafka ledger,
  // read directly; written only by admitd).
  std::string ledger_dir = "admission-ledger";
  // Kafka ledger: the folder of its local copy (--state); empty: a temporary one per run.
  std::string state_dir;
  int kafka_timeout_ms = 30'000;
  bool kafka() const;
  // Connected mode (--connect ADDR, or $ADMITCTL_CONNECT): every command goes through admitd.
  std::string connect;
  std::string cert, key, ca;  // TLS client identity and the daemon's CA
  std::string request_id;     // --request-id; connected mode makes one per invocation
  // --timeout: how long connecting to admitd, and each call, may take (Go-style duration).
  std::string timeout = "30s";
  uint64_t timeout_ms = 30'000;  // from `timeout` once parsed; 0: no limit
  bool connected() const { return !connect.empty(); }
  std::string at;
  std::string log_level = "warn";
  std::string actor;
  uint64_t snapshot_every = kSnapshotEveryEventsDefault;  // 0: no periodic snapshots
  // Appends are refused below this much free space on the ledger's disk (embedded ledger);
  // unset: ledger::DefaultMinFreeBytes of the disk.
  std::optional<uint64_t> min_free_bytes;
};

// admitctl's exit code when admitd did not answer within --timeout (kDeadlineExceeded).
inline constexpr int kExitTimedOut = 3;

// Prints "admitctl: <status>" to stderr and returns the exit code: kExitTimedOut for
// kDeadlineExceeded, 1 for any other refusal.
int Fail(const Status& status);

// The ledger to read: the embedded RocksDB ledger at --ledger, the Kafka ledger at --ledger
// kafka://... (read from the topic, verifying every record, into its local copy), or admitd's
// through --connect (read-only: log, verify, replay and get --at read the daemon's stored bytes).
Result<std::unique_ptr<ledger::EventLog>> OpenLedger(const GlobalOptions& global, bool create,
                                                     bool read_only = false);
// The ledger for a command that only reads it: an embedded ledger opens read-only (RocksDB's
// read-only mode writes nothing, so it works on a full disk and beside a writer).
inline Result<std::unique_ptr<ledger::EventLog>> OpenLedgerToRead(const GlobalOptions& global) {
  return OpenLedger(global, false, true);
}
// The embedded ledger for writing, refusing connected mode (developer commands).
Result<std::unique_ptr<ledger::RocksDbLog>> OpenLocalLedger(const GlobalOptions& global,
                                                             bool create, bool read_only = false);
// The snapshots beside the ledger (the daemon's, read-only, when connected).
Result<std::unique_ptr<ledger::SnapshotStore>> OpenSnapshots(const GlobalOptions& global);

// Progress on a terminal only; pipes and files stay quiet.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), enabled_(isatty(2) == 1) {}
  void Update(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%s: %llu / %llu events", what_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    std::fflush(stderr);
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fputc('\n', stderr);
  }

 private:
  std::string what_;
  bool enabled_;
  bool shown_ = false;
};

// The admission service a command talks to: embedded (an open ledger with the decider folded
// over it) or admitd's (connected). Commands use `api` only.
struct Session {
  std::unique_ptr<ledger::EventLog> log;                  // embedded only
  SystemClock clock;
  std::unique_ptr<ledger::FileSnapshotStore> snapshots;  // embedded only
  std::unique_ptr<Service> service;                      // embedded only
  std::unique_ptr<AdmissionApi> api;
};

// Embedded: opens the ledger and brings a decider to its head, from the newest usable snapshot
// (progress shown for long folds; skipped snapshots are warnings). Connected: connects to
// admitd (refusing --as: the daemon records the connection's principal).
Result<std::unique_ptr<Session>> OpenSession(const GlobalOptions& global, bool create,
                                             bool read_only = false);

// The whole file, or stdin for "-".
Result<std::string> ReadAll(const std::string& path);

// Connects to admitd as --connect, --cert, --key and --ca say.
Result<std::shared_ptr<rpc::RpcClient>> Connect(const GlobalOptions& global);

// A fresh random request id (128 bits from the system's random source, hex).
std::string NewRequestId();

// Intake options from --at and --as (default actor when --as is absent).
Result<IntakeOptions> IntakeFrom(const GlobalOptions& global, const std::string& default_actor);

// Prints what a Record did: each input (recorded / unchanged) and each decision. With
// `kubectl_verb` (the files' commands), each input reads as kubectl's `KIND.GROUP/NAME VERB`:
// unchanged, configured (a definition replaced), else the verb given (created, deleted); the
// sequences are in -o json. `action`: kueuectl's verb for an action on an object (stopped,
// resumed), said whenever the input was recorded (unchanged otherwise).
void PrintOutcome(const std::vector<std::string>& labels, const RecordOutcome& outcome,
                  const std::string& format, const char* kubectl_verb = nullptr,
                  bool action = false);

// "ns/name" -> (ns, name), refusing anything else.
Result<std::pair<std::string, std::string>> SplitName(const std::string& ns_name);

}  // namespace admission::ops

namespace CLI {
class App;
}  // namespace CLI

namespace admission::ops {
// Command groups (each in its own file) register subcommands whose callbacks set *exit_code.
void AddLifecycleCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddKafkaCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddBillingCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
// `metrics [--at N]` (ops/admitctl/metrics_commands.cc).
void AddMetricsCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
void AddWhatIfCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
// `simulate` and `drill` (ops/admitctl/sim_commands.cc).
void AddSimulationCommands(CLI::App& app, int* exit_code);
// configure's settings, shared with `whatif configure` (a changed configuration to simulate).
struct ConfigArgs {
  std::string pods_ready_timeout, aging_step, retain_finished = "24h", retain_deactivated = "24h";
  int32_t backoff_base = 60, backoff_max = 3600, backoff_limit = 0, aging_max = 0;
  bool fair_sharing = false;
  std::vector<std::string> fs_strategies;  // Kueue's fairSharing.preemptionStrategies
  std::string afs_half_life, afs_sampling = "5m";
  std::vector<std::string> afs_weights;
};
Status FillEngineConfig(const ConfigArgs& cfg, schema::Event::Builder event);
void AddConfigOptions(CLI::App* command, ConfigArgs& cfg);

}  // namespace admission::ops
