// Budgets (engine v25, docs/budgets.md) against billing and an independent model, over random
// scenarios (scenario_gen.h) whose ClusterQueues require budget checks: a namespace budget of
// cpu on every ClusterQueue, and a ClusterQueue budget of GPUs (a rolling window) on cq-0.
//   - One source of truth: after every append, each policy's `used` (the decider's standing)
//     equals the usage the billing fold of the stored ledger gives for that scope and period.
//   - No admission overdraws: every budget decision's figures are the billing fold's used and a
//     model's committed (the other holders' remaining expected use, from the ledger's events);
//     and a Ready decision has used + committed + need <= limit, a Retry more than the limit.

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "consumers/billing/usage.h"
#include "ledger/memory_log.h"
#include "projections/budget.h"
#include "tests/property/scenario_gen.h"

namespace admission::testing {
namespace {

namespace billing = consumers::billing;

__int128 ParseDecimal128(const std::string& text) {
  __int128 v = 0;
  for (char c : text) v = v * 10 + (c - '0');
  return v;
}

// The scenario's definitions with two budget policies and checks, required by the queues.
std::vector<std::string> BudgetDefinitions(const ScenarioGen& s, int64_t cpu_limit,
                                           int64_t gpu_limit) {
  std::vector<std::string> out;
  auto policy = [&](const char* name, bool namespace_scope, const char* resource, int64_t limit) {
    capnp::MallocMessageBuilder m;
    auto p = m.initRoot<schema::Event>().initBody().initBudgetPolicyDefined();
    p.setName(name);
    p.setScopeKind(namespace_scope ? schema::BudgetScopeKind::NAMESPACE
                                   : schema::BudgetScopeKind::CLUSTER_QUEUE);
    p.setScopeNamespace(namespace_scope ? "ns" : "");
    p.setScopeName(namespace_scope ? "" : "cq-0");
    auto l = p.initLimits(1)[0];
    l.setResource(resource);
    l.setMilliUnitHours(limit);
    p.setPeriod(namespace_scope ? schema::BudgetPeriodKind::MONTH
                                : schema::BudgetPeriodKind::ROLLING);
    p.setWindowNs(namespace_scope ? 0 : 3600LL * 1'000'000'000);
    out.push_back(Encode(m));
    capnp::MallocMessageBuilder c;
    auto check = c.initRoot<schema::Event>().initBody().initAdmissionCheckDefined();
    check.setName(std::string("check-") + name);
    check.setControllerName(projections::kBudgetController);
    check.setParameters(name);
    check.setRetryLimit(UINT32_MAX);
    out.push_back(Encode(c));
  };
  policy("ns-cpu", true, "cpu", cpu_limit);
  policy("cq0-gpu", false, "nvidia.com/gpu", gpu_limit);
  for (const std::string& bytes : Definitions(s)) {
    auto decoded = schema::DecodeEvent(bytes);
    capnp::MallocMessageBuilder m;
    m.setRoot(decoded->root());
    auto body = m.getRoot<schema::Event>().getBody();
    if (body.isClusterQueueDefined()) {
      const bool first = std::string(body.getClusterQueueDefined().getName().cStr()) == "cq-0";
      auto checks = body.getClusterQueueDefined().initAdmissionChecks(first ? 2 : 1);
      checks.set(0, "check-ns-cpu");
      if (first) checks.set(1, "check-cq0-gpu");
    }
    out.push_back(Encode(m));
  }
  return out;
}

// A submission with an expected runtime (1 to 40 s), which budgets need.
std::string WithRuntime(const std::string& bytes, size_t index) {
  auto decoded = schema::DecodeEvent(bytes);
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  auto body = m.getRoot<schema::Event>().getBody();
  if (body.isWorkloadSubmitted()) {
    body.getWorkloadSubmitted().getWorkload().setExpectedRuntimeNs(
        static_cast<int64_t>(index * 7 % 40 + 1) * 1'000'000'000);
  }
  return Encode(m);
}

// Billing's usage of a scope and resource in [start_ms, now_ms): closed and open intervals.
__int128 BillingUsed(const billing::UsageFold& fold, const projections::BudgetPolicySpec& p,
                     const std::string& resource, int64_t start_ms, int64_t now_ms) {
  __int128 total = 0;
  std::vector<billing::Interval> all(fold.closed().begin(), fold.closed().end());
  for (const billing::Interval& in : fold.OpenUntil(now_ms)) all.push_back(in);
  for (const billing::Interval& in : all) {
    if (in.to.resource != resource || !projections::InScope(p, projections::UsageKeyOf(in.to))) {
      continue;
    }
    const int64_t s = std::max(in.start_ms, start_ms), e = std::min(in.end_ms, now_ms);
    if (e > s) total += static_cast<__int128>(in.milli) * (e - s);
  }
  return total;
}

// The model of what holders have committed: per uid its reservation, from the ledger's events.
struct ModelHold {
  std::string cluster_queue;
  int64_t reserved_ms = 0;
  bool evicting = false;
  std::map<std::string, int64_t> amounts;
};

struct Model {
  std::map<std::string, int64_t> runtime_ms;  // uid -> expected runtime
  std::map<std::string, ModelHold> holds;     // uid -> held reservation
  int checked = 0, ready = 0, retried = 0;

  void Apply(schema::Event::Reader e) {
    auto b = e.getBody();
    const int64_t at = e.getRecordedAtNs() / 1'000'000;
    if (b.isWorkloadSubmitted()) {
      auto w = b.getWorkloadSubmitted().getWorkload();
      runtime_ms[w.getUid().cStr()] = w.getExpectedRuntimeNs() / 1'000'000;
    } else if (b.isQuotaReserved()) {
      ModelHold h;
      h.cluster_queue = b.getQuotaReserved().getAdmission().getClusterQueue().cStr();
      h.reserved_ms = at;
      for (auto ps : b.getQuotaReserved().getAdmission().getPodSetAssignments()) {
        for (auto u : ps.getResourceUsage()) h.amounts[u.getName().cStr()] += u.getMilli();
      }
      holds[b.getQuotaReserved().getWorkload().getUid().cStr()] = h;
    } else if (b.isEvictionStarted()) {
      auto it = holds.find(b.getEvictionStarted().getWorkload().getUid().cStr());
      if (it != holds.end()) it->second.evicting = true;
    } else if (b.isQuotaReleased()) {
      holds.erase(b.getQuotaReleased().getWorkload().getUid().cStr());
    }
  }

  __int128 Committed(const projections::BudgetPolicySpec& p, const std::string& resource,
                     const std::string& except_uid, int64_t now_ms) const {
    __int128 total = 0;
    for (const auto& [uid, h] : holds) {
      if (uid == except_uid || h.evicting) continue;
      if (!projections::InScope(p, {"ns", "", h.cluster_queue, "", resource})) continue;
      auto amount = h.amounts.find(resource);
      const int64_t left = runtime_ms.at(uid) - (now_ms - h.reserved_ms);
      if (amount != h.amounts.end() && left > 0) total += static_cast<__int128>(amount->second) * left;
    }
    return total;
  }
};

// Checks every budget decision of the ledger against billing and the model.
void CheckDecisions(ledger::EventLog& log, const projections::Engine& engine, Model* model) {
  auto all = log.Read(1, ledger::kReadEventsMax);
  RC_ASSERT(all.ok());
  billing::UsageFold fold;
  for (const auto& stored : *all) {
    auto decoded = schema::DecodeEvent(stored.bytes);
    RC_ASSERT(decoded.ok());
    auto e = decoded->root();
    if (e.getBody().isBudgetDecided()) {
      auto d = e.getBody().getBudgetDecided();
      const projections::BudgetPolicySpec& p = engine.budget_policies().at(d.getPolicy().cStr());
      const int64_t now_ms = e.getRecordedAtNs() / 1'000'000;
      const int64_t start_ms = d.getPeriodStartNs() / 1'000'000;
      bool over = false;
      for (auto f : d.getFigures()) {
        const __int128 used = ParseDecimal128(f.getUsed()), committed = ParseDecimal128(f.getCommitted());
        const __int128 need = ParseDecimal128(f.getNeed()), limit = ParseDecimal128(f.getLimit());
        RC_ASSERT(used == BillingUsed(fold, p, f.getResource().cStr(), start_ms, now_ms));
        RC_ASSERT(committed == model->Committed(p, f.getResource().cStr(),
                                                d.getWorkload().getUid().cStr(), now_ms));
        over = over || used + committed + need > limit;
      }
      ++model->checked;
      if (d.getState() == schema::CheckState::READY) {
        ++model->ready;
        RC_ASSERT(!over);
      } else if (d.getState() == schema::CheckState::RETRY) {
        ++model->retried;
        RC_ASSERT(over);
      }
    }
    fold.Apply(stored.sequence, e);
    model->Apply(e);
  }
}

RC_GTEST_PROP(Budgets, UsedIsBillingsUsageAndNoAdmissionOverdraws, ()) {
  const ScenarioGen s = *GenScenario();
  const int64_t cpu_limit = *rc::gen::inRange<int64_t>(5, 80);   // milli-cpu-hours
  const int64_t gpu_limit = *rc::gen::inRange<int64_t>(2, 40);
  ledger::MemoryLog log;
  FixedClock clock;
  auto service = ops::Service::Open(log, clock);
  RC_ASSERT(service.ok());
  int64_t now = 1'800'000'000'000'000'000;
  auto record = [&](const std::vector<std::string>& inputs) {
    if (inputs.empty()) return;
    ops::IntakeOptions options;
    options.at_ns = now += 3'000'000'000;
    options.actor = "test";
    auto outcome = (*service)->Record(inputs, options);
    RC_ASSERT(outcome.ok());
    // One source of truth: each policy's used, as the decider stands now, is billing's.
    auto fold = billing::FoldLedger(log);
    RC_ASSERT(fold.ok());
    const projections::Engine& engine = (*service)->engine();
    const int64_t now_ms = engine.now_ns() / 1'000'000;
    for (const auto& [name, policy] : engine.budget_policies()) {
      for (const projections::BudgetStanding& st : engine.BudgetStandings(policy)) {
        RC_ASSERT(st.used == BillingUsed(*fold, policy, st.resource, st.window.start_ms, now_ms));
      }
    }
  };
  record(BudgetDefinitions(s, cpu_limit, gpu_limit));
  std::vector<std::string> submitted, pending;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    pending.push_back(WithRuntime(StepInput(s.steps[i], i, s.queues.size(), &submitted), i));
    if (s.steps[i].batch_end || i + 1 == s.steps.size()) {
      record(pending);  // no retention configured: every finish and delete names a live one
      pending.clear();
    }
  }
  Model model;
  CheckDecisions(log, (*service)->engine(), &model);
  RC_CLASSIFY(model.ready > 0, "some budget check Ready");
  RC_CLASSIFY(model.retried > 0, "some budget check Retry");
}

}  // namespace
}  // namespace admission::testing
