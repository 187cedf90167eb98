#pragma once
// A RocksDB file system that can lose power (the power-loss test, power_loss_test.cc).
//
// SIGKILL leaves the page cache intact, so a crash test by signal cannot catch a missing fsync.
// PowerCutFileSystem forwards every call to the real file system and remembers, per file, how
// many of its bytes were durable at its last Sync/Fsync, and whether its directory entry was
// made durable (the directory fsync'd after the file was created). Cut() is the power failing:
// from then on every call that would change a file fails with an I/O error (the process can no
// longer make anything durable, and nothing it is told afterwards may count as acknowledged).
// After the process's RocksDB is closed, DropUnsynced() makes the disk look as it would after
// the machine came back: each file cut back to its last synced size, files whose directory was
// never fsync'd after their creation gone.
//
// What it models, and what not (docs/faults.md): data written but not synced is lost; a new
// file whose directory was not synced is lost; a synced file keeps everything up to its last
// sync. Renames and deletions count as durable at once (RocksDB syncs the directory right after
// the renames it relies on, CURRENT's, and a lost deletion only leaves an obsolete file), and
// directory operations are ordered, as a journaling file system (ext4, XFS) commits them: a
// rename makes every entry created before it in its directories durable too. RangeSync
// (sync_file_range) makes nothing durable. Nothing is torn inside a synced range.
//
// Cuts can also arm themselves: ArmCutAfter(n) cuts at the n-th change (append, sync, create,
// rename, delete, directory fsync) from now, so a cut lands inside whatever RocksDB is doing:
// a WAL write, a flush, the MANIFEST, recovery.
//
// Thread safety: every method may be called from any thread (RocksDB's background threads
// write through it too).

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace admission::crash {

struct PowerCutStats {
  uint64_t changes = 0;          // calls counted towards an armed cut
  uint64_t files_cut_back = 0;   // files DropUnsynced shortened
  uint64_t bytes_dropped = 0;    // bytes those files lost
  uint64_t files_dropped = 0;    // new files DropUnsynced removed (directory never synced)
};

class PowerCutFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit PowerCutFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base);
  const char* Name() const override { return "PowerCutFileSystem"; }

  // The power fails now. Idempotent.
  void Cut();
  // The power fails at the n-th change from now (n >= 1); 0 disarms.
  void ArmCutAfter(uint64_t changes);
  bool cut() const { return cut_.load(); }
  // Makes the disk what a machine finds after the cut: unsynced bytes and undurable new files
  // are gone. REQUIRES: cut(), and nothing holds a file of this file system open (RocksDB is
  // closed). Returns what it dropped since the file system was made.
  PowerCutStats DropUnsynced();
  PowerCutStats stats();

  // --- Calls that change files: refused once the power is off, tracked before ---
  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& name,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& from, const std::string& to,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& name, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& name, size_t size,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& name, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& name, const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& name, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;

 private:
  friend class PowerCutFile;
  friend class PowerCutDirectory;

  struct FileState {
    uint64_t written = 0;       // the file's size as this process wrote it
    uint64_t synced = 0;        // bytes durable: the size at the last successful sync
    bool entry_durable = true;  // its directory entry survives a cut
  };

  // Counts one change towards an armed cut; an error once the power is off (also when this
  // very change is the one that cuts it).
  rocksdb::IOStatus Change(const char* what, const std::string& name);
  // Wraps a writable file the target opened at `name`: new or truncated (size_at_open 0), or
  // reopened for appending at its size. `entry_durable`: the file existed before.
  void Track(const std::string& name, std::unique_ptr<rocksdb::FSWritableFile>* file,
             bool entry_durable, uint64_t size_at_open);
  // Called by PowerCutFile and PowerCutDirectory.
  void Wrote(const std::string& name, uint64_t end_offset);
  void Truncated(const std::string& name, uint64_t size);
  rocksdb::IOStatus Synced(const std::string& name);
  rocksdb::IOStatus DirectorySynced(const std::string& directory);

  std::atomic<bool> cut_{false};
  std::mutex mutex_;
  // Guarded by mutex_.
  uint64_t cut_at_change_ = 0;  // 0: not armed
  PowerCutStats stats_;
  std::map<std::string, FileState> files_;
};

}  // namespace admission::crash
