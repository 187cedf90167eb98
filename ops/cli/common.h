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
#include "ops/clock.h"
#include "ops/intake.h"
#include "ops/service.h"
#include "schema/result.h"

namespace admission::ops {

struct GlobalOptions {
  std::string ledger_dir = "admission-ledger";
  std::string at;
  std::string log_level = "warn";
  std::string actor;
  uint64_t snapshot_every = kSnapshotEveryEventsDefault;  // 0: no periodic snapshots
};

// Prints "admitctl: <status>" to stderr and returns the exit code for a refusal (1).
int Fail(const Status& status);

Result<std::unique_ptr<ledger::RocksDbLog>> OpenLedger(const GlobalOptions& global, bool create);

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

// An open ledger with the decider folded over it.
struct Session {
  std::unique_ptr<ledger::RocksDbLog> log;
  SystemClock clock;
  std::unique_ptr<ledger::FileSnapshotStore> snapshots;  // the ledger's snapshots/ folder
  std::unique_ptr<Service> service;
};

// Opens the ledger and brings a decider to its head, from the newest usable snapshot (progress
// shown for long folds; skipped snapshots are warnings).
Result<std::unique_ptr<Session>> OpenSession(const GlobalOptions& global, bool create);

// The whole file, or stdin for "-".
Result<std::string> ReadAll(const std::string& path);

// Intake options from --at and --as (default actor when --as is absent).
Result<IntakeOptions> IntakeFrom(const GlobalOptions& global, const std::string& default_actor);

// Prints what a Record did: each input (recorded / unchanged) and each decision.
void PrintOutcome(const std::vector<std::string>& labels, const RecordOutcome& outcome,
                  const std::string& format);

// "ns/name" -> (ns, name), refusing anything else.
Result<std::pair<std::string, std::string>> SplitName(const std::string& ns_name);

}  // namespace admission::ops

namespace CLI {
class App;
}  // namespace CLI

namespace admission::ops {
// Command groups (each in its own file) register subcommands whose callbacks set *exit_code.
void AddLifecycleCommands(CLI::App& app, GlobalOptions& global, int* exit_code);
}  // namespace admission::ops
