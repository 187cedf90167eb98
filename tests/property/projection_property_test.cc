// The projection never runs ahead of the log (issue 31): whatever a call does — recorded,
// refused for its size after the decider applied it, refused by intake — the service's read
// models after it equal the fold of the ledger by a fresh service. The append bound is made
// small (ServiceOptions::append_events_max) so that calls of a few inputs reach it. And each
// LocalQueue's counts are those of the workloads that name it.

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "tests/property/scenario_gen.h"

namespace admission::testing {
namespace {

constexpr size_t kSmallAppendEventsMax = 24;

struct CallGen {
  int submissions = 1;   // new workloads in the call
  int finishes = 0;      // finishes of earlier workloads (some of them unknown)
  int requests = 1;      // pods per submission
};

std::string FinishOf(const std::string& name) {
  capnp::MallocMessageBuilder m;
  auto ref = m.initRoot<schema::Event>().initBody().initWorkloadFinished().initWorkload();
  ref.setNamespace("ns");
  ref.setName(name);
  return schema::EncodeEvent(m);
}

// Each LocalQueue's counts in its read model are those of the workloads that name it, counted
// one queue at a time (the read model counts them in one pass over the workloads).
bool LocalQueueCountsAreTheirWorkloads(const projections::Engine& engine) {
  for (const auto& l : ops::LocalQueuesJson(engine)) {
    size_t pending = 0, reserving = 0, admitted = 0;
    for (const auto& [key, wl] : engine.workloads()) {
      if (wl.ns != l["metadata"]["namespace"] || wl.queue_name != l["metadata"]["name"]) continue;
      pending += wl.phase == projections::Phase::kPending;
      reserving += projections::HoldsQuota(wl.phase);
      admitted += wl.phase == projections::Phase::kAdmitted;
    }
    const ops::Json& status = l["status"];
    if (status["pendingWorkloads"] != pending || status["reservingWorkloads"] != reserving ||
        status["admittedWorkloads"] != admitted) {
      return false;
    }
  }
  return true;
}

std::string ReadModels(const projections::Engine& engine) {
  return ops::WorkloadsJson(engine).dump() + "\n" + ops::ClusterQueuesJson(engine).dump();
}

RC_GTEST_PROP(Projection, ReadModelsEqualTheFoldOfTheLedgerAfterEveryCall, ()) {
  ScenarioGen scenario;
  scenario.queues = *rc::gen::container<std::vector<QueueGen>>(
      static_cast<size_t>(*rc::gen::inRange(1, 3)),
      rc::gen::build<QueueGen>(
          rc::gen::set(&QueueGen::cpu, rc::gen::map(rc::gen::inRange(1, 30),
                                                    [](int v) { return int64_t{v} * 1000; }))));
  const auto calls = *rc::gen::container<std::vector<CallGen>>(
      static_cast<size_t>(*rc::gen::inRange(1, 12)),
      rc::gen::build<CallGen>(rc::gen::set(&CallGen::submissions, rc::gen::inRange(0, 14)),
                              rc::gen::set(&CallGen::finishes, rc::gen::inRange(0, 3)),
                              rc::gen::set(&CallGen::requests, rc::gen::inRange(1, 3))));
  ledger::MemoryLog log;
  FixedClock clock;
  ops::ServiceOptions options;
  options.append_events_max = kSmallAppendEventsMax;
  auto service = ops::Service::Open(log, clock, nullptr, options);
  RC_ASSERT(service.ok());
  int64_t now = 1'800'000'000'000'000'000;
  ops::IntakeOptions intake;
  intake.actor = "test";
  intake.at_ns = now;
  RC_ASSERT((*service)->Record(Definitions(scenario), intake).ok());
  std::vector<std::string> names;
  size_t next = 0, refused_for_size = 0;
  for (const CallGen& call : calls) {
    std::vector<std::string> inputs, added;
    for (int i = 0; i < call.submissions; ++i) {
      StepGen step;
      step.count = call.requests;
      step.queue = static_cast<int>(next % scenario.queues.size());
      inputs.push_back(StepInput(step, next++, scenario.queues.size(), &added));
    }
    for (int i = 0; i < call.finishes && !names.empty(); ++i) {
      inputs.push_back(FinishOf(names[(next + static_cast<size_t>(i)) % names.size()]));
    }
    if (inputs.empty()) continue;
    intake.at_ns = now += 1'000'000'000;
    const uint64_t head = log.GetHead().sequence;
    auto outcome = (*service)->Record(inputs, intake);
    if (outcome.ok()) {
      names.insert(names.end(), added.begin(), added.end());
    } else {
      RC_ASSERT(log.GetHead().sequence == head);  // a refusal writes nothing
      if (outcome.status().message().find("more than one append holds") != std::string::npos) {
        ++refused_for_size;
      }
    }
    RC_ASSERT(!(*service)->broken());
    auto fresh = ops::Service::Open(log, clock, nullptr, options);
    RC_ASSERT(fresh.ok());
    RC_ASSERT(ReadModels((*service)->engine()) == ReadModels((*fresh)->engine()));
    RC_ASSERT(LocalQueueCountsAreTheirWorkloads((*service)->engine()));
  }
  RC_TAG(refused_for_size > 0 ? "some call refused for its size" : "none refused for size");
}

// The same after a call too large for one append, at the real bound and in a group: the calls
// before it in the group are written, the ones after it decided on the ledger's state.
TEST(Projection, ACallTooLargeForOneAppendLeavesTheStateAsTheLedgerHasIt) {
  ScenarioGen scenario;
  QueueGen roomy;
  roomy.in_cohort = false;
  roomy.cpu = 4'000'000;
  scenario.queues.push_back(roomy);
  ledger::MemoryLog log;
  FixedClock clock;
  auto service = ops::Service::Open(log, clock);
  ASSERT_TRUE(service.ok());
  ops::IntakeOptions intake;
  intake.actor = "test";
  intake.at_ns = 1'800'000'000'000'000'000;
  ASSERT_TRUE((*service)->Record(Definitions(scenario), intake).ok());
  // Each submission is reserved and admitted: three events apiece.
  std::vector<std::string> names;
  size_t next = 0;
  auto submissions = [&](size_t n) {
    std::vector<std::string> inputs;
    for (size_t i = 0; i < n; ++i) inputs.push_back(StepInput(StepGen{}, next++, 1, &names));
    ops::RecordCall call;
    call.inputs = std::move(*ops::DecodeInputs(inputs));
    call.options = intake;
    return call;
  };
  std::vector<ops::RecordCall> group;
  group.push_back(submissions(2));
  group.push_back(submissions(ledger::kAppendBatchEventsMax / 3 + 1));  // 4,098 events
  group.push_back(submissions(3));
  auto results = (*service)->RecordGroup(group);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].status().message().find("more than one append holds"), std::string::npos)
      << results[1].status().message();
  ASSERT_TRUE(results[2].ok()) << results[2].status().ToString();
  EXPECT_FALSE((*service)->broken());
  auto fresh = ops::Service::Open(log, clock);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(ReadModels((*service)->engine()), ReadModels((*fresh)->engine()));
  EXPECT_EQ((*service)->engine().workloads().size(), 5u);
  // And writes go on.
  std::vector<ops::RecordCall> last;
  last.push_back(submissions(1));
  auto later = (*service)->RecordGroup(last);
  ASSERT_TRUE(later[0].ok()) << later[0].status().ToString();
}

}  // namespace
}  // namespace admission::testing
