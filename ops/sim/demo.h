#pragma once
// `admitctl demo`: a small GPU platform run through the real intake path on a fresh embedded
// RocksDB ledger, narrated for a person.

#include <functional>
#include <ostream>
#include <string>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "ops/service/api.h"
#include "schema/result.h"

namespace admission::ops {

// The service as each of the demo's actors reaches it (platform-ops, tenant, pod-runtime,
// security.example.com/scanner, security.example.com/revoker, finance.example.com/budget).
// Embedded: one LocalApi for all (the actor travels in IntakeOptions); through admitd: one
// connection per actor, whose principal the daemon records.
using DemoApis = std::function<Result<AdmissionApi*>(const std::string& actor)>;

struct DemoTarget {
  DemoApis apis;
  ledger::EventLog& log;              // read for verify, replay and the explain page
  ledger::SnapshotStore& snapshots;   // read for replay's snapshot comparison
  bool index_readable = true;         // verify checks the idempotency index (embedded only)
  std::string where;                  // the ledger, for the narration ("at DIR")
  std::string page_dir;               // where the explain page is written
  std::string inspect;                // how to reach the ledger afterwards (--ledger DIR)
};

// REQUIRES: `dir` does not exist or is empty (the demo never touches an existing ledger).
Status RunDemo(const std::string& dir, std::ostream& out);

// The same demo through `target` (RunDemo is this on a LocalApi). REQUIRES: an empty ledger.
Status RunDemoThrough(const DemoTarget& target, std::ostream& out);

}  // namespace admission::ops
