// ledger_bench: durable append throughput of RocksDbLog, measured against raw RocksDB doing the
// same writes in the same process, so the figures say what the ledger's own work (decode,
// canonicalize, hash chain, index, group commit) costs on top of the storage engine.
//
// Prints `name: value unit` lines and `ratio` lines with their goals. Speed goals are printed,
// never enforced; the exit status is non-zero only when the ledger misbehaves (an Append error,
// a head that does not match what was appended, a chain that fails VerifyChain).
// See docs/benchmarks.md for the command, figures and reading.

#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <capnp/message.h>
#include <openssl/evp.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/version.h>
#include <rocksdb/write_batch.h>

#include "ledger/rocksdb_log.h"
#include "ledger/rocksdb_options.h"
#include "ledger/sequencer.h"
#include "ledger/verify.h"
#include "schema/event_codec.h"
#include "schema/workload_refs.h"
#include "tests/bench/bench_util.h"

namespace admission::bench {
namespace {

using ledger::RocksDbLog;
using ledger::RocksDbLogOptions;
using ledger::RocksDbLogStats;
using ledger::Sequence;

// Logical time of every event. One fixed value: concurrent appenders race for their place in
// the queue, and a clock read before the race could go backwards along the ledger.
constexpr int64_t kEventTimeNs = 1'795'910'400'000'000'000;  // 2026-11-29T00:00:00Z
constexpr double kRatioGoal = 0.8;
// Keyed appends (every call through admitd or admitctl carries keys) against raw without keys.
// Issue 32: the keyed path against raw RocksDB doing the same index work.
constexpr double kKeyedVsRawKeyedGoal = 0.85;

struct Params {
  bool quick = false;
  double seconds = 2.0;       // duration of each time-bound phase
  size_t batch_size = 256;    // events per Append in the batched phase
  size_t batches = 0;         // batched phase: 0 = calibrated so ours takes ~`seconds`
  size_t appenders = 64;      // concurrent phase threads
  size_t rounds = 8;          // each phase's contenders are interleaved over this many rounds
  size_t stored_bytes = 256;  // target size of one stored event (a uid of Kubernetes' shape, a key)
  std::string phases = "batched,concurrent,breakdown";  // which phases run (for profiling)
  std::string dir;
};

// ------------------------------------------------------------------------------------------
// Reporting.

// ------------------------------------------------------------------------------------------
// Machine facts.

// ------------------------------------------------------------------------------------------
// Events.

// An index lookup that finds nothing: for running the sequencer step outside a log.
ledger::KeyLookup NoKeys() {
  return [](std::string_view) {
    return Result<std::optional<ledger::RecordedKey>>(std::optional<ledger::RecordedKey>());
  };
}

// Builds client events (envelope filled, no sequence, no prevHash) whose STORED form, after
// the ledger adds sequence and the 32-byte prevHash, is exactly `stored_bytes` long (or the
// next whole word above: canonical events are whole words). The body is workloadDeleted; the
// WorkloadRef uid carries the padding. Every id gives the same size, so all events are alike.
// splitmix64's finalizer: distinct ids give distinct, unordered values.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class EventFactory {
 public:
  EventFactory(size_t stored_bytes, bool keyed) : keyed_(keyed) {
    for (size_t pad = 0; pad < stored_bytes + 64; ++pad) {
      padding_.assign(pad, 'p');
      size_t size = StoredSizeOf(Make(0));
      if (size >= stored_bytes) {
        stored_bytes_ = size;
        break;
      }
    }
    ADM_CHECK(stored_bytes_ >= stored_bytes, "no padding reaches %zu bytes", stored_bytes);
    client_bytes_ = Make(0).size();
  }

  std::string Make(uint64_t id) const {
    char name[32];
    std::snprintf(name, sizeof name, "wl-%016" PRIx64, id);
    capnp::MallocMessageBuilder message;
    schema::Event::Builder event = message.initRoot<schema::Event>();
    event.setRecordedAtNs(kEventTimeNs);
    // The padding rides in the actor, which no index reads: every event names its own
    // workload by namespace, name and a uid of Kubernetes' shape, as a ledger's events do.
    event.setActor("bench" + padding_);
    if (keyed_) {
      // The shape of the keys admitd and admitctl write (`req/PRINCIPAL/REQUEST-ID/INPUT`,
      // ops::RequestInputKey): request ids are random, so index keys arrive in no order.
      char key[40];
      std::snprintf(key, sizeof key, "req/b/%016" PRIx64 "/0", Mix64(id));
      event.setIdempotencyKey(key);
    }
    schema::WorkloadRef::Builder ref =
        event.getBody().initWorkloadDeleted().initWorkload();
    ref.setNamespace("bench");
    ref.setName(name);
    char uid[40];
    const uint64_t u = Mix64(id ^ 0x5bd1e995);
    const uint64_t v = Mix64(u);
    std::snprintf(uid, sizeof uid, "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                  "-%012" PRIx64, u >> 32, (u >> 16) & 0xffff, u & 0xffff, v >> 48,
                  v & uint64_t{0xffffffffffff});
    ref.setUid(uid);
    return schema::EncodeEvent(message);
  }

  // The size the ledger stores this event at: the same step the logs run (PrepareAppend).
  static size_t StoredSizeOf(const std::string& client_event) {
    ledger::GroupKeys group_keys;
    ledger::KeyLookup no_keys = NoKeys();
    ledger::AppendAck ack;
    ledger::PreparedAppend prepared;
    std::span<const std::string> batch(&client_event, 1);
    Status s = ledger::PrepareAppend(batch, ledger::Head{}, group_keys, no_keys, &ack,
                                     &prepared);
    ADM_CHECK(s.ok() && prepared.events.size() == 1, "%s", s.ToString().c_str());
    return prepared.events[0].bytes.size();
  }

  bool keyed() const { return keyed_; }
  size_t stored_bytes() const { return stored_bytes_; }
  size_t client_bytes() const { return client_bytes_; }

