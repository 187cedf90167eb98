#pragma once
// Random scenarios for the replay and snapshot properties: ClusterQueues in one cohort (or
// none) with cpu and gpu quota on two flavors, preemption policies, and a stream of submits,
// finishes and deletes in batches, recorded through ops::Service into a ledger.

#include <capnp/message.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ops/service/clock.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"

namespace admission::testing {

using ledger::Sequence;

class FixedClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return 0; }
};

// ---------------------------------------------------------------------------------------------
// A small random scenario: ClusterQueues in one cohort (or none) with cpu and gpu quota on two
// flavors, preemption policies, and a stream of submits, finishes and deletes in batches.

struct QueueGen {
  bool in_cohort = true;
  int64_t cpu = 4000, gpu = 2000;  // nominal per flavor
  int within = 0, reclaim = 0;
  bool usage_based = false;  // admissionScope UsageBasedAdmissionFairSharing (engine v14)
  int64_t fair_weight_milli = 1000;  // spec.fairSharing.weight, read under fair sharing
};

struct StepGen {
  int kind = 0;  // 0 submit, 1 finish, 2 delete
  int queue = 0;
  int count = 1, min_count = 0;
  int64_t cpu = 1000, gpu = 0;
  int priority = 0;
  int target = 0;
  bool batch_end = true;
  bool second_queue = false;  // submitted to the ClusterQueue's second LocalQueue
};

struct ScenarioGen {
  std::vector<QueueGen> queues;
  std::vector<StepGen> steps;
  // Set: the definitions end with an engine configuration of this retention for ended
  // workloads (projections::kRetainForever: kept for ever). Unset: no configuration event.
  std::optional<int64_t> retain_ended_ns;
  // Admission fair sharing configured (engine v14): ClusterQueues with usage_based order their
  // two LocalQueues (weights 1 and 2) by usage.
  bool admission_fair_sharing = false;
  // Fair sharing configured: entries ordered by share, and victims chosen as Kueue's
  // fairPreemptions (engine v16), with the queues' weights (0 included).
  bool fair_sharing = false;
};

inline rc::Gen<ScenarioGen> GenScenario() {
  auto queue = rc::gen::build<QueueGen>(
      rc::gen::set(&QueueGen::in_cohort, rc::gen::arbitrary<bool>()),
      rc::gen::set(&QueueGen::cpu,
                   rc::gen::map(rc::gen::inRange(0, 9), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&QueueGen::gpu,
                   rc::gen::map(rc::gen::inRange(0, 5), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&QueueGen::within, rc::gen::inRange(0, 3)),
      rc::gen::set(&QueueGen::reclaim, rc::gen::inRange(0, 3)),
      rc::gen::set(&QueueGen::usage_based, rc::gen::arbitrary<bool>()),
      rc::gen::set(&QueueGen::fair_weight_milli,
                   rc::gen::element<int64_t>(0, 500, 1000, 1000, 2000)));
  auto step = rc::gen::build<StepGen>(
      rc::gen::set(&StepGen::kind, rc::gen::weightedElement<int>({{6, 0}, {3, 1}, {1, 2}})),
      rc::gen::set(&StepGen::queue, rc::gen::inRange(0, 3)),
      rc::gen::set(&StepGen::count, rc::gen::inRange(1, 4)),
      rc::gen::set(&StepGen::min_count, rc::gen::inRange(0, 3)),
      rc::gen::set(&StepGen::cpu,
                   rc::gen::map(rc::gen::inRange(0, 5), [](int v) { return int64_t{v} * 500; })),
      rc::gen::set(&StepGen::gpu,
                   rc::gen::map(rc::gen::inRange(0, 3), [](int v) { return int64_t{v} * 1000; })),
      rc::gen::set(&StepGen::priority, rc::gen::inRange(0, 4)),
      rc::gen::set(&StepGen::target, rc::gen::inRange(0, 1000)),
      rc::gen::set(&StepGen::batch_end, rc::gen::weightedElement<bool>({{3, true}, {1, false}})),
      rc::gen::set(&StepGen::second_queue, rc::gen::arbitrary<bool>()));
  return rc::gen::build<ScenarioGen>(
      rc::gen::set(&ScenarioGen::queues, rc::gen::container<std::vector<QueueGen>>(
                                             static_cast<size_t>(*rc::gen::inRange(1, 4)), queue)),
      rc::gen::set(&ScenarioGen::steps, rc::gen::container<std::vector<StepGen>>(
                                            static_cast<size_t>(*rc::gen::inRange(1, 50)), step)),
      rc::gen::set(&ScenarioGen::admission_fair_sharing, rc::gen::arbitrary<bool>()),
      rc::gen::set(&ScenarioGen::fair_sharing, rc::gen::arbitrary<bool>()));
}

// The same shape from a plain PRNG, for the process-level tests (which run a few fixed seeds
// rather than hundreds of rapidcheck cases, each being several processes).
inline ScenarioGen ScenarioFromSeed(uint64_t seed, size_t steps) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) {
    return static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)) + lo;
  };
  ScenarioGen s;
  const int queues = pick(1, 3);
  for (int q = 0; q < queues; ++q) {
    QueueGen g;
    g.in_cohort = pick(0, 1) == 1;
    g.cpu = pick(2, 8) * 1000;
    g.gpu = pick(0, 4) * 1000;
    g.within = pick(0, 2);
    g.reclaim = pick(0, 2);
    s.queues.push_back(g);
  }
  for (size_t i = 0; i < steps; ++i) {
    StepGen g;
    const int k = pick(0, 9);
    g.kind = k < 6 ? 0 : k < 9 ? 1 : 2;
    g.queue = pick(0, 2);
    g.count = pick(1, 3);
    g.min_count = pick(0, 2);
    g.cpu = pick(0, 4) * 500;
    g.gpu = pick(0, 2) * 1000;
    g.priority = pick(0, 3);
    g.target = pick(0, 999);
    g.batch_end = pick(0, 3) != 0;
    s.steps.push_back(g);
  }
  return s;
}

