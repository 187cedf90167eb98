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
#include "tests/crash/ledger_checks.h"
#include "tests/crash/scratch_dir.h"

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

// The ledger the runs append to, replaced by a fresh one once it holds kEpochEventsMax events.
struct Epoch {
  int number = -1;
  std::filesystem::path dir;
  std::string ledger_dir;
  std::string ack_path;
  LedgerContents contents = LedgerContents(kAppenderThreads);
  size_t ledger_acks = 0;  // acks in the current ledger's ack file at the last check
};

// Starts the next epoch when there is none yet or the current one is full.
void NextEpochIfFull(const std::filesystem::path& scratch, Epoch* epoch) {
  if (epoch->number >= 0 && epoch->contents.head < kEpochEventsMax) return;
  // A fresh ledger: the last one passed every check, so it is not needed for inspection.
  if (epoch->number >= 0) std::filesystem::remove_all(epoch->dir);
  ++epoch->number;
  epoch->dir = scratch / ("epoch-" + std::to_string(epoch->number));
  epoch->ledger_dir = epoch->dir / "ledger";
  epoch->ack_path = epoch->dir / "acks";
  std::filesystem::create_directories(epoch->dir);
  epoch->contents = LedgerContents(kAppenderThreads);
  epoch->ledger_acks = 0;
}

// Runs the appender on the epoch's ledger and SIGKILLs it run_ms after its first ack (or after
// its start); fails the test when the appender stopped on its own.
void RunAppenderUntilKilled(const std::string& appender, const Epoch& epoch,
                            uint64_t appender_seed, const std::string& appender_log,
                            bool after_first_ack, int run_ms) {
  const uintmax_t acks_before = FileSize(epoch.ack_path);
  const pid_t pid =
      SpawnAppender(appender, epoch.ledger_dir, epoch.ack_path, appender_seed, appender_log);
  ASSERT_GT(pid, 0) << "fork: " << std::strerror(errno);
  int status = 0;
  bool exited_early = false;
  if (after_first_ack) {
    exited_early = !WaitForAckOrExit(pid, epoch.ack_path, acks_before, &status);
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
  ASSERT_FALSE(::testing::Test::HasFailure());  // e.g. no ack before the timeout
}

// After a kill: the ledger opens, its whole chain verifies, it extends what the earlier runs
// left (epoch->contents), and every ack in the ack file names an event in it (*ack_count).
void CheckLedgerAfterKill(Epoch* epoch, size_t* ack_count) {
  Result<std::unique_ptr<ledger::RocksDbLog>> log = ledger::RocksDbLog::Open(epoch->ledger_dir);
  ASSERT_TRUE(log.ok()) << "Open refused the ledger after a SIGKILL: "
                        << log.status().ToString();

  ledger::VerifyReport verified;
  ASSERT_TRUE(WholeChainVerifies(**log, &verified));
  const ledger::VerifyReport* report = &verified;
  ASSERT_TRUE(CheckAndExtend(**log, &epoch->contents));
  ASSERT_EQ(epoch->contents.head, report->head);
  ASSERT_EQ(epoch->contents.head_hash, report->head_hash);
  ASSERT_TRUE(CheckAcks(ReadWholeFile(epoch->ack_path), epoch->contents, ack_count));
  log->reset();  // closes RocksDB (and its lock) before the next appender opens it
}

TEST(CrashRecovery, SigkilledAppenderLeavesVerifiedPrefixWithEveryAck) {
  const uint64_t seed = TestSeed();
  std::printf("crash test seed %llu (repeat with CRASH_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  const std::string appender = AppenderPath();
  ASSERT_EQ(access(appender.c_str(), X_OK), 0) << "crash_appender at '" << appender
                                               << "': " << std::strerror(errno);
  ScratchDir scratch("crash_sigkill");
  ASSERT_FALSE(HasFailure());
  const std::string appender_log = scratch.path() / "appender.log";

  Epoch epoch;
  int iterations_with_new_events = 0;
  int iterations_with_new_acks = 0;  // runs whose acks, checked against the ledger, grew
  uint64_t events_in_all = 0;
  size_t acks_in_all = 0;
  std::vector<size_t> stream_events_in_all(kAppenderThreads);
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    NextEpochIfFull(scratch.path(), &epoch);
    const int run_ms =
        kRunMsMin + static_cast<int>(Mix(seed, 2 * static_cast<uint64_t>(iteration)) %
                                     (kRunMsMax - kRunMsMin + 1));
    const uint64_t appender_seed = Mix(seed, 2 * static_cast<uint64_t>(iteration) + 1);
    // Most runs are killed a while after their first ack, so each of them appends however
    // slow the machine is; the rest are killed a while after the start, which lands in
    // process start-up, RocksDB's recovery and the appender's resume as often as in appends.
    const bool after_first_ack = iteration % kKillAfterStartOneIn != 0;
    SCOPED_TRACE("iteration " + std::to_string(iteration) + " (seed " + std::to_string(seed) +
                 ", ledger " + epoch.ledger_dir + ", killed " + std::to_string(run_ms) +
                 " ms after " + (after_first_ack ? "its first ack)" : "its start)"));
    ASSERT_NO_FATAL_FAILURE(RunAppenderUntilKilled(appender, epoch, appender_seed, appender_log,
                                                   after_first_ack, run_ms));

    const Sequence previous_head = epoch.contents.head;
    std::vector<size_t> previous_stream_events(kAppenderThreads);
    for (int t = 0; t < kAppenderThreads; ++t) {
      previous_stream_events[t] = epoch.contents.sequences[t].size();
    }
    size_t ack_count = 0;
    ASSERT_NO_FATAL_FAILURE(CheckLedgerAfterKill(&epoch, &ack_count));

    std::printf("iteration %2d: killed %2d ms after %s; ledger %d: %6llu events (+%4llu), "
                "%5zu acks\n",
                iteration, run_ms, after_first_ack ? "1st ack" : "start  ", epoch.number,
                static_cast<unsigned long long>(epoch.contents.head),
                static_cast<unsigned long long>(epoch.contents.head - previous_head), ack_count);
    // A run killed after its first ack appended (that ack names an event of this run, and
    // every ack is checked against the ledger above).
    if (after_first_ack) {
      EXPECT_GT(epoch.contents.head, previous_head);
    }
    if (ack_count > epoch.ledger_acks) ++iterations_with_new_acks;
    if (epoch.contents.head > previous_head) ++iterations_with_new_events;
    events_in_all += epoch.contents.head - previous_head;
    for (int t = 0; t < kAppenderThreads; ++t) {
      stream_events_in_all[t] += epoch.contents.sequences[t].size() - previous_stream_events[t];
    }
    acks_in_all += ack_count - epoch.ledger_acks;
    epoch.ledger_acks = ack_count;
  }

  // The test must not pass vacuously: most runs acknowledged events that the checks above
  // found in the ledger (counted from the ack files, not from which runs were meant to wait
  // for an ack), and every stream got somewhere (none starved behind the others' group
  // commits).
  EXPECT_GE(iterations_with_new_acks, kIterations / 2);
  for (int t = 0; t < kAppenderThreads; ++t) {
    EXPECT_GT(stream_events_in_all[t], 0u) << "stream t" << t << " never appended";
  }
  std::printf("%d of %d iterations appended; %llu events and %zu acks in all, in %d ledgers\n",
              iterations_with_new_events, kIterations,
              static_cast<unsigned long long>(events_in_all), acks_in_all, epoch.number + 1);
}

}  // namespace
}  // namespace admission::crash
