#pragma once
// Where snapshots are kept, beside the ledger: bytes and their SHA-256, by the sequence they
// stand after. What the bytes mean is projections/snapshot.h; choosing and checking them
// against the ledger is replay/snapshots.h. See docs/replay.md, "Snapshots".

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/event_log.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::ledger {

// How many snapshots Prune keeps (the newest).
inline constexpr size_t kSnapshotsKept = 3;

// A snapshot as stored: its bytes and the hash recorded beside them when it was written.
// `stored_hash == schema::SnapshotHash(bytes)` unless the storage was edited or damaged.
struct StoredSnapshot {
  Sequence after = 0;
  std::string bytes;
  schema::Hash stored_hash{};
};

// Interface: no fields. Implementations: FileSnapshotStore, MemorySnapshotStore.
// Thread safety: one writer (the ledger's single writer); readers may run beside it.
class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;

  // The sequences of the stored snapshots, ascending.
  virtual Result<std::vector<Sequence>> List() = 0;

  // The snapshot standing after `after`. kNotFound when there is none; kCorruption when its
  // storage frame is damaged (the message says how). The hash is the caller's to compare.
  virtual Result<StoredSnapshot> Read(Sequence after) = 0;

  // Stores `bytes` with their SHA-256 durably, replacing any snapshot after the same sequence
  // (atomically: a reader sees the old one or the new one). Returns the hash.
  virtual Result<schema::Hash> Write(Sequence after, std::string_view bytes) = 0;

  // Removes the snapshot after `after` (none is not an error).
  virtual Status Remove(Sequence after) = 0;
};

// Keeps the newest `keep` snapshots and removes the others.
Status PruneSnapshots(SnapshotStore& store, size_t keep = kSnapshotsKept);

// Files DIR/snapshots/<20-digit sequence>.snap beside the ledger's RocksDB files. A file is
// "ADMSNAP1", the body length (8 bytes, big-endian), the SHA-256 of the body (32 bytes), then
// the body. Written to a temporary file, fsynced, renamed, and the directory fsynced, so a
// crash leaves the old snapshot or the new one. Temporary files of a crashed write are ignored
// by List and removed by the next Write. The ledger's lock (one process opens it) covers the
// directory.
class FileSnapshotStore final : public SnapshotStore {
 public:
  // `ledger_dir` is the ledger's directory; the snapshots go to ledger_dir/snapshots.
  explicit FileSnapshotStore(std::string ledger_dir);

  Result<std::vector<Sequence>> List() override;
  Result<StoredSnapshot> Read(Sequence after) override;
  Result<schema::Hash> Write(Sequence after, std::string_view bytes) override;
  Status Remove(Sequence after) override;

  const std::string& dir() const { return dir_; }
  // The file of the snapshot after `after` (for tests that edit storage on purpose).
  std::string PathOf(Sequence after) const;

 private:
  std::string dir_;
};

// In memory, for tests; the frame is the same as FileSnapshotStore's.
class MemorySnapshotStore final : public SnapshotStore {
 public:
  Result<std::vector<Sequence>> List() override;
  Result<StoredSnapshot> Read(Sequence after) override;
  Result<schema::Hash> Write(Sequence after, std::string_view bytes) override;
  Status Remove(Sequence after) override;

  // Flips one bit of the stored frame (header or body) of the snapshot after `after`.
  // REQUIRES: it exists and offset < its frame size.
  void CorruptForTest(Sequence after, size_t offset);
  size_t FrameSizeForTest(Sequence after);

 private:
  std::mutex mu_;
  std::map<Sequence, std::string> frames_;  // GUARDED_BY(mu_)
};

// The storage frame, shared by both stores.
inline constexpr size_t kSnapshotFrameHeaderBytes = 8 + 8 + 32;
std::string FrameSnapshot(std::string_view bytes, const schema::Hash& hash);
Result<StoredSnapshot> UnframeSnapshot(Sequence after, std::string frame);

}  // namespace admission::ledger
