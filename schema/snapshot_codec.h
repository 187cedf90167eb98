#pragma once
// Reading snapshot bytes (schema/snapshot.capnp) with limits, and their hash. Encoding the
// decider's state is projections/snapshot.h; storing the bytes is ledger/snapshot_store.h.

#include <cstdint>
#include <memory>
#include <string_view>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "schema/event_codec.h"
#include "schema/result.h"
#include "schema/snapshot.capnp.h"

namespace admission::schema {

// Limits on one snapshot. 500,000 workloads take about 1 GB (docs/replay.md, "Snapshots").
inline constexpr uint64_t kSnapshotBytesMax = uint64_t{16} << 30;
inline constexpr int kSnapshotNestingMax = 64;

// Reader options for a snapshot of `bytes` bytes: every word may be read a few times (the
// canonical check, then the typed reads), and no more.
capnp::ReaderOptions SnapshotReaderOptions(size_t bytes);

// The snapshot's hash: SHA-256 of its canonical bytes.
inline Hash SnapshotHash(std::string_view bytes) { return Sha256Of(bytes); }

// A snapshot decoded from bytes. It reads the caller's bytes in place when they are
// word-aligned (large snapshots are not copied), else an aligned copy it owns.
// Lifetime: the bytes handed to DecodeSnapshot must outlive it.
class DecodedSnapshot {
 public:
  snap::Snapshot::Reader root() const { return root_; }

 private:
  friend Result<DecodedSnapshot> DecodeSnapshot(std::string_view bytes);
  DecodedSnapshot() = default;
  std::unique_ptr<capnp::word[]> copy_;
  kj::ArrayPtr<const capnp::word> segments_[1];
  std::unique_ptr<capnp::SegmentArrayMessageReader> reader_;
  snap::Snapshot::Reader root_;
};

// Decodes a snapshot in the form it is stored in: canonical bytes, one segment, no segment
// table. Refuses (kCorruption) bytes that are empty, not whole words, larger than
// kSnapshotBytesMax, malformed, or not in canonical form. Nothing throws; a reader of the
// result may still meet a malformed field deep inside (the caller runs its reads under
// kj::runCatchingExceptions).
Result<DecodedSnapshot> DecodeSnapshot(std::string_view bytes);

// The header fields, without reading the state.
struct SnapshotHeader {
  uint32_t format_version = 0;
  uint32_t engine_version = 0;
  uint64_t after = 0;
  Hash chain_hash{};
};
Result<SnapshotHeader> ReadSnapshotHeader(std::string_view bytes);

}  // namespace admission::schema
