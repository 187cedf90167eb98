// crash_appender DIR ACKFILE THREADS SEED
//
// The victim of the SIGKILL crash test (crash_test.cc). Opens the RocksDbLog at DIR (creating
// it) and runs THREADS threads; thread t appends its deterministic stream t:0, t:1, ... (see
// crash_stream.h) in batches of BatchSize(SEED, t, first) events, resuming after the last
// event of its stream that the ledger holds. After every successful Append it writes the line
// "t i_first i_last seq_first\n" to ACKFILE with one write(2) on an O_APPEND descriptor, so an
// acknowledgement the process made survives a SIGKILL that follows it. Runs until killed; any
// unexpected outcome aborts with a message on stderr (the test insists on death by SIGKILL).
//
// Time: recordedAtNs comes from one atomic counter that starts after the head's time, and each
// Append attempt takes a fresh value just before calling Append. Concurrent appenders may
// reach the ledger's queue in another order than they took their times, so the ledger can
// refuse an attempt with kTimeWentBackwards; that attempt wrote nothing and is retried with a
// new time. This keeps the appends concurrent (the point: group commits of several appenders)
// instead of serializing them under a mutex held across Append, and it exercises the refusal
// of one request inside a group while the rest of the group is written.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ledger/rocksdb_log.h"
#include "tests/crash/crash_stream.h"

namespace admission::crash {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "crash_appender: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

template <typename T>
T ParseNumber(std::string_view text, const char* what) {
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    Die(std::string("bad ") + what + ": '" + std::string(text) + "'");
  }
  return value;
}

bool HasEvent(ledger::EventLog& log, int thread, uint64_t index) {
  Result<std::optional<ledger::Sequence>> found = log.FindKey(IdempotencyKey(thread, index));
  if (!found.ok()) Die("FindKey: " + found.status().ToString());
  return found->has_value();
}

// The first event of `thread`'s stream that the ledger does not hold. The ledger holds a
// prefix of each stream (the test checks exactly that), so a search for the boundary
// costs O(log n) index lookups instead of a scan of the whole ledger at every restart.
uint64_t ResumeIndex(ledger::EventLog& log, int thread) {
  if (!HasEvent(log, thread, 0)) return 0;
  uint64_t present = 0;  // HasEvent(present)
  uint64_t absent = 1;   // !HasEvent(absent) once the doubling stops
  while (HasEvent(log, thread, absent)) {
    present = absent;
    absent *= 2;
  }
  while (absent - present > 1) {
    const uint64_t mid = present + (absent - present) / 2;
    if (HasEvent(log, thread, mid)) {
      present = mid;
    } else {
      absent = mid;
    }
  }
  return absent;
}

void WriteAck(int fd, int thread, uint64_t first, uint64_t last, ledger::Sequence seq_first) {
  char line[96];
  const int length = std::snprintf(line, sizeof(line), "%d %llu %llu %llu\n", thread,
                                   static_cast<unsigned long long>(first),
                                   static_cast<unsigned long long>(last),
                                   static_cast<unsigned long long>(seq_first));
  if (length <= 0 || static_cast<size_t>(length) >= sizeof(line)) Die("ack line too long");
  // One write of the whole line: O_APPEND makes it land at the end whole, and with no
  // user-space buffer a SIGKILL after write() returns cannot lose it.
  ssize_t written;
  do {
    written = write(fd, line, static_cast<size_t>(length));
  } while (written < 0 && errno == EINTR);
  if (written != length) {
    Die("writing an ack: " + std::string(written < 0 ? std::strerror(errno) : "short write"));
  }
}

// Cuts off a partial last line of the ack file: a SIGKILL that interrupted the write(2) of an
// ack line (one that crosses a page boundary can be torn) leaves a piece that acknowledges
// nothing, and the next line appended to it would read as another ack.
void CutTornAckLine(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) Die("stat " + path + ": " + std::strerror(errno));
  if (st.st_size == 0) return;
  char tail[128];  // longer than any ack line
  const off_t tail_size = std::min<off_t>(st.st_size, sizeof(tail));
  if (pread(fd, tail, static_cast<size_t>(tail_size), st.st_size - tail_size) != tail_size) {
    Die("reading the end of " + path + ": " + std::strerror(errno));
  }
  if (tail[tail_size - 1] == '\n') return;
  off_t keep = tail_size;
  while (keep > 0 && tail[keep - 1] != '\n') --keep;
  if (keep == 0 && tail_size < st.st_size) Die(path + " ends in a line that is too long");
  const off_t new_size = st.st_size - tail_size + keep;
  std::fprintf(stderr, "crash_appender: cutting a torn ack line of %lld bytes off %s\n",
               static_cast<long long>(st.st_size - new_size), path.c_str());
  if (ftruncate(fd, new_size) != 0) Die("truncating " + path + ": " + std::strerror(errno));
}

