// Properties of replay (replay/) over random scenarios, and the process-level checks around it.
//
// - Replay from sequence 1 reproduces every recorded decision, byte for byte, and its
//   decision-stream hash is the chain over the recorded decisions.
// - Replay comparing from any sequence N (folding 1..N-1 first) reproduces the decisions from N.
// - The state after any sequence (rounded up to its append's end) is the live decider's state
//   after that append.
// - A changed decider (the DecisionAlteration seam) fails at the first decision it changes.
// - A replay's CPU time by thread (fold, read, compare) is positive where work ran and within
//   the process's CPU time.
// - Across processes: `admitctl replay --verify -o json` gives the same decision-stream hash
//   twice, and the same as this process.
// - A ledger written by admitctl processes killed with SIGKILL mid-append and restarted holds
//   the same decisions (the same bytes) as one written without a crash.
// - An edited byte of a stored decision is named by `admitctl verify`.

#include <capnp/message.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rocksdb/db.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ledger/memory_log.h"
#include "ledger/rocksdb_log.h"
#include "tests/unit/raw_ledger_db.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "projections/engine_version.h"
#include "replay/explain.h"
#include "replay/ledger_file.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "tests/property/admitctl_process.h"
#include "tests/property/scenario_gen.h"
#include "tests/unit/temp_dir.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (see CMakeLists.txt)"
#endif
#ifndef ADMITCTL_PATH
#error "ADMITCTL_PATH must name the admitctl binary (see CMakeLists.txt)"
#endif

namespace admission::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// Properties (in process).

double ProcessCpuSeconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

RC_GTEST_PROP(Replay, FromGenesisReproducesEveryDecision, ()) {
  const ScenarioGen s = *GenScenario();
  ledger::MemoryLog log;
  const Recording rec = RecordScenario(s, log);
  const double cpu_before = ProcessCpuSeconds();
  auto report = replay::ReplayAndVerify(log);
  const double cpu_used = ProcessCpuSeconds() - cpu_before;
  RC_ASSERT(report.ok());
  RC_ASSERT(!report->divergence.has_value());
  RC_ASSERT(report->events == log.GetHead().sequence);
  RC_ASSERT(report->decisions_compared == rec.decisions.size());
  RC_ASSERT(report->decision_stream_hash == ChainOver(rec.decisions));
  // Each thread's part of the CPU time: the fold and the reading ran; no part is negative, and
  // together they are within what the whole process used.
  RC_ASSERT(report->events == 0 || report->fold_cpu_seconds > 0);
  RC_ASSERT(report->events == 0 || report->read_cpu_seconds > 0);
  RC_ASSERT(report->compare_cpu_seconds >= 0);
  RC_ASSERT(report->fold_cpu_seconds + report->read_cpu_seconds + report->compare_cpu_seconds <=
            cpu_used + 1e-6);
  RC_TAG(rec.decisions.empty() ? "no decisions" : "decisions");
}

RC_GTEST_PROP(Replay, FromAnySequenceReproducesTheDecisionsFromThere, ()) {
  const ScenarioGen s = *GenScenario();
  ledger::MemoryLog log;
  const Recording rec = RecordScenario(s, log);
  const Sequence head = log.GetHead().sequence;
  const Sequence from = *rc::gen::inRange<Sequence>(1, head + 1);
  const Sequence to = *rc::gen::inRange<Sequence>(from, head + 1);
  replay::Replayer replayer(log, replay::Genesis());
  replay::ReplayOptions options;
  options.compare_from = from;
  options.to = to;
  auto report = replayer.Run(options);
  RC_ASSERT(report.ok());
  RC_ASSERT(!report->divergence.has_value());
  std::vector<std::string> expected;
  auto events = log.Read(from, ledger::kReadEventsMax);
  for (const auto& e : *events) {
    if (e.sequence > to) break;
    if (schema::IsDecision(schema::DecodeEvent(e.bytes)->root().getBody().which())) {
      expected.push_back(e.bytes);
    }
  }
  RC_ASSERT(report->decisions_compared == expected.size());
  RC_ASSERT(report->decision_stream_hash == ChainOver(expected));
}

