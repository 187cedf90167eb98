// Scenario tests: Kueue YAML in, expected workload and queue states out. Each file in
// tests/scenarios/*.yaml is one test; see tests/scenarios/README.md for the format.
//
// Every scenario runs through the real intake path (Service: stamping, idempotency, decider,
// atomic append) on an in-memory ledger, then is replayed from that ledger into a fresh
// decider, which must reach the same state (a restart changes nothing), and snapshotted at the
// end of every append, each snapshot continuing exactly as the straight fold.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "ledger/memory_log.h"
#include "ledger/verify.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/quantity.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "tests/property/snapshot_check.h"
#include "tests/scenarios/steps.h"

namespace admission::testing {
namespace {

// The scenario files: tests/scenarios/*.yaml, or those of the directory $SCENARIO_DIR names
// (to try scenarios of another checkout with this build's decider).
std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  const char* other = std::getenv("SCENARIO_DIR");
  const std::string dir = other != nullptr && *other != '\0' ? other : SCENARIO_DIR;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class Scenario : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto service = ops::Service::Open(log_, clock_);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(*service);
  }

  // A key the harness does not know is a failure, not a check that silently never runs.
  static void ExpectKnownKeys(const YAML::Node& node, std::initializer_list<const char*> known,
                              const std::string& where) {
    if (!node.IsMap()) {
      ADD_FAILURE() << where << ": expected a map";
      return;
    }
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      bool found = false;
      for (const char* k : known) found = found || key == k;
      EXPECT_TRUE(found) << where << ": unknown key '" << key << "'";
    }
  }

  // Per pod set its placement as "value,value=count; ...": each domain's values at the
  // assignment's levels, the domains in the recorded order; "" for none.
  static void ExpectTopology(const projections::WorkloadState& wl, const YAML::Node& want,
                             const std::string& ctx) {
    for (const auto& ps : want) {
      std::string got = "(no such pod set)";
      for (const auto& a : wl.admission.pod_sets) {
        if (a.name != ps.first.as<std::string>()) continue;
        got.clear();
        if (!a.topology) continue;
        for (const auto& d : a.topology->domains) {
          if (!got.empty()) got += "; ";
          for (size_t i = 0; i < d.values.size(); ++i) got += (i ? "," : "") + d.values[i];
          got += "=" + std::to_string(d.count);
        }
      }
      EXPECT_EQ(got, ps.second.as<std::string>()) << ctx << " podSet " << ps.first.as<std::string>();
    }
  }

  void CheckWorkload(const std::string& key, const YAML::Node& want, const std::string& where) {
    const auto& workloads = service_->engine().workloads();
    auto it = workloads.find(key);
    if (want["retired"]) {  // left the live state by its retention (the ledger keeps it)
      ExpectKnownKeys(want, {"retired"}, where + ": " + key);
      EXPECT_EQ(it == workloads.end(), want["retired"].as<bool>()) << where << ": " << key;
      return;
    }
    ASSERT_NE(it, workloads.end()) << where << ": no workload " << key;
    const projections::WorkloadState& wl = it->second;
    const auto& engine = service_->engine();
    const std::string ctx = where + ": " + key;
    ExpectKnownKeys(want,
                    {"phase", "clusterQueue", "reason", "message", "flavors", "counts",
                     "topology", "preempted", "preemptedReason", "checks", "token", "generation",
                     "requeues", "priority"},
                    ctx);
    if (want["phase"]) {
      EXPECT_EQ(projections::PhaseName(wl.phase), want["phase"].as<std::string>())
          << ctx << " (pending reason: " << wl.pending_reason << ": " << wl.pending_message << ")";
    }
    if (want["clusterQueue"]) {
      EXPECT_EQ(wl.cluster_queue, want["clusterQueue"].as<std::string>()) << ctx;
    }
    if (want["reason"]) {
      EXPECT_EQ(wl.pending_reason, want["reason"].as<std::string>()) << ctx << ": " << wl.pending_message;
    }
    if (want["message"]) {
      std::string text = wl.pending_message;
      for (const projections::Condition& c : wl.conditions) text += " | " + c.message;
      EXPECT_NE(text.find(want["message"].as<std::string>()), std::string::npos)
          << ctx << ": message '" << want["message"].as<std::string>() << "' not in: " << text;
    }
    if (want["flavors"]) {
      for (const auto& ps : want["flavors"]) {
        const std::string ps_name = ps.first.as<std::string>();
        const projections::PodSetAssignment* psa = nullptr;
        for (const auto& a : wl.admission.pod_sets) {
          if (a.name == ps_name) psa = &a;
        }
        ASSERT_NE(psa, nullptr) << ctx << ": no assignment for podSet " << ps_name;
        for (const auto& rf : ps.second) {
          auto rid = engine.resource_names().Find(rf.first.as<std::string>());
          ASSERT_TRUE(rid.has_value()) << ctx;
          auto f = psa->flavors.find(*rid);
          ASSERT_NE(f, psa->flavors.end()) << ctx << ": " << rf.first.as<std::string>() << " unassigned";
          EXPECT_EQ(engine.flavor_names().Name(f->second), rf.second.as<std::string>())
              << ctx << " podSet " << ps_name << " resource " << rf.first.as<std::string>();
        }
      }
    }
    if (want["topology"]) ExpectTopology(wl, want["topology"], ctx);
    if (want["counts"]) {
      for (const auto& ps : want["counts"]) {
        bool found = false;
        for (const auto& a : wl.admission.pod_sets) {
          if (a.name == ps.first.as<std::string>()) {
            found = true;
            EXPECT_EQ(a.count, ps.second.as<int>()) << ctx << " podSet " << a.name;
          }
        }
        EXPECT_TRUE(found) << ctx << ": no podSet " << ps.first.as<std::string>();
      }
    }
    if (want["preempted"]) {
      const projections::Condition* c = wl.conditions.Find(projections::ConditionType::kPreempted);
      const bool preempted = c != nullptr && c->status;
      EXPECT_EQ(preempted, want["preempted"].as<bool>()) << ctx;
    }
    if (want["preemptedReason"]) {
      // Not fatal: the later steps' failures are reported too.
      const projections::Condition* c = wl.conditions.Find(projections::ConditionType::kPreempted);
      EXPECT_EQ(c != nullptr ? c->reason : std::string("(never preempted)"),
                want["preemptedReason"].as<std::string>())
          << ctx;
    }
    if (want["checks"]) {
      for (const auto& c : want["checks"]) {
        auto cs = wl.checks.find(c.first.as<std::string>());
        EXPECT_NE(cs, wl.checks.end()) << ctx << ": no check " << c.first.as<std::string>();
        if (cs == wl.checks.end()) continue;
        EXPECT_EQ(projections::CheckStateName(cs->second.state), c.second.as<std::string>())
            << ctx << " check " << cs->first;
      }
    }
    if (want["token"]) {
      EXPECT_EQ(!wl.fencing_token.empty(), want["token"].as<bool>()) << ctx;
    }
    if (want["generation"]) {
      EXPECT_EQ(wl.generation, want["generation"].as<uint64_t>()) << ctx;
    }
    if (want["requeues"]) {
      EXPECT_EQ(wl.requeue_count, want["requeues"].as<uint32_t>()) << ctx;
    }
    if (want["priority"]) {
      EXPECT_EQ(wl.priority, want["priority"].as<int32_t>()) << ctx;
    }
  }

  void CheckClusterQueue(const std::string& name, const YAML::Node& want, const std::string& where) {
    const auto& engine = service_->engine();
    auto it = engine.cluster_queues().find(name);
    ASSERT_NE(it, engine.cluster_queues().end()) << where << ": no ClusterQueue " << name;
    const std::string ctx = where + ": ClusterQueue " + name;
    ExpectKnownKeys(want,
                    {"pending", "reserving", "usage", "active", "flavorsReservation", "flavorsUsage"},
                    ctx);
    if (want["pending"]) {
      EXPECT_EQ(it->second.pending, want["pending"].as<size_t>()) << ctx;
    }
    if (want["reserving"]) {
      EXPECT_EQ(it->second.holders.size(), want["reserving"].as<size_t>()) << ctx;
    }
    if (want["usage"]) {
      for (const auto& u : want["usage"]) {
        const std::string fr = u.first.as<std::string>();  // flavor/resource
        const auto slash = fr.find('/');
        auto f = engine.flavor_names().Find(fr.substr(0, slash));
        auto r = engine.resource_names().Find(fr.substr(slash + 1));
        int64_t actual = 0;
        if (f && r) {
          auto v = it->second.usage.find(projections::MakeFr(*f, *r));
          if (v != it->second.usage.end()) actual = v->second;
        }
        auto expected = schema::ParseQuantityMilli(u.second.as<std::string>());
        ASSERT_TRUE(expected.ok()) << ctx;
        EXPECT_EQ(actual, *expected) << ctx << " usage of " << fr;
      }
    }
    if (want["active"]) {
      EXPECT_EQ(it->second.inactive_reason.empty(), want["active"].as<bool>())
          << ctx << ": " << it->second.inactive_reason;
    }
    // The read model's status (`get clusterqueues`, the bridge's ClusterQueue status), as
    // "flavor/resource": "total" or "total borrowed B"; unnamed flavor-resources are not checked.
    for (const char* field : {"flavorsReservation", "flavorsUsage"}) {
      if (!want[field]) continue;
      const ops::Json all = ops::ClusterQueuesJson(engine);
      const ops::Json* status = nullptr;
      for (const auto& item : all) {
        if (item["metadata"]["name"] == name) status = &item["status"];
      }
      ASSERT_NE(status, nullptr) << ctx << ": not in the read model";
      std::map<std::string, std::string> shown;
      for (const auto& flavor : (*status)[field]) {
        for (const auto& r : flavor["resources"]) {
          shown[flavor["name"].get<std::string>() + "/" + r["name"].get<std::string>()] =
              r["total"].get<std::string>() + " borrowed " + r["borrowed"].get<std::string>();
        }
      }
      for (const auto& u : want[field]) {
        std::string expected = u.second.as<std::string>();
        if (expected.find(" borrowed ") == std::string::npos) expected += " borrowed 0";
        EXPECT_EQ(shown[u.first.as<std::string>()], expected) << ctx << " " << field;
      }
    }
  }

  // A LocalQueue's counts as its read model shows them (`get lq`, the bridge's status).
  void CheckLocalQueue(const std::string& key, const YAML::Node& want, const std::string& where) {
    const std::string ctx = where + ": LocalQueue " + key;
    ExpectKnownKeys(want, {"pending", "reserving", "admitted"}, ctx);
    const auto slash = key.find('/');
    ASSERT_NE(slash, std::string::npos) << ctx << ": name it NAMESPACE/NAME";
    const ops::Json all = ops::LocalQueuesJson(service_->engine());
    const ops::Json* status = nullptr;
    for (const auto& lq : all) {
      if (lq["metadata"]["namespace"] == key.substr(0, slash) &&
          lq["metadata"]["name"] == key.substr(slash + 1)) {
        status = &lq["status"];
      }
    }
    ASSERT_NE(status, nullptr) << ctx << ": not in the read model";
    for (const auto& [field, json] : {std::pair<const char*, const char*>{"pending", "pendingWorkloads"},
                                      {"reserving", "reservingWorkloads"},
                                      {"admitted", "admittedWorkloads"}}) {
      if (want[field]) {
        EXPECT_EQ((*status)[json].get<size_t>(), want[field].as<size_t>()) << ctx << ": " << json;
      }
    }
  }

  void CheckExpect(const YAML::Node& expect, const std::vector<std::string>& decisions,
                   const std::string& where) {
    ExpectKnownKeys(expect,
                    {"workloads", "clusterQueues", "localQueues", "decisions", "notDecisions",
                     "noDecisions"},
                    where);
    if (expect["localQueues"]) {
      for (const auto& l : expect["localQueues"]) CheckLocalQueue(l.first.as<std::string>(), l.second, where);
    }
    if (expect["workloads"]) {
      for (const auto& w : expect["workloads"]) CheckWorkload(w.first.as<std::string>(), w.second, where);
    }
    if (expect["clusterQueues"]) {
      for (const auto& c : expect["clusterQueues"]) {
        CheckClusterQueue(c.first.as<std::string>(), c.second, where);
      }
    }
    if (expect["decisions"]) {
      std::string all;
      for (const auto& d : decisions) all += d + "\n";
      for (const auto& want : expect["decisions"]) {
        EXPECT_NE(all.find(want.as<std::string>()), std::string::npos)
            << where << ": decision '" << want.as<std::string>() << "' not among:\n" << all;
      }
    }
    for (const auto& unwanted : expect["notDecisions"] ? expect["notDecisions"] : YAML::Node()) {
      for (const auto& d : decisions) {
        EXPECT_EQ(d.find(unwanted.as<std::string>()), std::string::npos)
            << where << ": decision '" << d << "' (none may contain '"
            << unwanted.as<std::string>() << "')";
      }
    }
    if (expect["noDecisions"] && expect["noDecisions"].as<bool>()) {
      EXPECT_TRUE(decisions.empty()) << where << ": unexpected decisions";
    }
  }

  ledger::MemoryLog log_;
  StepClock clock_;
  std::unique_ptr<ops::Service> service_;
};

