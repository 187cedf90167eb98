// replay_bench: replay-with-verify of a large RocksDB ledger against a raw RocksDB iteration
// that decodes the same events, in the same run. See docs/benchmarks.md ("replay_bench").
//
// The ledger is generated first, through the real write path (ops::Service on a RocksDbLog
// with sync off): Kueue's scheduler performance profile (baseline-generator.yaml: 5 cohorts x 6
// ClusterQueues, small/medium/large workloads created at fixed intervals, each finishing its
// runtime after its admission) is simulated in logical time, round after round with fresh
// workload names, until the ledger holds --events events (default 5,000,000). Workloads are
// submitted and finished by the simulation as decisions admit or evict them, so the ledger has
// the profile's mix of submits, finishes, reservations, admissions, preemptions, evictions and
// requeues.
//
// Then, alternating over --rounds rounds:
//   raw      rocksdb::DB (read-only) iterator over the event keys, schema::DecodeEvent of each
//            value: the floor of any replay (read + decode).
//   replay   replay::ReplayAndVerify on a RocksDbLog: read, decode, fold every input through a
//            fresh decider, compare every decision byte for byte, hash the decision stream.
// and, once, for attribution: the same read path without the decider (RocksDbLog::Read +
// DecodeEvent), and a replay without verify (the fold alone).
//
// Exit status non-zero only when something misbehaves (an append error, a replay error or
// divergence, a count that differs). The 0.5 goal is printed, never enforced.

#include <capnp/message.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <sys/resource.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ledger/rocksdb_log.h"
#include "ops/service/service.h"
#include "projections/engine_version.h"
#include "consumers/billing/report.h"
#include "consumers/billing/store.h"
#include "consumers/billing/stream.h"
#include "consumers/billing/watch_consumer.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "kueue_profile.h"
#include "profile_generator.h"

#ifndef REPLAY_BENCH_PROFILE_DIR
#define REPLAY_BENCH_PROFILE_DIR "../shared/kueue-perf"
#endif

namespace admission::bench {
namespace {

constexpr uint64_t kRoundsMax = 100'000;

int g_failures = 0;
void Fail(const std::string& what) {
  ++g_failures;
  if (g_failures <= 20) std::printf("FAIL: %s\n", what.c_str());
  std::fflush(stdout);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double CpuNow() {
  struct timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
int64_t MaxRssMib() {
  struct rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

class ZeroClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return 0; }
};

// ------------------------------------------------------------------------------------------
// The profile (Kueue's generator.yaml, the fields this bench uses).

// ------------------------------------------------------------------------------------------
// Measurements.

struct Pass {
  uint64_t events = 0;
  double seconds = 0;
  double cpu_seconds = 0;
  // A replay's: CPU seconds of the folding thread, the reading and the comparing helper.
  double fold_cpu = 0, read_cpu = 0, compare_cpu = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(events) / seconds : 0; }
};

Pass RawIterateDecode(const std::string& dir) {
  Pass pass;
  rocksdb::DB* raw = nullptr;
  rocksdb::Options options;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, dir, &raw);
  if (!s.ok()) {
    Fail("raw open: " + s.ToString());
    return pass;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ReadOptions read;
  read.verify_checksums = true;  // as RocksDbLog reads (the default)
  const double t0 = Now(), c0 = CpuNow();
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read));
  for (it->Seek("e"); it->Valid() && it->key().starts_with("e"); it->Next()) {
    auto decoded = schema::DecodeEvent(std::string_view(it->value().data(), it->value().size()));
    if (!decoded.ok()) {
      Fail("raw decode: " + decoded.status().ToString());
      break;
    }
    ++pass.events;
  }
  pass.seconds = Now() - t0;
  pass.cpu_seconds = CpuNow() - c0;
  return pass;
}