RC_GTEST_PROP(Replay, StateAfterAnySequenceIsTheLiveStateAfterItsAppend, ()) {
  const ScenarioGen s = *GenScenario();
  ledger::MemoryLog log;
  const Recording rec = RecordScenario(s, log);
  const Sequence head = log.GetHead().sequence;
  const Sequence at = *rc::gen::inRange<Sequence>(1, head + 1);
  auto state = replay::FoldToSequence(log, at);
  RC_ASSERT(state.ok());
  // The append holding `at` is the first recorded point at or after it.
  const Recording::Point* point = nullptr;
  for (const auto& p : rec.points) {
    if (p.head >= at) {
      point = &p;
      break;
    }
  }
  RC_ASSERT(point != nullptr);
  RC_ASSERT(state->at == point->head);
  RC_ASSERT(ops::WorkloadsJson(*state->engine).dump() == point->workloads);
  RC_ASSERT(ops::ClusterQueuesJson(*state->engine).dump() == point->cluster_queues);
}

// The seam stands in for a changed decider: one decision type made differently.
std::string AlterMessage(const std::string& produced, schema::Event::Body::Which which) {
  auto decoded = schema::DecodeEvent(produced);
  if (!decoded.ok() || decoded->root().getBody().which() != which) return produced;
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  auto body = m.getRoot<schema::Event>().getBody();
  switch (which) {
    case schema::Event::Body::QUOTA_RESERVED:
      body.getQuotaReserved().setMessage("changed decider");
      break;
    case schema::Event::Body::ADMITTED:
      body.getAdmitted().setFencingToken("changed decider");
      break;
    case schema::Event::Body::PENDING_REASON_CHANGED:
      body.getPendingReasonChanged().setShortfallMilli(
          body.getPendingReasonChanged().getShortfallMilli() + 1);
      break;
    case schema::Event::Body::PREEMPTED:
      body.getPreempted().setReason("ChangedDecider");
      break;
    default:
      break;
  }
  return schema::EncodeEvent(m);
}

RC_GTEST_PROP(Replay, ChangedDeciderFailsAtItsFirstAffectedDecision, ()) {
  const ScenarioGen s = *GenScenario();
  ledger::MemoryLog log;
  RecordScenario(s, log);
  const auto which = *rc::gen::element(
      schema::Event::Body::QUOTA_RESERVED, schema::Event::Body::ADMITTED,
      schema::Event::Body::PENDING_REASON_CHANGED, schema::Event::Body::PREEMPTED);
  std::optional<Sequence> first;
  for (Sequence seq : DecisionSequences(log)) {
    auto e = log.Read(seq, 1);
    if (schema::DecodeEvent(e->front().bytes)->root().getBody().which() == which) {
      first = seq;
      break;
    }
  }
  replay::Replayer replayer(log, replay::Genesis());
  replay::ReplayOptions options;
  options.alter_replayed = [which](const std::string& d) { return AlterMessage(d, which); };
  // Decisions are compared a read chunk behind the fold: small chunks cross that boundary.
  options.read_chunk = *rc::gen::element<size_t>(1, 2, 7, replay::kReplayReadChunk);
  auto report = replayer.Run(options);
  RC_ASSERT(report.ok());
  RC_TAG(first ? "affected" : "unaffected");
  if (!first) {
    RC_ASSERT(!report->divergence.has_value());
    auto whole = replay::ReplayAndVerify(log);
    RC_ASSERT(whole.ok());
    RC_ASSERT(report->decision_stream_hash == whole->decision_stream_hash);
    RC_ASSERT(report->decisions_compared == whole->decisions_compared);
    return;
  }
  RC_ASSERT(report->divergence.has_value());
  RC_ASSERT(report->divergence->sequence == *first);
  // Every decision before it was compared and hashed, and none after it.
  uint64_t before = 0;
  for (Sequence seq : DecisionSequences(log)) before += seq < *first ? 1 : 0;
  RC_ASSERT(report->decisions_compared == before);
  RC_ASSERT(report->last == *first - 1);
  RC_ASSERT(!report->divergence->first_differing_field.empty());
  RC_ASSERT(report->divergence->first_differing_field.rfind("body.", 0) == 0);
}

