// SIGKILL crash test of the RocksDB ledger: no acknowledged event is lost, and what survives
// is a verified prefix of what was attempted.
//
// Each iteration starts crash_appender (4 threads appending their deterministic streams, see
// crash_stream.h) on the ledger the previous iterations left, kills it with SIGKILL a random
// 5-80 ms after its first ack (three runs in four) or after its start (the rest, which also
// lands in start-up and RocksDB's recovery), and then, in this process, opens the ledger and
// checks it:
//   - RocksDbLog::Open accepts it and VerifyChain over the whole chain (with the idempotency
//     index) finds no fault;
//   - every stored event is the next event of one appender stream, byte for byte what that
//     stream's generator, the chain and the recorded time make, with time never going back;
//   - the ledger of the previous iteration is still there unchanged (its head hash is the
//     chain value at its head sequence now);
//   - every event named in the ack file is stored at the acknowledged sequence.
// A ledger is replaced by a fresh one once it holds kEpochEventsMax events (see there).
// The kill times and the appenders' batch sizes derive from one seed, printed at the start;
// CRASH_TEST_SEED=<seed> repeats a run's schedule (the interleaving itself is up to the OS).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "tests/crash/crash_stream.h"

#ifndef CRASH_APPENDER_PATH
#error "CRASH_APPENDER_PATH must name the crash_appender binary (see CMakeLists.txt)"
#endif

