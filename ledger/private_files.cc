#include "ledger/private_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include "ledger/rocksdb_options.h"

namespace admission::ledger {

namespace {

// RocksDB's POSIX file system creates files 0644 (less the umask), and this version has no
// setting for it (Env::SetAllowNonOwnerAccess answers NotSupported): every file it creates is
// made kPrivateFileMode right after, and every folder kPrivateDirectoryMode. A new ledger's
// folder is private before its first file exists, so no other user sees a file in between.
class PrivateFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit PrivateFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target)
      : rocksdb::FileSystemWrapper(target) {}
  static const char* kClassName() { return "AdmissionPrivateFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->NewWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->ReopenWritableFile(f, o, r, dbg));
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->ReuseWritableFile(f, old, o, r, dbg));
  }
  rocksdb::IOStatus NewRandomRWFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->NewRandomRWFile(f, o, r, dbg));
  }
  rocksdb::IOStatus LockFile(const std::string& f, const rocksdb::IOOptions& o,
                             rocksdb::FileLock** lock, rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->LockFile(f, o, lock, dbg));
  }
  rocksdb::IOStatus NewLogger(const std::string& f, const rocksdb::IOOptions& o,
                              std::shared_ptr<rocksdb::Logger>* logger,
                              rocksdb::IODebugContext* dbg) override {
    return Private(f, kPrivateFileMode, target()->NewLogger(f, o, logger, dbg));
  }
  rocksdb::IOStatus CreateDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* dbg) override {
    return Private(d, kPrivateDirectoryMode, target()->CreateDir(d, o, dbg));
  }

 private:
  // A folder that was there before (CreateDirIfMissing) keeps its mode: not overridden.
  static rocksdb::IOStatus Private(const std::string& path, mode_t mode, rocksdb::IOStatus made) {
    if (!made.ok()) return made;
    if (::chmod(path.c_str(), mode) != 0) {
      return rocksdb::IOStatus::IOError("making " + path + " private", std::strerror(errno));
    }
    return made;
  }
};

}  // namespace

rocksdb::Env* PrivateFilesEnv() {
  // One for the process, as Env::Default(): its threads and clock are the default one's.
  static const std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(
      std::make_shared<PrivateFileSystem>(rocksdb::FileSystem::Default()));
  return env.get();
}

Status CreatePrivateDirectory(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
  const std::filesystem::path parent = std::filesystem::absolute(dir, ec).parent_path();
  if (!ec && !parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return Status(Code::kIoError, "creating " + parent.string() + ": " + ec.message());
  if (::mkdir(dir.c_str(), kPrivateDirectoryMode) != 0) {
    if (errno == EEXIST) return Status::Ok();  // made meanwhile by another: its mode stays
    return Status(Code::kIoError, "creating " + dir + ": " + std::strerror(errno));
  }
  // mkdir's mode passes through the umask, which may take the owner's rights too.
  if (::chmod(dir.c_str(), kPrivateDirectoryMode) != 0) {
    return Status(Code::kIoError, "making " + dir + " private: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace admission::ledger
