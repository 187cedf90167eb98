#include "tests/crash/power_cut_fs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

// Returns the error of a change refused because the power is off.
#define ADM_POWER_CHECK(expr)                     \
  do {                                            \
    rocksdb::IOStatus power_status_ = (expr);     \
    if (!power_status_.ok()) return power_status_; \
  } while (0)

namespace admission::crash {

namespace {

std::string ParentOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

rocksdb::IOStatus PowerIsOff(const char* what, const std::string& name) {
  return rocksdb::IOStatus::IOError(std::string("power is off (test): ") + what + " " + name);
}

}  // namespace

// A writable file that reports what it wrote and synced to its file system.
class PowerCutFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  PowerCutFile(std::unique_ptr<rocksdb::FSWritableFile> file, PowerCutFileSystem& fs,
               std::string name, uint64_t size)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), name_(std::move(name)),
        size_(size) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("append to", name_));
    rocksdb::IOStatus s = target()->Append(data, options, dbg);
    if (s.ok()) fs_.Wrote(name_, size_ += data.size());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("append to", name_));
    rocksdb::IOStatus s = target()->Append(data, options, info, dbg);
    if (s.ok()) fs_.Wrote(name_, size_ += data.size());
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("append to", name_));
    rocksdb::IOStatus s = target()->PositionedAppend(data, offset, options, dbg);
    if (s.ok()) fs_.Wrote(name_, size_ = std::max<uint64_t>(size_, offset + data.size()));
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("append to", name_));
    rocksdb::IOStatus s = target()->PositionedAppend(data, offset, options, info, dbg);
    if (s.ok()) fs_.Wrote(name_, size_ = std::max<uint64_t>(size_, offset + data.size()));
    return s;
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("truncate", name_));
    rocksdb::IOStatus s = target()->Truncate(size, options, dbg);
    if (s.ok()) fs_.Truncated(name_, size_ = size);
    return s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("sync", name_));
    rocksdb::IOStatus s = target()->Sync(options, dbg);
    return s.ok() ? fs_.Synced(name_) : s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("fsync", name_));
    rocksdb::IOStatus s = target()->Fsync(options, dbg);
    return s.ok() ? fs_.Synced(name_) : s;
  }
  // sync_file_range guarantees nothing after a power failure; RocksDB follows it with a sync.
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("range-sync", name_));
    return target()->RangeSync(offset, nbytes, options, dbg);
  }
  // Closing writes nothing of its own (RocksDB's writer flushes through Append first), and must
  // work after the cut so that RocksDB can be closed.
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return target()->Close(options, dbg);
  }

 private:
  PowerCutFileSystem& fs_;
  const std::string name_;
  uint64_t size_;  // bytes written through this handle's view of the file
};

// A directory whose fsync makes the entries of the files created in it durable.
class PowerCutDirectory final : public rocksdb::FSDirectoryWrapper {
 public:
  PowerCutDirectory(std::unique_ptr<rocksdb::FSDirectory> directory, PowerCutFileSystem& fs,
                    std::string name)
      : FSDirectoryWrapper(std::move(directory)), fs_(fs), name_(std::move(name)) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    ADM_POWER_CHECK(fs_.Change("fsync directory", name_));
    rocksdb::IOStatus s = FSDirectoryWrapper::Fsync(options, dbg);
    return s.ok() ? fs_.DirectorySynced(name_) : s;
  }
  rocksdb::IOStatus FsyncWithDirOptions(
      const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_fsync_options) override {
    ADM_POWER_CHECK(fs_.Change("fsync directory", name_));
    rocksdb::IOStatus s = FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_fsync_options);
    return s.ok() ? fs_.DirectorySynced(name_) : s;
  }

 private:
  PowerCutFileSystem& fs_;
  const std::string name_;
};

PowerCutFileSystem::PowerCutFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
    : FileSystemWrapper(base) {}

void PowerCutFileSystem::Cut() { cut_.store(true); }

void PowerCutFileSystem::ArmCutAfter(uint64_t changes) {
  std::lock_guard lock(mutex_);
  cut_at_change_ = changes == 0 ? 0 : stats_.changes + changes;
}

