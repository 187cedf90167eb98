// Snapshots (projections/snapshot.h, ledger/snapshot_store.h, replay/snapshots.h):
//
// - Replay from a random snapshot equals replay from sequence 0: the same decisions after it,
//   the same state at the head (byte-identical snapshots), the same read models and derived
//   state at the snapshot; encode -> load -> encode is byte-identical. Over random scenarios,
//   and at every append of every golden ledger (checks, pods, revocation, imports).
// - The service snapshots periodically and starts from the newest valid snapshot.
// - One edited byte of a stored snapshot (frame, hash or body) is named by `admitctl verify`
//   and CheckSnapshot; startup skips that snapshot and reaches the same state.
// - Snapshots of another engine version or another ledger are skipped, never trusted; a
//   decider holding undelivered decisions is refused.
// - Two processes snapshot the same ledger to the same bytes.

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ledger/verify.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "projections/engine_version.h"
#include "projections/snapshot.h"
#include "replay/ledger_file.h"
#include "replay/replayer.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"
#include "schema/snapshot_codec.h"
#include "tests/property/admitctl_process.h"
#include "tests/property/scenario_gen.h"
#include "tests/property/snapshot_check.h"
#include "tests/unit/temp_dir.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (see CMakeLists.txt)"
#endif
#ifndef ADMITCTL_PATH
#error "ADMITCTL_PATH must name the admitctl binary (see CMakeLists.txt)"
#endif

namespace admission::testing {
namespace {

// The service logs snapshots taken and loaded at info; these tests check them by value.
const bool kQuietLogs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

// ---------------------------------------------------------------------------------------------
// The round trip.

RC_GTEST_PROP(Snapshot, ReplayFromARandomSnapshotEqualsReplayFromGenesis, ()) {
  const ScenarioGen s = *GenScenario();
  ledger::MemoryLog log;
  RecordScenario(s, log);
  const std::vector<Sequence> ends = AppendEnds(log);
  const Sequence at = *rc::gen::elementOf(ends);
  RC_TAG(at == 0 ? "genesis" : at == log.GetHead().sequence ? "head" : "inside");
  const std::string failure = CheckSnapshotsAt(log, {at});
  RC_ASSERT(failure == "");
}

TEST(Snapshot, EveryAppendOfEveryGoldenLedgerRoundTrips) {
  int ledgers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GOLDEN_DIR)) {
    if (entry.path().extension() != ".ledger") continue;
    ledger::MemoryLog log;
    ASSERT_TRUE(replay::ImportLedger(ReadFile(entry.path().string()), log).ok()) << entry.path();
    const std::vector<Sequence> ends = AppendEnds(log);
    ASSERT_GT(ends.size(), 2u) << entry.path();
    EXPECT_EQ(CheckSnapshotsAt(log, ends), "") << entry.path();
    ++ledgers;
  }
  EXPECT_GE(ledgers, 6);
}

TEST(Snapshot, TheCheckFailsWhenTheLoadedDeciderDiffers) {
  // The round-trip check can fail: a snapshot whose state was changed (one workload's priority)
  // but still decodes is caught, by the re-encoding or by the continued fold.
  ledger::MemoryLog log;
  RecordScenario(ScenarioFromSeed(5, 30), log);
  const Sequence at = AppendEnds(log)[3];
  auto state = replay::FoldToSequence(log, at);
  ASSERT_TRUE(state.ok());
  auto bytes = projections::EncodeSnapshot(*state->engine, at, *ledger::ChainValueAfter(log, at), {});
  ASSERT_TRUE(bytes.ok());
  auto decoded = schema::DecodeSnapshot(*bytes);
  ASSERT_TRUE(decoded.ok());
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  auto workloads = m.getRoot<schema::snap::Snapshot>().getState().getWorkloads();
  ASSERT_GT(workloads.size(), 0u);
  workloads[0].setPriority(workloads[0].getPriority() + 7);
  kj::Array<capnp::word> words = capnp::canonicalize(m.getRoot<schema::snap::Snapshot>().asReader());
  const std::string edited(words.asChars().begin(), words.asChars().size());
  auto loaded = projections::LoadSnapshot(edited);
  // A queued workload's priority is also in its queue entry: the loader refuses the mismatch.
  // Otherwise it loads, and its state is not the straight fold's.
  if (loaded.ok()) {
    EXPECT_NE(EngineDump(*loaded->engine), EngineDump(*state->engine));
  } else {
    EXPECT_EQ(loaded.status().code(), Code::kCorruption) << loaded.status().ToString();
  }
}