namespace admission::crash {
namespace {

using ledger::Sequence;

constexpr int kAppenderThreads = 4;
// CI relies on at least 50 kill-and-check rounds; each takes ~0.1-0.2 s on 2 cores.
constexpr int kIterations = 60;
constexpr int kRunMsMin = 5;
constexpr int kRunMsMax = 80;
// One run in kKillAfterStartOneIn is killed counting from its start, not from its first ack.
constexpr int kKillAfterStartOneIn = 4;
// How long an appender may take to acknowledge its first append (a loaded CI machine).
constexpr auto kFirstAckTimeout = std::chrono::seconds(60);
constexpr size_t kReadChunk = 4096;
// Each iteration verifies the whole ledger, so a ledger that outgrows this is replaced by a
// fresh one: the test's time stays bounded however fast the disk lets the appender go, and
// every ledger still lives through many crashes (and RocksDB flushes and compactions).
constexpr Sequence kEpochEventsMax = 20000;

uint64_t TestSeed() {
  if (const char* text = std::getenv("CRASH_TEST_SEED"); text != nullptr && *text != '\0') {
    uint64_t seed = 0;
    const char* end = text + std::strlen(text);
    auto [rest, error] = std::from_chars(text, end, seed);
    if (error == std::errc() && rest == end) return seed;
    ADD_FAILURE() << "CRASH_TEST_SEED='" << text << "' is not an unsigned 64-bit number";
  }
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// The environment (set by ctest) wins, so the test binary can also be pointed at another build.
std::string AppenderPath() {
  const char* from_env = std::getenv("CRASH_APPENDER");
  return from_env != nullptr && *from_env != '\0' ? from_env : CRASH_APPENDER_PATH;
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The test's scratch directory; kept after a failure so the ledger can be inspected.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern =
        (base != nullptr && *base != '\0' ? std::filesystem::path(base)
                                          : std::filesystem::temp_directory_path()) /
        "crash_sigkill.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    if (::testing::Test::HasFailure()) {
      std::printf("keeping %s for inspection\n", path_.c_str());
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Starts the appender with stdout and stderr appended to `log_path`.
pid_t SpawnAppender(const std::string& appender, const std::string& ledger_dir,
                    const std::string& ack_path, uint64_t seed, const std::string& log_path) {
  // Everything the child needs is built before fork: after it, this (multi-threaded, thanks
  // to RocksDB's background pool) process may only make async-signal-safe calls.
  std::vector<std::string> args = {appender, ledger_dir, ack_path,
                                   std::to_string(kAppenderThreads), std::to_string(seed)};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

uintmax_t FileSize(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  return error ? 0 : size;
}

// Waits until the ack file grows past `size_before` (the appender acknowledged an append) and
// returns true; returns false with `status` filled if the appender exited first. Gives up
// after kFirstAckTimeout with a test failure, leaving the appender to be killed.
bool WaitForAckOrExit(pid_t pid, const std::string& ack_path, uintmax_t size_before,
                      int* status) {
  const auto deadline = std::chrono::steady_clock::now() + kFirstAckTimeout;
  while (FileSize(ack_path) <= size_before) {
    if (waitpid(pid, status, WNOHANG) == pid) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "crash_appender acknowledged nothing within "
                    << std::chrono::seconds(kFirstAckTimeout).count() << " s";
      return true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return true;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "died of signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "wait status " + std::to_string(status);
}

// What the ledger held at the last check, per appender stream.
struct LedgerContents {
  Sequence head = 0;
  schema::Hash head_hash = schema::kGenesisHash;  // the chain value after `head`
  int64_t head_recorded_at_ns = 0;
  // sequences[t][i]: where event t:i is stored. Each stream's events are t:0..t:k, so the
  // vector's size is how far that stream got.
  std::vector<std::vector<Sequence>> sequences =
      std::vector<std::vector<Sequence>>(kAppenderThreads);
};

// Why `stored` is not the expected bytes: the first differing payload field, or the envelope.
std::string DescribeMismatch(const std::string& stored, const std::string& expected) {
  Result<schema::DecodedEvent> a = schema::DecodeEvent(stored);
  Result<schema::DecodedEvent> b = schema::DecodeEvent(expected);
  if (!a.ok() || !b.ok()) return "undecodable";
  std::string field = schema::FirstDifferingPayloadField(a->root(), b->root());
  return field.empty() ? "the envelope (sequence, prevHash or recordedAtNs) differs"
                       : "first differing field: " + field;
}

// Reads events [from, to] of `log` in chunks, calling `check` on each one in order; fails on a
// gap or on the first event `check` fails.
template <typename Check>
::testing::AssertionResult ForEachEvent(ledger::EventLog& log, Sequence from, Sequence to,
                                        Check check) {
  Sequence expected = from;
  while (expected <= to) {
    Result<std::vector<ledger::StoredEvent>> chunk =
        log.Read(expected, std::min<Sequence>(kReadChunk, to - expected + 1));
    if (!chunk.ok()) {
      return ::testing::AssertionFailure() << "Read(" << expected
                                           << "): " << chunk.status().ToString();
    }
    if (chunk->empty()) {
      return ::testing::AssertionFailure() << "event " << expected << " is missing";
    }
    for (const ledger::StoredEvent& stored : *chunk) {
      if (stored.sequence != expected) {
        return ::testing::AssertionFailure() << "expected event " << expected << ", read "
                                             << stored.sequence;
      }
      if (::testing::AssertionResult ok = check(stored); !ok) return ok;
      ++expected;
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks that the ledger is still `contents` followed by new events, and that every new event
// is the next one of its appender stream with exactly the bytes that stream's generator, the
// chain and its recorded time make; then extends `contents` by the new events.
// The old part is rehashed, not re-decoded: the chain value at the old head is unchanged only
// if every old byte is, and those bytes were checked one by one when they were new. This keeps
// an iteration's cost to hashing the ledger plus decoding what the last run appended.
::testing::AssertionResult CheckAndExtend(ledger::EventLog& log, LedgerContents* contents) {
  const ledger::Head head = log.GetHead();
  if (head.sequence < contents->head) {
    return ::testing::AssertionFailure() << "the ledger shrank from " << contents->head
                                         << " to " << head.sequence << " events";
  }
  schema::Hash chain = schema::kGenesisHash;
  ::testing::AssertionResult old_part =
      ForEachEvent(log, 1, contents->head, [&](const ledger::StoredEvent& stored) {
        chain = schema::ChainHash(chain, stored.bytes);
        return ::testing::AssertionSuccess();
      });
  if (!old_part) return old_part;
  if (chain != contents->head_hash) {
    return ::testing::AssertionFailure()
           << "the first " << contents->head << " events changed since the last check (chain "
           << schema::HashHex(chain) << ", was " << schema::HashHex(contents->head_hash) << ")";
  }

  int64_t last_recorded_at_ns = contents->head_recorded_at_ns;
  ::testing::AssertionResult new_part = ForEachEvent(
      log, contents->head + 1, head.sequence,
      [&](const ledger::StoredEvent& stored) -> ::testing::AssertionResult {
        const Sequence s = stored.sequence;
        Result<schema::DecodedEvent> decoded = schema::DecodeEvent(stored.bytes);
        if (!decoded.ok()) {
          return ::testing::AssertionFailure() << "event " << s << ": "
                                               << decoded.status().ToString();
        }
        const schema::Event::Reader event = decoded->root();
        const std::string key = event.getIdempotencyKey().cStr();
        const std::optional<StreamEvent> position = ParseIdempotencyKey(key);
        if (!position || position->thread < 0 || position->thread >= kAppenderThreads) {
          return ::testing::AssertionFailure() << "event " << s << " has idempotency key '"
                                               << key << "', of no appender stream";
        }
        std::vector<Sequence>& stream = contents->sequences[position->thread];
        if (position->index != stream.size()) {
          return ::testing::AssertionFailure()
                 << "event " << s << " is " << key << ", but stream t" << position->thread
                 << " has " << stream.size() << " events before it: not a prefix of the stream";
        }
        if (event.getRecordedAtNs() < last_recorded_at_ns) {
          return ::testing::AssertionFailure() << "event " << s << " recordedAtNs "
                                               << event.getRecordedAtNs() << " < "
                                               << last_recorded_at_ns << " before it";
        }
        last_recorded_at_ns = event.getRecordedAtNs();
        const std::string want = ExpectedStoredBytes(position->thread, position->index,
                                                     event.getRecordedAtNs(), s, chain);
        if (stored.bytes != want) {
          return ::testing::AssertionFailure() << "event " << s << " (" << key
                                               << ") is not what its stream appended: "
                                               << DescribeMismatch(stored.bytes, want);
        }
        chain = schema::ChainHash(chain, stored.bytes);
        stream.push_back(s);
        return ::testing::AssertionSuccess();
      });
  if (!new_part) return new_part;
  if (chain != head.hash) {
    return ::testing::AssertionFailure() << "the head record's hash " << schema::HashHex(head.hash)
                                         << " is not the chain value " << schema::HashHex(chain);
  }
  contents->head = head.sequence;
  contents->head_hash = chain;
  contents->head_recorded_at_ns = last_recorded_at_ns;
  return ::testing::AssertionSuccess();
}

// Checks every line of the ack file against the ledger: the acknowledged events are stored,
// densely from the acknowledged sequence, and each stream's acks move forward.
::testing::AssertionResult CheckAcks(const std::string& ack_text, const LedgerContents& contents,
                                     size_t* ack_count) {
  std::vector<int64_t> last_acked(kAppenderThreads, -1);
  *ack_count = 0;
  size_t line_start = 0;
  while (line_start < ack_text.size()) {
    const size_t newline = ack_text.find('\n', line_start);
    if (newline == std::string::npos) {
      // The kill interrupted the write(2) of this line, so it acknowledges nothing (the
      // next appender cuts it off before it appends). Earlier lines cannot be torn.
      std::printf("ack file ends in a torn line '%s' (ignored)\n",
                  ack_text.substr(line_start).c_str());
      break;
    }
    const std::string line = ack_text.substr(line_start, newline - line_start);
    line_start = newline + 1;
    std::istringstream fields(line);
    int t = -1;
    uint64_t first = 0;
    uint64_t last = 0;
    Sequence seq_first = 0;
    std::string rest;
    if (!(fields >> t >> first >> last >> seq_first) || (fields >> rest) || t < 0 ||
        t >= kAppenderThreads || first > last || last - first >= kBatchEventsMax ||
        seq_first == 0) {
      return ::testing::AssertionFailure() << "malformed ack line '" << line << "'";
    }
    if (static_cast<int64_t>(first) <= last_acked[t]) {
      return ::testing::AssertionFailure() << "ack '" << line << "' does not follow t" << t
                                           << "'s previous ack, which ended at " << last_acked[t];
    }
    last_acked[t] = static_cast<int64_t>(last);
    const std::vector<Sequence>& stream = contents.sequences[t];
    for (uint64_t i = first; i <= last; ++i) {
      if (i >= stream.size()) {
        return ::testing::AssertionFailure()
               << "acknowledged event " << IdempotencyKey(t, i) << " (ack '" << line
               << "') is lost: the ledger holds only " << stream.size() << " events of t" << t;
      }
      if (stream[i] != seq_first + (i - first)) {
        return ::testing::AssertionFailure()
               << "acknowledged event " << IdempotencyKey(t, i) << " (ack '" << line
               << "') is stored at sequence " << stream[i] << ", not "
               << seq_first + (i - first);
      }
    }
    ++*ack_count;
  }
  return ::testing::AssertionSuccess();
}

TEST(CrashRecovery, SigkilledAppenderLeavesVerifiedPrefixWithEveryAck) {
  const uint64_t seed = TestSeed();
  std::printf("crash test seed %llu (repeat with CRASH_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  const std::string appender = AppenderPath();
  ASSERT_EQ(access(appender.c_str(), X_OK), 0) << "crash_appender at '" << appender
                                               << "': " << std::strerror(errno);
  ScratchDir scratch;
  ASSERT_FALSE(HasFailure());
  const std::string appender_log = scratch.path() / "appender.log";

  int epoch = -1;
  std::filesystem::path epoch_dir;
  std::string ledger_dir;
  std::string ack_path;
  LedgerContents contents;
  int iterations_with_new_events = 0;
  int iterations_after_ack = 0;
  uint64_t events_in_all = 0;
  size_t acks_in_all = 0;
  size_t ledger_acks = 0;  // acks in the current ledger's ack file at the last check
  std::vector<size_t> stream_events_in_all(kAppenderThreads);
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    if (epoch < 0 || contents.head >= kEpochEventsMax) {
      // A fresh ledger: the last one passed every check, so it is not needed for inspection.
      if (epoch >= 0) std::filesystem::remove_all(epoch_dir);
      ++epoch;
      epoch_dir = scratch.path() / ("epoch-" + std::to_string(epoch));
      ledger_dir = epoch_dir / "ledger";
      ack_path = epoch_dir / "acks";
      std::filesystem::create_directories(epoch_dir);
      contents = LedgerContents();
      ledger_acks = 0;
    }
    const int run_ms =
        kRunMsMin + static_cast<int>(Mix(seed, 2 * static_cast<uint64_t>(iteration)) %
                                     (kRunMsMax - kRunMsMin + 1));
    const uint64_t appender_seed = Mix(seed, 2 * static_cast<uint64_t>(iteration) + 1);
    // Most runs are killed a while after their first ack, so each of them appends however
    // slow the machine is; the rest are killed a while after the start, which lands in
    // process start-up, RocksDB's recovery and the appender's resume as often as in appends.
    const bool after_first_ack = iteration % kKillAfterStartOneIn != 0;
    SCOPED_TRACE("iteration " + std::to_string(iteration) + " (seed " + std::to_string(seed) +
                 ", ledger " + ledger_dir + ", killed " + std::to_string(run_ms) +
                 " ms after " + (after_first_ack ? "its first ack)" : "its start)"));

    const uintmax_t acks_before = FileSize(ack_path);
    const pid_t pid = SpawnAppender(appender, ledger_dir, ack_path, appender_seed, appender_log);
    ASSERT_GT(pid, 0) << "fork: " << std::strerror(errno);
    int status = 0;
    bool exited_early = false;
    if (after_first_ack) {
      exited_early = !WaitForAckOrExit(pid, ack_path, acks_before, &status);
    }
    if (!exited_early) {
      std::this_thread::sleep_for(std::chrono::milliseconds(run_ms));
      ASSERT_EQ(kill(pid, SIGKILL), 0) << std::strerror(errno);
      ASSERT_EQ(waitpid(pid, &status, 0), pid) << std::strerror(errno);
    }
    // Anything but our SIGKILL means the appender stopped on its own: an error it found.
    const bool killed_by_us = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    ASSERT_TRUE(killed_by_us) << "crash_appender " << DescribeWaitStatus(status)
                              << "; its output:\n" << ReadWholeFile(appender_log);
    ASSERT_FALSE(HasFailure());  // e.g. no ack before the timeout

    Result<std::unique_ptr<ledger::RocksDbLog>> log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok()) << "Open refused the ledger after a SIGKILL: "
                          << log.status().ToString();

    Result<ledger::VerifyReport> report =
        ledger::VerifyChain(**log, 1, schema::kGenesisHash, /*check_index=*/true);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ASSERT_FALSE(report->fault.has_value())
        << "chain fault at sequence " << report->fault->sequence << ": "
        << report->fault->reason;
    ASSERT_EQ(report->events_checked, report->head);

    const Sequence previous_head = contents.head;
    std::vector<size_t> previous_stream_events(kAppenderThreads);
    for (int t = 0; t < kAppenderThreads; ++t) {
      previous_stream_events[t] = contents.sequences[t].size();
    }
    ASSERT_TRUE(CheckAndExtend(**log, &contents));
    ASSERT_EQ(contents.head, report->head);
    ASSERT_EQ(contents.head_hash, report->head_hash);
    size_t ack_count = 0;
    ASSERT_TRUE(CheckAcks(ReadWholeFile(ack_path), contents, &ack_count));
    log->reset();  // closes RocksDB (and its lock) before the next appender opens it

    std::printf("iteration %2d: killed %2d ms after %s; ledger %d: %6llu events (+%4llu), "
                "%5zu acks\n",
                iteration, run_ms, after_first_ack ? "1st ack" : "start  ", epoch,
                static_cast<unsigned long long>(contents.head),
                static_cast<unsigned long long>(contents.head - previous_head), ack_count);
    // An ack of this run was seen, and every ack is checked above; this states the point.
    if (after_first_ack) {
      EXPECT_GT(contents.head, previous_head);
      ++iterations_after_ack;
    }
    if (contents.head > previous_head) ++iterations_with_new_events;
    events_in_all += contents.head - previous_head;
    for (int t = 0; t < kAppenderThreads; ++t) {
      stream_events_in_all[t] += contents.sequences[t].size() - previous_stream_events[t];
    }
    acks_in_all += ack_count - ledger_acks;
    ledger_acks = ack_count;
  }

  // The test must not pass vacuously: most runs appended (at least those killed after an
  // ack), and every stream got somewhere (none starved behind the others' group commits).
  // (Every run killed after an ack appended: checked per run above.)
  EXPECT_GE(iterations_after_ack, kIterations / 2);
  EXPECT_GE(acks_in_all, static_cast<size_t>(iterations_after_ack));
  for (int t = 0; t < kAppenderThreads; ++t) {
    EXPECT_GT(stream_events_in_all[t], 0u) << "stream t" << t << " never appended";
  }
  std::printf("%d of %d iterations appended; %llu events and %zu acks in all, in %d ledgers\n",
              iterations_with_new_events, kIterations,
              static_cast<unsigned long long>(events_in_all), acks_in_all, epoch + 1);
}

}  // namespace
}  // namespace admission::crash
