// Properties of running for years (docs/operations.md): retention and the history index.
//
// - Retiring ended workloads from the decider's live state changes no decision: the same
//   inputs with a retention of 2 s and with none give the same decisions, byte for byte, and
//   the ledger with retention replays with verify. The live state then holds only workloads
//   that are live or ended within the retention.
// - Explain through the history index gives exactly the explanation of a fold from the
//   genesis (which scans every event), for every workload, at the head and at any sequence,
//   with and without snapshots.
// - A ledger without a history index (written before it existed) gets a complete one on its
//   first writable open, and a read-only open of it uses none until then.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "projections/engine.h"
#include "replay/explain.h"
#include "replay/replayer.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"
#include "schema/workload_refs.h"
#include "tests/property/scenario_gen.h"
#include "tests/unit/raw_ledger_db.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/without_history.h"

namespace admission::testing {
namespace {

constexpr int64_t kShortRetentionNs = 2'000'000'000;  // two batches of the recorded scenario

// Each decision as JSON without its prevHash.
std::vector<std::string> WithoutLinks(const std::vector<std::string>& decisions) {
  std::vector<std::string> out;
  for (const std::string& d : decisions) {
    nlohmann::json j = nlohmann::json::parse(schema::EventToJson(schema::DecodeEvent(d)->root()));
    j.erase("prevHash");
    out.push_back(j.dump());
  }
  return out;
}

RC_GTEST_PROP(Retention, RetiringEndedWorkloadsChangesNoDecision, ()) {
  ScenarioGen s = *GenScenario();
  s.retain_ended_ns = projections::kRetainForever;
  ledger::MemoryLog kept_log;
  const Recording kept = RecordScenario(s, kept_log);
  s.retain_ended_ns = kShortRetentionNs;
  ledger::MemoryLog retired_log;
  const Recording retired = RecordScenario(s, retired_log);
  // The same decisions; only their chain links differ (the configurations differ).
  RC_ASSERT(WithoutLinks(retired.decisions) == WithoutLinks(kept.decisions));
  auto report = replay::ReplayAndVerify(retired_log);
  RC_ASSERT(report.ok());
  RC_ASSERT(!report->divergence.has_value());
  RC_ASSERT(report->decisions_compared == retired.decisions.size());

  // At the head: kept for ever, every workload is there; with retention, only those live or
  // ended within the last 2 s of ledger time.
  auto kept_state = replay::FoldToSequence(kept_log, 0);
  auto retired_state = replay::FoldToSequence(retired_log, 0);
  RC_ASSERT(kept_state.ok() && retired_state.ok());
  const auto& all = kept_state->engine->workloads();
  const auto& live = retired_state->engine->workloads();
  size_t ended = 0;
  for (const auto& [key, wl] : all) {
    if (!projections::Terminal(wl.phase)) {
      RC_ASSERT(live.count(key) == 1u);
    } else {
      ++ended;
    }
  }
  for (const auto& [key, wl] : live) RC_ASSERT(all.count(key) == 1u);
  RC_ASSERT(live.size() <= all.size());
  RC_TAG(live.size() < all.size() ? "some retired" : "none retired");
  RC_CLASSIFY(ended > 0, "some ended");
}

// Every workload named in a ledger.
std::set<std::string> WorkloadNames(ledger::EventLog& log) {
  std::set<std::string> out;
  auto events = log.Read(1, ledger::kReadEventsMax);
  for (const auto& e : *events) {
    auto decoded = schema::DecodeEvent(e.bytes);  // owns what `root` views
    auto root = decoded->root();
    if (root.getBody().isWorkloadSubmitted()) {
      out.insert(root.getBody().getWorkloadSubmitted().getWorkload().getName().cStr());
    }
  }
  return out;
}

RC_GTEST_PROP(HistoryIndex, ExplainThroughTheIndexIsTheFoldsExplanation, ()) {
  ScenarioGen s = *GenScenario();
  if (*rc::gen::arbitrary<bool>()) s.retain_ended_ns = kShortRetentionNs;
  TempDir dir;
  auto log = ledger::RocksDbLog::Open(dir.Sub("ledger"));
  RC_ASSERT(log.ok());
  RecordScenario(s, **log);
  WithoutHistory folded(**log);
  ledger::FileSnapshotStore snapshots(dir.Sub("ledger"));
  const Sequence head = (*log)->GetHead().sequence;
  if (head > 2) {  // a snapshot somewhere in the middle: explain folds on from it
    const Sequence mid = *rc::gen::inRange<Sequence>(1, head);
    auto at = replay::FoldToSequence(**log, mid);
    RC_ASSERT(at.ok());
    RC_ASSERT(replay::TakeSnapshot(**log, snapshots, *at->engine, at->at, {}).ok());
  }
  const std::set<std::string> names = WorkloadNames(**log);
  RC_PRE(!names.empty());
  const Sequence at = *rc::gen::element<Sequence>(0, *rc::gen::inRange<Sequence>(1, head + 1));
  size_t compared = 0;
  for (const std::string& name : names) {
    auto want = replay::Explain(folded, "ns", name, at);
    auto got = replay::Explain(**log, "ns", name, at, nullptr, &snapshots);
    RC_ASSERT(want.ok() == got.ok());
    if (!want.ok()) continue;
    RC_ASSERT(replay::ExplainJson(*got) == replay::ExplainJson(*want));
    ++compared;
  }
  RC_TAG(compared > 0 ? "compared" : "none submitted yet");
}

TEST(HistoryIndex, AnOlderLedgerIsIndexedOnItsFirstWritableOpen) {
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(7, 60), **log);
  }
  std::vector<Sequence> full;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    auto h = (*log)->History(schema::HistoryNameKey("ns/w0"), 0);
    ASSERT_TRUE(h.ok() && h->has_value());
    full = **h;
    ASSERT_GE(full.size(), 2u) << "w0's submission and at least one decision";
  }
  {
    // As a ledger of the version before the index: no history family, no state key.
    RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
    ASSERT_NE(raw.history, nullptr);
    ASSERT_TRUE(raw.db->Delete(rocksdb::WriteOptions(), ledger::RocksDbLog::kHistoryStateKey).ok());
    ASSERT_TRUE(raw.db->DropColumnFamily(raw.history.get()).ok());
  }
  {
    ledger::RocksDbLogOptions read_only;
    read_only.read_only = true;
    auto log = ledger::RocksDbLog::Open(ledger_dir, read_only);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto h = (*log)->History(schema::HistoryNameKey("ns/w0"), 0);
    ASSERT_TRUE(h.ok());
    EXPECT_FALSE(h->has_value()) << "a read-only open of an unindexed ledger has no index";
    // Reads work; writes are refused.
    EXPECT_TRUE((*log)->Read(1, 10).ok());
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initFlavorDefined().setName("x");
    std::vector<std::string> batch{schema::EncodeEvent(m)};
    EXPECT_FALSE((*log)->Append(batch).ok());
  }
  uint64_t progress_calls = 0;
  ledger::RocksDbLogOptions options;
  options.history_progress = [&](uint64_t done, uint64_t total) {
    ++progress_calls;
    EXPECT_LE(done, total);
  };
  auto log = ledger::RocksDbLog::Open(ledger_dir, options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_GT(progress_calls, 0u);
  auto h = (*log)->History(schema::HistoryNameKey("ns/w0"), 0);
  ASSERT_TRUE(h.ok() && h->has_value());
  EXPECT_EQ(**h, full);
  auto bounded = (*log)->History(schema::HistoryNameKey("ns/w0"), full[1]);
  ASSERT_TRUE(bounded.ok() && bounded->has_value());
  EXPECT_EQ(**bounded, std::vector<Sequence>(full.begin(), full.begin() + 2));
}

