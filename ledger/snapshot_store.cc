#include "ledger/snapshot_store.h"
#include "ledger/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "schema/snapshot_codec.h"

namespace admission::ledger {

namespace {

constexpr char kMagic[9] = "ADMSNAP1";
constexpr const char* kSuffix = ".snap";
constexpr size_t kSequenceDigits = 20;

void PutBigEndian64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t GetBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

Status Errno(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

Status FsyncPath(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("opening " + path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync " + path);
  return Status::Ok();
}

// The sequence named by a snapshot file name, if it is one.
std::optional<Sequence> SequenceOf(const std::string& name) {
  if (name.size() != kSequenceDigits + std::strlen(kSuffix) ||
      name.compare(kSequenceDigits, std::string::npos, kSuffix) != 0) {
    return std::nullopt;
  }
  Sequence s = 0;
  for (size_t i = 0; i < kSequenceDigits; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    if (s > (UINT64_MAX - 9) / 10) return std::nullopt;
    s = s * 10 + static_cast<Sequence>(name[i] - '0');
  }
  return s;
}

}  // namespace

std::string FrameSnapshot(std::string_view bytes, const schema::Hash& hash) {
  std::string frame;
  frame.reserve(kSnapshotFrameHeaderBytes + bytes.size());
  frame.append(kMagic, 8);
  PutBigEndian64(&frame, bytes.size());
  frame.append(reinterpret_cast<const char*>(hash.data()), hash.size());
  frame.append(bytes);
  return frame;
}

Result<StoredSnapshot> UnframeSnapshot(Sequence after, std::string frame) {
  auto damaged = [&](const std::string& why) {
    return Status(Code::kCorruption,
                  "snapshot at sequence " + std::to_string(after) + ": " + why);
  };
  if (frame.size() < kSnapshotFrameHeaderBytes) {
    return damaged("the file has " + std::to_string(frame.size()) + " bytes, fewer than its " +
                   std::to_string(kSnapshotFrameHeaderBytes) + "-byte header");
  }
  if (std::memcmp(frame.data(), kMagic, 8) != 0) return damaged("the file does not start with ADMSNAP1");
  const uint64_t length = GetBigEndian64(frame.data() + 8);
  if (length != frame.size() - kSnapshotFrameHeaderBytes) {
    return damaged("the header gives a body of " + std::to_string(length) + " bytes, the file holds " +
                   std::to_string(frame.size() - kSnapshotFrameHeaderBytes));
  }
  StoredSnapshot stored;
  stored.after = after;
  std::memcpy(stored.stored_hash.data(), frame.data() + 16, stored.stored_hash.size());
  // The body moves to the front, in place: no second copy of a large snapshot.
  frame.erase(0, kSnapshotFrameHeaderBytes);
  stored.bytes = std::move(frame);
  return stored;
}

Status PruneSnapshots(SnapshotStore& store, size_t keep) {
  auto list = store.List();
  if (!list.ok()) return list.status();
  if (list->size() <= keep) return Status::Ok();
  for (size_t i = 0; i + keep < list->size(); ++i) ADM_RETURN_IF_ERROR(store.Remove((*list)[i]));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Files.

FileSnapshotStore::FileSnapshotStore(std::string ledger_dir)
    : dir_(std::move(ledger_dir) + "/snapshots") {}

std::string FileSnapshotStore::PathOf(Sequence after) const {
  char name[32];
  std::snprintf(name, sizeof name, "%020llu", static_cast<unsigned long long>(after));
  return dir_ + "/" + name + kSuffix;
}

Result<std::vector<Sequence>> FileSnapshotStore::List() {
  std::vector<Sequence> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (auto s = SequenceOf(entry.path().filename().string())) out.push_back(*s);
  }
  if (ec) return Status(Code::kIoError, "listing " + dir_ + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

Result<StoredSnapshot> FileSnapshotStore::Read(Sequence after) {
  const std::string path = PathOf(after);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status(Code::kNotFound, "no snapshot at sequence " + std::to_string(after));
    }
    return Errno("opening " + path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Errno("stat " + path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > schema::kSnapshotBytesMax + kSnapshotFrameHeaderBytes) {
    ::close(fd);
    return Status(Code::kCorruption, "snapshot at sequence " + std::to_string(after) + ": " +
                                         std::to_string(size) + " bytes exceed the limit");
  }
  std::string frame(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::read(fd, frame.data() + done, frame.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0 ? Status(Code::kCorruption, path + " shrank while it was read")
                    : Errno("reading " + path);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return UnframeSnapshot(after, std::move(frame));
}

Result<schema::Hash> FileSnapshotStore::Write(Sequence after, std::string_view bytes) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(dir_, ec);
  ADM_RETURN_IF_ERROR(CreatePrivateDirectory(dir_));
  if (!existed) ADM_RETURN_IF_ERROR(FsyncPath(std::filesystem::path(dir_).parent_path().string()));
  // Leftovers of a write that crashed before its rename.
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    if (entry.path().filename().string().rfind(".tmp-", 0) == 0) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  const schema::Hash hash = schema::SnapshotHash(bytes);
  char header[kSnapshotFrameHeaderBytes];
  std::memcpy(header, kMagic, 8);
  std::string length;
  PutBigEndian64(&length, bytes.size());
  std::memcpy(header + 8, length.data(), 8);
  std::memcpy(header + 16, hash.data(), hash.size());

  const std::string final_path = PathOf(after);
  const std::string temp_path =
      dir_ + "/.tmp-" + std::to_string(after) + "-" + std::to_string(::getpid());
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        kPrivateFileMode);
  if (fd < 0) return Errno("creating " + temp_path);
  auto write_all = [&](const char* p, size_t n) -> bool {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  if (!write_all(header, sizeof header) || !write_all(bytes.data(), bytes.size()) ||
      ::fsync(fd) != 0) {
    Status s = Errno("writing " + temp_path);
    ::close(fd);
    ::unlink(temp_path.c_str());
    return s;
  }
  if (::close(fd) != 0) return Errno("closing " + temp_path);
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    Status s = Errno("renaming " + temp_path + " to " + final_path);
    ::unlink(temp_path.c_str());
    return s;
  }
  ADM_RETURN_IF_ERROR(FsyncPath(dir_));
  return hash;
}

Status FileSnapshotStore::Remove(Sequence after) {
  const std::string path = PathOf(after);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("removing " + path);
  return FsyncPath(dir_);
}

// ---------------------------------------------------------------------------------------------
// Memory.

Result<std::vector<Sequence>> MemorySnapshotStore::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Sequence> out;
  for (const auto& [after, frame] : frames_) out.push_back(after);
  return out;
}

Result<StoredSnapshot> MemorySnapshotStore::Read(Sequence after) {
  std::string frame;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = frames_.find(after);
    if (it == frames_.end()) {
      return Status(Code::kNotFound, "no snapshot at sequence " + std::to_string(after));
    }
    frame = it->second;
  }
  return UnframeSnapshot(after, std::move(frame));
}

Result<schema::Hash> MemorySnapshotStore::Write(Sequence after, std::string_view bytes) {
  const schema::Hash hash = schema::SnapshotHash(bytes);
  std::string frame = FrameSnapshot(bytes, hash);
  std::lock_guard<std::mutex> lock(mu_);
  frames_[after] = std::move(frame);
  return hash;
}

Status MemorySnapshotStore::Remove(Sequence after) {
  std::lock_guard<std::mutex> lock(mu_);
  frames_.erase(after);
  return Status::Ok();
}

void MemorySnapshotStore::CorruptForTest(Sequence after, size_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string& frame = frames_.at(after);
  ADM_CHECK(offset < frame.size(), "offset %zu beyond a frame of %zu bytes", offset, frame.size());
  frame[offset] = static_cast<char>(frame[offset] ^ 0x01);
}

size_t MemorySnapshotStore::FrameSizeForTest(Sequence after) {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.at(after).size();
}

}  // namespace admission::ledger