inline std::string Encode(capnp::MallocMessageBuilder& m) { return schema::EncodeEvent(m); }

inline std::vector<std::string> Definitions(const ScenarioGen& s) {
  std::vector<std::string> out;
  for (const char* f : {"on-demand", "spot"}) {
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initFlavorDefined().setName(f);
    out.push_back(Encode(m));
  }
  for (size_t q = 0; q < s.queues.size(); ++q) {
    const QueueGen& g = s.queues[q];
    capnp::MallocMessageBuilder m;
    auto def = m.initRoot<schema::Event>().initBody().initClusterQueueDefined();
    def.setName("cq-" + std::to_string(q));
    if (g.in_cohort) def.setCohortName("cohort");
    def.initNamespaceSelector().setMatchesAll(true);
    auto p = def.initPreemption();
    p.setWithinClusterQueue(static_cast<schema::WithinClusterQueuePolicy>(g.within));
    p.setReclaimWithinCohort(static_cast<schema::ReclaimWithinCohortPolicy>(g.reclaim));
    auto group = def.initResourceGroups(1)[0];
    auto covered = group.initCoveredResources(2);
    covered.set(0, "cpu");
    covered.set(1, "nvidia.com/gpu");
    auto flavors = group.initFlavors(2);
    for (unsigned f = 0; f < 2; ++f) {
      flavors[f].setName(f == 0 ? "on-demand" : "spot");
      auto r = flavors[f].initResources(2);
      r[0].setName("cpu");
      r[0].setNominalQuotaMilli(g.cpu / (f + 1));
      r[1].setName("nvidia.com/gpu");
      r[1].setNominalQuotaMilli(g.gpu / (f + 1));
    }
    if (g.usage_based) {
      def.setAdmissionMode(schema::AdmissionMode::USAGE_BASED_ADMISSION_FAIR_SHARING);
    }
    def.setFairSharingWeightMilli(g.fair_weight_milli);
    out.push_back(Encode(m));
    for (const char* suffix : {"", "-b"}) {
      capnp::MallocMessageBuilder lm;
      auto lq = lm.initRoot<schema::Event>().initBody().initLocalQueueDefined();
      lq.setNamespace("ns");
      lq.setName("lq-" + std::to_string(q) + suffix);
      lq.setClusterQueue("cq-" + std::to_string(q));
      if (*suffix != '\0') lq.setFairSharingWeightMilli(2000);
      out.push_back(Encode(lm));
    }
  }
  if (s.retain_ended_ns || s.admission_fair_sharing || s.fair_sharing) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<schema::Event>().initBody().initEngineConfigDefined();
    if (s.retain_ended_ns) {
      c.setRetainFinishedNs(*s.retain_ended_ns);
      c.setRetainDeactivatedNs(*s.retain_ended_ns);
    }
    c.setFairSharingEnabled(s.fair_sharing);
    if (s.admission_fair_sharing) {
      c.setAfsUsageHalfLifeNs(10'000'000'000);
      c.setAfsUsageSamplingIntervalNs(1'000'000'000);
    }
    out.push_back(Encode(m));
  }
  return out;
}

// Drives a Service over a log through a scenario. Keeps, after every append, the head and the
// read models (for the state-at property) and the decisions made.
struct Recording {
  std::vector<std::string> decisions;  // stored bytes, in order
  struct Point {
    Sequence head = 0;
    std::string workloads, cluster_queues;
  };
  std::vector<Point> points;
};

inline std::string StepInput(const StepGen& step, size_t index, size_t queues,
                      std::vector<std::string>* submitted) {
  capnp::MallocMessageBuilder m;
  auto event = m.initRoot<schema::Event>();
  if (step.kind == 0 || submitted->empty()) {
    const std::string name = "w" + std::to_string(index);
    auto wl = event.initBody().initWorkloadSubmitted().initWorkload();
    wl.setNamespace("ns");
    wl.setName(name);
    wl.setUid("uid-" + name);
    wl.setQueueName("lq-" + std::to_string(static_cast<size_t>(step.queue) % queues) +
                    (step.second_queue ? "-b" : ""));
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
    event.setIdempotencyKey("submit/ns/" + name);
    submitted->push_back(name);
  } else {
    const std::string& name = (*submitted)[static_cast<size_t>(step.target) % submitted->size()];
    auto ref = step.kind == 1 ? event.initBody().initWorkloadFinished().initWorkload()
                              : event.initBody().initWorkloadDeleted().initWorkload();
    ref.setNamespace("ns");
    ref.setName(name);
    ref.setUid("uid-" + name);
  }
  return Encode(m);
}

inline Recording RecordScenario(const ScenarioGen& s, ledger::EventLog& log) {
  Recording rec;
  FixedClock clock;
  auto service = ops::Service::Open(log, clock);
  ADM_CHECK(service.ok(), "%s", service.status().ToString().c_str());
  int64_t now = 1'800'000'000'000'000'000;
  auto record = [&](const std::vector<std::string>& inputs) {
    if (inputs.empty()) return;
    ops::IntakeOptions options;
    options.at_ns = now += 1'000'000'000;
    options.actor = "test";
    auto outcome = (*service)->Record(inputs, options);
    ADM_CHECK(outcome.ok(), "%s", outcome.status().ToString().c_str());
    for (auto& d : outcome->decisions) rec.decisions.push_back(d);
    rec.points.push_back(Recording::Point{log.GetHead().sequence,
                                          ops::WorkloadsJson((*service)->engine()).dump(),
                                          ops::ClusterQueuesJson((*service)->engine()).dump()});
  };
  record(Definitions(s));
  std::vector<std::string> submitted, pending, pending_names;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    // Intake refuses to finish or delete a workload the ledger no longer holds (retired after
    // its retention): only live workloads, or ones submitted in this batch, are ended, which is
    // the same choice whatever the retention (a live workload is never retired).
    std::vector<std::string> held;
    for (const std::string& name : submitted) {
      auto it = (*service)->engine().workloads().find("ns/" + name);
      if ((it != (*service)->engine().workloads().end() && !projections::Terminal(it->second.phase)) ||
          std::find(pending_names.begin(), pending_names.end(), name) != pending_names.end()) {
        held.push_back(name);
      }
    }
    std::vector<std::string> targets = held;
    pending.push_back(StepInput(s.steps[i], i, s.queues.size(), &targets));
    if (targets.size() > held.size()) {
      submitted.push_back(targets.back());
      pending_names.push_back(targets.back());
    }
    if (s.steps[i].batch_end || i + 1 == s.steps.size()) {
      record(pending);
      pending.clear();
      pending_names.clear();
    }
  }
  return rec;
}

inline schema::Hash ChainOver(const std::vector<std::string>& decisions) {
  schema::Hash h = schema::kGenesisHash;
  for (const std::string& d : decisions) h = schema::ChainHash(h, d);
  return h;
}

// Sequences of the decisions in a log, in order.
inline std::vector<Sequence> DecisionSequences(ledger::EventLog& log) {
  std::vector<Sequence> out;
  auto events = log.Read(1, ledger::kReadEventsMax);
  for (const auto& e : *events) {
    if (schema::IsDecision(schema::DecodeEvent(e.bytes)->root().getBody().which())) {
      out.push_back(e.sequence);
    }
  }
  return out;
}

}  // namespace admission::testing