 private:
  bool keyed_;
  std::string padding_;
  size_t stored_bytes_ = 0;
  size_t client_bytes_ = 0;
};

// Events with ids [first_id, first_id + count).
std::vector<std::string> MakeEvents(const EventFactory& factory, uint64_t first_id,
                                    size_t count) {
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.push_back(factory.Make(first_id + i));
  return out;
}

// ------------------------------------------------------------------------------------------
// Checks on a log after a run: the head, the chain, the index, and a reopen.

// Closes `log`, reopens the ledger at `dir` (which checks its tail) and checks the whole chain
// and index. Fails the run on any disagreement with `appended`. Returns VerifyChain's rate.
double CheckLedger(const std::string& label, std::unique_ptr<RocksDbLog> log,
                 const std::string& dir, uint64_t appended, size_t stored_bytes) {
  Sequence head_before = log->GetHead().sequence;
  if (head_before != appended) {
    Fail(label + ": head sequence " + Int(head_before) + " != " + Int(appended) +
         " events appended");
  }
  log.reset();
  Result<std::unique_ptr<RocksDbLog>> reopened = RocksDbLog::Open(dir);
  if (!reopened.ok()) {
    Fail(label + ": reopening the ledger: " + reopened.status().ToString());
    return 0;
  }
  RocksDbLog& l = **reopened;
  if (l.GetHead().sequence != appended) {
    Fail(label + ": head sequence after reopen " + Int(l.GetHead().sequence) + " != " +
         Int(appended));
  }
  auto t0 = Clock::now();
  Result<ledger::VerifyReport> report = ledger::VerifyChain(l, 1, schema::kGenesisHash, true);
  double verify_s = Seconds(t0, Clock::now());
  if (!report.ok()) {
    Fail(label + ": VerifyChain: " + report.status().ToString());
    return 0;
  }
  if (report->fault) {
    Fail(label + ": VerifyChain fault at sequence " + Int(report->fault->sequence) + ": " +
         report->fault->reason);
  }
  if (report->events_checked != appended) {
    Fail(label + ": VerifyChain checked " + Int(report->events_checked) + " events, not " +
         Int(appended));
  }
  if (appended > 0) {
    Result<std::vector<ledger::StoredEvent>> first = l.Read(1, 1);
    if (!first.ok() || first->size() != 1) {
      Fail(label + ": reading event 1 back");
    } else if (first->front().bytes.size() != stored_bytes) {
      Fail(label + ": stored event 1 has " + Int(first->front().bytes.size()) +
           " bytes, expected " + Int(stored_bytes));
    }
  }
  return verify_s > 0 ? static_cast<double>(appended) / verify_s : 0;
}

// ------------------------------------------------------------------------------------------
// Contenders. Each one is opened once and kept open across rounds; every round runs each
// contender for a slice of the work, in an order rotated by the round. The disk of this kind of
// machine is shared and its fsync time drifts by several times within seconds, so running all
// of one contender and then all of the other would measure the drift, not the contenders.

// Accumulated figures of one contender over all rounds.
struct Tally {
  uint64_t events = 0;
  double seconds = 0;
  double cpu_seconds = 0;
  uint64_t switches = 0;
  std::vector<double> round_rates;
  void Add(uint64_t n, const Span& span) {
    events += n;
    seconds += span.seconds;
    cpu_seconds += span.cpu_seconds;
    switches += span.switches;
    round_rates.push_back(span.seconds > 0 ? static_cast<double>(n) / span.seconds : 0);
  }
  double rate() const { return seconds > 0 ? static_cast<double>(events) / seconds : 0; }
};

void RunRounds(size_t rounds, const std::vector<std::function<void(size_t round)>>& contenders) {
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < contenders.size(); ++i) contenders[(i + r) % contenders.size()](r);
  }
}

// The ratio of the totals decides the goal; the per-round ratios and their median show how
// much the disk moved under the run.
void RatioLine(const std::string& name, const Tally& ours, const Tally& raw,
               double goal = kRatioGoal) {
  double ratio = raw.rate() > 0 ? ours.rate() / raw.rate() : 0;
  std::string rounds;
  std::vector<double> round_ratios;
  for (size_t r = 0; r < ours.round_rates.size() && r < raw.round_rates.size(); ++r) {
    round_ratios.push_back(raw.round_rates[r] > 0 ? ours.round_rates[r] / raw.round_rates[r]
                                                  : 0);
    rounds += " " + Fixed(round_ratios.back(), 2);
  }
  std::printf("%s: %.3f (ours/raw; goal >= %.2f: %s; per round:%s; median %.2f)\n",
              name.c_str(), ratio, goal, ratio >= goal ? "met" : "NOT met",
              rounds.c_str(), Percentile(round_ratios, 0.5));
  std::fflush(stdout);
}

void RateLine(const std::string& name, const Tally& t, const std::string& what) {
  Line(name + ".events_per_s", Fixed(t.rate(), 0),
       "events/s (" + Int(t.events) + " events in " + Fixed(t.seconds, 3) + " s; " + what + ")");
  if (t.events == 0 || t.seconds <= 0) return;
  const double events = static_cast<double>(t.events);
  Line(name + ".cpu", Fixed(t.cpu_seconds / events * 1e6, 2),
       "us CPU/event (process user+sys; " + Fixed(t.cpu_seconds / t.seconds, 2) +
           " cores busy; " + Fixed(static_cast<double>(t.switches) / events, 2) +
           " context switches/event)");
}

// Writes `count` values under keys `e` + big-endian sequence, in WriteBatches of `batch_size`,
// one Write each.
Span WriteRawBatches(RawDb& raw, uint64_t count, size_t batch_size, size_t value_bytes,
                       bool sync) {
  rocksdb::WriteOptions write_options;
  write_options.sync = sync;
  std::string value;
  const uint64_t end = raw.next + count;
  Stopwatch watch;
  while (raw.next < end) {
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < batch_size && raw.next < end; ++i, ++raw.next) {
      FillValue(&value, value_bytes, raw.next);
      batch.Put(RocksDbLog::EventKey(raw.next), value);
    }
    rocksdb::Status s = raw.db->Write(write_options, &batch);
    ADM_CHECK(s.ok(), "raw write: %s", s.ToString().c_str());
  }
  return watch.Stop();
}

// Raw RocksDB doing the index's own work and nothing of the ledger's: the ledger's options
// (ledger/rocksdb_options.h), and per batch one MultiGet of the batch's keys in the index
// family (all absent), then one WriteBatch of the events, the index entries (sorted, 8-byte
// values) and a 48-byte head record, written with sync. What a durable per-key index in
// RocksDB costs by itself.
struct RawKeyedDb {
  std::unique_ptr<rocksdb::DB> db;
  std::unique_ptr<rocksdb::ColumnFamilyHandle> events, index;
  uint64_t next = 1;
  ~RawKeyedDb() {
    index.reset();
    events.reset();
    db.reset();
  }
};

std::unique_ptr<RawKeyedDb> OpenRawKeyedDb(const std::string& dir) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, ledger::LedgerEventsFamilyOptions()},
      {RocksDbLog::kIndexFamily, ledger::LedgerIndexFamilyOptions()},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(ledger::LedgerDbOptions(true), dir, families, &handles, &raw);
  ADM_CHECK(s.ok(), "opening raw keyed RocksDB at %s: %s", dir.c_str(), s.ToString().c_str());
  auto out = std::make_unique<RawKeyedDb>();
  out->db.reset(raw);
  out->events.reset(handles[0]);
  out->index.reset(handles[1]);
  return out;
}