// kHistoryThroughKey of a closed ledger, as the ledger reads it: in the history family, else in
// `default`.
Sequence HistoryThrough(RawLedgerDb& raw) {
  std::string value;
  rocksdb::Status read = raw.db->Get(rocksdb::ReadOptions(), raw.history.get(),
                                     ledger::RocksDbLog::kHistoryThroughKey, &value);
  if (read.IsNotFound()) {
    read = raw.db->Get(rocksdb::ReadOptions(), ledger::RocksDbLog::kHistoryThroughKey, &value);
  }
  EXPECT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(value.size(), 8u);
  Sequence s = 0;
  for (char c : value) s = (s << 8) | static_cast<uint8_t>(c);
  return s;
}

// The history family's keys of the events after `after`.
std::vector<std::string> HistoryEntriesAfter(RawLedgerDb& raw, Sequence after) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(
      raw.db->NewIterator(rocksdb::ReadOptions(), raw.history.get()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    if (key.size() <= 8) continue;  // kHistoryThroughKey
    Sequence s = 0;
    for (size_t i = key.size() - 8; i < key.size(); ++i) {
      s = (s << 8) | static_cast<uint8_t>(key[i]);
    }
    if (s > after) keys.push_back(key);
  }
  EXPECT_TRUE(it->status().ok());
  return keys;
}

