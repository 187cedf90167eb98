#pragma once
// What the benchmark programs share: `name: value unit` lines, wall and CPU spans, percentiles,
// the machine facts every run starts with (with an fdatasync probe of the run's folder), and
// raw RocksDB baselines configured like the ledger's default column family.

#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "ledger/rocksdb_log.h"
#include "ledger/rocksdb_options.h"
#include "schema/result.h"

namespace admission::bench {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------
// Reporting.

inline int g_failures = 0;

// Records a ledger misbehaviour; the run goes on so every figure still prints, but exits 1.
inline void Fail(const std::string& what) {
  ++g_failures;
  std::printf("FAIL: %s\n", what.c_str());
  std::fflush(stdout);
}

inline void Line(const std::string& name, const std::string& value,
                 const std::string& unit = "") {
  std::printf("%s: %s%s%s\n", name.c_str(), value.c_str(), unit.empty() ? "" : " ",
              unit.c_str());
  std::fflush(stdout);
}

inline std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

inline std::string Int(uint64_t v) { return std::to_string(v); }

inline double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Wall time, and the whole process's CPU time and context switches, over a span of a run:
// where a contender is CPU-bound or spends its time handing off between threads.
struct Span {
  double seconds = 0;
  double cpu_seconds = 0;
  uint64_t switches = 0;  // voluntary + involuntary
};

class Stopwatch {
 public:
  Stopwatch() : wall_(Clock::now()) { ::getrusage(RUSAGE_SELF, &usage_); }
  Span Stop() const {
    struct rusage now {};
    ::getrusage(RUSAGE_SELF, &now);
    auto cpu = [](const struct rusage& u) {
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
    };
    return Span{Seconds(wall_, Clock::now()), cpu(now) - cpu(usage_),
                static_cast<uint64_t>((now.ru_nvcsw - usage_.ru_nvcsw) +
                                      (now.ru_nivcsw - usage_.ru_nivcsw))};
  }

 private:
  Clock::time_point wall_;
  struct rusage usage_ {};
};

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

// The command line as one string, for the first line of a run.
inline std::string CommandLine(int argc, char** argv) {
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  return command;
}

// A fresh folder PARENT/NAME.XXXXXX for a run, removed when the run ends however its phases end
// (a failed ADM_CHECK aborts and leaves it, on purpose: the ledger is evidence then).
class WorkDir {
 public:
  WorkDir(const std::string& parent, const std::string& name) {
    std::string pattern = parent + "/" + name + ".XXXXXX";
    ADM_CHECK(::mkdtemp(pattern.data()) != nullptr,
              "cannot create a temporary directory under %s: %s", parent.c_str(),
              std::strerror(errno));
    path_ = pattern;
  }
  ~WorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ------------------------------------------------------------------------------------------
// Machine facts.

inline std::string FsTypeName(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    case 0x2FC12FC1: return "zfs";
    case 0x65735546: return "fuse";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(type));
      return buf;
    }
  }
}

// The /proc/self/mounts entry whose mount point is the longest prefix of `path`.
struct MountInfo {
  std::string source, point, type;
};

inline MountInfo MountOf(const std::string& path) {
  MountInfo best;
  std::ifstream mounts("/proc/self/mounts");
  std::string source, point, type, rest;
  while (mounts >> source >> point >> type && std::getline(mounts, rest)) {
    bool prefix = path.compare(0, point.size(), point) == 0 &&
                  (point == "/" || path.size() == point.size() || path[point.size()] == '/');
    if (prefix && point.size() >= best.point.size()) best = {source, point, type};
  }
  return best;
}