Span WriteRawKeyedBatches(RawKeyedDb& raw, uint64_t count, size_t batch_size,
                          size_t value_bytes) {
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  std::string value;
  const std::string head(48, 'h');
  const uint64_t end = raw.next + count;
  std::vector<std::string> keys;
  Stopwatch watch;
  while (raw.next < end) {
    const uint64_t first = raw.next;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(batch_size, end - first));
    keys.clear();
    for (size_t i = 0; i < n; ++i) {
      char key[40];
      std::snprintf(key, sizeof key, "req/b/%016" PRIx64 "/0", Mix64(first + i));
      keys.emplace_back(key);
    }
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    raw.db->MultiGet(rocksdb::ReadOptions(), raw.index.get(), n, slices.data(), values.data(),
                     statuses.data());
    for (const rocksdb::Status& st : statuses) {
      ADM_CHECK(st.IsNotFound(), "raw keyed: a new key was found: %s", st.ToString().c_str());
    }
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < n; ++i, ++raw.next) {
      FillValue(&value, value_bytes, raw.next);
      batch.Put(raw.events.get(), RocksDbLog::EventKey(raw.next), value);
    }
    std::sort(keys.begin(), keys.end());
    for (const std::string& key : keys) {
      batch.Put(raw.index.get(), key, RocksDbLog::EventKey(first).substr(1));
    }
    batch.Put(raw.events.get(), RocksDbLog::kHeadKey, head);
    rocksdb::Status s = raw.db->Write(write_options, &batch);
    ADM_CHECK(s.ok(), "raw keyed write: %s", s.ToString().c_str());
  }
  return watch.Stop();
}

// A RocksDbLog under test.
struct OursLog {
  std::string label;
  std::string dir;
  std::unique_ptr<RocksDbLog> log;
  uint64_t appended = 0;
  bool failed = false;  // after the first error the log is left alone
};

OursLog OpenOurs(const std::string& label, const std::string& dir, bool sync,
                 bool index_history = true) {
  RocksDbLogOptions options;
  options.sync = sync;
  options.index_history = index_history;
  Result<std::unique_ptr<RocksDbLog>> opened = RocksDbLog::Open(dir, options);
  ADM_CHECK(opened.ok(), "%s", opened.status().ToString().c_str());
  return OursLog{label, dir, std::move(*opened), 0, false};
}

// Appends `events` in Appends of `batch_size`.
Span AppendBatches(OursLog& ours, std::span<const std::string> events, size_t batch_size) {
  Stopwatch watch;
  for (size_t i = 0; i < events.size() && !ours.failed; i += batch_size) {
    std::span<const std::string> batch =
        events.subspan(i, std::min(batch_size, events.size() - i));
    Result<ledger::AppendAck> ack = ours.log->Append(batch);
    if (!ack.ok()) {
      Fail(ours.label + ": Append: " + ack.status().ToString());
      ours.failed = true;
    } else {
      if (ack->written != batch.size()) {
        Fail(ours.label + ": Append wrote " + Int(ack->written) + " of " + Int(batch.size()));
      }
      ours.appended += ack->written;
    }
  }
  return watch.Stop();
}

double Ratio(uint64_t a, uint64_t b) {
  return b ? static_cast<double>(a) / static_cast<double>(b) : 0;
}

// ------------------------------------------------------------------------------------------
// Phase 1: batched durable appends.

// Calibrate: a short run of ours sizes the measured run to ~p.seconds; returns its batches.
size_t CalibrateBatches(const Params& p, const std::string& work, const EventFactory& plain) {
  OursLog probe = OpenOurs("calibration", work + "/calibrate", true);
  std::vector<std::string> events = MakeEvents(plain, 0, p.batch_size * 16);
  double s = AppendBatches(probe, events, p.batch_size).seconds;
  probe.log.reset();
  std::filesystem::remove_all(work + "/calibrate");
  return static_cast<size_t>(static_cast<double>(events.size()) / s * p.seconds /
                             static_cast<double>(p.batch_size));
}

// The batched phases' batch count: --batches, else calibrated; whole batches in every round.
size_t BatchesOf(const Params& p, const std::string& work, const EventFactory& plain) {
  size_t batches = p.batches == 0 ? CalibrateBatches(p, work, plain) : p.batches;
  batches = std::max(batches, p.rounds);
  return batches - batches % p.rounds;
}

// The batched phase's contenders' timings, synced and not.
struct BatchedTallies {
  Tally raw, raw_keyed, ours, ours_keyed;
  Tally raw_nosync, ours_nosync, ours_keyed_nosync;
};

void PrintBatched(const BatchedTallies& t, const RocksDbLogStats& stats, const Params& p,
                  size_t batches) {
  RateLine("batched.raw", t.raw, "one WriteBatch of " + Int(p.batch_size) + ", sync");
  Line("batched.raw.batch_ms", Fixed(t.raw.seconds * 1e3 / static_cast<double>(batches), 3),
       "ms per batch (write + fsync)");
  RateLine("batched.ours", t.ours, "no idempotency keys");
  Line("batched.ours.batch_ms", Fixed(t.ours.seconds * 1e3 / static_cast<double>(batches), 3),
       "ms per batch");
  Line("batched.ours.events_per_fsync", Fixed(Ratio(stats.events_written, stats.writes), 1),
       "events (" + Int(stats.writes) + " WriteBatches)");
  Line("batched.ours.write_ms", Fixed(stats.write_seconds * 1e3 / static_cast<double>(batches), 3),
       "ms per batch in RocksDB's Write (and its fsync), of batch_ms");
  Line("batched.ours.history_wait_ms",
       Fixed(stats.history_wait_seconds * 1e3 / static_cast<double>(batches), 3),
       "ms per batch waiting for room in the history writer's queue, of batch_ms");
  RatioLine("batched.ratio", t.ours, t.raw);
  RateLine("batched.ours_keyed", t.ours_keyed,
           "every event has a unique idempotency key: index lookup + index entry");
  Line("batched.ours_keyed.batch_ms",
       Fixed(t.ours_keyed.seconds * 1e3 / static_cast<double>(batches), 3), "ms per batch");
  Line("batched.ratio_keyed", Fixed(t.raw.rate() > 0 ? t.ours_keyed.rate() / t.raw.rate() : 0, 3),
       "(ours keyed/raw; for information: the goal is ratio_keyed_vs_raw_keyed)");
  RateLine("batched.raw_keyed", t.raw_keyed,
           "raw RocksDB doing only the index's work: MultiGet of the keys, events + index "
           "entries + head in one WriteBatch, sync; the ledger's options");
  Line("batched.ratio_raw_keyed",
       Fixed(t.raw.rate() > 0 ? t.raw_keyed.rate() / t.raw.rate() : 0, 3),
       "(raw keyed/raw: the best a per-key durable index in RocksDB leaves; for information)");
  RatioLine("batched.ratio_keyed_vs_raw_keyed", t.ours_keyed, t.raw_keyed,
            kKeyedVsRawKeyedGoal);
  RateLine("batched.raw_nosync", t.raw_nosync, "sync=false, for information");
  RateLine("batched.ours_nosync", t.ours_nosync, "sync=false: the CPU side, for information");
  Line("batched.ratio_nosync",
       Fixed(t.raw_nosync.rate() > 0 ? t.ours_nosync.rate() / t.raw_nosync.rate() : 0, 3),
       "(ours/raw without fsync, for information; no goal)");
  RateLine("batched.ours_keyed_nosync", t.ours_keyed_nosync,
           "unique keys, sync=false: the keyed CPU side, for information");
  Line("batched.ratio_keyed_nosync",
       Fixed(t.raw_nosync.rate() > 0 ? t.ours_keyed_nosync.rate() / t.raw_nosync.rate() : 0,
             3),
       "(ours keyed/raw without fsync, for information; no goal)");

}

