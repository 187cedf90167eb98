#pragma once
// Snapshots of the projection state: the decider (Engine) and intake's definition bodies after
// a ledger sequence, as canonical Cap'n Proto bytes (schema/snapshot.capnp). Two processes
// holding the same state produce the same bytes; the snapshot's hash is their SHA-256
// (schema::SnapshotHash). See docs/replay.md, "Snapshots". Pure: storage is ledger/, choosing
// and checking snapshots against a ledger is replay/.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "projections/definitions.h"
#include "projections/engine.h"
#include "schema/event_codec.h"
#include "schema/result.h"
#include "schema/snapshot_codec.h"

namespace admission::projections {

// What a snapshot stores. A change of it (a member added to the Engine, a field to the schema)
// bumps this: snapshots of another format are skipped, never misread.
// 3: timers as fields (kind, key, generation, detail), not one text.
// 5: a check's podSetUpdates (engine v17). A v4 snapshot still loads: it is a v5 state with no
// podSetUpdates, the only state an engine before v17 can have.
// 6: whether the node inventory is complete (engine v19). A v4 or v5 snapshot loads as a v6
// state whose inventory is not complete, the only state an engine before v19 can have.
// 7: a workload's labels (for the views' get -l; they decide nothing). A v4 to v6 snapshot
// loads with no workload labels.
inline constexpr uint32_t kSnapshotFormatVersion = 9;
inline constexpr uint32_t kSnapshotFormatVersionOldestRead = 9;

// Encodes the state of `engine` standing after ledger event `after`, whose chain value is
// `chain_hash`, with intake's `definitions`.
// REQUIRES (checked): the engine is at a batch boundary (every decision it made was returned by
// EndBatch), else kInvalidArgument. kInvalidArgument also when the state exceeds the limits of
// one snapshot (schema::kSnapshotBytesMax, 2^29 elements per list).
Result<std::string> EncodeSnapshot(const Engine& engine, uint64_t after,
                                   const schema::Hash& chain_hash,
                                   const DefinitionBodies& definitions);

struct LoadedSnapshot {
  schema::SnapshotHeader header;
  std::unique_ptr<Engine> engine;
  DefinitionBodies definitions;
};

// Decodes a snapshot into a fresh decider, then rebuilds its derived state
// (Engine::RestoreDerivedState). The decider continues exactly as the one that was encoded.
// Errors: kInvalidArgument for a snapshot of a format or engine version it does not read (the message
// names both); kCorruption for bytes that do not decode or a state that breaks the decider's
// invariants (the message says which). The hash is the caller's to check.
Result<LoadedSnapshot> LoadSnapshot(std::string_view bytes);

}  // namespace admission::projections