TEST(Replay, ReplayedDecisionIsComparedWithSequenceAndPrevHashOfTheRecord) {
  // A decision whose stored bytes were edited (as an attacker would, keeping the chain aside)
  // is a divergence at that sequence, naming the edited field.
  ledger::MemoryLog log;
  RecordScenario(ScenarioFromSeed(7, 30), log);
  const std::vector<Sequence> decisions = DecisionSequences(log);
  ASSERT_FALSE(decisions.empty());
  const Sequence target = decisions[decisions.size() / 2];
  auto stored = log.Read(target, 1);
  auto decoded = schema::DecodeEvent(stored->front().bytes);
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  m.getRoot<schema::Event>().setCausationSequence(decoded->root().getCausationSequence() + 1000);
  log.OverwriteForTest(target, schema::CanonicalBytes(m.getRoot<schema::Event>().asReader()));
  auto report = replay::ReplayAndVerify(log);
  ASSERT_TRUE(report.ok());
  ASSERT_TRUE(report->divergence.has_value());
  EXPECT_EQ(report->divergence->sequence, target);
  EXPECT_EQ(report->divergence->first_differing_field, "causationSequence");
}

TEST(Replay, RefusesADecisionOfAnotherEngineVersion) {
  ledger::MemoryLog log;
  RecordScenario(ScenarioFromSeed(3, 10), log);
  const std::vector<Sequence> decisions = DecisionSequences(log);
  ASSERT_FALSE(decisions.empty());
  const Sequence target = decisions.front();
  auto stored = log.Read(target, 1);
  auto decoded = schema::DecodeEvent(stored->front().bytes);
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  m.getRoot<schema::Event>().setEngineVersion(projections::kEngineVersion + 1);
  log.OverwriteForTest(target, schema::CanonicalBytes(m.getRoot<schema::Event>().asReader()));
  for (bool verify : {true, false}) {
    replay::Replayer replayer(log, replay::Genesis());
    replay::ReplayOptions options;
    options.verify = verify;
    auto report = replayer.Run(options);
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.status().message().find("engine v" +
                                             std::to_string(projections::kEngineVersion + 1)),
              std::string::npos)
        << report.status().message();
    EXPECT_NE(report.status().message().find("this build runs engine v" +
                                             std::to_string(projections::kEngineVersion)),
              std::string::npos)
        << report.status().message();
    EXPECT_NE(report.status().message().find("sequence " + std::to_string(target)),
              std::string::npos);
  }
}

// The ledger of `v6` rebuilt as an older writer would have written it: its inputs carry
// `input_version` (0: written before inputs recorded one) and each batch's decisions are the
// decider's when it decides as `decide_as`.
// With `batches`, only the first that many batches; the inputs of the next are left in
// `*next_batch` (their bodies and keys only, as a client sends them).
void RewriteInputs(ledger::EventLog& v6, uint32_t input_version, uint32_t decide_as,
                   ledger::MemoryLog* out, size_t batches = SIZE_MAX,
                   std::vector<std::string>* next_batch = nullptr) {
  auto events = v6.Read(1, ledger::kReadEventsMax);
  ASSERT_TRUE(events.ok());
  projections::Engine engine;
  size_t ended = 0;
  for (const auto& e : *events) {
    if (ended == batches) {
      auto decoded = schema::DecodeEvent(e.bytes);
      ASSERT_TRUE(decoded.ok());
      if (schema::IsDecision(decoded->root().getBody().which())) continue;
      capnp::MallocMessageBuilder m;
      m.setRoot(decoded->root());
      auto input = m.getRoot<schema::Event>();
      input.setSequence(0);
      input.setRecordedAtNs(0);
      input.setPrevHash(capnp::Data::Reader());
      input.setEndsBatch(false);
      input.setEngineVersion(0);
      if (next_batch != nullptr) next_batch->push_back(schema::CanonicalBytes(input.asReader()));
      if (decoded->root().getEndsBatch()) break;
      continue;
    }
    auto decoded = schema::DecodeEvent(e.bytes);
    ASSERT_TRUE(decoded.ok());
    if (schema::IsDecision(decoded->root().getBody().which())) continue;
    capnp::MallocMessageBuilder m;
    m.setRoot(decoded->root());
    m.getRoot<schema::Event>().setEngineVersion(input_version);
    auto ack = out->Append(
        std::vector<std::string>{schema::CanonicalBytes(m.getRoot<schema::Event>().asReader())});
    ASSERT_TRUE(ack.ok());
    auto stored = out->Read(ack->sequences.front(), 1);
    auto input = schema::DecodeEvent(stored->front().bytes);
    engine.ApplyInput(input->root());
    // The quota invariants hold after every input, and after every batch's cycles.
    const Status after_input = engine.CheckInvariants();
    ASSERT_TRUE(after_input.ok()) << after_input.message();
    if (input->root().getEndsBatch()) {
      ++ended;
      std::vector<std::string> decisions =
          engine.EndBatch(ack->sequences.front(), input->root().getRecordedAtNs(), decide_as);
      const Status after_batch = engine.CheckInvariants();
      ASSERT_TRUE(after_batch.ok()) << after_batch.message();
      if (!decisions.empty()) {
        ASSERT_TRUE(out->Append(decisions).ok());
      }
    }
  }
}