void PhaseBatched(const Params& p, const std::string& work) {
  std::printf("\n# 1. batched durable appends (one Append of %zu events = one fsync)\n",
              p.batch_size);
  EventFactory plain(p.stored_bytes, false);
  EventFactory keyed(p.stored_bytes, true);
  ADM_CHECK(plain.stored_bytes() == keyed.stored_bytes(), "stored sizes differ: %zu vs %zu",
            plain.stored_bytes(), keyed.stored_bytes());
  const size_t stored = plain.stored_bytes();

  const size_t batches = BatchesOf(p, work, plain);
  const size_t per_round = batches / p.rounds * p.batch_size;
  const size_t count = batches * p.batch_size;
  Line("batched.batch_size", Int(p.batch_size), "events");
  Line("batched.batches", Int(batches), p.batches == 0 ? "(calibrated to ~seconds)" : "");
  Line("batched.events", Int(count), "events per contender");
  Line("batched.rounds", Int(p.rounds), "(contenders interleaved, order rotated per round)");
  Line("batched.client_event_bytes", Int(plain.client_bytes()), "bytes (no key)");
  Line("batched.client_event_bytes_keyed", Int(keyed.client_bytes()), "bytes (unique key)");
  Line("batched.stored_event_bytes", Int(stored), "bytes (all variants; raw value size too)");

  RawDb raw = OpenRawDb(work + "/raw", false);
  std::unique_ptr<RawKeyedDb> raw_keyed = OpenRawKeyedDb(work + "/raw_keyed");
  OursLog ours = OpenOurs("batched.ours", work + "/ours", true);
  OursLog ours_keyed = OpenOurs("batched.ours_keyed", work + "/ours_keyed", true);
  BatchedTallies t;
  // Events are built before each timed slice: building them is intake's cost, not the log's.
  RunRounds(p.rounds, {
      [&](size_t) {
        t.raw.Add(per_round, WriteRawBatches(raw, per_round, p.batch_size, stored, true));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(plain, r * per_round, per_round);
        t.ours.Add(per_round, AppendBatches(ours, events, p.batch_size));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(keyed, r * per_round, per_round);
        t.ours_keyed.Add(per_round, AppendBatches(ours_keyed, events, p.batch_size));
      },
      [&](size_t) {
        t.raw_keyed.Add(per_round,
                        WriteRawKeyedBatches(*raw_keyed, per_round, p.batch_size, stored));
      },
  });
  const RocksDbLogStats stats = ours.log->GetStats();

  // The same without fsync: what the CPU side costs (run apart, so its unsynced writeback
  // does not land on the synced contenders).
  RawDb raw_nosync = OpenRawDb(work + "/raw_nosync", false);
  OursLog ours_nosync = OpenOurs("batched.ours_nosync", work + "/ours_nosync", false);
  OursLog ours_keyed_nosync =
      OpenOurs("batched.ours_keyed_nosync", work + "/ours_keyed_nosync", false);
  RunRounds(p.rounds, {
      [&](size_t) {
        t.raw_nosync.Add(per_round,
                         WriteRawBatches(raw_nosync, per_round, p.batch_size, stored, false));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(plain, r * per_round, per_round);
        t.ours_nosync.Add(per_round, AppendBatches(ours_nosync, events, p.batch_size));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(keyed, r * per_round, per_round);
        t.ours_keyed_nosync.Add(per_round,
                                AppendBatches(ours_keyed_nosync, events, p.batch_size));
      },
  });

  PrintBatched(t, stats, p, batches);
  for (OursLog* o : {&ours, &ours_keyed, &ours_nosync, &ours_keyed_nosync}) {
    double verify_rate = CheckLedger(o->label, std::move(o->log), o->dir, o->appended, stored);
    Line(o->label + ".verify_events_per_s", Fixed(verify_rate, 0),
         "events/s (VerifyChain of the result with index check, for information)");
  }
}

// ------------------------------------------------------------------------------------------
// Phase 1b (not run by default): what the history index costs the batched appends. Raw
// against ours as in phase 1, and ours with the history index off (RocksDbLogOptions::
// index_history), in the same rounds. For information: the goals are phase 1's.

// Where a leader's time in RocksDB's Write goes, from RocksDB's perf context of the appending
// thread (this one): the WAL write and its fsync, the memtable inserts, waiting in the write
// queue for writes ahead of it, and the pipelined write's steps before and after.
struct WriteTimes {
  uint64_t wal_ns = 0, memtable_ns = 0, queue_ns = 0, pre_post_ns = 0;
  void Add(const rocksdb::PerfContext& c) {
    wal_ns += c.write_wal_time;
    memtable_ns += c.write_memtable_time;
    queue_ns += c.write_thread_wait_nanos;
    pre_post_ns += c.write_pre_and_post_process_time;
  }
};

// Runs `write` with RocksDB's perf context timing this thread's writes (for every contender
// alike: the timing has a cost).
template <typename Write>
Span WithWriteTimes(WriteTimes* times, const Write& write) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableTimeExceptForMutex);
  rocksdb::get_perf_context()->Reset();
  Span span = write();
  times->Add(*rocksdb::get_perf_context());
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  return span;
}

void WriteTimesLine(const std::string& name, const WriteTimes& w, double batches) {
  auto us = [&](uint64_t ns) { return Fixed(static_cast<double>(ns) / 1e3 / batches, 1); };
  Line(name + ".write_us", "wal " + us(w.wal_ns) + " memtable " + us(w.memtable_ns) +
                               " queue " + us(w.queue_ns) + " pre_post " + us(w.pre_post_ns),
       "us per batch in RocksDB's Write: the WAL write and fsync, the memtable inserts, waiting "
       "behind other writes, the pipelined steps around them (RocksDB's perf context)");
}

