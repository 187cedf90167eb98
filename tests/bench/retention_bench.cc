// retention_bench (docs/operations.md): resident memory while millions of workloads (Kueue's
// baseline profile, one round of 15,000 workloads every 7.2 h of ledger time: 50,000 a day)
// stream through ops::Service with the default retention (24 h), against retention off
// ("today's growth") in the same program; then the ledger's growth on RocksDB: bytes per stored
// event by column family, events per workload, a snapshot's size.
//
// The memory phases write to a log that keeps only its head and the last append (the ledger's
// storage is RocksDB's, bounded by its own configuration, and not what is measured here): the
// resident memory is the service's and the decider's. Readings follow malloc_trim(0).
//
// Then `explain` of the ledger's first workload at the head of that (~5M-event) ledger, through
// the history index against the fold from the genesis.
//
// Usage: retention_bench [--workloads N] [--baseline-workloads N] [--growth-workloads N]
//                        [--growth-only] [--quick]
#include <malloc.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ledger/rocksdb_log.h"
#include "ledger/sequencer.h"
#include "ledger/snapshot_store.h"
#include "ops/service/service.h"
#include "profile_generator.h"
#include "projections/engine.h"
#include "replay/explain.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"
#include "tests/unit/without_history.h"

#ifndef RETENTION_BENCH_PROFILE_DIR
#define RETENTION_BENCH_PROFILE_DIR "../shared/kueue-perf"
#endif

namespace admission::bench {
namespace {

constexpr int64_t kRoundGapMs = 7LL * 3600 * 1000 + 12 * 60 * 1000;  // 15,000 per 7.2 h

class ZeroClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return 0; }
};

// Sequences and chains appends like a ledger, and keeps only the head and the last append (so
// the service can read back the decisions it just wrote).
class HeadOnlyLog final : public ledger::EventLog {
 public:
  Result<ledger::AppendAck> Append(std::span<const std::string> batch) override {
    ledger::GroupKeys group_keys;
    ledger::KeyLookup none = [](std::string_view) -> Result<std::optional<ledger::RecordedKey>> {
      return std::optional<ledger::RecordedKey>();
    };
    ledger::AppendAck ack;
    ledger::PreparedAppend prepared;
    ADM_RETURN_IF_ERROR(ledger::PrepareAppend(batch, head_, group_keys, none, &ack, &prepared));
    head_ = prepared.head;
    last_ = std::move(prepared.events);
    return ack;
  }
  Result<std::vector<ledger::StoredEvent>> Read(ledger::Sequence from, size_t max_count) override {
    std::vector<ledger::StoredEvent> out;
    for (const auto& e : last_) {
      if (e.sequence >= from && out.size() < max_count) out.push_back(e);
    }
    return out;
  }
  ledger::Head GetHead() override { return head_; }
  Result<std::optional<ledger::Sequence>> FindKey(std::string_view) override {
    return std::optional<ledger::Sequence>();
  }

 private:
  ledger::Head head_;
  std::vector<ledger::StoredEvent> last_;
};