// What each batch's decisions record as their version, in ledger order.
std::vector<uint32_t> DecisionVersions(ledger::EventLog& log) {
  std::vector<uint32_t> versions;
  auto events = log.Read(1, ledger::kReadEventsMax);
  for (const auto& e : *events) {
    auto decoded = schema::DecodeEvent(e.bytes);
    if (schema::IsDecision(decoded->root().getBody().which())) {
      versions.push_back(decoded->root().getEngineVersion());
    }
  }
  return versions;
}

TEST(Replay, EachBatchIsDecidedAsTheVersionThatSequencedIt) {
  // tests/scenarios/25-preempted-then-reclaims.yaml, recorded by engine v6: a workload
  // preempted in a batch preempts nobody before the next one. v5 let it reclaim in the same
  // batch, so the same inputs make other decisions under v5.
  ledger::MemoryLog v6;
  ASSERT_TRUE(
      replay::ImportLedger(ReadFile(GOLDEN_DIR "/preempted-then-reclaims.ledger"), v6).ok());
  for (uint32_t version : DecisionVersions(v6)) ASSERT_EQ(version, 6u);
  ledger::MemoryLog v5;  // as written before v6: inputs carry no version
  RewriteInputs(v6, 0, 5, &v5);
  for (uint32_t version : DecisionVersions(v5)) ASSERT_EQ(version, 5u);
  ASSERT_NE(replay::ReplayAndVerify(v6)->decision_stream_hash,
            replay::ReplayAndVerify(v5)->decision_stream_hash)
      << "the scenario no longer tells v5 from v6";

  // Each replays as recorded: the v5 ledger's batches decided as v5, the v6 ledger's as v6.
  for (ledger::EventLog* log : {static_cast<ledger::EventLog*>(&v5), static_cast<ledger::EventLog*>(&v6)}) {
    auto report = replay::ReplayAndVerify(*log);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_FALSE(report->divergence.has_value()) << report->divergence->first_differing_field;
  }

  // The inputs say which version decides: v5's decisions under inputs that name v6 diverge
  // (replay never picks whichever version matches).
  ledger::MemoryLog relabelled;
  RewriteInputs(v5, 6, 5, &relabelled);
  auto report = replay::ReplayAndVerify(relabelled);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->divergence.has_value());

  // An upgraded service continues a v5 ledger: old batches folded as v5, new ones decided and
  // recorded as this build's version (v6's rule included), and the mixed ledger replays. Here
  // it takes over just before B's submission (the fourth batch).
  FixedClock clock;
  ledger::MemoryLog mixed;
  std::vector<std::string> b_submission;
  RewriteInputs(v6, 0, 5, &mixed, 3, &b_submission);
  ASSERT_FALSE(b_submission.empty());
  {
    auto service = ops::Service::Open(mixed, clock);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    ops::IntakeOptions options;
    options.actor = "test";
    ASSERT_TRUE((*service)->Record(b_submission, options).ok());
  }
  std::vector<uint32_t> versions = DecisionVersions(mixed);
  ASSERT_FALSE(versions.empty());
  EXPECT_EQ(versions.front(), 5u);
  EXPECT_EQ(versions.back(), projections::kEngineVersion);
  auto mixed_report = replay::ReplayAndVerify(mixed);
  ASSERT_TRUE(mixed_report.ok()) << mixed_report.status().ToString();
  EXPECT_FALSE(mixed_report->divergence.has_value());
  // The new batch follows v6's rule: A waits, C keeps its quota.
  auto a = schema::DecodeEvent(mixed.Read(mixed.GetHead().sequence, 1)->front().bytes);
  const std::string last = schema::EventToJson(a->root());
  EXPECT_NE(last.find("Preempted at this instant"), std::string::npos) << last;

  // A batch of a version this build cannot decide as is refused, by replay and by the service.
  ledger::MemoryLog future;
  RewriteInputs(v6, projections::kEngineVersion + 1, projections::kEngineVersion, &future);
  auto refused = replay::ReplayAndVerify(future);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "engine v" + std::to_string(projections::kEngineVersion + 1)),
            std::string::npos)
      << refused.status().message();
  auto opened = ops::Service::Open(future, clock);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find(
                "sequenced by engine v" + std::to_string(projections::kEngineVersion + 1)),
            std::string::npos)
      << opened.status().message();
}

