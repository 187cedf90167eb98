#pragma once
// admitd's command line: its flags, and the options they fill.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ops/rpc/transport.h"
#include "ops/service/service.h"

namespace admission::ops::admitd {

struct Args {
  std::string ledger_dir;
  std::string state_dir;
  bool create_topic = false;
  int kafka_timeout_ms = 30'000;
  int transaction_timeout_ms = 60'000;
  int session_timeout_ms = 10'000;
  std::string advertise;
  std::vector<std::string> listen;
  rpc::TlsFiles tls;
  std::string policy;
  std::string ready_file;
  std::string metrics_listen;
  bool local_queue_metrics = false;
  std::string log_level = "info";
  uint64_t snapshot_every = kSnapshotEveryEventsDefault;
  std::optional<uint64_t> min_free_bytes;  // unset: ledger::DefaultMinFreeBytes of the disk
};

// Adds admitd's flags to `app`, each filling its field of `args`.
void AddFlags(CLI::App& app, Args& args);

}  // namespace admission::ops::admitd
