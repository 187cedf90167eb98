// Properties of the decider over random configurations and workload streams (rapidcheck).
//
// - Quota is never over-committed at any level of the cohort tree.
// - Every admitted podSet's flavors satisfy its node selector and tolerate the flavor's taints.
// - The decisions for the same input stream are byte-identical across two runs, and across a
//   restart that folds the ledger written so far and carries on.

#include <map>
#include <set>

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "ledger/memory_log.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "projections/state_checks.h"

namespace admission::testing {
namespace {

class FixedClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return 0; }
};

constexpr const char* kFlavors[] = {"h100", "a100", "spot"};
constexpr const char* kResources[] = {"cpu", "nvidia.com/gpu"};

struct QueueSpec {
  int cohort = 0;                     // -1: none
  std::vector<int64_t> nominal;       // per flavor, for both resources (milli)
  int64_t borrowing_limit = -1;       // -1: none
  int64_t lending_limit = -1;
  int within = 0, reclaim = 0, borrow_within = 0;
  bool strict = false;
  int when_can_borrow = 0;
  int64_t fair_weight_milli = 1000;   // read under fair sharing
};

struct Config {
  bool checks = false;                // every ClusterQueue requires check "scan" (TTL 10m, Retry)
  bool spot_tainted = true;
  bool hierarchical = false;          // cohort 1's parent is cohort 0
  int64_t cohort0_quota = 0;          // cohort 0's own quota of h100 gpus
  std::vector<QueueSpec> queues;
  // Fair sharing (engine v16's fair preemption), with cohort 1's weight.
  bool fair_sharing = false;
  int64_t cohort1_weight_milli = 1000;
};

struct Step {
  int kind = 0;        // 0 submit, 1 finish, 2 delete (3..6 lifecycle, 7 node; see below)
  int queue = 0;
  int count = 1, min_count = 0;
  int64_t cpu = 1000, gpu = 0;
  int priority = 0;
  int selector = -1;   // -1 none, else flavor index required (by gpu.product label)
  bool tolerate_spot = false;
  int target = 0;      // finish/delete: index into submitted workloads
  bool batch_end = true;
  // Lifecycle streams (kinds 3..6): check reports, pod reports, revocations, time jumps.
  int check_state = 0;    // 0 Pending, 1 Ready, 2 Retry, 3 Rejected
  int generation_skew = 0;  // 0: current generation; else a stale one
  bool foreign = false;   // reported by someone who does not own the check
  int pods = 0;           // 0 released, 1 ready, 2 terminated, 3 finished, 4 failedToStart
  bool stale_token = false;
  int jump_minutes = 0;
};

rc::Gen<QueueSpec> GenQueue() {
  return rc::gen::build<QueueSpec>(
      rc::gen::set(&QueueSpec::cohort, rc::gen::inRange(-1, 2)),
      rc::gen::set(&QueueSpec::nominal,
                   rc::gen::container<std::vector<int64_t>>(
                       3, rc::gen::map(rc::gen::inRange(0, 9), [](int v) { return int64_t{v} * 1000; }))),
      rc::gen::set(&QueueSpec::borrowing_limit,
                   rc::gen::map(rc::gen::inRange(-1, 6), [](int v) { return v < 0 ? int64_t{-1} : int64_t{v} * 1000; })),
      rc::gen::set(&QueueSpec::lending_limit,
                   rc::gen::map(rc::gen::inRange(-1, 6), [](int v) { return v < 0 ? int64_t{-1} : int64_t{v} * 1000; })),
      rc::gen::set(&QueueSpec::within, rc::gen::inRange(0, 3)),
      rc::gen::set(&QueueSpec::reclaim, rc::gen::inRange(0, 3)),
      rc::gen::set(&QueueSpec::borrow_within, rc::gen::inRange(0, 2)),
      rc::gen::set(&QueueSpec::strict, rc::gen::arbitrary<bool>()),
      rc::gen::set(&QueueSpec::when_can_borrow, rc::gen::inRange(0, 2)),
      rc::gen::set(&QueueSpec::fair_weight_milli, rc::gen::element<int64_t>(0, 500, 1000, 1000, 3000)));
}