void PhaseNoHistory(const Params& p, const std::string& work) {
  std::printf("\n# 1b. batched durable appends with the history index on and off\n");
  EventFactory plain(p.stored_bytes, false);
  const size_t batches = BatchesOf(p, work, plain);
  const size_t per_round = batches / p.rounds * p.batch_size;
  RawDb raw = OpenRawDb(work + "/nohistory_raw", false);
  OursLog ours = OpenOurs("nohistory.ours", work + "/nohistory_ours", true);
  OursLog bare = OpenOurs("nohistory.bare", work + "/nohistory_bare", true, false);
  Tally t_raw, t_ours, t_bare;
  WriteTimes w_raw, w_ours, w_bare;
  RunRounds(p.rounds, {
      [&](size_t) {
        t_raw.Add(per_round, WithWriteTimes(&w_raw, [&] {
                    return WriteRawBatches(raw, per_round, p.batch_size, plain.stored_bytes(),
                                           true);
                  }));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(plain, r * per_round, per_round);
        t_ours.Add(per_round, WithWriteTimes(&w_ours, [&] {
                     return AppendBatches(ours, events, p.batch_size);
                   }));
      },
      [&](size_t r) {
        std::vector<std::string> events = MakeEvents(plain, r * per_round, per_round);
        t_bare.Add(per_round, WithWriteTimes(&w_bare, [&] {
                     return AppendBatches(bare, events, p.batch_size);
                   }));
      },
  });
  RateLine("nohistory.raw", t_raw, "as batched.raw");
  RateLine("nohistory.ours", t_ours, "as batched.ours: the history index on");
  RateLine("nohistory.bare", t_bare, "the history index off");
  RatioLine("nohistory.ratio_on", t_ours, t_raw);
  RatioLine("nohistory.ratio_off", t_bare, t_raw);
  const double n = static_cast<double>(batches);
  Line("nohistory.raw.batch_ms", Fixed(t_raw.seconds * 1e3 / n, 3), "ms per batch (write + fsync)");
  WriteTimesLine("nohistory.raw", w_raw, n);
  for (const auto& [o, t, w] :
       {std::tuple{&ours, &t_ours, &w_ours}, std::tuple{&bare, &t_bare, &w_bare}}) {
    const RocksDbLogStats stats = o->log->GetStats();
    Line(o->label + ".batch_ms", Fixed(t->seconds * 1e3 / n, 3), "ms per batch");
    Line(o->label + ".write_ms", Fixed(stats.write_seconds * 1e3 / n, 3),
         "ms per batch in RocksDB's Write (and its fsync), of batch_ms");
    WriteTimesLine(o->label, *w, n);
  }
  for (OursLog* o : {&ours, &bare}) {
    CheckLedger(o->label, std::move(o->log), o->dir, o->appended, plain.stored_bytes());
  }
}

// ------------------------------------------------------------------------------------------
// Phase 2: concurrent appenders, one event per Append, each waiting for its own ack.

// `threads` appenders for `seconds`, each appending one event and waiting for its ack.
// Returns the events appended.
uint64_t RunAppenders(OursLog& ours, const EventFactory& factory, size_t threads,
                      double seconds, std::atomic<uint64_t>& next_id,
                      std::vector<double>* latencies, Span* span) {
  if (ours.failed) {
    *span = Span{};
    return 0;
  }
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<uint64_t> counts(threads, 0);
  std::vector<std::vector<double>> thread_latencies(threads);
  std::latch ready(static_cast<ptrdiff_t>(threads) + 1);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ready.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed) && !failed.load()) {
        std::string event = factory.Make(next_id.fetch_add(1));
        auto a0 = Clock::now();
        Result<ledger::AppendAck> ack = ours.log->Append(std::span<const std::string>(&event, 1));
        thread_latencies[t].push_back(Seconds(a0, Clock::now()));
        if (!ack.ok() || ack->written != 1) {
          if (!failed.exchange(true)) {
            Fail(ours.label + ": Append: " +
                 (ack.ok() ? "wrote " + Int(ack->written) + " of 1" : ack.status().ToString()));
          }
          return;
        }
        ++counts[t];
      }
    });
  }
  Stopwatch watch;
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (std::thread& w : workers) w.join();
  *span = watch.Stop();
  uint64_t events = 0;
  for (uint64_t c : counts) events += c;
  for (auto& l : thread_latencies) latencies->insert(latencies->end(), l.begin(), l.end());
  ours.appended += events;
  if (failed.load()) ours.failed = true;
  return events;
}

void ConcurrentLines(const std::string& label, const Tally& t, const RocksDbLogStats& stats,
                     const std::vector<double>& latencies) {
  RateLine(label, t, "one event per Append");
  Line(label + ".fsyncs", Int(stats.writes), "WriteBatches (one fsync each)");
  Line(label + ".events_per_fsync", Fixed(Ratio(stats.events_written, stats.writes), 1),
       "events (RocksDbLogStats events_written / writes)");
  Line(label + ".ack_latency_p50", Fixed(Percentile(latencies, 0.5) * 1e3, 3), "ms");
  Line(label + ".ack_latency_p99", Fixed(Percentile(latencies, 0.99) * 1e3, 3), "ms");
}

void PhaseConcurrent(const Params& p, const std::string& work) {
  std::printf("\n# 2. %zu concurrent appenders, one event per Append, each awaiting its ack\n",
              p.appenders);
  EventFactory plain(p.stored_bytes, false);
  EventFactory keyed(p.stored_bytes, true);
  const size_t stored = plain.stored_bytes();
  const double slice = p.seconds / static_cast<double>(p.rounds);
  Line("concurrent.appenders", Int(p.appenders), "threads");
  Line("concurrent.seconds", Fixed(p.seconds, 1),
       "s per time-bound contender, in " + Int(p.rounds) + " rounds");
  Line("concurrent.stored_event_bytes", Int(stored), "bytes");

  OursLog ours = OpenOurs("concurrent.ours", work + "/c_ours", true);
  OursLog ours_keyed = OpenOurs("concurrent.ours_keyed", work + "/c_ours_keyed", true);
  RawDb raw = OpenRawDb(work + "/c_raw", false);
  RawDb raw_threaded = OpenRawDb(work + "/c_raw_threaded", true);
  rocksdb::Statistics& tickers = *raw_threaded.stats;
  const uint64_t syncs0 = tickers.getTickerCount(rocksdb::WAL_FILE_SYNCED);
  const uint64_t keys0 = tickers.getTickerCount(rocksdb::NUMBER_KEYS_WRITTEN);
  const uint64_t self0 = tickers.getTickerCount(rocksdb::WRITE_DONE_BY_SELF);
  const uint64_t other0 = tickers.getTickerCount(rocksdb::WRITE_DONE_BY_OTHER);

  Tally ours_t, ours_keyed_t, raw_t, threaded_t;
  std::vector<double> ours_latencies, keyed_latencies;
  std::atomic<uint64_t> next_id{0}, next_keyed_id{0};
  uint64_t round_events = 0;  // ours' events of this round: raw writes as many
  auto run_ours = [&](size_t) {
    Span s;
    round_events = RunAppenders(ours, plain, p.appenders, slice, next_id, &ours_latencies, &s);
    ours_t.Add(round_events, s);
  };
  auto run_raw = [&](size_t) {
    raw_t.Add(round_events, WriteRawBatches(raw, round_events, p.appenders, stored, true));
  };
  auto run_threaded = [&](size_t) {
    Span s;
    uint64_t n = RunRawThreaded(raw_threaded, p.appenders, slice, stored, &s);
    threaded_t.Add(n, s);
  };
  auto run_keyed = [&](size_t) {
    Span s;
    uint64_t n = RunAppenders(ours_keyed, keyed, p.appenders, slice, next_keyed_id,
                              &keyed_latencies, &s);
    ours_keyed_t.Add(n, s);
  };
  // Raw batched writes exactly ours' count of the round, so it always follows ours; the
  // others move around it from round to round.
  for (size_t r = 0; r < p.rounds; ++r) {
    if (r % 2 == 0) {
      run_ours(r), run_raw(r), run_threaded(r), run_keyed(r);
    } else {
      run_keyed(r), run_threaded(r), run_ours(r), run_raw(r);
    }
  }

  ConcurrentLines("concurrent.ours", ours_t, ours.log->GetStats(), ours_latencies);
  Line("concurrent.ours.events_per_fsync_goal", Int(p.appenders),
       "events (close to the number of waiting appenders)");
  RateLine("concurrent.raw_batched", raw_t,
           "one thread, WriteBatches of " + Int(p.appenders) +
               " events, sync, same events as ours");
  RatioLine("concurrent.ratio", ours_t, raw_t);
  const uint64_t syncs = tickers.getTickerCount(rocksdb::WAL_FILE_SYNCED) - syncs0;
  const uint64_t keys = tickers.getTickerCount(rocksdb::NUMBER_KEYS_WRITTEN) - keys0;
  RateLine("concurrent.raw_threaded", threaded_t,
           Int(p.appenders) + " threads, one single-Put sync Write each, for information");
  Line("concurrent.raw_threaded.wal_syncs", Int(syncs), "(WAL_FILE_SYNCED)");
  Line("concurrent.raw_threaded.writes_per_fsync", Fixed(Ratio(keys, syncs), 1),
       "writes (NUMBER_KEYS_WRITTEN / WAL_FILE_SYNCED)");
  Line("concurrent.raw_threaded.write_groups",
       Int(tickers.getTickerCount(rocksdb::WRITE_DONE_BY_SELF) - self0),
       "(WRITE_DONE_BY_SELF; WRITE_DONE_BY_OTHER " +
           Int(tickers.getTickerCount(rocksdb::WRITE_DONE_BY_OTHER) - other0) + ")");
  ConcurrentLines("concurrent.ours_keyed", ours_keyed_t, ours_keyed.log->GetStats(),
                  keyed_latencies);

  for (OursLog* o : {&ours, &ours_keyed}) {
    double verify_rate = CheckLedger(o->label, std::move(o->log), o->dir, o->appended, stored);
    Line(o->label + ".verify_events_per_s", Fixed(verify_rate, 0),
         "events/s (VerifyChain of the result with index check, for information)");
  }
}

