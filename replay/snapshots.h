#pragma once
// Snapshots used against their ledger: take one, check them (`admitctl verify`), start a fold
// from the newest usable one (startup, `replay --from-snapshot`), and compare them with the
// fold (`replay --verify`). See docs/replay.md, "Snapshots".

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/snapshot_store.h"
#include "projections/definitions.h"
#include "projections/engine.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::replay {

struct TakenSnapshot {
  Sequence after = 0;
  uint64_t bytes = 0;
  schema::Hash hash{};
};

// Encodes `engine`, standing after event `after`, with intake's `definitions`, tied to the
// ledger by its chain value after `after`, and stores it.
// REQUIRES: `after` ends an append and the engine is the state after it (checked: kInvalidArgument
// otherwise).
Result<TakenSnapshot> TakeSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                   const projections::Engine& engine, Sequence after,
                                   const projections::DefinitionBodies& definitions);

// One stored snapshot checked against its ledger, without loading its state.
struct SnapshotCheck {
  Sequence after = 0;
  uint64_t bytes = 0;
  schema::Hash hash{};          // SHA-256 of the stored bytes
  uint32_t engine_version = 0;  // 0 when the header does not decode
  // Why the snapshot cannot be trusted: a damaged frame, a stored hash that does not match its
  // bytes, a header that does not decode or names another sequence, a sequence beyond the head
  // or inside an append, a chain hash that is not the ledger's. Empty: intact and this ledger's.
  std::optional<std::string> fault;
};

// Checks the snapshot after `after`. A fault is in the result; errors only for I/O failures.
Result<SnapshotCheck> CheckSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                    Sequence after);

// Every stored snapshot, in sequence order.
Result<std::vector<SnapshotCheck>> VerifySnapshots(ledger::EventLog& log,
                                                   ledger::SnapshotStore& store);

// Where a fold starts: the newest usable snapshot, or the genesis.
struct SnapshotStart {
  ReplayStart start;
  projections::DefinitionBodies definitions;  // intake's, as of start.after
  std::optional<Sequence> loaded;             // the snapshot used, if any
  std::vector<std::string> skipped;           // one line per snapshot passed over, saying why
};

// The newest snapshot at or before `at_most` (0: the head) that passes CheckSnapshot, is of
// this build's format and engine version, and loads; the genesis when there is none. Every
// snapshot passed over is named in `skipped` with the reason: an unusable snapshot is never
// trusted, and never an error. Errors only for I/O failures.
Result<SnapshotStart> StartFromNewestSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                              Sequence at_most = 0);

// FoldToSequence, starting from the newest usable snapshot at or before the end of the append
// holding `at` instead of the genesis (`admitctl get --at`). Snapshots passed over are named in
// *skipped (may be null).
Result<StateAt> FoldToSequenceFromSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                           Sequence at, const ReplayProgress& progress = nullptr,
                                           std::vector<std::string>* skipped = nullptr);

// A stored snapshot compared with the state the fold reached at its sequence.
struct SnapshotComparison {
  Sequence after = 0;
  // Empty: the stored bytes equal the state re-encoded there. Else what differs (the first
  // differing field, e.g. "state.workloads[ns/a]"), or why the snapshot cannot be compared.
  std::optional<std::string> mismatch;
};

struct ComparedReplay {
  ReplayReport report;
  std::vector<SnapshotComparison> snapshots;  // those in the folded range, in order
};

// Runs `replayer` with `options` and also compares every stored snapshot whose sequence lies
// in the folded range (replayer.position(), to] with the decider's state there, re-encoded with
// intake's definitions (tracked from `definitions`, those at replayer.position()). A decision
// divergence stops the fold as in Replayer::Run; snapshots after it are not compared.
Result<ComparedReplay> RunComparingSnapshots(Replayer& replayer, const ReplayOptions& options,
                                             ledger::EventLog& log, ledger::SnapshotStore& store,
                                             projections::DefinitionBodies definitions);

}  // namespace admission::replay