PowerCutStats PowerCutFileSystem::stats() {
  std::lock_guard lock(mutex_);
  return stats_;
}

rocksdb::IOStatus PowerCutFileSystem::Change(const char* what, const std::string& name) {
  std::lock_guard lock(mutex_);
  if (cut_.load()) return PowerIsOff(what, name);
  ++stats_.changes;
  if (cut_at_change_ != 0 && stats_.changes >= cut_at_change_) {
    cut_.store(true);
    return PowerIsOff(what, name);
  }
  return rocksdb::IOStatus::OK();
}

void PowerCutFileSystem::Track(const std::string& name,
                               std::unique_ptr<rocksdb::FSWritableFile>* file,
                               bool entry_durable, uint64_t size_at_open) {
  {
    std::lock_guard lock(mutex_);
    auto [it, is_new] = files_.try_emplace(name);
    FileState& state = it->second;
    // A file this file system has not seen was there before it: durable, entry and bytes. One
    // it has seen keeps what it knew of its entry and, when reopened, of its bytes.
    if (is_new) {
      state.entry_durable = entry_durable;
      state.synced = size_at_open;
    }
    state.written = size_at_open;
    state.synced = std::min(state.synced, size_at_open);
  }
  *file = std::make_unique<PowerCutFile>(std::move(*file), *this, name, size_at_open);
}

void PowerCutFileSystem::Wrote(const std::string& name, uint64_t end_offset) {
  std::lock_guard lock(mutex_);
  FileState& state = files_[name];
  state.written = std::max(state.written, end_offset);
}

void PowerCutFileSystem::Truncated(const std::string& name, uint64_t size) {
  std::lock_guard lock(mutex_);
  FileState& state = files_[name];
  state.written = size;
  state.synced = std::min(state.synced, size);
}

rocksdb::IOStatus PowerCutFileSystem::Synced(const std::string& name) {
  std::lock_guard lock(mutex_);
  // A sync that returns after the cut was still running when the power failed: it made
  // nothing durable that anyone may be told about.
  if (cut_.load()) return PowerIsOff("sync", name);
  FileState& state = files_[name];
  state.synced = state.written;
  return rocksdb::IOStatus::OK();
}

rocksdb::IOStatus PowerCutFileSystem::DirectorySynced(const std::string& directory) {
  std::lock_guard lock(mutex_);
  if (cut_.load()) return PowerIsOff("fsync directory", directory);
  for (auto& [name, state] : files_) {
    if (ParentOf(name) == directory) state.entry_durable = true;
  }
  return rocksdb::IOStatus::OK();
}

PowerCutStats PowerCutFileSystem::DropUnsynced() {
  std::lock_guard lock(mutex_);
  for (const auto& [name, state] : files_) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(name, error);
    if (error) continue;  // deleted before the cut (deletions are durable at once)
    if (!state.entry_durable) {
      std::filesystem::remove(name, error);
      ++stats_.files_dropped;
      stats_.bytes_dropped += size;
      continue;
    }
    if (size > state.synced) {
      if (::truncate(name.c_str(), static_cast<off_t>(state.synced)) != 0) {
        std::fprintf(stderr, "power cut: truncate %s: %s\n", name.c_str(), std::strerror(errno));
        std::abort();
      }
      ++stats_.files_cut_back;
      stats_.bytes_dropped += size - state.synced;
    }
  }
  files_.clear();
  return stats_;
}

rocksdb::IOStatus PowerCutFileSystem::NewWritableFile(
    const std::string& name, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("create", name));
  const bool existed = std::filesystem::exists(name);
  rocksdb::IOStatus s = target()->NewWritableFile(name, options, result, dbg);
  if (s.ok()) Track(name, result, /*entry_durable=*/existed, 0);
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::ReopenWritableFile(
    const std::string& name, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("reopen", name));
  std::error_code error;
  const bool existed = std::filesystem::exists(name);
  const uintmax_t size = existed ? std::filesystem::file_size(name, error) : 0;
  rocksdb::IOStatus s = target()->ReopenWritableFile(name, options, result, dbg);
  if (s.ok()) Track(name, result, existed, error ? 0 : size);
  return s;
}