struct Shared {
  ledger::EventLog* log = nullptr;
  int ack_fd = -1;
  uint64_t seed = 0;
  std::atomic<int64_t> next_recorded_at_ns{0};
  std::atomic<uint64_t> time_refusals{0};
};

[[noreturn]] void RunStream(Shared& shared, int thread, uint64_t next_index) {
  std::vector<std::string> batch;
  for (;;) {
    const size_t count = BatchSize(shared.seed, thread, next_index);
    Result<ledger::AppendAck> ack = Status(Code::kIoError, "not attempted");
    for (;;) {
      const int64_t at = shared.next_recorded_at_ns.fetch_add(1);
      batch.clear();
      for (size_t k = 0; k < count; ++k) {
        batch.push_back(EncodeStreamEvent(thread, next_index + k, at));
      }
      ack = shared.log->Append(batch);
      if (ack.ok() || ack.status().code() != Code::kTimeWentBackwards) break;
      const uint64_t refusals = shared.time_refusals.fetch_add(1) + 1;
      if ((refusals & (refusals - 1)) == 0) {  // a trace, not a flood
        std::fprintf(stderr, "crash_appender: %llu appends refused for time order so far "
                     "(each retried)\n", static_cast<unsigned long long>(refusals));
      }
    }
    if (!ack.ok()) {
      Die("append of t" + std::to_string(thread) + ":" + std::to_string(next_index) + "+" +
          std::to_string(count) + ": " + ack.status().ToString());
    }
    // Every event is new (the resume point is past whatever the ledger holds), so the ack
    // must show them all written, densely.
    if (ack->written != count || ack->sequences.size() != count) {
      Die("append of t" + std::to_string(thread) + ":" + std::to_string(next_index) +
          " wrote " + std::to_string(ack->written) + " of " + std::to_string(count));
    }
    for (size_t k = 0; k < count; ++k) {
      if (ack->sequences[k] != ack->first() + k || ack->duplicate[k]) {
        Die("append of t" + std::to_string(thread) + ":" + std::to_string(next_index) +
            " got sequences that are not dense and new");
      }
    }
    WriteAck(shared.ack_fd, thread, next_index, next_index + count - 1, ack->first());
    next_index += count;
  }
}

int Main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: crash_appender DIR ACKFILE THREADS SEED\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string ack_path = argv[2];
  const int threads = ParseNumber<int>(argv[3], "THREADS");
  if (threads < 1 || threads > kThreadsMax) {
    Die("THREADS must be 1.." + std::to_string(kThreadsMax));
  }

  Shared shared;
  shared.seed = ParseNumber<uint64_t>(argv[4], "SEED");
  shared.ack_fd = open(ack_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (shared.ack_fd < 0) Die("opening " + ack_path + ": " + std::strerror(errno));
  CutTornAckLine(shared.ack_fd, ack_path);

  Result<std::unique_ptr<ledger::RocksDbLog>> log = ledger::RocksDbLog::Open(dir);
  if (!log.ok()) Die("opening the ledger: " + log.status().ToString());
  shared.log = log->get();
  const ledger::Head head = shared.log->GetHead();
  shared.next_recorded_at_ns = std::max(head.recorded_at_ns + 1, kFirstRecordedAtNs);

  std::vector<uint64_t> resume(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    resume[static_cast<size_t>(t)] = ResumeIndex(*shared.log, t);
  }

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&shared, t, start = resume[static_cast<size_t>(t)]] {
      RunStream(shared, t, start);
    });
  }
  // The streams never end: the process lives until the test kills it.
  for (std::thread& worker : workers) worker.join();
  return 1;
}

}  // namespace
}  // namespace admission::crash

int main(int argc, char** argv) { return admission::crash::Main(argc, argv); }
