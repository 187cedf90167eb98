// The budget check (engine v25, docs/budgets.md): an AdmissionCheck of controller
// admission-ledger.io/budget, decided by the decider at quota reservation from the usage fold
// it shares with billing, the holders' expected runtimes and ledger time.

#include <algorithm>
#include <string>
#include <vector>

#include "projections/budget.h"
#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/event_codec.h"
#include "schema/time_format.h"

namespace admission::projections {

namespace {

int64_t Ms(int64_t ns) { return ns / 1'000'000; }

std::string Decimal(__int128 v) { return ExactDecimal(v, 0); }

schema::CheckState ToSchema(CheckState s) {
  switch (s) {
    case CheckState::kReady: return schema::CheckState::READY;
    case CheckState::kRetry: return schema::CheckState::RETRY;
    case CheckState::kRejected: return schema::CheckState::REJECTED;
    default: return schema::CheckState::PENDING;
  }
}

}  // namespace

void Engine::DefineBudgetPolicy(schema::BudgetPolicyDef::Reader def, uint64_t seq, int64_t now,
                                uint32_t version) {
  BudgetPolicySpec spec = ToBudgetPolicy(def);
  capnp::MallocMessageBuilder message;
  message.initRoot<schema::Event>().initBody().setBudgetPolicyDefined(def);
  spec.def_bytes = schema::CanonicalBytes(message.getRoot<schema::Event>().asReader());
  spec.version = seq;
  const std::string name = spec.name;
  budgets_[name] = std::move(spec);
  if (version < 25) return;
  // Reservations whose budget check waited for this policy are decided now.
  std::vector<WorkloadState*> waiting;
  for (auto& [cq_name, cq] : cqs_) {
    for (const Holder& h : cq.holders) {
      if (h.wl->phase != Phase::kReserved) continue;
      for (const auto& [check, cs] : h.wl->checks) {
        auto spec_it = checks_.find(check);
        if (cs.state == CheckState::kPending && spec_it != checks_.end() &&
            spec_it->second.controller == kBudgetController &&
            spec_it->second.parameters == name) {
          waiting.push_back(h.wl);
          break;
        }
      }
    }
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const WorkloadState* a, const WorkloadState* b) { return a->key < b->key; });
  for (WorkloadState* wl : waiting) {
    if (wl->phase == Phase::kReserved && DecideBudgetChecks(*wl, now)) TryAdmit(*wl, now);
  }
}

void Engine::FeedUsage(schema::Event::Reader event) {
  usage_.Apply(event.getSequence(), event);
  if (!usage_.HasClosed()) return;
  const int64_t now_ms = Ms(now_ns_);
  const int64_t keep_from = now_ms - kBudgetHorizonMs;
  for (const Interval& interval : usage_.closed()) usage_buckets_.Add(interval, keep_from);
  usage_.DropClosed();
  // Forget what fell out of the horizon, once per quarter hour of ledger time.
  if (now_ms - usage_pruned_at_ms_ >= kUsageBucketMs) {
    usage_buckets_.Prune(keep_from);
    usage_pruned_at_ms_ = now_ms;
  }
}

__int128 Engine::RemainingUse(const WorkloadState& wl, const BudgetPolicySpec& policy,
                              int resource, int64_t now) const {
  if (wl.phase == Phase::kEvicting) return 0;  // its pods are on their way out
  int64_t runtime = wl.expected_runtime_ns;
  if (runtime <= 0 && !policy.reject_unknown) runtime = wl.max_execution_ns;
  const int64_t left = Ms(runtime) - (Ms(now) - Ms(wl.reserved_at_ns));
  if (runtime <= 0 || left <= 0) return 0;
  __int128 total = 0;
  for (const auto& [fr, amount] : wl.admission.usage) {
    if (FrResource(fr) == resource) total += static_cast<__int128>(amount) * left;
  }
  return total;
}