TEST(Replay, ExtraDecisionOfTheReplayedDeciderIsADivergenceAtTheNextInput) {
  // Remove the last decision of the first batch that has two or more, by rebuilding the ledger
  // without it: the replayed decider then makes one more decision than recorded.
  ledger::MemoryLog original;
  RecordScenario(ScenarioFromSeed(11, 20), original);
  auto events = original.Read(1, ledger::kReadEventsMax);
  std::optional<Sequence> drop;
  for (size_t i = 0; i + 1 < events->size(); ++i) {
    auto here = schema::DecodeEvent((*events)[i].bytes);
    auto next = schema::DecodeEvent((*events)[i + 1].bytes);
    if (schema::IsDecision(here->root().getBody().which()) &&
        !schema::IsDecision(next->root().getBody().which())) {
      drop = (*events)[i].sequence;
      break;
    }
  }
  ASSERT_TRUE(drop.has_value());
  ledger::MemoryLog edited;
  for (const auto& e : *events) {
    if (e.sequence == *drop) continue;
    ASSERT_TRUE(edited.Append(std::vector<std::string>{e.bytes}).ok());
  }
  // Whatever the read chunk: the fold finds this one, after every comparison before it.
  for (size_t chunk : {size_t{1}, size_t{3}, replay::kReplayReadChunk}) {
    replay::Replayer replayer(edited, replay::Genesis());
    replay::ReplayOptions options;
    options.read_chunk = chunk;
    auto report = replayer.Run(options);
    ASSERT_TRUE(report.ok());
    ASSERT_TRUE(report->divergence.has_value()) << "chunk " << chunk;
    EXPECT_EQ(report->divergence->sequence, *drop) << "chunk " << chunk;  // where it should be
    EXPECT_FALSE(report->divergence->replayed_json.empty());
    EXPECT_FALSE(report->divergence->recorded_type.empty());
  }
}

TEST(LedgerFile, RoundTripsAndRefusesAnEditedEvent) {
  ledger::MemoryLog log;
  RecordScenario(ScenarioFromSeed(5, 25), log);
  auto text = replay::ExportLedger(log);
  ASSERT_TRUE(text.ok());
  ledger::MemoryLog loaded;
  ASSERT_TRUE(replay::ImportLedger(*text, loaded).ok());
  EXPECT_EQ(loaded.GetHead().hash, log.GetHead().hash);
  // One hex digit of one event changed: refused.
  std::string edited = *text;
  const size_t line = edited.find("\n5 ");
  ASSERT_NE(line, std::string::npos);
  const size_t digit = edited.find(' ', edited.find(' ', line + 1) + 1) + 40;
  edited[digit] = edited[digit] == '0' ? '1' : '0';
  ledger::MemoryLog refused;
  EXPECT_FALSE(replay::ImportLedger(edited, refused).ok());
}