// Every workload's whole history, and up to its second event, are `want`'s.
void ExpectHistories(ledger::EventLog& log,
                     const std::map<std::string, std::vector<Sequence>>& want) {
  for (const auto& [name, sequences] : want) {
    auto h = log.History(schema::HistoryNameKey("ns/" + name), 0);
    ASSERT_TRUE(h.ok() && h->has_value()) << name;
    EXPECT_EQ(**h, sequences) << name;
    const size_t first = sequences.size() > 1 ? 2 : 1;
    auto bounded = log.History(schema::HistoryNameKey("ns/" + name), sequences[first - 1]);
    ASSERT_TRUE(bounded.ok() && bounded->has_value()) << name;
    EXPECT_EQ(**bounded, std::vector<Sequence>(sequences.begin(), sequences.begin() + first));
  }
}

// The history entries are written behind the appends, unsynced: a crash can leave the last
// events without theirs. A reader reads those events instead, and the next writable open writes
// their entries, so every reader sees the same histories.
TEST(HistoryIndex, EntriesACrashLostAreReadFromTheEventsAndWrittenOnTheNextOpen) {
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  std::map<std::string, std::vector<Sequence>> want;
  Sequence head = 0;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(13, 80), **log);
    head = (*log)->GetHead().sequence;
    for (const std::string& name : WorkloadNames(**log)) {
      auto h = (*log)->History(schema::HistoryNameKey("ns/" + name), 0);
      ASSERT_TRUE(h.ok() && h->has_value());
      want[name] = **h;
    }
  }
  ASSERT_GE(want.size(), 2u);
  ASSERT_GT(head, 4u);
  const Sequence kept = head / 2;  // the index holds the entries of events 1..kept only
  {
    // As a power cut leaves it: the entries of the events after `kept` never reached the disk.
    RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
    ASSERT_NE(raw.history, nullptr);
    EXPECT_EQ(HistoryThrough(raw), head) << "a closed ledger's index holds every event's entries";
    const std::vector<std::string> lost = HistoryEntriesAfter(raw, kept);
    ASSERT_FALSE(lost.empty());
    for (const std::string& key : lost) {
      ASSERT_TRUE(raw.db->Delete(rocksdb::WriteOptions(), raw.history.get(), key).ok());
    }
    std::string value;
    for (int shift = 56; shift >= 0; shift -= 8) value.push_back(static_cast<char>(kept >> shift));
    ASSERT_TRUE(raw.db->Put(rocksdb::WriteOptions(), raw.history.get(),
                            ledger::RocksDbLog::kHistoryThroughKey, value).ok());
  }
  for (bool read_only : {true, false}) {
    ledger::RocksDbLogOptions options;
    options.read_only = read_only;
    auto log = ledger::RocksDbLog::Open(ledger_dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ExpectHistories(**log, want);
  }
  RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
  EXPECT_EQ(HistoryThrough(raw), head) << "the writable open wrote the missing entries";
  EXPECT_FALSE(HistoryEntriesAfter(raw, kept).empty());
}

// Every history key of the ledger's events, with their sequences, read from the events.
std::map<std::string, std::vector<Sequence>> HistoriesOfEvents(ledger::EventLog& log) {
  std::map<std::string, std::vector<Sequence>> out;
  std::vector<std::string> keys;
  auto shown = log.Scan(1, ledger::kReadEventsMax, [&](Sequence sequence, std::string_view bytes) {
    auto decoded = schema::DecodeEvent(bytes);
    EXPECT_TRUE(decoded.ok()) << sequence;
    if (!decoded.ok()) return false;
    schema::HistoryKeysOf(decoded->root(), &keys);
    for (const std::string& k : keys) out[k].push_back(sequence);
    return true;
  });
  EXPECT_TRUE(shown.ok() && *shown == log.GetHead().sequence);
  return out;
}