// ------------------------------------------------------------------------------------------
// Phase 3: per-event cost of each step the leader runs, timed outside the log with the same
// functions the Sequencer calls, so a gap between ours and raw can be attributed.

// What the breakdown measured, in seconds over all its events (or its rounds).
struct BreakdownFigures {
  double decode_s = 0, rebuild_s = 0, canonical_s = 0, hash_s = 0;  // PrepareAppend's steps
  double static_decode_s = 0, fetched_hash_s = 0;                   // their alternatives
  double prepare_s = 0, prepare_keyed_s = 0, batch_build_s = 0;     // whole PrepareAppends
  double nosync_s = 0, sync_s = 0;                                  // raw batch writes
  double get_s = 0, find_s = 0;                                     // index misses
  double history_keys_s = 0;  // the history writer's keys of the stored events
  uint64_t raw_events = 0;    // in the raw DB that get_s read
  size_t write_rounds = 0;    // the batches nosync_s and sync_s each wrote
};

// The steps of PrepareAppend for one new event, one by one; *chain is the chain value after.
void TimeAppendSteps(const std::vector<std::string>& events, size_t rounds,
                     schema::Hash* chain_out, BreakdownFigures* f, size_t* sink) {
  schema::Hash chain = schema::kGenesisHash;
  for (size_t r = 0; r < rounds; ++r) {
    for (const std::string& bytes : events) {
      auto t0 = Clock::now();
      Result<schema::DecodedEvent> decoded = schema::DecodeEvent(bytes);
      ADM_CHECK(decoded.ok(), "%s", decoded.status().ToString().c_str());
      auto t1 = Clock::now();
      capnp::MallocMessageBuilder message(
          static_cast<unsigned>(bytes.size() / sizeof(capnp::word) + 8));
      message.setRoot(decoded->root());
      schema::Event::Builder root = message.getRoot<schema::Event>();
      root.setSequence(r + 1);
      root.setPrevHash(capnp::Data::Reader(chain.data(), chain.size()));
      auto t2 = Clock::now();
      std::string canonical = schema::CanonicalBytes(root.asReader());
      auto t3 = Clock::now();
      chain = schema::ChainHash(chain, canonical);
      auto t4 = Clock::now();
      f->decode_s += Seconds(t0, t1);
      f->rebuild_s += Seconds(t1, t2);
      f->canonical_s += Seconds(t2, t3);
      f->hash_s += Seconds(t3, t4);
      *sink += canonical.size();
    }
  }
  *chain_out = chain;
}

// For comparison: decoding without the reflective body check, and SHA-256 with the digest
// fetched once instead of at every EVP_DigestInit_ex(EVP_sha256()) (OpenSSL 3 looks the
// algorithm up in its provider tables on every init when given the legacy EVP_sha256()).
void TimeAlternatives(const std::vector<std::string>& events, size_t rounds, schema::Hash chain,
                      BreakdownFigures* f, size_t* sink) {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ADM_CHECK(md != nullptr && ctx != nullptr, "EVP_MD_fetch SHA256");
  std::string stored_sample;
  {
    ledger::PreparedAppend prepared;
    ledger::AppendAck ack;
    ledger::GroupKeys group_keys;
    Status s = ledger::PrepareAppend(std::span<const std::string>(events.data(), 1),
                                     ledger::Head{}, group_keys, NoKeys(), &ack, &prepared);
    ADM_CHECK(s.ok(), "%s", s.ToString().c_str());
    stored_sample = prepared.events[0].bytes;
  }
  for (size_t r = 0; r < rounds; ++r) {
    for (const std::string& bytes : events) {
      auto t0 = Clock::now();
      const size_t words = bytes.size() / sizeof(capnp::word);
      auto aligned = std::make_unique<capnp::word[]>(words);
      std::memcpy(aligned.get(), bytes.data(), bytes.size());
      kj::ArrayPtr<const capnp::word> segment(aligned.get(), words);
      capnp::SegmentArrayMessageReader reader(kj::arrayPtr(&segment, 1),
                                              schema::EventReaderOptions());
      *sink += reader.getRoot<schema::Event>().totalSize().wordCount;
      auto t1 = Clock::now();
      unsigned int length = 0;
      ADM_CHECK(EVP_DigestInit_ex2(ctx, md, nullptr) == 1 &&
                    EVP_DigestUpdate(ctx, chain.data(), chain.size()) == 1 &&
                    EVP_DigestUpdate(ctx, stored_sample.data(), stored_sample.size()) == 1 &&
                    EVP_DigestFinal_ex(ctx, chain.data(), &length) == 1,
                "sha256");
      auto t2 = Clock::now();
      f->static_decode_s += Seconds(t0, t1);
      f->fetched_hash_s += Seconds(t1, t2);
    }
  }
  EVP_MD_CTX_free(ctx);
  EVP_MD_free(md);
}