TEST_P(Scenario, ReachesExpectedStates) {
  auto steps = LoadScenarioSteps(GetParam());
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  StepRunner runner(GetParam(), log_, clock_, *service_);
  size_t index = 0;
  for (const auto& step : *steps) {
    ++index;
    const std::string where = StepWhere(GetParam(), step, index);
    auto outcome = runner.Run(step, index);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (step["noop"]) {
      EXPECT_EQ(outcome->last_input_unchanged, step["noop"].as<bool>()) << where << ": noop";
    }
    if (step["expect"]) CheckExpect(step["expect"], outcome->decisions, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The ledger verifies, and a restart from it reaches the same state.
  auto report = ledger::VerifyChain(log_, 1, schema::kGenesisHash, true);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->fault.has_value());
  auto replayed = ops::Service::Open(log_, clock_);
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(ops::WorkloadsJson((*replayed)->engine()).dump(),
            ops::WorkloadsJson(service_->engine()).dump());
  EXPECT_EQ(ops::ClusterQueuesJson((*replayed)->engine()).dump(),
            ops::ClusterQueuesJson(service_->engine()).dump());
  // A snapshot at the end of any append loads into a decider that continues exactly as the
  // straight fold (docs/replay.md, "Snapshots"): timers, checks, nodes, windows, fair sharing.
  EXPECT_EQ(CheckSnapshotsAt(log_, AppendEnds(log_)), "");
}

INSTANTIATE_TEST_SUITE_P(Kueue, Scenario, ::testing::ValuesIn(ScenarioFiles()), TestName);

// The cases of Kueue's own tables that the scenarios port (`kueue:`), counted and printed; each
// is listed in tests/scenarios/PORTS.md with its outcome, and the counts are those that
// docs/semantics.md ("Kueue's own tables, ported") states. A ported case
// matches Kueue when its scenario passes (Scenario.ReachesExpectedStates) and it names neither a
// deliberate difference (`differs`) nor a gap (`gap`: Kueue's behaviour not built); the two are
// counted apart, so a missing feature is never counted as a choice.
TEST(KueuePorts, AreCountedAndListedInTheSemantics) {
  std::map<std::string, size_t> by_test;
  size_t ported = 0, differing = 0, gaps = 0;
  std::ifstream doc_file(std::string(SCENARIO_DIR) + "/PORTS.md");
  ASSERT_TRUE(doc_file.good()) << "tests/scenarios/PORTS.md not found";
  const std::string doc((std::istreambuf_iterator<char>(doc_file)), {});
  std::ifstream semantics_file(std::string(SCENARIO_DIR) + "/../../docs/semantics.md");
  ASSERT_TRUE(semantics_file.good()) << "docs/semantics.md not found";
  std::string semantics;  // its words, each followed by one space (lines are wrapped)
  for (std::string word; semantics_file >> word;) semantics += word + " ";
  for (const std::string& file : ScenarioFiles()) {
    auto ports = LoadKueuePorts(file);
    ASSERT_TRUE(ports.ok()) << ports.status().ToString();
    for (const KueuePort& p : *ports) {
      ++ported;
      ++by_test[p.test];
      if (!p.differs.empty()) ++differing;
      if (!p.gap.empty()) ++gaps;
      EXPECT_NE(doc.find(p.test + " \"" + p.kueue_case + "\""), std::string::npos)
          << file << ": " << p.test << " \"" << p.kueue_case
          << "\" is not listed in tests/scenarios/PORTS.md";
    }
  }
  std::string tests;
  for (const auto& [test, n] : by_test) {
    tests += (tests.empty() ? "" : ", ") + test + " " + std::to_string(n);
  }
  char counts[1024];
  std::snprintf(counts, sizeof counts,
                "Kueue cases ported: %zu (%s); matching: %zu; deliberate differences: %zu; "
                "not built (gaps): %zu",
                ported, tests.c_str(), ported - differing - gaps, differing, gaps);
  std::printf("%s\n", counts);
  EXPECT_NE(semantics.find(std::string(counts) + "`"), std::string::npos)
      << "docs/semantics.md does not state the counts: " << counts;
  RecordProperty("kueue_cases_ported", static_cast<int>(ported));
  RecordProperty("kueue_cases_matching", static_cast<int>(ported - differing - gaps));
  RecordProperty("kueue_cases_gaps", static_cast<int>(gaps));
  EXPECT_GT(ported, 0u);
}

// The interpreter golden_tool shares (tests/golden/CMakeLists.txt runs it on the same file):
// a misspelt step key is refused, naming the key, the step and the file, before the step
// records anything.
TEST(ScenarioSteps, AnUnknownStepKeyIsRefusedNamingKeyStepAndFile) {
  const std::string file = std::string(SCENARIO_DIR) + "/refused/unknown-step-key.yaml";
  auto steps = LoadScenarioSteps(file);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ledger::MemoryLog log;
  StepClock clock;
  auto service = ops::Service::Open(log, clock);
  ASSERT_TRUE(service.ok());
  StepRunner runner(file, log, clock, **service);
  ASSERT_EQ(steps->size(), 2u);
  auto first = runner.Run((*steps)[0], 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const uint64_t head = log.GetHead().sequence;
  auto second = runner.Run((*steps)[1], 2);
  ASSERT_FALSE(second.ok()) << "the step with the key 'tikc' ran";
  EXPECT_EQ(second.status().message(),
            "unknown-step-key.yaml step 2 (misspelt tick): unknown key 'tikc' in the step "
            "(known: name, at, refused, apply, remove, submit, import, workloads, finish, delete, "
            "finish_by_uid, report, pods, revoke, activate, tick, node, maintenance, configure, expect, "
            "noop)");
  EXPECT_EQ(log.GetHead().sequence, head) << "the refused step recorded inputs";
}

TEST(ScenarioSteps, AnUnknownKeyInsideAStepIsRefused) {
  ledger::MemoryLog log;
  StepClock clock;
  auto service = ops::Service::Open(log, clock);
  ASSERT_TRUE(service.ok());
  StepRunner runner("inline.yaml", log, clock, **service);
  auto outcome = runner.Run(YAML::Load("{configure: {fairSharing: true, fairsharing: false}}"), 3);
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find(
                "inline.yaml step 3: unknown key 'fairsharing' in configure"),
            std::string::npos)
      << outcome.status().message();
  outcome =
      runner.Run(YAML::Load("{workloads: [{name: ns/a, podSets: [{name: main, cuont: 2}]}]}"), 4);
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find(
                "inline.yaml step 4: unknown key 'cuont' in workloads[0].podSets[0]"),
            std::string::npos)
      << outcome.status().message();
  EXPECT_EQ(log.GetHead().sequence, 0u);
}

}  // namespace
}  // namespace admission::testing