// Format 9 (engine v26) stores the topology state TAS places from (format 8 the usage fold
// budgets need): a snapshot of an older format lacks it (nodes without labels would place
// nothing), so it is refused, as a newer one is, naming the formats this build reads; startup
// then folds from an older snapshot or the genesis.
TEST(Snapshot, LoadsOnlyFormatsWithTheTopologyState) {
  projections::Engine engine;
  auto bytes = projections::EncodeSnapshot(engine, 0, schema::kGenesisHash, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto with_format = [&](uint32_t format) {
    auto decoded = schema::DecodeSnapshot(*bytes);
    EXPECT_TRUE(decoded.ok());
    capnp::MallocMessageBuilder message;
    message.setRoot(decoded->root());
    message.getRoot<schema::snap::Snapshot>().setFormatVersion(format);
    kj::Array<capnp::word> words =
        capnp::canonicalize(message.getRoot<schema::snap::Snapshot>().asReader());
    return projections::LoadSnapshot(std::string_view(words.asChars().begin(), words.asChars().size()));
  };
  EXPECT_EQ(projections::kSnapshotFormatVersion, 9u);
  EXPECT_TRUE(with_format(9).ok());
  for (uint32_t format : {4u, 8u, 10u}) {
    auto other = with_format(format);
    ASSERT_FALSE(other.ok());
    EXPECT_NE(other.status().message().find("snapshot format v" + std::to_string(format) +
                                            "; this build reads formats v9 to v9"),
              std::string::npos)
        << other.status().message();
  }
}

// A text no encoder writes (an embedded NUL: setters write a std::string up to its first NUL)
// is refused, so that a loaded state encodes to what it was loaded from.
TEST(Snapshot, RefusesATextWithANulByte) {
  projections::Engine engine;
  auto bytes = projections::EncodeSnapshot(engine, 0, schema::kGenesisHash, {{"k", "body"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_TRUE(projections::LoadSnapshot(*bytes).ok());
  auto decoded = schema::DecodeSnapshot(*bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  capnp::MallocMessageBuilder message;
  message.setRoot(decoded->root());
  const char kKey[] = {'k', '\0', 'x'};
  message.getRoot<schema::snap::Snapshot>().getDefinitions()[0].setKey(
      capnp::Text::Reader(kKey, sizeof kKey));
  kj::Array<capnp::word> words = capnp::canonicalize(
      message.getRoot<schema::snap::Snapshot>().asReader());
  auto loaded = projections::LoadSnapshot(std::string_view(words.asChars().begin(), words.asChars().size()));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Code::kCorruption);
  EXPECT_NE(loaded.status().message().find("NUL"), std::string::npos) << loaded.status().message();
}

TEST(Snapshot, RefusesADeciderHoldingUndeliveredDecisions) {
  ledger::MemoryLog log;
  RecordScenario(ScenarioFromSeed(2, 10), log);
  auto state = replay::FoldToSequence(log, 0);
  ASSERT_TRUE(state.ok());
  // A workload for a LocalQueue that does not exist: the decider records at once that it is
  // inadmissible, a decision EndBatch has not returned yet.
  capnp::MallocMessageBuilder m;
  auto event = m.initRoot<schema::Event>();
  event.setSequence(state->at + 1);
  auto wl = event.initBody().initWorkloadSubmitted().initWorkload();
  wl.setNamespace("ns");
  wl.setName("orphan");
  wl.setUid("uid-orphan");
  wl.setQueueName("no-such-queue");
  state->engine->ApplyInput(m.getRoot<schema::Event>().asReader());
  auto bytes = projections::EncodeSnapshot(*state->engine, state->at, schema::kGenesisHash, {});
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bytes.status().message().find("end of an append"), std::string::npos);
  // Once the batch ends, it can be taken.
  (void)state->engine->EndBatch(state->at + 1, 0);
  EXPECT_TRUE(projections::EncodeSnapshot(*state->engine, state->at + 1, schema::kGenesisHash, {}).ok());
}

// ---------------------------------------------------------------------------------------------
// Storage, checks and startup.

struct SnapshottedLedger {
  ledger::MemoryLog log;
  ledger::MemorySnapshotStore store;
};

// Records a scenario through a service that snapshots every `every` events.
void RecordWithSnapshots(const ScenarioGen& s, ledger::EventLog& log, ledger::SnapshotStore& store,
                         uint64_t every) {
  ops::ServiceOptions options;
  options.snapshots = &store;
  options.snapshot_every_events = every;
  FixedClock clock;
  auto service = ops::Service::Open(log, clock, nullptr, options);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  int64_t now = 1'800'000'000'000'000'000;
  auto record = [&](const std::vector<std::string>& inputs) {
    ops::IntakeOptions intake;
    intake.at_ns = now += 1'000'000'000;
    intake.actor = "test";
    auto outcome = (*service)->Record(inputs, intake);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  };
  record(Definitions(s));
  std::vector<std::string> submitted;
  for (size_t i = 0; i < s.steps.size(); ++i) record({StepInput(s.steps[i], i, s.queues.size(), &submitted)});
}

TEST(SnapshotService, SnapshotsPeriodicallyAndStartsFromTheNewest) {
  SnapshottedLedger l;
  RecordWithSnapshots(ScenarioFromSeed(31, 60), l.log, l.store, 20);
  auto list = l.store.List();
  ASSERT_TRUE(list.ok());
  ASSERT_FALSE(list->empty());
  EXPECT_LE(list->size(), ledger::kSnapshotsKept);
  const std::vector<Sequence> ends = AppendEnds(l.log);
  for (Sequence s : *list) {
    EXPECT_NE(std::find(ends.begin(), ends.end(), s), ends.end()) << s << " is inside an append";
    auto check = replay::CheckSnapshot(l.log, l.store, s);
    ASSERT_TRUE(check.ok());
    EXPECT_FALSE(check->fault.has_value()) << *check->fault;
  }
  FixedClock clock;
  ops::ServiceOptions options;
  options.snapshots = &l.store;
  auto from_snapshot = ops::Service::Open(l.log, clock, nullptr, options);
  auto from_genesis = ops::Service::Open(l.log, clock);
  ASSERT_TRUE(from_snapshot.ok() && from_genesis.ok());
  ASSERT_TRUE((*from_snapshot)->loaded_snapshot().has_value());
  EXPECT_EQ(*(*from_snapshot)->loaded_snapshot(), list->back());
  EXPECT_EQ((*from_snapshot)->events_folded_at_open(), l.log.GetHead().sequence - list->back());
  EXPECT_EQ(EngineDump((*from_snapshot)->engine()), EngineDump((*from_genesis)->engine()));
  // Intake's definitions came with the snapshot: re-applying an identical definition is still a
  // no-op, as it is for a service folded from the genesis.
  ops::IntakeOptions intake;
  intake.at_ns = l.log.GetHead().recorded_at_ns;
  intake.actor = "test";
  auto outcome = (*from_snapshot)->Record(Definitions(ScenarioFromSeed(31, 60)), intake);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  for (bool unchanged : outcome->unchanged) EXPECT_TRUE(unchanged);
}

TEST(SnapshotTamper, EveryEditedByteOfAStoredSnapshotIsFoundAndSkipped) {
  SnapshottedLedger l;
  RecordWithSnapshots(ScenarioFromSeed(41, 50), l.log, l.store, 15);
  auto list = l.store.List();
  ASSERT_TRUE(list.ok());
  ASSERT_GE(list->size(), 2u);
  const Sequence newest = list->back(), older = (*list)[list->size() - 2];
  FixedClock clock;
  auto from_genesis = ops::Service::Open(l.log, clock);
  ASSERT_TRUE(from_genesis.ok());
  const std::string expected = EngineDump((*from_genesis)->engine());
  const size_t frame = l.store.FrameSizeForTest(newest);
  std::mt19937_64 rng(7);
  std::vector<size_t> offsets;
  for (size_t i = 0; i < ledger::kSnapshotFrameHeaderBytes; ++i) offsets.push_back(i);
  for (int i = 0; i < 64; ++i) offsets.push_back(ledger::kSnapshotFrameHeaderBytes + rng() % (frame - ledger::kSnapshotFrameHeaderBytes));
  for (size_t offset : offsets) {
    l.store.CorruptForTest(newest, offset);
    auto check = replay::CheckSnapshot(l.log, l.store, newest);
    ASSERT_TRUE(check.ok());
    EXPECT_TRUE(check->fault.has_value()) << "byte " << offset << " edited, not found";
    auto all = replay::VerifySnapshots(l.log, l.store);
    ASSERT_TRUE(all.ok());
    for (const auto& c : *all) EXPECT_EQ(c.fault.has_value(), c.after == newest) << c.after;
    ops::ServiceOptions options;
    options.snapshots = &l.store;
    auto service = ops::Service::Open(l.log, clock, nullptr, options);
    ASSERT_TRUE(service.ok());
    EXPECT_EQ((*service)->loaded_snapshot(), std::optional<uint64_t>(older)) << "byte " << offset;
    ASSERT_EQ((*service)->skipped_snapshots().size(), 1u);
    EXPECT_NE((*service)->skipped_snapshots()[0].find("snapshot at sequence " + std::to_string(newest)),
              std::string::npos);
    EXPECT_EQ(EngineDump((*service)->engine()), expected);
    l.store.CorruptForTest(newest, offset);  // flip it back
  }
  auto check = replay::CheckSnapshot(l.log, l.store, newest);
  EXPECT_FALSE(check->fault.has_value());
}

TEST(SnapshotTamper, ASnapshotOfAnotherLedgerOrEngineVersionIsSkipped) {
  ledger::MemoryLog a, b;
  RecordScenario(ScenarioFromSeed(51, 30), a);
  RecordScenario(ScenarioFromSeed(52, 30), b);
  // An append end of both ledgers, so that only the chain hash tells them apart.
  const std::vector<Sequence> ends_a = AppendEnds(a), ends_b = AppendEnds(b);
  Sequence s = 0;
  for (Sequence e : ends_a) {
    if (e > 0 && std::find(ends_b.begin(), ends_b.end(), e) != ends_b.end()) s = e;
  }
  ASSERT_GT(s, 0u);
  auto state = replay::FoldToSequence(a, s);
  ASSERT_TRUE(state.ok());
  auto bytes = projections::EncodeSnapshot(*state->engine, s, *ledger::ChainValueAfter(a, s), {});
  ASSERT_TRUE(bytes.ok());
  ledger::MemorySnapshotStore own, foreign;
  ASSERT_TRUE(own.Write(s, *bytes).ok());
  ASSERT_TRUE(foreign.Write(s, *bytes).ok());
  auto own_check = replay::CheckSnapshot(a, own, s);
  ASSERT_TRUE(own_check.ok());
  EXPECT_FALSE(own_check->fault.has_value()) << *own_check->fault;
  auto stored = own.Read(s);
  ASSERT_TRUE(stored.ok());
  auto check = replay::CheckSnapshot(b, foreign, s);
  ASSERT_TRUE(check.ok());
  ASSERT_TRUE(check->fault.has_value());
  EXPECT_NE(check->fault->find("chain hash"), std::string::npos) << *check->fault;

  // Another engine version, with a valid hash and chain: not loaded, the message names both.
  auto decoded = schema::DecodeSnapshot(stored->bytes);
  ASSERT_TRUE(decoded.ok());
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  m.getRoot<schema::snap::Snapshot>().setEngineVersion(projections::kEngineVersion + 1);
  kj::Array<capnp::word> words = capnp::canonicalize(m.getRoot<schema::snap::Snapshot>().asReader());
  ledger::MemorySnapshotStore other_version;
  ASSERT_TRUE(other_version.Write(s, std::string(words.asChars().begin(), words.asChars().size())).ok());
  auto start = replay::StartFromNewestSnapshot(a, other_version);
  ASSERT_TRUE(start.ok());
  EXPECT_FALSE(start->loaded.has_value());
  EXPECT_EQ(start->start.after, 0u);
  ASSERT_EQ(start->skipped.size(), 1u);
  EXPECT_NE(start->skipped[0].find("engine v" + std::to_string(projections::kEngineVersion + 1)),
            std::string::npos) << start->skipped[0];
  EXPECT_NE(start->skipped[0].find("this build runs engine v" +
                                   std::to_string(projections::kEngineVersion)),
            std::string::npos) << start->skipped[0];
}

TEST(SnapshotReplay, ReplayVerifyReportsASnapshotThatDisagreesWithTheFold) {
  SnapshottedLedger l;
  RecordWithSnapshots(ScenarioFromSeed(61, 40), l.log, l.store, 10);
  auto list = l.store.List();
  ASSERT_TRUE(list.ok() && !list->empty());
  const Sequence s = list->back();
  auto run = [&]() {
    replay::Replayer replayer(l.log, replay::Genesis());
    auto compared = replay::RunComparingSnapshots(replayer, replay::ReplayOptions{}, l.log, l.store, {});
    EXPECT_TRUE(compared.ok());
    return std::move(*compared);
  };
  replay::ComparedReplay good = run();
  EXPECT_FALSE(good.report.divergence.has_value());
  ASSERT_EQ(good.snapshots.size(), list->size());
  for (const auto& c : good.snapshots) EXPECT_FALSE(c.mismatch.has_value()) << *c.mismatch;

  // A snapshot rewritten with a consistent hash and chain but another state (a workload's
  // creation time): only the comparison with the fold can tell.
  auto stored = l.store.Read(s);
  auto decoded = schema::DecodeSnapshot(stored->bytes);
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  auto workloads = m.getRoot<schema::snap::Snapshot>().getState().getWorkloads();
  ASSERT_GT(workloads.size(), 0u);
  const std::string key = workloads[workloads.size() - 1].getKey().cStr();
  workloads[workloads.size() - 1].setCreationNs(workloads[workloads.size() - 1].getCreationNs() + 1);
  kj::Array<capnp::word> words = capnp::canonicalize(m.getRoot<schema::snap::Snapshot>().asReader());
  ASSERT_TRUE(l.store.Write(s, std::string(words.asChars().begin(), words.asChars().size())).ok());
  auto check = replay::CheckSnapshot(l.log, l.store, s);
  EXPECT_FALSE(check->fault.has_value());  // intact and tied to the ledger
  replay::ComparedReplay bad = run();
  ASSERT_EQ(bad.snapshots.size(), list->size());
  const auto& c = bad.snapshots.back();
  EXPECT_EQ(c.after, s);
  ASSERT_TRUE(c.mismatch.has_value());
  EXPECT_NE(c.mismatch->find("state.workloads[" + key + "].creationNs"), std::string::npos)
      << *c.mismatch;
}

// ---------------------------------------------------------------------------------------------
// Across processes: admitctl.

TEST(SnapshotProcess, TwoProcessesSnapshotTheSameLedgerToTheSameBytes) {
  TempDir dir;
  const std::string a = dir.Sub("a"), b = dir.Sub("b");
  WriteRocksLedger(ScenarioFromSeed(71, 40), a);
  WriteRocksLedger(ScenarioFromSeed(71, 40), b);
  ProcessRun ra = Admitctl({"--ledger", a, "snapshot", "-o", "json"});
  ProcessRun rb = Admitctl({"--ledger", b, "snapshot", "-o", "json"});
  ASSERT_EQ(ra.exit_code, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.out << rb.err;
  auto ja = ParseJson(ra.out), jb = ParseJson(rb.out);
  ASSERT_FALSE(ja.is_discarded()) << ra.out;
  EXPECT_EQ(ja["sha256"], jb["sha256"]);
  EXPECT_EQ(ja["bytes"], jb["bytes"]);
  EXPECT_TRUE(ja["loadedSnapshot"].is_null());
  const Sequence at = ja["sequence"].get<Sequence>();
  // And the same bytes as this process makes (with intake's definitions, as the service has).
  auto log = ledger::RocksDbLog::Open(a);
  ASSERT_TRUE(log.ok());
  FixedClock clock;
  ledger::FileSnapshotStore store(a);
  auto stored = store.Read(at);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(schema::HashHex(schema::SnapshotHash(stored->bytes)), ja["sha256"].get<std::string>());
  ops::ServiceOptions none;
  auto service = ops::Service::Open(**log, clock, nullptr, none);
  ASSERT_TRUE(service.ok());
  ledger::MemorySnapshotStore mine;
  ops::ServiceOptions options;
  options.snapshots = &mine;
  auto snapshotting = ops::Service::Open(**log, clock, nullptr, options);
  ASSERT_TRUE(snapshotting.ok());
  auto taken = (*snapshotting)->Snapshot();
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(schema::HashHex(taken->hash), ja["sha256"].get<std::string>());
}

// Flips one byte of a file.
void FlipFileByte(const std::string& path, size_t offset) {
  std::string bytes = ReadFile(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(SnapshotTamper, VerifyNamesTheSnapshotWhoseStoredByteWasEditedAndStartupSkipsIt) {
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    const std::string ledger_dir = dir.Sub("ledger");
    Sequence older = 0, newest = 0;
    {
      auto log = ledger::RocksDbLog::Open(ledger_dir);
      ASSERT_TRUE(log.ok());
      ledger::FileSnapshotStore store(ledger_dir);
      RecordWithSnapshots(ScenarioFromSeed(80 + round, 50), **log, store, 25);
      auto list = store.List();
      ASSERT_TRUE(list.ok());
      ASSERT_GE(list->size(), 2u);
      older = (*list)[list->size() - 2];
      newest = list->back();
    }
    ProcessRun clean = Admitctl({"--ledger", ledger_dir, "verify", "-o", "json"});
    ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
    ProcessRun before = Admitctl({"--ledger", ledger_dir, "get", "workloads", "-o", "json"});
    ASSERT_EQ(before.exit_code, 0);
    ledger::FileSnapshotStore store(ledger_dir);
    const std::string path = store.PathOf(newest);
    const size_t size = std::filesystem::file_size(path);
    const size_t offset = round == 0 ? rng() % ledger::kSnapshotFrameHeaderBytes : rng() % size;
    FlipFileByte(path, offset);

    ProcessRun json = Admitctl({"--ledger", ledger_dir, "verify", "-o", "json"});
    EXPECT_EQ(json.exit_code, 1) << json.out;
    auto parsed = ParseJson(json.out);
    ASSERT_FALSE(parsed.is_discarded()) << json.out;
    EXPECT_FALSE(parsed["ok"].get<bool>());
    EXPECT_EQ(parsed["badSnapshot"].get<Sequence>(), newest) << json.out;
    EXPECT_FALSE(parsed.contains("badSequence")) << "the events are intact: " << json.out;
    ProcessRun text = Admitctl({"--ledger", ledger_dir, "verify"});
    EXPECT_EQ(text.exit_code, 1);
    EXPECT_NE(text.out.find("FAILED: snapshot at sequence " + std::to_string(newest)),
              std::string::npos) << text.out;

    // Startup skips it (saying so), starts from the older one and reaches the same state.
    ProcessRun after = Admitctl(
        {"--ledger", ledger_dir, "--log-level", "info", "get", "workloads", "-o", "json"});
    ASSERT_EQ(after.exit_code, 0) << after.err;
    EXPECT_EQ(after.out, before.out);
    EXPECT_NE(after.err.find("skipping snapshot at sequence " + std::to_string(newest)),
              std::string::npos) << after.err;
    EXPECT_NE(after.err.find("loaded snapshot at " + std::to_string(older)), std::string::npos)
        << after.err;
  }
}

}  // namespace
}  // namespace admission::testing