double ResidentMib() {
  ::malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

uint64_t WorkloadsPerRound(const std::vector<CohortClass>& profile) {
  uint64_t n = 0;
  for (const CohortClass& cc : profile) {
    for (const QueuesSet& qs : cc.queues_sets) {
      uint64_t per_queue = 0;
      for (const WorkloadsSet& ws : qs.sets) per_queue += uint64_t(ws.count) * ws.workloads.size();
      n += uint64_t(cc.count) * uint64_t(qs.count) * per_queue;
    }
  }
  return n;
}

std::string Encoded(const std::function<void(schema::Event::Body::Builder)>& fill) {
  return Encode(fill);
}

// Streams `workloads` through a service on `log`; prints the resident memory after each
// million (or each `step`) as NAME.rss_mib.at_K and returns the readings.
std::vector<double> Stream(const std::string& name, ledger::EventLog& log,
                           const std::vector<CohortClass>& profile, uint64_t workloads,
                           uint64_t step, bool retention_off) {
  ZeroClock clock;
  auto service = ops::Service::Open(log, clock);
  if (!service.ok()) {
    Fail(name + ": " + service.status().ToString());
    return {};
  }
  Generator gen(**service, profile, [](const std::string& what) { Fail(what); }, kRoundGapMs);
  if (Status s = gen.Define(); !s.ok()) Fail(name + ": " + s.ToString());
  if (retention_off) {
    std::vector<std::string> config{Encoded([](schema::Event::Body::Builder b) {
      auto c = b.initEngineConfigDefined();
      c.setRetainFinishedNs(projections::kRetainForever);
      c.setRetainDeactivatedNs(projections::kRetainForever);
    })};
    ops::IntakeOptions options;
    options.at_ns = kStartNs;
    options.actor = "retention_bench";
    if (auto r = (*service)->Record(config, options); !r.ok()) Fail(r.status().ToString());
  }
  const uint64_t per_round = WorkloadsPerRound(profile);
  std::vector<double> readings;
  uint64_t streamed = 0, next_reading = step;
  const auto started = Clock::now();
  for (uint64_t round = 0; streamed < workloads; ++round) {
    if (Status s = gen.Round(round); !s.ok()) {
      Fail(name + ": round " + std::to_string(round) + ": " + s.ToString());
      break;
    }
    streamed += per_round;
    while (streamed >= next_reading && next_reading <= workloads) {
      const double rss = ResidentMib();
      readings.push_back(rss);
      Line(name + ".rss_mib.at_" + std::to_string(next_reading / 1000) + "k", Fixed(rss, 1),
           "(" + Int((*service)->engine().workloads().size()) + " workloads live in the decider, " +
               Fixed(Seconds(started, Clock::now()), 1) + " s)");
      next_reading += step;
    }
  }
  Line(name + ".workloads_streamed", Int(streamed));
  Line(name + ".seconds", Fixed(Seconds(started, Clock::now()), 1));
  return readings;
}

// `explain` of the first workload of the ledger at its head: through the history index and the
// snapshot at the head, against the fold from the genesis; both must say the same.
void ExplainEarly(const std::string& ledger_dir) {
  ledger::RocksDbLogOptions options;
  options.read_only = true;
  auto log = ledger::RocksDbLog::Open(ledger_dir, options);
  if (!log.ok()) return Fail(log.status().ToString());
  std::string ns, name;
  for (ledger::Sequence s = 1; name.empty() && s <= (*log)->GetHead().sequence; ++s) {
    auto e = (*log)->Read(s, 1);
    if (!e.ok() || e->empty()) return Fail("reading event " + std::to_string(s));
    auto decoded = schema::DecodeEvent(e->front().bytes);
    if (decoded.ok() && decoded->root().getBody().isWorkloadSubmitted()) {
      auto w = decoded->root().getBody().getWorkloadSubmitted().getWorkload();
      ns = w.getNamespace().cStr();
      name = w.getName().cStr();
    }
  }
  ledger::FileSnapshotStore snapshots(ledger_dir);
  auto t0 = Clock::now();
  auto indexed = replay::Explain(**log, ns, name, 0, nullptr, &snapshots);
  const double indexed_s = Seconds(t0, Clock::now());
  testing::WithoutHistory hidden(**log);
  t0 = Clock::now();
  auto folded = replay::Explain(hidden, ns, name, 0);
  const double folded_s = Seconds(t0, Clock::now());
  if (!indexed.ok() || !folded.ok()) {
    return Fail("explain: " + (indexed.ok() ? folded.status() : indexed.status()).ToString());
  }
  if (replay::ExplainJson(*indexed) != replay::ExplainJson(*folded)) {
    Fail("explain through the index differs from the fold's");
  }
  Line("explain.workload", ns + "/" + name, "(" + Int(indexed->history.size()) + " events of its history; ledger of " +
       Int((*log)->GetHead().sequence) + " events)");
  Line("explain.indexed_seconds", Fixed(indexed_s, 3), "(history index + the snapshot at the head; goal < 1)");
  Line("explain.genesis_seconds", Fixed(folded_s, 3), "(the fold from the genesis, as before the index)");
  Line("explain.speedup", Fixed(folded_s / indexed_s, 1), "(goal >= 20)");
}

// The on-disk size of each column family after a full compaction.
void Growth(const std::vector<CohortClass>& profile, uint64_t workloads) {
  WorkDir dir(std::filesystem::temp_directory_path().string(), "retention-bench");
  const std::string ledger_dir = dir.path() + "/ledger";
  uint64_t events = 0, snapshot_bytes = 0, live = 0;
  {
    ledger::RocksDbLogOptions options;
    options.sync = false;
    options.min_free_bytes = 0;
    auto log = ledger::RocksDbLog::Open(ledger_dir, options);
    if (!log.ok()) return Fail(log.status().ToString());
    ZeroClock clock;
    ledger::FileSnapshotStore snapshots(ledger_dir);
    ops::ServiceOptions service_options;
    service_options.snapshots = &snapshots;
    service_options.snapshot_every_events = 0;
    auto service = ops::Service::Open(**log, clock, nullptr, service_options);
    if (!service.ok()) return Fail(service.status().ToString());
    Generator gen(**service, profile, [](const std::string& what) { Fail(what); }, kRoundGapMs);
    if (Status s = gen.Define(); !s.ok()) return Fail(s.ToString());
    const uint64_t per_round = WorkloadsPerRound(profile);
    for (uint64_t round = 0, n = 0; n < workloads; ++round, n += per_round) {
      if (Status s = gen.Round(round); !s.ok()) return Fail(s.ToString());
    }
    events = (*log)->GetHead().sequence;
    live = (*service)->engine().workloads().size();
    auto taken = (*service)->Snapshot();
    if (!taken.ok()) return Fail("snapshot: " + taken.status().ToString());
    snapshot_bytes = taken->bytes;
  }
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, {}},
      {ledger::RocksDbLog::kIndexFamily, {}},
      {ledger::RocksDbLog::kHistoryFamily, {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, ledger_dir, families, &handles, &raw);
  if (!s.ok()) return Fail(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  const char* names[] = {"events", "index", "history"};
  uint64_t total = 0;
  for (size_t i = 0; i < handles.size(); ++i) {
    (void)db->CompactRange(rocksdb::CompactRangeOptions(), handles[i], nullptr, nullptr);
    uint64_t bytes = 0;
    db->GetIntProperty(handles[i], "rocksdb.total-sst-files-size", &bytes);
    total += bytes;
    Line(std::string("growth.bytes_per_event.") + names[i],
         Fixed(static_cast<double>(bytes) / static_cast<double>(events), 1));
  }
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  Line("growth.events", Int(events));
  Line("growth.events_per_workload", Fixed(static_cast<double>(events) / workloads, 2));
  Line("growth.bytes_per_event.all", Fixed(static_cast<double>(total) / events, 1));
  Line("growth.disk_mib_per_million_workloads",
       Fixed(static_cast<double>(total) / workloads * 1e6 / (1 << 20), 1));
  Line("growth.snapshot_bytes", Int(snapshot_bytes),
       "(" + Int(live) + " workloads live in the decider at the snapshot)");
  ExplainEarly(ledger_dir);
}

int Main(int argc, char** argv) {
  uint64_t workloads = 10'000'000, baseline = 2'000'000, growth = 600'000, step = 1'000'000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0ull; };
    if (a == "--workloads") {
      workloads = next();
    } else if (a == "--baseline-workloads") {
      baseline = next();
    } else if (a == "--growth-workloads") {
      growth = next();
    } else if (a == "--growth-only") {
      workloads = baseline = 0;
    } else if (a == "--quick") {
      workloads = 300'000, baseline = 150'000, growth = 30'000, step = 75'000;
    } else {
      std::printf("usage: retention_bench [--workloads N] [--baseline-workloads N] "
                  "[--growth-workloads N] [--growth-only] [--quick]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  std::printf("# %s\n", CommandLine(argc, argv).c_str());
  auto profile_file = LoadProfile(std::string(RETENTION_BENCH_PROFILE_DIR) + "/baseline/generator.yaml");
  const std::vector<CohortClass> profile = profile_file ? *profile_file : BuiltInBaseline();
  Line("profile.workloads_per_round", Int(WorkloadsPerRound(profile)),
       "(one round every 7.2 h of ledger time: 50,000 workloads a day)");
  std::vector<double> kept, base;
  if (workloads > 0) {
    HeadOnlyLog log;
    kept = Stream("retention", log, profile, workloads, step, false);
  }
  if (baseline > 0) {
    HeadOnlyLog log;
    base = Stream("retention_off", log, profile, baseline, step, true);
  }
  if (kept.size() >= 2) {
    const double ratio = kept.back() / kept.front();
    Line("retention.rss_last_vs_first", Fixed(ratio, 3), "(goal <= 1.2: flat)");
    if (ratio > 1.2) std::printf("# goal missed: memory grows with retention on\n");
  }
  // The baseline at the same points: every reading both runs reached (same process, same run).
  for (size_t i = 0; i < std::min(kept.size(), base.size()); ++i) {
    Line("retention.ratio_at_" + Int((i + 1) * step / 1000) + "k", Fixed(kept[i] / base[i], 3),
         "(resident memory, retention on / off, after the same workloads)");
  }
  if (base.size() >= 2 && kept.size() >= 1) {
    const double per_step = (base.back() - base.front()) / static_cast<double>(base.size() - 1);
    Line("retention_off.rss_mib_growth_per_step", Fixed(per_step, 1));
    const double projected = base.front() + per_step * static_cast<double>(kept.size() - 1);
    Line("retention_off.rss_mib_projected_at_end", Fixed(projected, 1),
         "(at " + Int(workloads / 1000) + "k workloads, extrapolated linearly)");
    Line("retention.ratio", Fixed(kept.back() / projected, 3),
         "(resident memory at the end, retention on / off; same process, same run)");
  }
  Growth(profile, growth);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) { return admission::bench::Main(argc, argv); }