namespace admission::testing {
namespace {

// Every manifest in ../shared/kueue-examples/ is recorded through the real intake path: setup
// files with apply, Jobs with submit (on top of the quick-start setup they name).
TEST(KueueExamples, EveryManifestAppliesOrSubmitsCleanly) {
  const std::string dir = KUEUE_EXAMPLES_DIR;
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not found";
  size_t applied = 0, submitted = 0;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  };
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    ledger::MemoryLog log;
    StepClock clock;
    clock.now_ns = 1'800'000'000'000'000'000;
    auto service = ops::Service::Open(log, clock);
    ASSERT_TRUE(service.ok());
    ops::IntakeOptions options;
    options.actor = "operator";
    const std::string text = read(path);
    const bool is_job = text.find("kind: Job") != std::string::npos;
    if (is_job) {
      auto setup = ops::ParseApplyYaml(read(dir + "/getting-started-quick-start-setup.yaml"));
      ASSERT_TRUE(setup.ok()) << setup.status().ToString();
      std::vector<std::string> inputs;
      for (const auto& o : *setup) inputs.push_back(o.event);
      ASSERT_TRUE((*service)->Record(inputs, options).ok());
      ops::SubmitContext ctx;
      ctx.name_seed = "1";
      auto jobs = ops::ParseSubmitYaml(text, ctx);
      ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
      inputs.clear();
      for (const auto& o : *jobs) inputs.push_back(o.event);
      auto outcome = (*service)->Record(inputs, options);
      ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
      EXPECT_FALSE(outcome->decisions.empty()) << "a submitted Job got no decision";
      ++submitted;
    } else {
      auto objects = ops::ParseApplyYaml(text);
      ASSERT_TRUE(objects.ok()) << objects.status().ToString();
      std::vector<std::string> inputs;
      for (const auto& o : *objects) inputs.push_back(o.event);
      auto outcome = (*service)->Record(inputs, options);
      ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
      EXPECT_EQ(log.GetHead().sequence, inputs.size());
      ++applied;
    }
  }
  EXPECT_EQ(applied + submitted, files.size());
  EXPECT_GE(applied, 9u);
  EXPECT_GE(submitted, 4u);
}

}  // namespace
}  // namespace admission::testing