// History of every key the events have (workload names, uids, configurations) is the one read
// from the events.
void ExpectEveryHistory(ledger::EventLog& log) {
  const std::map<std::string, std::vector<Sequence>> want = HistoriesOfEvents(log);
  ASSERT_GE(want.size(), 4u);
  for (const auto& [key, sequences] : want) {
    auto h = log.History(key, 0);
    ASSERT_TRUE(h.ok() && h->has_value()) << key;
    EXPECT_EQ(**h, sequences) << key;
  }
}

// The history writer writes without the WAL, so a crash loses the entries of its memtable; the
// next writable open writes them again from `I`. The ledger as a killed process leaves it: its
// files copied while it is open, every append returned and the writer idle. Events appended
// after the reopen move `I` past the rebuilt ones, so a rebuild that missed any shows.
TEST(HistoryIndex, ACrashLosesNoHistory) {
  constexpr auto kWriterIdle = std::chrono::milliseconds(300);
  TempDir dir;
  const std::string live_dir = dir.Sub("ledger");
  const std::string crashed_dir = dir.Sub("crashed");
  Sequence head = 0;
  {
    auto log = ledger::RocksDbLog::Open(live_dir);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(17, 80), **log);
    head = (*log)->GetHead().sequence;
    std::this_thread::sleep_for(kWriterIdle);
    // A reader beside the writer (as another process) sees only flushed entries: it reads the
    // events after their `I` itself.
    ledger::RocksDbLogOptions read_only;
    read_only.read_only = true;
    auto reader = ledger::RocksDbLog::Open(live_dir, read_only);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    ExpectEveryHistory(**reader);
    reader->reset();
    std::filesystem::copy(live_dir, crashed_dir, std::filesystem::copy_options::recursive);
  }
  {
    RawLedgerDb raw = OpenRawLedgerDb(crashed_dir);
    ASSERT_NE(raw.history, nullptr);
    EXPECT_LT(HistoryThrough(raw), head) << "the crash lost entries written without the WAL";
  }
  {
    auto log = ledger::RocksDbLog::Open(crashed_dir);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ExpectEveryHistory(**log);
    capnp::MallocMessageBuilder m;
    auto event = m.initRoot<schema::Event>();
    event.setRecordedAtNs((*log)->GetHead().recorded_at_ns);
    auto ref = event.initBody().initWorkloadDeleted().initWorkload();
    ref.setNamespace("ns");
    ref.setName("after-the-crash");
    auto appended = (*log)->Append(std::vector<std::string>{schema::EncodeEvent(m)});
    ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  }
  {
    RawLedgerDb raw = OpenRawLedgerDb(crashed_dir);
    EXPECT_EQ(HistoryThrough(raw), head + 1) << "a clean close flushed the history";
  }
  for (bool read_only : {true, false}) {
    ledger::RocksDbLogOptions options;
    options.read_only = read_only;
    auto log = ledger::RocksDbLog::Open(crashed_dir, options);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ExpectEveryHistory(**log);
  }
}