// RocksDbLog::Read + DecodeEvent, no decider: replay's read path alone.
Pass LogReadDecode(ledger::RocksDbLog& log) {
  Pass pass;
  const uint64_t head = log.GetHead().sequence;
  const double t0 = Now(), c0 = CpuNow();
  uint64_t next = 1;
  while (next <= head) {
    auto chunk = log.Read(next, replay::kReplayReadChunk);
    if (!chunk.ok() || chunk->empty()) {
      Fail("log read at " + std::to_string(next));
      break;
    }
    for (const auto& e : *chunk) {
      auto decoded = schema::DecodeEvent(e.bytes);
      if (!decoded.ok()) Fail("decode " + std::to_string(e.sequence));
      ++pass.events;
      next = e.sequence + 1;
    }
  }
  pass.seconds = Now() - t0;
  pass.cpu_seconds = CpuNow() - c0;
  return pass;
}

Pass Replay(ledger::RocksDbLog& log, bool verify, std::string* hash) {
  Pass pass;
  replay::Replayer replayer(log, replay::Genesis());
  replay::ReplayOptions options;
  options.verify = verify;
  const double c0 = CpuNow();
  auto report = replayer.Run(options);
  pass.cpu_seconds = CpuNow() - c0;
  if (!report.ok()) {
    Fail("replay: " + report.status().ToString());
    return pass;
  }
  if (report->divergence) {
    Fail("replay diverges at sequence " + std::to_string(report->divergence->sequence) + ": " +
         report->divergence->first_differing_field);
  }
  pass.events = report->events;
  pass.seconds = report->seconds;
  pass.fold_cpu = report->fold_cpu_seconds;
  pass.read_cpu = report->read_cpu_seconds;
  pass.compare_cpu = report->compare_cpu_seconds;
  if (hash != nullptr) *hash = schema::HashHex(report->decision_stream_hash);
  return pass;
}

