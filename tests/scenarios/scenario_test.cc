// Scenario tests: Kueue YAML in, expected workload and queue states out. Each file in
// tests/scenarios/*.yaml is one test; see tests/scenarios/README.md for the format.
//
// Every scenario runs through the real intake path (Service: stamping, idempotency, decider,
// atomic append) on an in-memory ledger, then is replayed from that ledger into a fresh
// decider, which must reach the same state (a restart changes nothing), and snapshotted at the
// end of every append, each snapshot continuing exactly as the straight fold.

#include <filesystem>
#include <fstream>
#include <sstream>

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "ledger/memory_log.h"
#include "ledger/verify.h"
#include "ops/kueue_yaml.h"
#include "schema/quantity.h"
#include "ops/render.h"
#include "ops/service.h"
#include "schema/time_format.h"
#include "schema/event_codec.h"
#include "tests/property/snapshot_check.h"
#include "tests/scenarios/workload_yaml.h"

namespace admission::testing {
namespace {

class FixedClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return now_ns; }
  int64_t now_ns = 0;
};


std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(SCENARIO_DIR)) {
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

  // Records the inputs of one step; returns the decisions' one-line descriptions.
  std::vector<std::string> Record(const std::vector<std::string>& inputs, const std::string& actor) {
    ops::IntakeOptions options;
    options.at_ns = clock_.now_ns;
    options.actor = actor;
    const uint64_t head_before = log_.GetHead().sequence;
    auto outcome = service_->Record(inputs, options);
    if (!expect_refused_.empty()) {
      EXPECT_FALSE(outcome.ok()) << "expected a refusal containing '" << expect_refused_ << "'";
      if (!outcome.ok()) {
        EXPECT_NE(outcome.status().message().find(expect_refused_), std::string::npos)
            << outcome.status().ToString();
      }
      EXPECT_EQ(log_.GetHead().sequence, head_before) << "a refused input wrote events";
      return {};
    }
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (outcome.ok()) {
      last_noop_ = !outcome->unchanged.empty() && outcome->unchanged.back();
    }
    std::vector<std::string> described;
    if (!outcome.ok()) return described;
    for (const std::string& bytes : outcome->decisions) {
      auto d = schema::DecodeEvent(bytes);
      described.push_back(schema::BodyName(d->root()) + " " + ops::DescribeDecision(d->root()));
    }
    return described;
  }

  std::vector<std::string> RunStep(const YAML::Node& step, size_t index) {
    // Before any of the step's inputs is recorded: a refusal of any of them is checked.
    expect_refused_ = step["refused"] ? step["refused"].as<std::string>() : "";
    if (step["at"]) {
      auto at = ParseRfc3339(step["at"].as<std::string>());
      EXPECT_TRUE(at.ok()) << "step " << index << ": " << at.status().ToString();
      clock_.now_ns = *at;
    } else {
      clock_.now_ns += 1'000'000'000;  // one second per step unless told
    }
    std::vector<std::string> decisions;
    auto add = [&](std::vector<std::string> d) { decisions.insert(decisions.end(), d.begin(), d.end()); };
    if (step["apply"]) {
      auto objects = ops::ParseApplyYaml(step["apply"].as<std::string>());
      EXPECT_TRUE(objects.ok()) << "step " << index << ": " << objects.status().ToString();
      if (objects.ok()) {
        std::vector<std::string> inputs;
        for (const auto& o : *objects) inputs.push_back(o.event);
        add(Record(inputs, "operator"));
      }
    }
    for (const char* verb : {"submit", "import", "workloads"}) {
      if (!step[verb]) continue;
      const bool compact = std::string(verb) == "workloads";
      const std::string text = compact ? WorkloadYaml(step[verb]) : step[verb].as<std::string>();
      if (compact) verb = "submit";
      ops::SubmitContext ctx;
      ctx.name_seed = std::to_string(log_.GetHead().sequence);
      auto objects = std::string(verb) == "submit" ? ops::ParseSubmitYaml(text, ctx)
                                                   : ops::ParseImportYaml(text, ctx);
      EXPECT_TRUE(objects.ok()) << "step " << index << ": " << objects.status().ToString();
      if (!objects.ok()) continue;
      std::vector<std::string> inputs;
      for (const auto& o : *objects) {
        auto decoded = schema::DecodeEvent(o.event);
        capnp::MallocMessageBuilder message;
        message.setRoot(decoded->root());
        message.getRoot<schema::Event>().setIdempotencyKey(std::string(verb) + "/" + o.ns + "/" + o.name);
        inputs.push_back(schema::EncodeEvent(message));
      }
      add(Record(inputs, "submitter"));
    }
    for (const char* verb : {"finish", "delete", "finish_by_uid"}) {
      if (!step[verb]) continue;
      std::vector<std::string> names;
      if (step[verb].IsSequence()) {
        for (const auto& n : step[verb]) names.push_back(n.as<std::string>());
      } else {
        names.push_back(step[verb].as<std::string>());
      }
      std::vector<std::string> inputs;
      for (const std::string& key : names) {
        auto it = service_->engine().workloads().find(key);
        EXPECT_NE(it, service_->engine().workloads().end()) << "step " << index << ": no " << key;
        if (it == service_->engine().workloads().end()) continue;
        capnp::MallocMessageBuilder message;
        auto event = message.initRoot<schema::Event>();
        const bool delete_it = std::string(verb) == "delete";
        auto ref = delete_it ? event.initBody().initWorkloadDeleted().initWorkload()
                             : event.initBody().initWorkloadFinished().initWorkload();
        ref.setNamespace(it->second.ns);
        if (std::string(verb) != "finish_by_uid") ref.setName(it->second.name);  // else uid alone
        ref.setUid(it->second.uid);
        inputs.push_back(schema::EncodeEvent(message));
      }
      if (!inputs.empty()) add(Record(inputs, "runtime"));
    }
    auto workload = [&](const std::string& key) -> const projections::WorkloadState* {
      auto it = service_->engine().workloads().find(key);
      EXPECT_NE(it, service_->engine().workloads().end()) << "step " << index << ": no " << key;
      return it == service_->engine().workloads().end() ? nullptr : &it->second;
    };
    auto set_ref = [](schema::WorkloadRef::Builder ref, const projections::WorkloadState& wl) {
      ref.setNamespace(wl.ns);
      ref.setName(wl.name);
      ref.setUid(wl.uid);
    };
    if (const auto& r = step["report"]) {
      const projections::WorkloadState* wl = workload(r["workload"].as<std::string>());
      if (wl != nullptr) {
        capnp::MallocMessageBuilder m;
        auto rep = m.initRoot<schema::Event>().initBody().initCheckStateReported();
        set_ref(rep.initWorkload(), *wl);
        rep.setCheck(r["check"].as<std::string>());
        const std::string gen = r["generation"] ? r["generation"].as<std::string>() : "current";
        rep.setGeneration(gen == "current" ? wl->generation : std::stoull(gen));
        const std::string state = r["state"].as<std::string>();
        rep.setState(state == "Ready"      ? schema::CheckState::READY
                     : state == "Retry"    ? schema::CheckState::RETRY
                     : state == "Rejected" ? schema::CheckState::REJECTED
                                           : schema::CheckState::PENDING);
        if (r["message"]) rep.setMessage(r["message"].as<std::string>());
        if (r["requeueAfter"]) rep.setRequeueAfterNs(*schema::ParseDurationNs(r["requeueAfter"].as<std::string>()));
        add(Record({schema::EncodeEvent(m)}, r["as"] ? r["as"].as<std::string>() : "nobody"));
      }
    }
    if (const auto& p = step["pods"]) {
      const projections::WorkloadState* wl = workload(p["workload"].as<std::string>());
      if (wl != nullptr) {
        capnp::MallocMessageBuilder m;
        auto rep = m.initRoot<schema::Event>().initBody().initPodsReported();
        set_ref(rep.initWorkload(), *wl);
        const std::string token = p["token"] ? p["token"].as<std::string>() : "current";
        rep.setFencingToken(token == "current" ? (wl->fencing_token.empty()
                                                      ? wl->uid + "/" + std::to_string(wl->generation)
                                                      : wl->fencing_token)
                                               : token);
        const std::string what = p["report"].as<std::string>();
        rep.setReport(what == "released"     ? schema::PodsReport::RELEASED
                      : what == "ready"      ? schema::PodsReport::READY
                      : what == "terminated" ? schema::PodsReport::TERMINATED
                                             : schema::PodsReport::FINISHED);
        add(Record({schema::EncodeEvent(m)}, "pod-runtime"));
      }
    }
    if (const auto& r = step["revoke"]) {
      capnp::MallocMessageBuilder m;
      auto rev = m.initRoot<schema::Event>().initBody().initRevocationRequested();
      if (r["workload"]) {
        const projections::WorkloadState* wl = workload(r["workload"].as<std::string>());
        if (wl != nullptr) set_ref(rev.getTarget().initWorkload(), *wl);
      } else if (r["check"]) {
        rev.getTarget().setCheck(r["check"].as<std::string>());
      } else {
        rev.getTarget().setFlavor(r["flavor"].as<std::string>());
      }
      rev.setReason(r["reason"] ? r["reason"].as<std::string>() : "test");
      if (r["drain"] && r["drain"].as<bool>()) rev.setPodSetAction(schema::PodSetAction::DRAIN);
      if (r["drainDeadline"]) {
        rev.setDrainDeadlineNs(clock_.now_ns + *schema::ParseDurationNs(r["drainDeadline"].as<std::string>()));
      }
      add(Record({schema::EncodeEvent(m)}, r["as"] ? r["as"].as<std::string>() : "security"));
    }
    if (step["tick"]) {
      capnp::MallocMessageBuilder m;
      m.initRoot<schema::Event>().initBody().initClockAdvanced().setToNs(clock_.now_ns);
      add(Record({schema::EncodeEvent(m)}, "clock"));
    }
    if (const auto& n = step["node"]) {
      capnp::MallocMessageBuilder m;
      auto body = m.initRoot<schema::Event>().initBody();
      const std::string action = n["action"].as<std::string>();
      auto node = action == "capacity" ? body.initNodeCapacityChanged()
                  : action == "fail"   ? body.initNodeFailed()
                                       : body.initNodeRecovered();
      node.setNode(n["node"].as<std::string>());
      if (n["flavor"]) node.setFlavor(n["flavor"].as<std::string>());
      if (n["capacity"]) {
        auto list = node.initCapacity(static_cast<unsigned>(n["capacity"].size()));
        unsigned i = 0;
        for (const auto& c : n["capacity"]) {
          list[i].setName(c.first.as<std::string>());
          list[i].setMilli(*schema::ParseQuantityMilli(c.second.as<std::string>()));
          ++i;
        }
      }
      add(Record({schema::EncodeEvent(m)}, "node-monitor"));
    }
    if (const auto& w = step["maintenance"]) {
      capnp::MallocMessageBuilder m;
      auto win = m.initRoot<schema::Event>().initBody().initMaintenanceWindowDefined();
      win.setName(w["name"].as<std::string>());
      win.setFlavor(w["flavor"].as<std::string>());
      win.setStartNs(*ParseRfc3339(w["from"].as<std::string>()));
      win.setEndNs(*ParseRfc3339(w["to"].as<std::string>()));
      add(Record({schema::EncodeEvent(m)}, "operator"));
    }
    if (const auto& c = step["configure"]) {
      capnp::MallocMessageBuilder m;
      auto cfg = m.initRoot<schema::Event>().initBody().initEngineConfigDefined();
      if (c["podsReadyTimeout"]) {
        cfg.setWaitForPodsReadyEnabled(true);
        cfg.setPodsReadyTimeoutNs(*schema::ParseDurationNs(c["podsReadyTimeout"].as<std::string>()));
      }
      if (c["backoffBaseSeconds"]) cfg.setBackoffBaseSeconds(c["backoffBaseSeconds"].as<int>());
      if (c["backoffMaxSeconds"]) cfg.setBackoffMaxSeconds(c["backoffMaxSeconds"].as<int>());
      if (c["backoffLimitCount"]) cfg.setBackoffLimitCount(c["backoffLimitCount"].as<int>());
      if (c["agingStep"]) cfg.setAgingStepNs(*schema::ParseDurationNs(c["agingStep"].as<std::string>()));
      if (c["agingMax"]) cfg.setAgingPriorityMax(c["agingMax"].as<int>());
      if (c["fairSharing"]) cfg.setFairSharingEnabled(c["fairSharing"].as<bool>());
      if (c["retainFinished"]) cfg.setRetainFinishedNs(*schema::ParseRetentionNs(c["retainFinished"].as<std::string>()));
      if (c["retainDeactivated"]) cfg.setRetainDeactivatedNs(*schema::ParseRetentionNs(c["retainDeactivated"].as<std::string>()));
      add(Record({schema::EncodeEvent(m)}, "operator"));
    }
    if (step["noop"]) {
      EXPECT_EQ(last_noop_, step["noop"].as<bool>()) << "step " << index;
    }
    expect_refused_.clear();
    return decisions;
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
                     "preempted", "preemptedReason", "checks", "token", "generation",
                     "requeues"},
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
      const projections::Condition* c = wl.conditions.Find(projections::ConditionType::kPreempted);
      ASSERT_NE(c, nullptr) << ctx;
      EXPECT_EQ(c->reason, want["preemptedReason"].as<std::string>()) << ctx;
    }
    if (want["checks"]) {
      for (const auto& c : want["checks"]) {
        auto cs = wl.checks.find(c.first.as<std::string>());
        ASSERT_NE(cs, wl.checks.end()) << ctx << ": no check " << c.first.as<std::string>();
        EXPECT_EQ(cs->second.state, c.second.as<std::string>()) << ctx << " check " << cs->first;
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
  }

  void CheckClusterQueue(const std::string& name, const YAML::Node& want, const std::string& where) {
    const auto& engine = service_->engine();
    auto it = engine.cluster_queues().find(name);
    ASSERT_NE(it, engine.cluster_queues().end()) << where << ": no ClusterQueue " << name;
    const std::string ctx = where + ": ClusterQueue " + name;
    ExpectKnownKeys(want, {"pending", "reserving", "usage", "active"}, ctx);
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
  }

  void CheckExpect(const YAML::Node& expect, const std::vector<std::string>& decisions,
                   const std::string& where) {
    ExpectKnownKeys(expect, {"workloads", "clusterQueues", "decisions", "noDecisions"}, where);
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
    if (expect["noDecisions"] && expect["noDecisions"].as<bool>()) {
      EXPECT_TRUE(decisions.empty()) << where << ": unexpected decisions";
    }
  }

  ledger::MemoryLog log_;
  FixedClock clock_;
  std::unique_ptr<ops::Service> service_;
  std::string expect_refused_;
  bool last_noop_ = false;
};

TEST_P(Scenario, ReachesExpectedStates) {
  YAML::Node doc = YAML::LoadFile(GetParam());
  ASSERT_TRUE(doc["steps"]) << GetParam() << ": no steps";
  size_t index = 0;
  for (const auto& step : doc["steps"]) {
    ++index;
    const std::string where = std::filesystem::path(GetParam()).filename().string() + " step " +
                              std::to_string(index) +
                              (step["name"] ? " (" + step["name"].as<std::string>() + ")" : "");
    auto decisions = RunStep(step, index);
    if (step["expect"]) CheckExpect(step["expect"], decisions, where);
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
    FixedClock clock;
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