inline std::string ReadFirstLine(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// Latency of appending 4 KiB to a file and fdatasync-ing it: what one WAL sync costs here.
inline std::vector<double> FdatasyncLatencies(const std::string& dir, int count) {
  std::vector<double> out;
  std::string path = dir + "/fdatasync_probe";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return out;
  std::string block(4096, 'x');
  for (int i = 0; i < count; ++i) {
    auto t0 = Clock::now();
    if (::write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) break;
    if (::fdatasync(fd) != 0) break;
    out.push_back(Seconds(t0, Clock::now()));
  }
  ::close(fd);
  std::filesystem::remove(path);
  return out;
}

inline void PrintMachine(const std::string& dir, const std::string& work_dir, bool quick) {
  struct utsname u {};
  ::uname(&u);
  Line("machine.nproc", Int(static_cast<uint64_t>(::sysconf(_SC_NPROCESSORS_ONLN))), "cores");
  Line("machine.kernel", std::string(u.sysname) + " " + u.release + " " + u.machine);
  std::error_code ec;
  std::string canonical = std::filesystem::canonical(dir, ec).string();
  struct statfs fs {};
  std::string fs_type = ::statfs(dir.c_str(), &fs) == 0 ? FsTypeName(fs.f_type) : "unknown";
  MountInfo mount = MountOf(canonical);
  std::string device = mount.source;
  std::string rotational;
  if (device.rfind("/dev/", 0) == 0) {
    rotational = ReadFirstLine("/sys/class/block/" + device.substr(5) + "/queue/rotational");
  }
  Line("machine.dir", canonical);
  Line("machine.fs", fs_type + " on " + device + " (mounted at " + mount.point + ")");
  if (!rotational.empty()) {
    Line("machine.disk_rotational_flag", rotational, "(as the kernel reports it)");
  }
  // Enough syncs to get past a burst allowance, if the virtual disk has one.
  std::vector<double> sync = FdatasyncLatencies(work_dir, quick ? 20 : 400);
  if (!sync.empty()) {
    double total = 0;
    for (double s : sync) total += s;
    Line("machine.fdatasync_4k_append",
         "mean " + Fixed(total / static_cast<double>(sync.size()) * 1e3, 3) + " p50 " +
             Fixed(Percentile(sync, 0.5) * 1e3, 3) + " p90 " +
             Fixed(Percentile(sync, 0.9) * 1e3, 3) + " p99 " +
             Fixed(Percentile(sync, 0.99) * 1e3, 3),
         "ms (" + Int(sync.size()) + " appends of 4 KiB + fdatasync)");
  }
  Line("machine.rocksdb_version",
       Int(ROCKSDB_MAJOR) + "." + Int(ROCKSDB_MINOR) + "." + Int(ROCKSDB_PATCH));
}

// ------------------------------------------------------------------------------------------
// Raw RocksDB baselines.

// Raw RocksDB, configured like RocksDbLog::Open (the ledger's database and events-family
// options: its memtable budget, pipelined writes) so only the write path differs.
struct RawDb {
  std::unique_ptr<rocksdb::DB> db;
  std::shared_ptr<rocksdb::Statistics> stats;  // only where the tickers are reported
  uint64_t next = 1;                           // sequence of the next key
};

inline RawDb OpenRawDb(const std::string& dir, bool with_statistics) {
  rocksdb::Options options(ledger::LedgerDbOptions(true), ledger::LedgerEventsFamilyOptions());
  if (with_statistics) options.statistics = rocksdb::CreateDBStatistics();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  ADM_CHECK(s.ok(), "opening raw RocksDB at %s: %s", dir.c_str(), s.ToString().c_str());
  return RawDb{std::unique_ptr<rocksdb::DB>(raw), options.statistics, 1};
}

// A value of `bytes` bytes, distinct per sequence.
inline void FillValue(std::string* value, size_t bytes, uint64_t sequence) {
  value->assign(bytes, 'v');
  std::memcpy(value->data(), &sequence, std::min(bytes, sizeof sequence));
}

// `threads` threads for `seconds`, each doing one single-Put Write with sync=true at a time:
// RocksDB's own write grouping of concurrent writers. Returns the events written.
inline uint64_t RunRawThreaded(RawDb& raw, size_t threads, double seconds, size_t value_bytes,
                        Span* span) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next{raw.next};
  const uint64_t first = raw.next;
  std::latch ready(static_cast<ptrdiff_t>(threads) + 1);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      rocksdb::WriteOptions write_options;
      write_options.sync = true;
      std::string value;
      ready.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed)) {
        uint64_t sequence = next.fetch_add(1);
        FillValue(&value, value_bytes, sequence);
        rocksdb::WriteBatch batch;
        batch.Put(ledger::RocksDbLog::EventKey(sequence), value);
        rocksdb::Status s = raw.db->Write(write_options, &batch);
        ADM_CHECK(s.ok(), "raw write: %s", s.ToString().c_str());
      }
    });
  }
  Stopwatch watch;
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& w : workers) w.join();
  *span = watch.Stop();
  raw.next = next.load();
  return raw.next - first;
}

}  // namespace admission::bench