// The billing consumer's fold (consumers/billing) over the whole ledger, and its report: what
// `admitctl billing report` and the streaming consumer do with each event.
Pass BillingFold(ledger::RocksDbLog& log, uint64_t* intervals) {
  Pass pass;
  const double c0 = CpuNow();
  const auto t0 = std::chrono::steady_clock::now();
  auto fold = consumers::billing::FoldLedger(log);
  if (!fold.ok()) {
    Fail("billing fold: " + fold.status().ToString());
    return pass;
  }
  consumers::billing::ReportOptions options;
  options.to_ms = fold->last_time_ms() + 1;
  options.bucket_ms = 3'600'000;
  options.by = {consumers::billing::GroupKey::kClusterQueue, consumers::billing::GroupKey::kFlavor};
  const auto t1 = std::chrono::steady_clock::now();
  const auto report = consumers::billing::BuildReport(*fold, options);
  std::printf("# billing: fold %.2f s, report %.2f s\n",
              std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  pass.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pass.cpu_seconds = CpuNow() - c0;
  pass.events = fold->last_sequence();
  *intervals = fold->closed().size();
  if (report.rows.empty() && !fold->closed().empty()) Fail("billing report without rows");
  return pass;
}

// The watch consumer's ingest (consumers::billing::BillingIngest, the code `admitctl billing
// run --connect` runs) without the relay: events in chunks as admitd's watch pushes them while a
// watcher catches up (512), folded with change tracking and the chain checked, closed intervals
// cut into records, and one synced WriteBatch per BillingIngest::kIngestEventsPerBatch events
// into a fresh BillingStore (cursor, fold entries, aggregates, outbox).
Pass BillingWatchIngest(ledger::RocksDbLog& log, const std::string& state_dir) {
  namespace billing = consumers::billing;
  Pass pass;
  std::error_code ignored;
  std::filesystem::remove_all(state_dir, ignored);
  auto store = billing::BillingStore::Open(state_dir);
  if (!store.ok()) {
    Fail("billing state: " + store.status().ToString());
    return pass;
  }
  const double c0 = CpuNow();
  const auto t0 = std::chrono::steady_clock::now();
  billing::UsageFold fold;
  fold.TrackChanges(true);
  billing::BillingIngest ingest(**store, fold, 3'600'000, std::nullopt, state_dir);
  const uint64_t head = log.GetHead().sequence;
  while (ingest.cursor() < head) {
    auto events = log.Read(ingest.cursor() + 1, 512);
    if (!events.ok() || events->empty()) {
      Fail("billing watch read: " + (events.ok() ? "nothing" : events.status().ToString()));
      return pass;
    }
    Status s = ingest.Add(*events);
    if (!s.ok()) {
      Fail("billing watch ingest: " + s.ToString());
      return pass;
    }
  }
  Status s = ingest.Flush();
  if (!s.ok()) Fail("billing watch ingest: " + s.ToString());
  pass.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pass.cpu_seconds = CpuNow() - c0;
  pass.events = ingest.cursor();
  auto outbox = (*store)->OutboxSize();
  if (!outbox.ok() || (*outbox == 0 && head > 1000)) Fail("billing watch ingest: no records");
  return pass;
}

std::string F(double v, int digits = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void Print(const std::string& name, const Pass& p) {
  std::printf("%-24s %10" PRIu64 " events  %8.2f s  %10s events/s  (cpu %.2f s", name.c_str(),
              p.events, p.seconds, F(p.rate()).c_str(), p.cpu_seconds);
  if (p.fold_cpu > 0) {
    std::printf(": fold %.2f, read %.2f, compare %.2f", p.fold_cpu, p.read_cpu, p.compare_cpu);
  }
  std::printf(")\n");
  std::fflush(stdout);
}

// replay_bench's command line.
struct BenchArgs {
  uint64_t target_events = 5'000'000;
  int rounds = 5;  // best of each side; this machine moves by +-20% from run to run
  std::string dir_base = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  std::string keep;
  std::string profile_path = std::string(REPLAY_BENCH_PROFILE_DIR) + "/baseline-generator.yaml";
};

// False (after the usage line) on an unknown argument.
bool ParseBenchArgs(int argc, char** argv, BenchArgs* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--quick") {
      args->target_events = 200'000;
      args->rounds = 1;
    } else if (a == "--events") {
      args->target_events = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--rounds") {
      args->rounds = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--dir") {
      args->dir_base = value();
    } else if (a == "--ledger") {
      args->keep = value();  // reuse (or create and keep) this ledger
    } else if (a == "--profile") {
      args->profile_path = value();
    } else {
      std::fprintf(stderr,
                   "usage: replay_bench [--quick] [--events N] [--rounds R] [--dir DIR] "
                   "[--ledger DIR (kept)] [--profile GENERATOR.yaml]\n");
      return false;
    }
  }
  return true;
}