TEST(Explain, ReservedWorkloadNamesTheChecksItWaitsForAndAdmittedCitesTheirReports) {
  // The golden ledger of tests/scenarios/15-admission-checks.yaml: ml/train is reserved, its
  // image-scan check reports Ready, then its budget check, and it is admitted.
  ledger::MemoryLog log;
  ASSERT_TRUE(replay::ImportLedger(ReadFile(GOLDEN_DIR "/admission-checks.ledger"), log).ok());
  std::optional<replay::Explanation> reserved, admitted;
  for (Sequence at = 1; at <= log.GetHead().sequence; ++at) {
    auto x = replay::Explain(log, "ml", "train", at);
    if (!x.ok()) continue;  // not submitted yet
    if (x->now.phase == "QuotaReserved" && !reserved) reserved = *x;
    if (x->now.phase == "Admitted" && !admitted) admitted = *x;
  }
  ASSERT_TRUE(reserved.has_value());
  EXPECT_NE(reserved->now.blocked_by.find("waiting for admission checks"), std::string::npos)
      << reserved->now.blocked_by;
  EXPECT_NE(reserved->now.blocked_by.find("budget Pending since"), std::string::npos)
      << reserved->now.blocked_by;
  EXPECT_EQ(reserved->now.checks.size(), 2u);
  ASSERT_TRUE(admitted.has_value());
  std::vector<uint64_t> reports;
  for (const replay::HistoryEntry& e : admitted->history) {
    if (e.type == "checkStateReported") reports.push_back(e.sequence);
  }
  const replay::HistoryEntry& last = admitted->history.back();
  EXPECT_EQ(last.type, "admitted");
  ASSERT_EQ(last.check_versions.size(), 2u);
  for (uint64_t v : last.check_versions) {
    EXPECT_NE(std::find(reports.begin(), reports.end(), v), reports.end())
        << "check version " << v << " is not a report in the history";
  }
  EXPECT_NE(replay::ExplainHtml(*admitted).find("check image-scan: Ready"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Across processes.

TEST(ReplayProcess, DecisionStreamHashIsTheSameAcrossProcesses) {
  for (uint64_t seed : {1, 2, 3}) {
    TempDir dir;
    const std::string ledger_dir = dir.Sub("ledger");
    WriteRocksLedger(ScenarioFromSeed(seed, 40), ledger_dir);
    std::string in_process;
    {
      auto log = ledger::RocksDbLog::Open(ledger_dir);
      ASSERT_TRUE(log.ok());
      auto report = replay::ReplayAndVerify(**log);
      ASSERT_TRUE(report.ok());
      ASSERT_FALSE(report->divergence.has_value());
      in_process = schema::HashHex(report->decision_stream_hash);
    }
    std::vector<std::string> hashes;
    for (int i = 0; i < 2; ++i) {
      ProcessRun run = Admitctl({"--ledger", ledger_dir, "replay", "--verify", "-o", "json"});
      ASSERT_EQ(run.exit_code, 0) << run.all();
      auto json = ParseJson(run.out);
      ASSERT_FALSE(json.is_discarded()) << run.all();
      EXPECT_TRUE(json["ok"].get<bool>());
      hashes.push_back(json["decisionStreamSha256"].get<std::string>());
    }
    EXPECT_EQ(hashes[0], hashes[1]) << "seed " << seed;
    EXPECT_EQ(hashes[0], in_process) << "seed " << seed;
  }
}

// The steps of a crash run, as admitctl command lines (each idempotent: definitions that are
// already recorded are unchanged, submits carry the workload's name as key and an explicit uid,
// finishes are keyed by uid).
std::vector<std::vector<std::string>> CrashSteps(const std::string& ledger, const std::string& dir,
                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::string>> steps;
  {
    std::ofstream setup(dir + "/setup.yaml");
    setup << R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 6}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
)";
  }
  auto at = [](int i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "2026-11-29T10:%02d:%02dZ", i / 60, i % 60);
    return std::string(buf);
  };
  int t = 0;
  steps.push_back({"--ledger", ledger, "--at", at(t++), "apply", "-f", dir + "/setup.yaml"});
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    const std::string file = dir + "/wl-" + std::to_string(i) + ".yaml";
    std::ofstream out(file);
    const int count = 1 + static_cast<int>(rng() % 2);
    for (int k = 0; k < count; ++k) {
      const std::string name = "w" + std::to_string(i) + "-" + std::to_string(k);
      names.push_back(name);
      out << "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: " << name
          << ", namespace: default, uid: uid-" << name
          << "}\nspec:\n  queueName: lq\n  priority: " << rng() % 4
          << "\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n"
          << "        containers:\n        - name: c\n          image: busybox\n"
          << "          resources: {requests: {cpu: \"" << 1 + rng() % 3 << "\"}}\n";
    }
    out.close();
    steps.push_back({"--ledger", ledger, "--at", at(t++), "submit", "-f", file});
    if (i % 3 == 2) {
      steps.push_back({"--ledger", ledger, "--at", at(t++), "finish",
                       "default/" + names[rng() % names.size()]});
    }
  }
  return steps;
}