// A ledger whose history family was written in the earlier layout (one skip list, no prefix
// extractor: tables without prefix filters, and a log replayed into the vector memtable) reads
// the same histories as the layout it is opened with now.
TEST(HistoryIndex, ALedgerWrittenInTheSkipListLayoutReadsTheSameHistories) {
  static constexpr char kLongName[] = "a-workload-with-a-name-longer-than-a-sequence";
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  std::map<std::string, std::vector<Sequence>> want;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(11, 80), **log);
    // A name longer than the 8 bytes of a sequence: the prefix filters see its whole key.
    capnp::MallocMessageBuilder m;
    auto event = m.initRoot<schema::Event>();
    event.setRecordedAtNs((*log)->GetHead().recorded_at_ns);
    auto ref = event.initBody().initWorkloadDeleted().initWorkload();
    ref.setNamespace("ns");
    ref.setName(kLongName);
    auto appended = (*log)->Append(std::vector<std::string>{schema::EncodeEvent(m)});
    ASSERT_TRUE(appended.ok()) << appended.status().ToString();
    for (const std::string& name : WorkloadNames(**log)) {
      auto h = (*log)->History(schema::HistoryNameKey("ns/" + name), 0);
      ASSERT_TRUE(h.ok() && h->has_value());
      want[name] = **h;
    }
  }
  ASSERT_GE(want.size(), 2u);
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    auto h = (*log)->History(schema::HistoryNameKey(std::string("ns/") + kLongName), 0);
    ASSERT_TRUE(h.ok() && h->has_value());
    ASSERT_EQ(h->value().size(), 1u);
    want[kLongName] = **h;
  }
  {
    RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
    ASSERT_NE(raw.history, nullptr);
    std::vector<std::pair<std::string, std::string>> entries;
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db->NewIterator(rocksdb::ReadOptions(), raw.history.get()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      entries.emplace_back(it->key().ToString(), it->value().ToString());
    }
    ASSERT_TRUE(it->status().ok());
    it.reset();
    ASSERT_TRUE(raw.db->DropColumnFamily(raw.history.get()).ok());
    raw.history.reset();
    rocksdb::ColumnFamilyHandle* fresh = nullptr;
    ASSERT_TRUE(raw.db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(),
                                           ledger::RocksDbLog::kHistoryFamily, &fresh)
                    .ok());
    raw.history.reset(fresh);
    // Half into a table file of the old layout, half left in the log.
    for (size_t i = 0; i < entries.size(); ++i) {
      ASSERT_TRUE(raw.db->Put(rocksdb::WriteOptions(), raw.history.get(), entries[i].first,
                              entries[i].second)
                      .ok());
      if (i == entries.size() / 2) {
        ASSERT_TRUE(raw.db->Flush({}, raw.history.get()).ok());
      }
    }
  }
  auto log = ledger::RocksDbLog::Open(ledger_dir);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  for (const auto& [name, sequences] : want) {
    auto h = (*log)->History(schema::HistoryNameKey("ns/" + name), 0);
    ASSERT_TRUE(h.ok() && h->has_value()) << name;
    EXPECT_EQ(**h, sequences) << name;
  }
}

// Adds to the closed ledger at `ledger_dir` the history entries of the layout before the uid entries
// were kept for references by uid alone: a `u` entry for every event that names a workload and
// its uid. Returns how many (0 on any failure).
size_t AddUidEntriesAsBefore(const std::string& ledger_dir) {
  std::vector<std::pair<Sequence, std::string>> uid_entries;
  {
    ledger::RocksDbLogOptions read_only;
    read_only.read_only = true;
    auto log = ledger::RocksDbLog::Open(ledger_dir, read_only);
    if (!log.ok()) return 0;
    auto all = (*log)->Read(1, ledger::kReadEventsMax);
    if (!all.ok()) return 0;
    for (const auto& e : *all) {
      auto decoded = schema::DecodeEvent(e.bytes);
      if (!decoded.ok()) return 0;
      if (auto spec = schema::SpecOf(decoded->root())) {
        uid_entries.emplace_back(e.sequence, spec->getUid().cStr());
      } else if (auto ref = schema::SubjectOf(decoded->root()); ref && ref->getName().size() > 0) {
        uid_entries.emplace_back(e.sequence, ref->getUid().cStr());
      }
    }
  }
  RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
  size_t added = 0;
  for (const auto& [sequence, uid] : uid_entries) {
    if (uid.empty()) continue;
    if (!raw.db->Put(rocksdb::WriteOptions(), raw.history.get(),
                     ledger::RocksDbLog::HistoryKey(schema::HistoryUidKey(uid), sequence), "")
             .ok()) {
      return 0;
    }
    ++added;
  }
  return added;
}