// 1. Generates the ledger at `dir` from the profile, unless the kept ledger is already big
// enough. False after a failure.
bool GenerateLedger(const std::string& dir, const BenchArgs& args) {
  ledger::RocksDbLogOptions options;
  options.sync = false;
  auto log = ledger::RocksDbLog::Open(dir, options);
  if (!log.ok()) {
    Fail("open: " + log.status().ToString());
    return false;
  }
  if ((*log)->GetHead().sequence < args.target_events) {
    if ((*log)->GetHead().sequence != 0) {
      Fail("the kept ledger holds fewer events than --events; remove it");
      return false;
    }
    auto profile =
        std::filesystem::exists(args.profile_path) ? LoadProfile(args.profile_path) : std::nullopt;
    std::printf("# profile: %s\n",
                profile ? args.profile_path.c_str() : "built-in copy of Kueue's baseline");
    ZeroClock clock;
    auto service = ops::Service::Open(**log, clock);
    if (!service.ok()) {
      Fail("service: " + service.status().ToString());
      return false;
    }
    Generator gen(**service, profile ? *profile : BuiltInBaseline(), Fail);
    const double t0 = Now();
    Status s = gen.Define();
    uint64_t round = 0;
    // Progress on a terminal only; pipes and files get the summary line below.
    const bool progress = ::isatty(STDERR_FILENO) != 0;
    while (s.ok() && (*log)->GetHead().sequence < args.target_events && round < kRoundsMax) {
      s = gen.Round(round++);
      if (progress) {
        std::fprintf(stderr, "\rgenerating: round %" PRIu64 ", %" PRIu64 " events", round,
                     (*log)->GetHead().sequence);
      }
    }
    if (progress) std::fprintf(stderr, "\n");
    if (!s.ok()) {
      Fail("generate: " + s.ToString());
      return false;
    }
    const double seconds = Now() - t0;
    std::printf("generated                %10" PRIu64 " events  %8.2f s  (%" PRIu64
                " rounds of the profile, %" PRIu64 " decisions; max RSS %" PRId64 " MiB)\n",
                (*log)->GetHead().sequence, seconds, round, gen.decisions(), MaxRssMib());
  } else {
    std::printf("# reusing %" PRIu64 " events in %s\n", (*log)->GetHead().sequence, dir.c_str());
  }
  return true;
}

// The best pass of each side over the rounds, and each round's ratios.
struct Measured {
  std::vector<double> ratios;
  Pass best_raw, best_replay, best_billing;
  std::vector<double> billing_ratios;
  uint64_t billing_intervals = 0;
  std::string first_hash;
  uint64_t head = 0;
};

// 2. Measures, alternating raw and replay (and the billing fold). False after a failure.
bool MeasureRounds(const std::string& dir, int rounds, Measured* m) {
  std::string hash;
  for (int r = 0; r < rounds; ++r) {
    Pass raw = RawIterateDecode(dir);
    Print("raw iterate+decode", raw);
    auto log = ledger::RocksDbLog::Open(dir);
    if (!log.ok()) {
      Fail("open: " + log.status().ToString());
      return false;
    }
    m->head = (*log)->GetHead().sequence;
    Pass rep = Replay(**log, true, &hash);
    Print("replay --verify", rep);
    if (m->first_hash.empty()) m->first_hash = hash;
    if (hash != m->first_hash) Fail("the decision-stream hash changed between rounds");
    if (raw.events != m->head || rep.events != m->head) {
      Fail("events counted: raw " + std::to_string(raw.events) + ", replay " +
           std::to_string(rep.events) + ", head " + std::to_string(m->head));
    }
    Pass bill = BillingFold(**log, &m->billing_intervals);
    Print("billing fold+report", bill);
    if (bill.events != m->head) Fail("billing folded " + std::to_string(bill.events) + " events");
    if (raw.rate() > 0) m->billing_ratios.push_back(bill.rate() / raw.rate());
    if (bill.rate() > m->best_billing.rate()) m->best_billing = bill;
    if (raw.rate() > 0) m->ratios.push_back(rep.rate() / raw.rate());
    if (raw.rate() > m->best_raw.rate()) m->best_raw = raw;
    if (rep.rate() > m->best_replay.rate()) m->best_replay = rep;
  }
  return true;
}

// Attribution, once; and the watch consumer's ingest, once (a fresh state each time).
Pass MeasureOnce(const std::string& dir, uint64_t head) {
  Pass watch;
  auto log = ledger::RocksDbLog::Open(dir);
  if (log.ok()) {
    Print("log read+decode", LogReadDecode(**log));
    Print("replay (fold only)", Replay(**log, false, nullptr));
    watch = BillingWatchIngest(**log, dir + ".billing-state");
    Print("billing watch ingest", watch);
    if (watch.events != head) Fail("billing watch ingest folded " + std::to_string(watch.events));
    std::error_code ignored;
    std::filesystem::remove_all(dir + ".billing-state", ignored);
  }
  return watch;
}