// Runs admitctl with args in a child; kills it with SIGKILL after kill_after_ms if it is still
// running. Returns true when it ran to completion with exit code 0.
bool RunOrKill(const std::vector<std::string>& args, int kill_after_ms, bool* killed) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    std::string path = ADMITCTL_PATH;
    argv.push_back(path.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  *killed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kill_after_ms);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (kill_after_ms >= 0 && std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      *killed = WIFSIGNALED(status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(ReplayProcess, KilledMidAppendAndRestartedMakesTheSameDecisions) {
  int kills = 0;
  for (uint64_t seed : {21, 22, 23}) {
    TempDir dir;
    const std::string clean = dir.Sub("clean"), crashed = dir.Sub("crashed");
    for (const auto& step : CrashSteps(clean, dir.path(), seed)) {
      bool killed = false;
      ASSERT_TRUE(RunOrKill(step, -1, &killed)) << "clean run failed at " << step[4];
    }
    std::mt19937_64 rng(seed * 7919);
    for (const auto& step : CrashSteps(crashed, dir.path(), seed)) {
      // Kill the first attempts at a random moment (0-40 ms: start-up, the fold, the append),
      // then let one run to completion; each rerun of a step that did land is a no-op.
      int attempts = 0;
      while (true) {
        bool killed = false;
        const int after_ms = attempts < 2 && rng() % 2 == 0 ? static_cast<int>(rng() % 40) : -1;
        ++attempts;
        if (RunOrKill(step, after_ms, &killed)) break;
        ASSERT_TRUE(killed) << "a step failed without being killed: " << step[4] << " "
                            << step.back();
        ++kills;
        ASSERT_LT(attempts, 10);
      }
    }
    // Same ledger, byte for byte: same head hash; and the same decisions on replay.
    ProcessRun a = Admitctl({"--ledger", clean, "verify", "-o", "json"});
    ProcessRun b = Admitctl({"--ledger", crashed, "verify", "-o", "json"});
    ASSERT_EQ(a.exit_code, 0) << a.all();
    ASSERT_EQ(b.exit_code, 0) << b.all();
    EXPECT_EQ(ParseJson(a.out)["headHash"], ParseJson(b.out)["headHash"]) << "seed " << seed;
    ProcessRun ra = Admitctl({"--ledger", clean, "replay", "--verify", "-o", "json"});
    ProcessRun rb = Admitctl({"--ledger", crashed, "replay", "--verify", "-o", "json"});
    ASSERT_EQ(ra.exit_code, 0) << ra.all();
    ASSERT_EQ(rb.exit_code, 0) << rb.all();
    EXPECT_EQ(ParseJson(ra.out)["decisionStreamSha256"], ParseJson(rb.out)["decisionStreamSha256"]);
    EXPECT_GT(ParseJson(ra.out)["decisionsCompared"].get<uint64_t>(), 0u);
  }
  // The test means something only if processes were actually killed.
  EXPECT_GT(kills, 0);
  std::printf("killed %d admitctl processes\n", kills);
}

TEST(ReplayProcess, ForgedDecisionWithAValidChainFailsReplayButNotVerify) {
  // A ledger rewritten from scratch with one decision changed has a valid hash chain: only
  // replay can tell that the decider would not have made that decision.
  ledger::MemoryLog original;
  RecordScenario(ScenarioFromSeed(14, 30), original);
  const std::vector<Sequence> decisions = DecisionSequences(original);
  ASSERT_FALSE(decisions.empty());
  const Sequence target = decisions[decisions.size() / 3];
  const std::string original_actor =
      schema::DecodeEvent(original.Read(target, 1)->front().bytes)->root().getActor().cStr();
  ASSERT_NE(original_actor, "forger");
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    auto events = original.Read(1, ledger::kReadEventsMax);
    for (const auto& e : *events) {
      std::string bytes = e.bytes;
      if (e.sequence == target) {
        auto decoded = schema::DecodeEvent(bytes);
        capnp::MallocMessageBuilder m;
        m.setRoot(decoded->root());
        m.getRoot<schema::Event>().setActor("forger");
        bytes = schema::EncodeEvent(m);
      }
      ASSERT_TRUE((*log)->Append(std::vector<std::string>{bytes}).ok());
    }
  }
  ProcessRun verify = Admitctl({"--ledger", ledger_dir, "verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.all();
  ProcessRun text = Admitctl({"--ledger", ledger_dir, "replay", "--verify"});
  EXPECT_EQ(text.exit_code, 1) << text.all();
  EXPECT_NE(text.all().find("MISMATCH at sequence " + std::to_string(target)), std::string::npos)
      << text.all();
  EXPECT_NE(text.all().find("first differing field: actor"), std::string::npos) << text.all();
  EXPECT_NE(text.all().find("--- recorded"), std::string::npos) << text.all();
  EXPECT_NE(text.all().find("--- replayed"), std::string::npos) << text.all();
  ProcessRun json = Admitctl({"--ledger", ledger_dir, "replay", "--verify", "-o", "json"});
  EXPECT_EQ(json.exit_code, 1) << json.all();
  auto parsed = ParseJson(json.out);
  ASSERT_FALSE(parsed.is_discarded()) << json.all();
  EXPECT_EQ(parsed["divergence"]["sequence"].get<Sequence>(), target);
  EXPECT_EQ(parsed["divergence"]["recorded"]["actor"], "forger");
  EXPECT_EQ(parsed["divergence"]["replayed"]["actor"], original_actor);
  // Comparing from after the forged decision, the rest still replays.
  ProcessRun after = Admitctl(
      {"--ledger", ledger_dir, "replay", "--verify", "--from", std::to_string(target + 1)});
  EXPECT_EQ(after.exit_code, 0) << after.all();
}

// Flips one byte of the stored value of `sequence` in a closed RocksDB ledger.
void FlipStoredByte(const std::string& dir, Sequence sequence, size_t offset) {
  RawLedgerDb raw = OpenRawLedgerDb(dir);
  rocksdb::DB* db = raw.db.get();
  std::string value;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), ledger::RocksDbLog::EventKey(sequence), &value).ok());
  ASSERT_LT(offset, value.size());
  value[offset] = static_cast<char>(value[offset] ^ 0x01);
  rocksdb::WriteOptions sync;
  sync.sync = true;
  ASSERT_TRUE(db->Put(sync, ledger::RocksDbLog::EventKey(sequence), value).ok());
}