// The whole PrepareAppend of a batch as the leader runs it (the index lookup answered "absent"
// without RocksDB, so only the sequencer's own work counts), `rounds` times; *build_s gets the
// time to put its stored events in a WriteBatch.
double TimePrepare(const std::vector<std::string>& batch, size_t rounds, double* build_s,
                   size_t* sink) {
  double prepare_s = 0;
  ledger::Head head;
  for (size_t r = 0; r < rounds; ++r) {
    ledger::GroupKeys group_keys;
    ledger::AppendAck ack;
    ledger::PreparedAppend prepared;
    auto t0 = Clock::now();
    Status s = ledger::PrepareAppend(batch, head, group_keys, NoKeys(), &ack, &prepared);
    auto t1 = Clock::now();
    ADM_CHECK(s.ok(), "%s", s.ToString().c_str());
    rocksdb::WriteBatch write_batch;
    for (const ledger::StoredEvent& e : prepared.events) {
      write_batch.Put(RocksDbLog::EventKey(e.sequence), e.bytes);
    }
    auto t2 = Clock::now();
    prepare_s += Seconds(t0, t1);
    if (build_s != nullptr) *build_s += Seconds(t1, t2);
    head = prepared.head;
    *sink += write_batch.GetDataSize();
  }
  return prepare_s;
}

// The history writer's own step before its write, off the append's path: the history keys of
// each stored event (schema::HistoryKeysOfCanonical), `rounds` times.
double TimeHistoryKeys(const std::vector<std::string>& batch, size_t rounds, size_t* sink) {
  ledger::GroupKeys group_keys;
  ledger::AppendAck ack;
  ledger::PreparedAppend prepared;
  Status s = ledger::PrepareAppend(batch, ledger::Head{}, group_keys, NoKeys(), &ack, &prepared);
  ADM_CHECK(s.ok(), "%s", s.ToString().c_str());
  schema::HistoryKeyTexts keys;
  auto t0 = Clock::now();
  for (size_t r = 0; r < rounds; ++r) {
    for (const ledger::StoredEvent& e : prepared.events) {
      schema::HistoryKeysOfCanonical(e.bytes, &keys);
      *sink += keys.size();
    }
  }
  return Seconds(t0, Clock::now());
}

// The durable write of one ready batch, an index lookup that misses in a raw DB, and the same
// miss through the ledger's own index family.
void TimeWritesAndMisses(const Params& p, const std::string& work, const EventFactory& plain,
                         const EventFactory& keyed, size_t n, BreakdownFigures* f) {
  const size_t batch_size = p.batch_size;
  const size_t write_rounds = p.quick ? 8 : 100;
  f->write_rounds = write_rounds;
  RawDb raw = OpenRawDb(work + "/bd_raw", false);
  f->nosync_s =
      WriteRawBatches(raw, write_rounds * batch_size, batch_size, plain.stored_bytes(), false)
          .seconds;
  f->sync_s =
      WriteRawBatches(raw, write_rounds * batch_size, batch_size, plain.stored_bytes(), true)
          .seconds;
  std::string value;
  for (size_t i = 0; i < n; ++i) {
    char key[40];
    std::snprintf(key, sizeof key, "req/b/%016" PRIx64 "/0", Mix64(i));
    auto t0 = Clock::now();
    rocksdb::Status s = raw.db->Get(rocksdb::ReadOptions(), RocksDbLog::IndexKey(key), &value);
    f->get_s += Seconds(t0, Clock::now());
    ADM_CHECK(s.IsNotFound(), "index key found: %s", s.ToString().c_str());
  }
  f->raw_events = raw.next - 1;

  // The same miss through the ledger's own index family, on a ledger of n keyed events.
  OursLog keyed_log = OpenOurs("breakdown.keyed", work + "/bd_keyed", false);
  {
    std::vector<std::string> keyed_events = MakeEvents(keyed, 0, n);
    AppendBatches(keyed_log, keyed_events, batch_size);
  }
  for (size_t i = 0; i < n; ++i) {
    char key[40];
    std::snprintf(key, sizeof key, "req/absent/%016" PRIx64 "/0", Mix64(i));
    auto t0 = Clock::now();
    Result<std::optional<ledger::Sequence>> found = keyed_log.log->FindKey(key);
    f->find_s += Seconds(t0, Clock::now());
    ADM_CHECK(found.ok() && !found->has_value(), "absent key found");
  }
}

void PrintBreakdown(const BreakdownFigures& f, size_t n, size_t batch_size, size_t rounds,
                    size_t stored_bytes) {
  const double per_event_us = 1e6 / static_cast<double>(n);
  Line("breakdown.events", Int(n), "events in batches of " + Int(batch_size));
  Line("breakdown.decode_us", Fixed(f.decode_s * per_event_us, 3),
       "us/event (schema::DecodeEvent: aligned copy, reader, reflective walk of every field, "
       "isCanonical)");
  Line("breakdown.decode_static_us", Fixed(f.static_decode_s * per_event_us, 3),
       "us/event (for comparison: aligned copy, reader, totalSize; no reflection, no "
       "isCanonical)");
  Line("breakdown.rebuild_us", Fixed(f.rebuild_s * per_event_us, 3),
       "us/event (MallocMessageBuilder setRoot + setSequence + setPrevHash)");
  Line("breakdown.canonicalize_us", Fixed(f.canonical_s * per_event_us, 3),
       "us/event (schema::CanonicalBytes)");
  Line("breakdown.sha256_us", Fixed(f.hash_s * per_event_us, 3),
       "us/event (schema::ChainHash over " + Int(stored_bytes + 32) + " bytes)");
  Line("breakdown.sha256_fetched_us", Fixed(f.fetched_hash_s * per_event_us, 3),
       "us/event (for comparison: EVP_MD_fetch once + EVP_DigestInit_ex2)");
  Line("breakdown.prepare_append_us", Fixed(f.prepare_s * per_event_us, 3),
       "us/event (ledger::PrepareAppend, whole step, no keys)");
  Line("breakdown.prepare_append_keyed_us", Fixed(f.prepare_keyed_s * per_event_us, 3),
       "us/event (ledger::PrepareAppend with unique keys, lookup answered without RocksDB)");
  Line("breakdown.rocksdb_index_get_miss_us", Fixed(f.get_s * per_event_us, 3),
       "us/event (for comparison: DB::Get of an absent key in a raw DB of " +
           Int(f.raw_events) + " events, one family, no filters: the index before its family)");
  Line("breakdown.index_find_miss_us", Fixed(f.find_s * per_event_us, 3),
       "us/event (RocksDbLog::FindKey of an absent key, " + Int(n) +
           " keyed events in the ledger: the index family's bloom filters)");
  Line("breakdown.write_batch_build_us", Fixed(f.batch_build_s * per_event_us, 3),
       "us/event (WriteBatch::Put of stored events)");
  Line("breakdown.history_keys_us", Fixed(f.history_keys_s * per_event_us, 3),
       "us/event (schema::HistoryKeysOfCanonical: the history writer's, off the append's path)");
  Line("breakdown.prepare_append_per_batch_ms",
       Fixed(f.prepare_s * 1e3 / static_cast<double>(rounds), 3),
       "ms per " + Int(batch_size) + "-event batch");
  Line("breakdown.raw_write_nosync_per_batch_ms",
       Fixed(f.nosync_s * 1e3 / static_cast<double>(f.write_rounds), 3), "ms");
  Line("breakdown.raw_write_sync_per_batch_ms",
       Fixed(f.sync_s * 1e3 / static_cast<double>(f.write_rounds), 3), "ms (write + fsync)");
}