void PrintRatios(const Measured& m, const Pass& watch) {
  std::printf("decision-stream sha256: %s\n", m.first_hash.c_str());
  std::string per_round;
  for (double r : m.ratios) per_round += (per_round.empty() ? "" : " ") + F(r, 3);
  const double ratio = m.best_raw.rate() > 0 ? m.best_replay.rate() / m.best_raw.rate() : 0;
  std::printf(
      "ratio replay-with-verify / raw iterate+decode: %s (best of each: %s / %s events/s; "
      "per round: %s; goal >= 0.5: %s)\n",
      F(ratio, 3).c_str(), F(m.best_replay.rate()).c_str(), F(m.best_raw.rate()).c_str(),
      per_round.c_str(), ratio >= 0.5 ? "met" : "NOT met");
  std::string billing_rounds;
  for (double r : m.billing_ratios) billing_rounds += (billing_rounds.empty() ? "" : " ") + F(r, 3);
  const double billing_ratio =
      m.best_raw.rate() > 0 ? m.best_billing.rate() / m.best_raw.rate() : 0;
  std::printf(
      "billing.ratio: %s (billing fold+report / raw iterate+decode, best of each: %s / %s "
      "events/s; per round: %s; %" PRIu64 " intervals; goal >= 0.5: %s)\n",
      F(billing_ratio, 3).c_str(), F(m.best_billing.rate()).c_str(), F(m.best_raw.rate()).c_str(),
      billing_rounds.c_str(), m.billing_intervals, billing_ratio >= 0.5 ? "met" : "NOT met");
  const double watch_ratio = m.best_raw.rate() > 0 ? watch.rate() / m.best_raw.rate() : 0;
  std::printf(
      "billing_watch.ratio: %s (the watch consumer's ingest: fold, chain check, records and one "
      "synced state batch per 8192 events / raw iterate+decode, best: %s / %s events/s; goal >= 0.5: %s)\n",
      F(watch_ratio, 3).c_str(), F(watch.rate()).c_str(), F(m.best_raw.rate()).c_str(),
      watch_ratio >= 0.5 ? "met" : "NOT met");
  // On a shared machine the wall clock moves with other load; CPU seconds (user + sys of the
  // whole process, both of replay's threads) give the second view.
  const double raw_cpu_rate =
      m.best_raw.cpu_seconds > 0
          ? static_cast<double>(m.best_raw.events) / m.best_raw.cpu_seconds
          : 0;
  const double replay_cpu_rate =
      m.best_replay.cpu_seconds > 0
          ? static_cast<double>(m.best_replay.events) / m.best_replay.cpu_seconds
          : 0;
  std::printf("cpu ratio replay-with-verify / raw iterate+decode: %s (%s / %s events per cpu-s)\n",
              F(raw_cpu_rate > 0 ? replay_cpu_rate / raw_cpu_rate : 0, 3).c_str(),
              F(replay_cpu_rate).c_str(), F(raw_cpu_rate).c_str());
  std::printf("max RSS %" PRId64 " MiB\n", MaxRssMib());
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  BenchArgs args;
  if (!ParseBenchArgs(argc, argv, &args)) return 2;
  std::string dir = args.keep;
  if (dir.empty()) {
    std::string pattern = args.dir_base + "/replay_bench.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = pattern + "/ledger";
  }
  std::printf("# replay_bench: engine v%u, target %" PRIu64 " events, ledger %s\n",
              projections::kEngineVersion, args.target_events, dir.c_str());
  if (!GenerateLedger(dir, args)) return 1;
  Measured m;
  if (!MeasureRounds(dir, args.rounds, &m)) return 1;
  const Pass watch = MeasureOnce(dir, m.head);
  PrintRatios(m, watch);
  if (args.keep.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(dir).parent_path(), ignored);
  }
  std::printf("exit status: %d\n", g_failures == 0 ? 0 : 1);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) { return admission::bench::Main(argc, argv); }