// The index names a workload's events by NS/NAME; an event that refers to one by uid alone is
// indexed under its uid too (`u`), and only such an event: explain finds it through the uids
// of the workload's submissions. A ledger of the layout before (a `u` entry for every event
// that carried a uid) explains the same.
TEST(HistoryIndex, AUidOnlyReferenceIsIndexedUnderItsUidAndNamedEventsAreNot) {
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  Sequence finished_at = 0;
  std::string want;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(7, 10), **log);
    FixedClock clock;
    auto service = ops::Service::Open(**log, clock);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    ops::IntakeOptions options;
    options.actor = "test";
    options.at_ns = (*log)->GetHead().recorded_at_ns + 1'000'000'000;
    capnp::MallocMessageBuilder submit;
    auto wl = submit.initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
    wl.setNamespace("ns");
    wl.setName("solo");
    wl.setUid("uid-solo");
    wl.setQueueName("lq-0");
    auto ps = wl.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(1);
    auto req = ps.initRequests(1);
    req[0].setName("cpu");
    req[0].setMilli(100);
    auto submitted = (*service)->Record({schema::EncodeEvent(submit)}, options);
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    options.at_ns = *options.at_ns + 1'000'000'000;
    capnp::MallocMessageBuilder finish;
    auto by_uid_alone =
        finish.initRoot<schema::Event>().initBody().initWorkloadFinished().initWorkload();
    by_uid_alone.setNamespace("ns");
    by_uid_alone.setUid("uid-solo");
    auto finished = (*service)->Record({schema::EncodeEvent(finish)}, options);
    ASSERT_TRUE(finished.ok()) << finished.status().ToString();
    ASSERT_FALSE(finished->sequences.empty());
    finished_at = finished->sequences.front();

    auto by_uid = (*log)->History(schema::HistoryUidKey("uid-solo"), 0);
    ASSERT_TRUE(by_uid.ok() && by_uid->has_value());
    EXPECT_EQ(**by_uid, std::vector<Sequence>{finished_at})
        << "only the event that names the workload by uid alone is indexed under its uid";
    auto by_name = (*log)->History(schema::HistoryNameKey("ns/solo"), 0);
    ASSERT_TRUE(by_name.ok() && by_name->has_value());
    EXPECT_EQ(std::count(by_name->value().begin(), by_name->value().end(), finished_at), 0);

    WithoutHistory folded(**log);
    auto from_fold = replay::Explain(folded, "ns", "solo", 0);
    auto from_index = replay::Explain(**log, "ns", "solo", 0);
    ASSERT_TRUE(from_fold.ok() && from_index.ok());
    want = replay::ExplainJson(*from_fold);
    EXPECT_EQ(replay::ExplainJson(*from_index), want);
    EXPECT_NE(want.find("\"sequence\": " + std::to_string(finished_at) + ","), std::string::npos)
        << "the finish by uid is in the explanation: " << want;
  }
  // The layout before: a `u` entry beside the `n` entry of every event that names a uid.
  ASSERT_GT(AddUidEntriesAsBefore(ledger_dir), 0u);
  auto log = ledger::RocksDbLog::Open(ledger_dir);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto by_uid = (*log)->History(schema::HistoryUidKey("uid-solo"), 0);
  ASSERT_TRUE(by_uid.ok() && by_uid->has_value());
  EXPECT_GT(by_uid->value().size(), 1u) << "the older layout's entries are read";
  auto again = replay::Explain(**log, "ns", "solo", 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(replay::ExplainJson(*again), want);
}

// A ledger appended to with the history index off (ledger_bench's comparison) answers the same
// histories, from its events, and the next writable open indexes them.
TEST(HistoryIndex, WithTheIndexOffHistoriesComeFromTheEventsUntilTheNextOpen) {
  TempDir dir;
  std::map<std::string, std::vector<Sequence>> want;
  {
    auto indexed = ledger::RocksDbLog::Open(dir.Sub("indexed"));
    ASSERT_TRUE(indexed.ok());
    RecordScenario(ScenarioFromSeed(5, 40), **indexed);
    for (const std::string& name : WorkloadNames(**indexed)) {
      auto h = (*indexed)->History(schema::HistoryNameKey("ns/" + name), 0);
      ASSERT_TRUE(h.ok() && h->has_value());
      want[name] = **h;
    }
  }
  ASSERT_FALSE(want.empty());
  const std::string ledger_dir = dir.Sub("off");
  {
    ledger::RocksDbLogOptions off;
    off.index_history = false;
    auto log = ledger::RocksDbLog::Open(ledger_dir, off);
    ASSERT_TRUE(log.ok());
    RecordScenario(ScenarioFromSeed(5, 40), **log);
    ExpectHistories(**log, want);
  }
  {
    RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
    EXPECT_LT(HistoryThrough(raw), 10u) << "nothing past the definitions was indexed";
  }
  Sequence head = 0;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ExpectHistories(**log, want);
    head = (*log)->GetHead().sequence;
  }
  RawLedgerDb raw = OpenRawLedgerDb(ledger_dir);
  EXPECT_EQ(HistoryThrough(raw), head) << "the writable open indexed the rest";
}

}  // namespace
}  // namespace admission::testing