// WAL recycling (off in the ledger's options) would reuse a file's old bytes: not modelled.
rocksdb::IOStatus PowerCutFileSystem::ReuseWritableFile(
    const std::string& name, const std::string& old_name, const rocksdb::FileOptions&,
    std::unique_ptr<rocksdb::FSWritableFile>*, rocksdb::IODebugContext*) {
  return rocksdb::IOStatus::NotSupported("PowerCutFileSystem does not reuse " + old_name +
                                         " as " + name);
}

rocksdb::IOStatus PowerCutFileSystem::NewRandomRWFile(
    const std::string& name, const rocksdb::FileOptions&,
    std::unique_ptr<rocksdb::FSRandomRWFile>*, rocksdb::IODebugContext*) {
  return rocksdb::IOStatus::NotSupported("PowerCutFileSystem has no random-write files: " +
                                         name);
}

rocksdb::IOStatus PowerCutFileSystem::NewDirectory(const std::string& name,
                                                   const rocksdb::IOOptions& options,
                                                   std::unique_ptr<rocksdb::FSDirectory>* result,
                                                   rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewDirectory(name, options, result, dbg);
  if (s.ok()) *result = std::make_unique<PowerCutDirectory>(std::move(*result), *this, name);
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::RenameFile(const std::string& from, const std::string& to,
                                                 const rocksdb::IOOptions& options,
                                                 rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("rename", from));
  rocksdb::IOStatus s = target()->RenameFile(from, to, options, dbg);
  if (s.ok()) {
    std::lock_guard lock(mutex_);
    auto it = files_.find(from);
    if (it != files_.end()) {
      FileState state = it->second;
      files_.erase(it);
      files_[to] = state;
    } else {
      files_.erase(to);
    }
    // A rename counts as durable at once, and directory operations are ordered (as a journaling
    // file system commits them): every entry made before it in its directories is durable too.
    // Otherwise a cut could keep a CURRENT that names a MANIFEST whose creation it lost, a
    // state ext4 and XFS never leave.
    for (auto& [name, other] : files_) {
      const std::string parent = ParentOf(name);
      if (parent == ParentOf(to) || parent == ParentOf(from)) other.entry_durable = true;
    }
  }
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::LinkFile(const std::string& from, const std::string& to,
                                               const rocksdb::IOOptions& options,
                                               rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("link", from));
  rocksdb::IOStatus s = target()->LinkFile(from, to, options, dbg);
  if (s.ok()) {
    std::lock_guard lock(mutex_);
    auto it = files_.find(from);
    if (it != files_.end()) files_[to] = it->second;
  }
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::DeleteFile(const std::string& name,
                                                 const rocksdb::IOOptions& options,
                                                 rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("delete", name));
  rocksdb::IOStatus s = target()->DeleteFile(name, options, dbg);
  if (s.ok()) {
    std::lock_guard lock(mutex_);
    files_.erase(name);
  }
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::Truncate(const std::string& name, size_t size,
                                               const rocksdb::IOOptions& options,
                                               rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("truncate", name));
  rocksdb::IOStatus s = target()->Truncate(name, size, options, dbg);
  if (s.ok()) Truncated(name, size);
  return s;
}

rocksdb::IOStatus PowerCutFileSystem::CreateDir(const std::string& name,
                                                const rocksdb::IOOptions& options,
                                                rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("create directory", name));
  return target()->CreateDir(name, options, dbg);
}

rocksdb::IOStatus PowerCutFileSystem::CreateDirIfMissing(const std::string& name,
                                                         const rocksdb::IOOptions& options,
                                                         rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("create directory", name));
  return target()->CreateDirIfMissing(name, options, dbg);
}

rocksdb::IOStatus PowerCutFileSystem::DeleteDir(const std::string& name,
                                                const rocksdb::IOOptions& options,
                                                rocksdb::IODebugContext* dbg) {
  ADM_POWER_CHECK(Change("delete directory", name));
  return target()->DeleteDir(name, options, dbg);
}

}  // namespace admission::crash