void PhaseBreakdown(const Params& p, const std::string& work) {
  std::printf("\n# 3. per-event cost of the ledger's steps (single thread, for attribution)\n");
  EventFactory plain(p.stored_bytes, false);
  EventFactory keyed(p.stored_bytes, true);
  const size_t batch_size = p.batch_size;
  const size_t rounds = p.quick ? 8 : 200;
  const size_t n = rounds * batch_size;
  std::vector<std::string> events = MakeEvents(plain, 0, batch_size);
  size_t sink = 0;
  BreakdownFigures figures;
  BreakdownFigures* f = &figures;
  schema::Hash chain;
  TimeAppendSteps(events, rounds, &chain, f, &sink);
  TimeAlternatives(events, rounds, chain, f, &sink);
  // The whole PrepareAppend of a batch, without and with keys.
  f->prepare_s = TimePrepare(events, rounds, &f->batch_build_s, &sink);
  f->prepare_keyed_s = TimePrepare(MakeEvents(keyed, 0, batch_size), rounds, nullptr, &sink);
  f->history_keys_s = TimeHistoryKeys(events, rounds, &sink);
  ADM_CHECK(sink > 0, "nothing measured");
  TimeWritesAndMisses(p, work, plain, keyed, n, f);
  PrintBreakdown(figures, n, batch_size, rounds, plain.stored_bytes());
}

// ------------------------------------------------------------------------------------------

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--seconds S] [--batches N] [--batch-size B]\n"
               "          [--appenders T] [--event-bytes E] [--rounds R] [--phases LIST]\n"
               "          [--dir DIR]\n"
               "  --quick          small counts for a CI smoke run (a few seconds)\n"
               "  --seconds S      duration of each time-bound phase (default 2)\n"
               "  --batches N      batched phase: N Appends (default: calibrated to ~S s)\n"
               "  --batch-size B   events per Append in the batched phase (default 256)\n"
               "  --appenders T    threads in the concurrent phase (default 64)\n"
               "  --event-bytes E  stored size of one event (default 256)\n"
               "  --rounds R       interleave each phase's contenders over R rounds (default 8)\n"
               "  --phases LIST    comma-separated subset of batched,concurrent,breakdown (default), or\n"
               "                   nohistory (the batched phase with the history index on and off)\n"
               "  --dir DIR        where temporary ledgers go (default $TMPDIR or /tmp)\n",
               argv0);
}

std::optional<Params> ParseFlags(int argc, char** argv) {
  Params p;
  const char* tmp = std::getenv("TMPDIR");
  p.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  bool seconds_set = false;
  bool rounds_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto next = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    auto number = [&](double* out) {
      std::optional<std::string> v = next();
      if (!v) return false;
      char* end = nullptr;
      *out = std::strtod(v->c_str(), &end);
      return end != v->c_str() && *end == '\0' && *out > 0;
    };
    double v = 0;
    if (flag == "--quick") {
      p.quick = true;
    } else if (flag == "--seconds" && number(&v)) {
      p.seconds = v;
      seconds_set = true;
    } else if (flag == "--batches" && number(&v)) {
      p.batches = static_cast<size_t>(v);
    } else if (flag == "--batch-size" && number(&v) && v <= ledger::kAppendBatchEventsMax) {
      p.batch_size = static_cast<size_t>(v);
    } else if (flag == "--appenders" && number(&v) && v <= 4096) {
      p.appenders = static_cast<size_t>(v);
    } else if (flag == "--event-bytes" && number(&v) && v <= 65536) {
      p.stored_bytes = static_cast<size_t>(v);
    } else if (flag == "--rounds" && number(&v) && v <= 1000) {
      p.rounds = static_cast<size_t>(v);
      rounds_set = true;
    } else if (flag == "--phases") {
      std::optional<std::string> list = next();
      if (!list) return std::nullopt;
      p.phases = *list;
      std::string rest = *list + ",";
      for (size_t at = rest.find(','); at != std::string::npos; at = rest.find(',')) {
        const std::string phase = rest.substr(0, at);
        rest.erase(0, at + 1);
        if (phase != "batched" && phase != "concurrent" && phase != "breakdown" &&
            phase != "nohistory") {
          std::fprintf(stderr, "--phases: unknown phase '%s'\n", phase.c_str());
          return std::nullopt;
        }
      }
    } else if (flag == "--dir") {
      std::optional<std::string> d = next();
      if (!d) return std::nullopt;
      p.dir = *d;
    } else {
      return std::nullopt;
    }
  }
  if (p.quick) {
    if (!seconds_set) p.seconds = 0.3;
    if (p.batches == 0) p.batches = 8;
    if (!rounds_set) p.rounds = 2;
  }
  return p;
}

int Main(int argc, char** argv) {
  std::optional<Params> parsed = ParseFlags(argc, argv);
  if (!parsed) {
    Usage(argv[0]);
    return 2;
  }
  const Params& p = *parsed;
  const WorkDir work_dir(p.dir, "ledger_bench");
  const std::string& work = work_dir.path();

  auto t0 = Clock::now();
  Line("ledger_bench", CommandLine(argc, argv));
  PrintMachine(p.dir, work, p.quick);
  Line("params.mode", p.quick ? "quick" : "full");
  Line("params.seconds", Fixed(p.seconds, 1), "s per time-bound phase");
  Line("params.batch_size", Int(p.batch_size), "events");
  Line("params.batches", p.batches ? Int(p.batches) : "calibrated");
  Line("params.appenders", Int(p.appenders), "threads");
  Line("params.rounds", Int(p.rounds), "(contenders interleaved, order rotated per round)");
  Line("params.stored_event_bytes_target", Int(p.stored_bytes), "bytes");
  Line("params.phases", p.phases);
  Line("params.work_dir", work);
  Line("params.sync", "true (RocksDbLog default; raw WriteOptions.sync=true) unless noted");

  auto wanted = [&](const std::string& phase) {
    return ("," + p.phases + ",").find("," + phase + ",") != std::string::npos;
  };
  if (wanted("batched")) PhaseBatched(p, work);
  if (wanted("nohistory")) PhaseNoHistory(p, work);
  if (wanted("concurrent")) PhaseConcurrent(p, work);
  if (wanted("breakdown")) PhaseBreakdown(p, work);

  std::printf("\n");
  Line("total_seconds", Fixed(Seconds(t0, Clock::now()), 1), "s");
  Line("result", g_failures == 0 ? "ok" : Int(static_cast<uint64_t>(g_failures)) + " failures");
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) { return admission::bench::Main(argc, argv); }