TEST(ReplayTamper, VerifyNamesTheDecisionWhoseStoredByteWasEdited) {
  std::mt19937_64 rng(99);
  int checked = 0;
  for (int round = 0; round < 4; ++round) {
    TempDir dir;
    const std::string ledger_dir = dir.Sub("ledger");
    WriteRocksLedger(ScenarioFromSeed(100 + round, 60), ledger_dir);
    std::vector<Sequence> decisions;
    Sequence head = 0;
    size_t size = 0;
    Sequence target = 0;
    {
      auto log = ledger::RocksDbLog::Open(ledger_dir);
      ASSERT_TRUE(log.ok());
      head = (*log)->GetHead().sequence;
      decisions = DecisionSequences(**log);
      // A decision before the tail Open checks, so that verify (not Open) reports it.
      std::vector<Sequence> early;
      for (Sequence s : decisions) {
        if (s + ledger::kOpenTailCheckEvents < head) early.push_back(s);
      }
      if (early.empty()) continue;
      target = early[rng() % early.size()];
      size = (*log)->Read(target, 1)->front().bytes.size();
    }
    FlipStoredByte(ledger_dir, target, rng() % size);
    ProcessRun run = Admitctl({"--ledger", ledger_dir, "verify", "-o", "json"});
    EXPECT_EQ(run.exit_code, 1) << run.all();
    auto json = ParseJson(run.out);
    ASSERT_FALSE(json.is_discarded()) << run.all();
    EXPECT_FALSE(json["ok"].get<bool>());
    EXPECT_EQ(json["badSequence"].get<Sequence>(), target) << run.all();
    // (replay --verify may or may not notice: it compares decisions with the recorded
    // sequence and prevHash, and an edit of the prevHash bytes is the chain's business.)
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(ReplayTamper, OpenNamesAnEditedDecisionInTheTail) {
  TempDir dir;
  const std::string ledger_dir = dir.Sub("ledger");
  WriteRocksLedger(ScenarioFromSeed(7, 30), ledger_dir);
  Sequence target = 0;
  {
    auto log = ledger::RocksDbLog::Open(ledger_dir);
    ASSERT_TRUE(log.ok());
    const auto decisions = DecisionSequences(**log);
    ASSERT_FALSE(decisions.empty());
    target = decisions.back();
  }
  FlipStoredByte(ledger_dir, target, 60);
  ProcessRun run = Admitctl({"--ledger", ledger_dir, "verify"});
  EXPECT_EQ(run.exit_code, 1) << run.all();
  EXPECT_NE(run.all().find("sequence " + std::to_string(target)), std::string::npos) << run.all();
}

}  // namespace
}  // namespace admission::testing