rc::Gen<Config> GenConfig() {
  return rc::gen::build<Config>(
      rc::gen::set(&Config::checks, rc::gen::arbitrary<bool>()),
      rc::gen::set(&Config::spot_tainted, rc::gen::arbitrary<bool>()),
      rc::gen::set(&Config::hierarchical, rc::gen::arbitrary<bool>()),
      rc::gen::set(&Config::cohort0_quota,
                   rc::gen::map(rc::gen::inRange(0, 5), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&Config::queues, rc::gen::container<std::vector<QueueSpec>>(
                                        static_cast<size_t>(*rc::gen::inRange(1, 5)), GenQueue())),
      rc::gen::set(&Config::fair_sharing, rc::gen::arbitrary<bool>()),
      rc::gen::set(&Config::cohort1_weight_milli, rc::gen::element<int64_t>(0, 1000, 2000)));
}

rc::Gen<Step> GenStep() {
  return rc::gen::build<Step>(
      rc::gen::set(&Step::kind, rc::gen::weightedElement<int>({{6, 0}, {3, 1}, {1, 2}})),
      rc::gen::set(&Step::queue, rc::gen::inRange(0, 4)),
      rc::gen::set(&Step::count, rc::gen::inRange(1, 5)),
      rc::gen::set(&Step::min_count, rc::gen::inRange(0, 3)),
      rc::gen::set(&Step::cpu, rc::gen::map(rc::gen::inRange(0, 5), [](int v) { return int64_t{v} * 500; })),
      rc::gen::set(&Step::gpu, rc::gen::map(rc::gen::inRange(0, 4), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&Step::priority, rc::gen::inRange(0, 4)),
      rc::gen::set(&Step::selector, rc::gen::inRange(-1, 3)),
      rc::gen::set(&Step::tolerate_spot, rc::gen::arbitrary<bool>()),
      rc::gen::set(&Step::target, rc::gen::inRange(0, 1000)),
      rc::gen::set(&Step::batch_end, rc::gen::weightedElement<bool>({{3, true}, {1, false}})));
}

rc::Gen<Step> GenLifecycleStep() {
  return rc::gen::build<Step>(
      rc::gen::set(&Step::kind, rc::gen::weightedElement<int>(
                                    {{5, 0}, {2, 1}, {1, 2}, {6, 3}, {4, 4}, {1, 5}, {2, 6}})),
      rc::gen::set(&Step::queue, rc::gen::inRange(0, 4)),
      rc::gen::set(&Step::count, rc::gen::inRange(1, 3)),
      rc::gen::set(&Step::cpu, rc::gen::map(rc::gen::inRange(0, 5), [](int v) { return int64_t{v} * 500; })),
      rc::gen::set(&Step::gpu, rc::gen::map(rc::gen::inRange(0, 4), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&Step::priority, rc::gen::inRange(0, 4)),
      rc::gen::set(&Step::target, rc::gen::inRange(0, 1000)),
      rc::gen::set(&Step::batch_end, rc::gen::weightedElement<bool>({{3, true}, {1, false}})),
      rc::gen::set(&Step::check_state, rc::gen::weightedElement<int>({{2, 0}, {6, 1}, {1, 2}, {1, 3}})),
      rc::gen::set(&Step::generation_skew, rc::gen::weightedElement<int>({{6, 0}, {1, 1}, {1, 2}})),
      rc::gen::set(&Step::foreign, rc::gen::weightedElement<bool>({{6, false}, {1, true}})),
      rc::gen::set(&Step::pods, rc::gen::inRange(0, 5)),
      rc::gen::set(&Step::stale_token, rc::gen::weightedElement<bool>({{5, false}, {1, true}})),
      rc::gen::set(&Step::jump_minutes, rc::gen::inRange(0, 30)));
}

std::string Encode(capnp::MallocMessageBuilder& m) { return schema::EncodeEvent(m); }

std::vector<std::string> ConfigInputs(const Config& config) {
  std::vector<std::string> out;
  for (int f = 0; f < 3; ++f) {
    capnp::MallocMessageBuilder m;
    auto def = m.initRoot<schema::Event>().initBody().initFlavorDefined();
    def.setName(kFlavors[f]);
    auto labels = def.initNodeLabels(1);
    labels[0].setKey("gpu.product");
    labels[0].setValue(kFlavors[f]);
    if (f == 2 && config.spot_tainted) {
      auto taints = def.initNodeTaints(1);
      taints[0].setKey("spot");
      taints[0].setValue("true");
      taints[0].setEffect("NoSchedule");
    }
    out.push_back(Encode(m));
  }
  for (int c = 0; c < 2; ++c) {
    capnp::MallocMessageBuilder m;
    auto def = m.initRoot<schema::Event>().initBody().initCohortDefined();
    def.setName("cohort-" + std::to_string(c));
    if (c == 1 && config.hierarchical) def.setParentName("cohort-0");
    if (c == 1) def.setFairSharingWeightMilli(config.cohort1_weight_milli);
    if (c == 0 && config.cohort0_quota > 0) {
      auto group = def.initResourceGroups(1)[0];
      auto covered = group.initCoveredResources(1);
      covered.set(0, "nvidia.com/gpu");
      auto flavor = group.initFlavors(1)[0];
      flavor.setName("h100");
      auto r = flavor.initResources(1)[0];
      r.setName("nvidia.com/gpu");
      r.setNominalQuotaMilli(config.cohort0_quota);
    }
    out.push_back(Encode(m));
  }
  if (config.checks) {
    capnp::MallocMessageBuilder m;
    auto def = m.initRoot<schema::Event>().initBody().initAdmissionCheckDefined();
    def.setName("scan");
    def.setControllerName("scanner");
    def.setPendingTtlNs(int64_t{10} * 60 * 1'000'000'000);
    def.setRetryLimit(2);
    def.setBackoffBaseNs(int64_t{60} * 1'000'000'000);
    def.setBackoffMaxNs(int64_t{600} * 1'000'000'000);
    out.push_back(Encode(m));
  }
  for (size_t q = 0; q < config.queues.size(); ++q) {
    const QueueSpec& spec = config.queues[q];
    capnp::MallocMessageBuilder m;
    auto def = m.initRoot<schema::Event>().initBody().initClusterQueueDefined();
    if (config.checks) def.initAdmissionChecks(1).set(0, "scan");
    def.setName("cq-" + std::to_string(q));
    if (spec.cohort >= 0) def.setCohortName("cohort-" + std::to_string(spec.cohort));
    def.initNamespaceSelector().setMatchesAll(true);
    def.setFairSharingWeightMilli(spec.fair_weight_milli);
    def.setQueueingStrategy(spec.strict ? schema::QueueingStrategy::STRICT_FIFO
                                        : schema::QueueingStrategy::BEST_EFFORT_FIFO);
    auto p = def.initPreemption();
    p.setWithinClusterQueue(static_cast<schema::WithinClusterQueuePolicy>(spec.within));
    p.setReclaimWithinCohort(static_cast<schema::ReclaimWithinCohortPolicy>(spec.reclaim));
    p.setBorrowWithinCohort(static_cast<schema::ReclaimWithinCohortPolicy>(spec.borrow_within));
    def.initFlavorFungibility().setWhenCanBorrow(spec.when_can_borrow == 0
                                                     ? schema::FungibilityAction::BORROW
                                                     : schema::FungibilityAction::TRY_NEXT_FLAVOR);
    auto group = def.initResourceGroups(1)[0];
    auto covered = group.initCoveredResources(2);
    covered.set(0, kResources[0]);
    covered.set(1, kResources[1]);
    auto flavors = group.initFlavors(3);
    for (int f = 0; f < 3; ++f) {
      flavors[f].setName(kFlavors[f]);
      auto resources = flavors[f].initResources(2);
      for (int r = 0; r < 2; ++r) {
        resources[r].setName(kResources[r]);
        resources[r].setNominalQuotaMilli(spec.nominal[f] * (r == 0 ? 2 : 1));
        if (spec.borrowing_limit >= 0 && spec.cohort >= 0) {
          resources[r].setHasBorrowingLimit(true);
          resources[r].setBorrowingLimitMilli(spec.borrowing_limit);
        }
        if (spec.lending_limit >= 0 && spec.cohort >= 0) {
          resources[r].setHasLendingLimit(true);
          resources[r].setLendingLimitMilli(std::min(spec.lending_limit, spec.nominal[f] * (r == 0 ? 2 : 1)));
        }
      }
    }
    out.push_back(Encode(m));
    capnp::MallocMessageBuilder lm;
    auto lq = lm.initRoot<schema::Event>().initBody().initLocalQueueDefined();
    lq.setNamespace("ns");
    lq.setName("lq-" + std::to_string(q));
    lq.setClusterQueue("cq-" + std::to_string(q));
    out.push_back(Encode(lm));
  }
  if (config.fair_sharing) {
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initEngineConfigDefined().setFairSharingEnabled(true);
    out.push_back(Encode(m));
  }
  return out;
}

// Drives a Service through the stream; returns the stored bytes of every decision.
class Runner {
 public:
  Runner(ledger::MemoryLog& log, size_t queues) : log_(log), queues_(queues) {
    service_ = std::move(*ops::Service::Open(log_, clock_));
  }
  void Reopen() {
    service_ = std::move(*ops::Service::Open(log_, clock_));
    const Status held = service_->engine().CheckInvariants();
    if (!held.ok()) RC_FAIL("quota invariant after reopening: " + held.message());
  }

  // Records inputs; a refusal (stale report, foreign identity, stale token) is allowed only
  // when `may_refuse`, and then nothing may have been written.
  void Record(const std::vector<std::string>& inputs, bool may_refuse = false) {
    if (inputs.empty()) return;
    ops::IntakeOptions options;
    options.at_ns = now_ += 1'000'000'000;
    options.actor = actor_;
    const uint64_t head = log_.GetHead().sequence;
    auto outcome = service_->Record(inputs, options);
    // The decider's own quota invariants hold after every append, refused or recorded.
    const Status held = service_->engine().CheckInvariants();
    if (!held.ok()) RC_FAIL("quota invariant: " + held.message());
    if (!outcome.ok()) {
      RC_ASSERT(may_refuse);
      RC_ASSERT(log_.GetHead().sequence == head);
      return;
    }
    for (auto& d : outcome->decisions) decisions_.push_back(d);
  }
  void SetActor(const std::string& actor) { actor_ = actor; }
  void Jump(int minutes) { now_ += int64_t{minutes} * 60 * 1'000'000'000; }

  // A lifecycle input about an existing workload, or "" if there is none.
  std::string LifecycleInput(const Step& step) {
    if (submitted_.empty()) return "";
    const std::string& name = submitted_[static_cast<size_t>(step.target) % submitted_.size()];
    const auto& workloads = service_->engine().workloads();
    auto it = workloads.find("ns/" + name);
    if (it == workloads.end()) return "";
    const projections::WorkloadState& wl = it->second;
    capnp::MallocMessageBuilder m;
    auto body = m.initRoot<schema::Event>().initBody();
    auto ref = [&](schema::WorkloadRef::Builder r) {
      r.setNamespace(wl.ns);
      r.setName(wl.name);
      r.setUid(wl.uid);
    };
    if (step.kind == 3) {
      auto r = body.initCheckStateReported();
      ref(r.initWorkload());
      r.setCheck("scan");
      r.setGeneration(wl.generation >= static_cast<uint64_t>(step.generation_skew)
                          ? wl.generation - static_cast<uint64_t>(step.generation_skew)
                          : 0);
      r.setState(static_cast<schema::CheckState>(step.check_state));
      r.setMessage("m" + std::to_string(step.check_state));
      // Engine v17: some reports carry podSetUpdates (the step's pods field picks which).
      if (step.pods % 2 == 0 && !wl.pod_sets.empty()) {
        auto u = r.initPodSetUpdates(1);
        u[0].setPodSet(wl.pod_sets[0].name);
        auto labels = u[0].initLabels(1);
        labels[0].setKey("pool");
        labels[0].setValue(step.pods == 0 ? "a" : "b");
      }
    } else if (step.kind == 4) {
      auto r = body.initPodsReported();
      ref(r.initWorkload());
      r.setReport(static_cast<schema::PodsReport>(step.pods));
      if (step.pods == 4) r.setMessage("cannot start");  // engine v18
      r.setFencingToken(step.stale_token ? wl.uid + "/0"
                                         : wl.uid + "/" + std::to_string(wl.generation));
    } else {
      auto r = body.initRevocationRequested();
      ref(r.getTarget().initWorkload());
      r.setReason("policy");
      r.setPodSetAction(schema::PodSetAction::DRAIN);
    }
    return Encode(m);
  }

  // Engine v19: a node event (kind 7). Four nodes, node-i of flavor kFlavors[i % 3]; `pods`
  // picks capacity (0, 1), fail (2, 3) or recover (4); `foreign` marks the inventory complete;
  // a failure names up to two workloads holding quota in the node's flavor.
  std::string NodeInput(const Step& step) {
    const int i = step.target % 4;
    const std::string flavor = kFlavors[i % 3];
    capnp::MallocMessageBuilder m;
    auto body = m.initRoot<schema::Event>().initBody();
    auto n = step.pods <= 1 ? body.initNodeCapacityChanged()
             : step.pods <= 3 ? body.initNodeFailed()
                              : body.initNodeRecovered();
    n.setNode("node-" + std::to_string(i));
    if (step.pods <= 1) {
      n.setFlavor(flavor);
      auto c = n.initCapacity(2);
      c[0].setName("cpu");
      c[0].setMilli(int64_t{2000} * step.count);
      c[1].setName("nvidia.com/gpu");
      c[1].setMilli(int64_t{1000} * (step.count + step.priority));
    }
    if (step.foreign) n.setInventoryComplete(true);
    if (step.pods == 2 || step.pods == 3) {
      std::vector<const projections::WorkloadState*> on_node;
      const auto f = service_->engine().flavor_names().Find(flavor);
      for (const auto& [key, wl] : service_->engine().workloads()) {
        if (on_node.size() == 2 || !f) break;
        if (wl.holder_index < 0) continue;
        for (const auto& [fr, v] : wl.admission.usage) {
          if (v > 0 && projections::FrFlavor(fr) == *f) {
            on_node.push_back(&wl);
            break;
          }
        }
      }
      auto refs = n.initWorkloads(static_cast<unsigned>(on_node.size()));
      for (size_t k = 0; k < on_node.size(); ++k) {
        refs[static_cast<unsigned>(k)].setNamespace(on_node[k]->ns);
        refs[static_cast<unsigned>(k)].setName(on_node[k]->name);
        refs[static_cast<unsigned>(k)].setUid(on_node[k]->uid);
      }
    }
    return Encode(m);
  }

  std::string StepInput(const Step& step, size_t index) {
    capnp::MallocMessageBuilder m;
    auto event = m.initRoot<schema::Event>();
    if (step.kind == 0 || submitted_.empty()) {
      auto wl = event.initBody().initWorkloadSubmitted().initWorkload();
      const std::string name = "w" + std::to_string(index);
      wl.setNamespace("ns");
      wl.setName(name);
      wl.setUid("uid-" + name);
      wl.setQueueName("lq-" + std::to_string(static_cast<size_t>(step.queue) % queues_));
      wl.setHasPriority(true);
      wl.setPriority(step.priority);
      auto ps = wl.initPodSets(1)[0];
      ps.setName("main");
      ps.setCount(step.count);
      if (step.min_count > 0 && step.min_count < step.count) ps.setMinCount(step.min_count);
      auto req = ps.initRequests(2);
      req[0].setName("cpu");
      req[0].setMilli(step.cpu);
      req[1].setName("nvidia.com/gpu");
      req[1].setMilli(step.gpu);
      if (step.selector >= 0) {
        auto sel = ps.initNodeSelector(1);
        sel[0].setKey("gpu.product");
        sel[0].setValue(kFlavors[step.selector]);
      }
      if (step.tolerate_spot) {
        auto tol = ps.initTolerations(1);
        tol[0].setKey("spot");
        tol[0].setOperator("Exists");
      }
      submitted_.push_back(name);
    } else {
      const std::string& name = submitted_[static_cast<size_t>(step.target) % submitted_.size()];
      auto ref = step.kind == 1 ? event.initBody().initWorkloadFinished().initWorkload()
                                : event.initBody().initWorkloadDeleted().initWorkload();
      ref.setNamespace("ns");
      ref.setName(name);
      ref.setUid("uid-" + name);
    }
    return Encode(m);
  }

  const projections::Engine& engine() const { return service_->engine(); }
  const std::vector<std::string>& decisions() const { return decisions_; }

 private:
  ledger::MemoryLog& log_;
  FixedClock clock_;
  std::unique_ptr<ops::Service> service_;
  size_t queues_;
  int64_t now_ = 1'800'000'000'000'000'000;
  std::vector<std::string> submitted_;
  std::vector<std::string> decisions_;
  std::string actor_ = "test";
};

// Runs the whole stream, optionally reopening (refolding the ledger) at `restart_at`.
std::vector<std::string> RunStream(const Config& config, const std::vector<Step>& steps,
                             std::optional<size_t> restart_at,
                             const std::function<void(const projections::Engine&)>& check) {
  ledger::MemoryLog log;
  Runner runner(log, config.queues.size());
  runner.Record(ConfigInputs(config));
  std::vector<std::string> pending;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (restart_at && *restart_at == i) runner.Reopen();
    pending.push_back(runner.StepInput(steps[i], i));
    if (steps[i].batch_end || i + 1 == steps.size()) {
      runner.Record(pending);
      pending.clear();
      if (check) check(runner.engine());
    }
  }
  return runner.decisions();
}

// The invariants (projections/state_checks.h, shared with the simulator), as rapidcheck
// assertions that name the violation.
void AssertHolds(const std::optional<projections::Violation>& violation) {
  if (violation) RC_FAIL(violation->ToString());
}
void CheckQuota(const projections::Engine& engine) { AssertHolds(projections::CheckQuota(engine)); }
void CheckFlavors(const projections::Engine& engine) { AssertHolds(projections::CheckFlavors(engine)); }
// Invariants of the lifecycle, checked after every append.
void CheckLifecycle(const projections::Engine& engine) {
  AssertHolds(projections::CheckLifecycle(engine));
}

// Runs a lifecycle stream: inputs that may be refused are recorded one by one (a refusal
// must write nothing); `check` runs after every append.
std::vector<std::string> RunLifecycle(const Config& config, const std::vector<Step>& steps,
                                      const std::function<void(const projections::Engine&)>& check) {
  ledger::MemoryLog log;
  Runner runner(log, config.queues.size());
  runner.Record(ConfigInputs(config));
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.kind <= 2) {
      runner.SetActor("test");
      runner.Record({runner.StepInput(step, i)});
    } else if (step.kind == 7) {
      runner.SetActor("node-monitor");
      runner.Record({runner.NodeInput(step)});
    } else if (step.kind == 6) {
      runner.Jump(step.jump_minutes);
      capnp::MallocMessageBuilder m;
      m.initRoot<schema::Event>().initBody().initClockAdvanced();
      runner.SetActor("clock");
      runner.Record({Encode(m)});
    } else {
      const std::string input = runner.LifecycleInput(step);
      if (input.empty()) continue;
      runner.SetActor(step.kind == 3 ? (step.foreign ? "intruder" : "scanner")
                                     : step.kind == 4 ? "pod-runtime" : "security");
      runner.Record({input}, /*may_refuse=*/true);
      // The same report again (a duplicate delivery) must change nothing.
      if (step.kind == 3 && step.check_state == 1) runner.Record({input}, true);
    }
    if (check) check(runner.engine());
  }
  return runner.decisions();
}

RC_GTEST_PROP(Decider, LifecycleInvariantsHoldUnderDuplicatedStaleAndForeignReports, ()) {
  Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(
      static_cast<size_t>(*rc::gen::inRange(1, 80)), GenLifecycleStep());
  const auto decisions = RunLifecycle(config, steps, CheckLifecycle);
  // Duplicates never produce a second Admitted or a second token.
  std::set<std::pair<std::string, uint64_t>> admitted;
  std::set<std::string> tokens;
  bool any_admitted = false, any_released = false;
  for (const auto& bytes : decisions) {
    auto decoded = schema::DecodeEvent(bytes);  // owns what `body` views
    auto body = decoded->root().getBody();
    if (body.isAdmitted()) {
      any_admitted = true;
      auto a = body.getAdmitted();
      RC_ASSERT(admitted.insert({a.getWorkload().getUid().cStr(), a.getGeneration()}).second);
      RC_ASSERT(tokens.insert(a.getFencingToken().cStr()).second);
    }
    any_released = any_released || body.isQuotaReleased();
  }
  RC_TAG(config.checks, any_admitted, any_released);
}

// Engine v20: a preemptor waiting for its victims to drain keeps its place at the head of
// its ClusterQueue, so no workload of lower priority in that ClusterQueue reserves quota in an
// append that begins and ends with the preemptor waiting (before v20 such workloads took the
// room the victims freed, and were preempted in turn). One that stops waiting in the append
// (no victim can free enough any more, Kueue's PreemptionNoCandidates) lets the next head go.
RC_GTEST_PROP(Decider, NoLowerPriorityWorkloadOfItsQueueOvertakesAWaitingPreemptor, ()) {
  Config config = *GenConfig();
  // Preemption within each ClusterQueue, and streams of submissions and pod reports, so that
  // victims run pods and drain while their preemptors wait.
  config.checks = false;
  for (QueueSpec& q : config.queues) q.within = *rc::gen::inRange(1, 3);
  const auto steps = *rc::gen::container<std::vector<Step>>(
      static_cast<size_t>(*rc::gen::inRange(1, 80)),
      rc::gen::apply(
          [](Step step, int kind, int pods, int queue) {
            static constexpr int kKinds[] = {0, 0, 0, 4, 4, 4, 4, 1};
            static constexpr int kPods[] = {0, 0, 0, 2, 2, 1};
            step.kind = kKinds[kind];
            step.pods = kPods[pods];
            step.queue = queue;
            step.stale_token = false;
            return step;
          },
          GenLifecycleStep(), rc::gen::inRange(0, 8), rc::gen::inRange(0, 6),
          rc::gen::inRange(0, 2)));
  std::map<std::string, uint64_t> generations;  // by key, after the previous append
  std::set<std::string> waiting;                // keys of preemptors waiting for victims
  bool checked = false, waited = false;
  RunLifecycle(config, steps, [&](const projections::Engine& engine) {
    const auto& workloads = engine.workloads();
    auto reserved_now = [&](const projections::WorkloadState& wl) {
      auto before = generations.find(wl.key);
      return wl.generation > (before == generations.end() ? 0 : before->second);
    };
    auto is_waiting = [](const projections::WorkloadState& wl) {
      return wl.phase == projections::Phase::kPending &&
             wl.pending_message.find("to make room") != std::string::npos;
    };
    for (const std::string& key : waiting) {
      auto p = workloads.find(key);
      if (p == workloads.end() || reserved_now(p->second) || !is_waiting(p->second)) continue;
      for (const auto& [w_key, w] : workloads) {
        if (w.cluster_queue != p->second.cluster_queue || !reserved_now(w)) continue;
        // A workload that requests nothing takes none of the room the preemptor waits for:
        // Kueue admits it beside a waiting preemptor, and so do we.
        if (w.admission.usage.empty()) continue;
        checked = true;
        if (w.priority < p->second.priority) {
          RC_FAIL(w_key + " (priority " + std::to_string(w.priority) + ") reserved in " +
                  w.cluster_queue + " while " + key + " (priority " +
                  std::to_string(p->second.priority) + ") waited for its victims: " +
                  p->second.pending_message);
        }
      }
    }
    waiting.clear();
    generations.clear();
    for (const auto& [key, wl] : workloads) {
      generations[key] = wl.generation;
      if (is_waiting(wl)) {
        waiting.insert(key);
        waited = true;
      }
    }
  });
  RC_TAG(waited, checked);
}

// The lifecycle stream with node events (kind 7) among its steps.
rc::Gen<Step> GenNodeLifecycleStep() {
  return rc::gen::mapcat(rc::gen::weightedElement<bool>({{3, false}, {1, true}}), [](bool node) {
    return rc::gen::map(GenLifecycleStep(), [node](Step step) {
      if (node) step.kind = 7;
      return step;
    });
  });
}

// Engine v19: once the inventory is complete, no admission takes a flavor's node capacity
// beyond its healthy nodes (whatever preemption, failures with named workloads, deadlines
// and recoveries do), and the lifecycle invariants hold throughout.
RC_GTEST_PROP(Decider, NodeCapacityIsNeverOvercommittedByAnAdmission, ()) {
  Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(
      static_cast<size_t>(*rc::gen::inRange(1, 80)), GenNodeLifecycleStep());
  projections::FrQuantities usage;
  bool bounded = false;
  const auto decisions = RunLifecycle(config, steps, [&](const projections::Engine& engine) {
    AssertHolds(projections::CheckLifecycle(engine));
    projections::FrQuantities after;
    AssertHolds(projections::CheckNodeCapacity(engine, usage, &after));
    for (const auto& [fr, v] : after) {
      bounded = bounded || engine.node_capacity(fr) != INT64_MAX;
    }
    usage = std::move(after);
  });
  bool node_failure = false;
  for (const auto& bytes : decisions) {
    auto decoded = schema::DecodeEvent(bytes);
    auto body = decoded->root().getBody();
    node_failure = node_failure || (body.isEvictionStarted() &&
                                    body.getEvictionStarted().getReason() == "NodeFailure");
  }
  RC_TAG(bounded, node_failure);
}

RC_GTEST_PROP(Decider, NodeLifecycleDecisionsAreIdenticalAcrossRuns, ()) {
  Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(
      static_cast<size_t>(*rc::gen::inRange(1, 60)), GenNodeLifecycleStep());
  RC_ASSERT(RunLifecycle(config, steps, nullptr) == RunLifecycle(config, steps, nullptr));
}

RC_GTEST_PROP(Decider, LifecycleDecisionsAreIdenticalAcrossRuns, ()) {
  Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(
      static_cast<size_t>(*rc::gen::inRange(1, 60)), GenLifecycleStep());
  RC_ASSERT(RunLifecycle(config, steps, nullptr) == RunLifecycle(config, steps, nullptr));
}

RC_GTEST_PROP(Decider, NeverOvercommitsAnyCohortLevel, ()) {
  const Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(static_cast<size_t>(*rc::gen::inRange(1, 60)), GenStep());
  const auto decisions = RunStream(config, steps, std::nullopt, CheckQuota);
  // Show the distribution, so a generator that stopped producing admissions or preemptions
  // is visible in the output.
  bool admitted = false, preempted = false, borrowed = false;
  for (const auto& d : decisions) {
    auto decoded = schema::DecodeEvent(d);  // owns what `body` views
    auto body = decoded->root().getBody();
    admitted = admitted || body.isAdmitted();
    preempted = preempted || body.isPreempted();
    borrowed = borrowed || (body.isQuotaReserved() && body.getQuotaReserved().getBorrowing());
  }
  RC_TAG(admitted, preempted, borrowed);
}

RC_GTEST_PROP(Decider, AdmittedFlavorsSatisfySelectorsAndTaints, ()) {
  const Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(static_cast<size_t>(*rc::gen::inRange(1, 60)), GenStep());
  RunStream(config, steps, std::nullopt, CheckFlavors);
}

RC_GTEST_PROP(Decider, DecisionsAreIdenticalAcrossRunsAndRestarts, ()) {
  const Config config = *GenConfig();
  const auto steps = *rc::gen::container<std::vector<Step>>(static_cast<size_t>(*rc::gen::inRange(1, 60)), GenStep());
  const size_t restart = *rc::gen::inRange<size_t>(0, steps.size());
  const auto first = RunStream(config, steps, std::nullopt, nullptr);
  const auto second = RunStream(config, steps, std::nullopt, nullptr);
  RC_ASSERT(first == second);
  const auto restarted = RunStream(config, steps, restart, nullptr);
  RC_ASSERT(first == restarted);
}

// The properties above would pass vacuously if the streams they generate never admitted or
// preempted: run streams from the same generators and require both, often.
TEST(Decider, GeneratedStreamsAdmitAndPreempt) {
  int streams = 0, admitting = 0, preempting = 0;
  const bool ran = rc::check("generated streams", [&] {
    const Config config = *GenConfig();
    const auto steps = *rc::gen::container<std::vector<Step>>(
        static_cast<size_t>(*rc::gen::inRange(1, 60)), GenStep());
    bool admitted = false, preempted = false;
    for (const auto& d : RunStream(config, steps, std::nullopt, nullptr)) {
      auto e = schema::DecodeEvent(d);
      RC_ASSERT(e.ok());
      admitted = admitted || e->root().getBody().isAdmitted();
      preempted = preempted || e->root().getBody().isPreempted();
    }
    ++streams;
    admitting += admitted;
    preempting += preempted;
  });
  ASSERT_TRUE(ran);
  std::printf("of %d generated streams, %d admitted and %d preempted\n", streams, admitting,
              preempting);
  // Measured over runs of 100 streams: 43-57 admit, 11-24 preempt. The bounds are about four
  // standard deviations below, so that the test fails when the generators stop reaching the
  // decider, not by chance.
  ASSERT_GE(streams, 50);
  EXPECT_GE(admitting, streams / 4);
  EXPECT_GE(preempting, streams * 3 / 100);
}

}  // namespace
}  // namespace admission::testing