std::vector<BudgetStanding> Engine::BudgetStandings(const BudgetPolicySpec& policy) const {
  const int64_t now_ms = Ms(now_ns_);
  const BudgetWindow window = WindowAt(policy, now_ms);
  const std::vector<Interval> open = usage_.OpenUntil(now_ms);
  std::vector<BudgetStanding> out;
  for (const auto& [resource, milli_hours] : policy.limits) {
    BudgetStanding s;
    s.policy = policy.name;
    s.resource = resource;
    s.window = window;
    s.limit = static_cast<__int128>(milli_hours) * kMilliMsPerMilliHour;
    s.used = UsedInWindow(policy, resource, usage_buckets_, open, window.start_ms, now_ms);
    if (std::optional<int> id = resources_.Find(resource)) {
      for (const auto& [cq_name, cq] : cqs_) {
        const std::string cohort = cq.spec ? cq.spec->cohort : std::string();
        for (const Holder& h : cq.holders) {
          if (!InScope(policy, UsageKey{h.wl->ns, h.wl->queue_name, cq_name, cohort, resource})) {
            continue;
          }
          s.committed += RemainingUse(*h.wl, policy, *id, now_ns_);
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Engine::BudgetVerdict Engine::EvaluateBudget(const WorkloadState& wl, const std::string& name,
                                             int64_t now) const {
  BudgetVerdict v;
  auto found = budgets_.find(name);
  if (found == budgets_.end()) {
    v.message = name.empty() ? "the check names no BudgetPolicy (spec.parameters)"
                             : "BudgetPolicy " + name + " is not defined";
    return v;
  }
  const BudgetPolicySpec& policy = found->second;
  const std::string cohort = wl.cq_state != nullptr && wl.cq_state->spec
                                 ? wl.cq_state->spec->cohort : std::string();
  v.state = CheckState::kReady;
  if (!InScope(policy, UsageKey{wl.ns, wl.queue_name, wl.cluster_queue, cohort, ""})) {
    v.message = "not in the scope of BudgetPolicy " + name + " (" + ScopeText(policy) + ")";
    return v;
  }
  int64_t runtime = wl.expected_runtime_ns;
  if (runtime <= 0 && !policy.reject_unknown) runtime = wl.max_execution_ns;
  if (runtime <= 0) {
    v.state = CheckState::kRejected;
    v.message = "BudgetPolicy " + name + " needs the workload's expected runtime: the "
                "annotation admission-ledger.io/expected-runtime" +
                (policy.reject_unknown ? std::string()
                                       : " or spec.maximumExecutionTimeSeconds");
    return v;
  }
  // Where the policy stands (other holders only: this reservation is counted as `need`).
  std::vector<BudgetStanding> standings = BudgetStandings(policy);
  std::vector<std::string> lines;
  bool retry = false, reject = false;
  for (BudgetStanding& s : standings) {
    std::optional<int> id = resources_.Find(s.resource);
    __int128 need = 0;
    if (id) {
      for (const auto& [fr, amount] : wl.admission.usage) {
        if (FrResource(fr) == *id) need += static_cast<__int128>(amount) * Ms(runtime);
      }
      s.committed -= RemainingUse(wl, policy, *id, now);
    }
    if (need == 0) continue;
    v.window = s.window;
    reject = reject || need > s.limit;
    retry = retry || s.used + s.committed + need > s.limit;
    lines.push_back(UnitHours(s.limit) + " " + s.resource + "-hours in " + s.window.label +
                    " for " + ScopeText(policy) + ": " + UnitHours(s.used) + " used, " +
                    UnitHours(s.committed) + " committed, this workload needs " +
                    UnitHours(need));
    v.figures.push_back(s);
    v.need.push_back(need);
  }
  if (lines.empty()) {
    v.message = "requests none of the resources BudgetPolicy " + name + " limits";
    return v;
  }
  std::string figures;
  for (const std::string& line : lines) figures += (figures.empty() ? "" : "; ") + line;
  if (reject) {
    v.state = CheckState::kRejected;
    v.message = figures + ": more than any period holds";
  } else if (retry) {
    v.state = CheckState::kRetry;
    v.requeue_after_ns = v.window.retry_at_ms * 1'000'000 - now;
    v.message = figures + ": does not fit; retried at " + FormatRfc3339Seconds(v.window.retry_at_ms * 1'000'000);
  } else {
    v.message = figures + ": fits";
  }
  return v;
}

bool Engine::DecideBudgetChecks(WorkloadState& wl, int64_t now) {
  std::vector<std::string> budget_checks;
  for (const auto& [check, cs] : wl.checks) {
    auto spec = checks_.find(check);
    if (spec != checks_.end() && spec->second.controller == kBudgetController) {
      budget_checks.push_back(check);
    }
  }
  for (const std::string& check : budget_checks) {
    if (wl.phase != Phase::kReserved) return false;
    const std::string& policy = checks_.at(check).parameters;
    BudgetVerdict v = EvaluateBudget(wl, policy, now);
    auto d = NewDecision(current_sequence_).initBody().initBudgetDecided();
    Ref(d.initWorkload(), wl);
    d.setGeneration(wl.generation);
    d.setCheck(Txt(check));
    d.setPolicy(Txt(policy));
    d.setState(ToSchema(v.state));
    d.setMessage(Txt(v.message));
    d.setRequeueAfterNs(v.requeue_after_ns);
    d.setPeriodStartNs(v.window.start_ms * 1'000'000);
    d.setPeriodEndNs(v.window.end_ms * 1'000'000);
    auto figures = d.initFigures(static_cast<unsigned>(v.figures.size()));
    for (size_t i = 0; i < v.figures.size(); ++i) {
      auto f = figures[static_cast<unsigned>(i)];
      f.setResource(Txt(v.figures[i].resource));
      f.setLimit(Txt(Decimal(v.figures[i].limit)));
      f.setUsed(Txt(Decimal(v.figures[i].used)));
      f.setCommitted(Txt(Decimal(v.figures[i].committed)));
      f.setNeed(Txt(Decimal(v.need[i])));
    }
    if (v.state == CheckState::kPending) {
      CheckStatus& cs = wl.checks.at(check);
      cs.message = v.message;
      continue;
    }
    if (v.state == CheckState::kReady) {
      // Set without TryAdmit: the caller admits once every check is decided.
      CheckStatus& cs = wl.checks.at(check);
      if (cs.state != v.state) cs.last_transition_ns = now;
      cs.state = v.state;
      cs.message = v.message;
      cs.report_sequence = current_sequence_;
      continue;
    }
    SetCheckState(wl, check, v.state, v.message, current_sequence_, v.requeue_after_ns, now);
    return false;
  }
  return wl.phase == Phase::kReserved;
}

}  // namespace admission::projections
