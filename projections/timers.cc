// Timers: check TTLs, backoffs (requeue), podsReady timeouts, drain deadlines, maximum
// execution, max wait alerts, maintenance windows and retention, fired in order at the end of a
// batch (docs/decider.md, "Timers"). Kueue: the workload controller's requeue and podsReady
// handling (pkg/controller/core/workload_controller.go) and objectRetentionPolicies.

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <string>
#include <string_view>

#include "projections/engine.h"
#include "projections/engine_internal.h"
#include "schema/enum_names.h"
#include "schema/result.h"

namespace admission::projections {

namespace {

// Jitter for backoffs: a hash of (uid, attempt), never a random number (FNV-1a, 64 bits).
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

const char* TimerKindName(TimerKind kind) {
  switch (kind) {
    case TimerKind::kDrain: return "drain";
    case TimerKind::kMaxExec: return "maxexec";
    case TimerKind::kMaxWait: return "maxwait";
    case TimerKind::kPodsReady: return "podsready";
    case TimerKind::kRequeue: return "requeue";
    case TimerKind::kRetire: return "retire";
    case TimerKind::kTtl: return "ttl";
    case TimerKind::kWindow: return "window";
  }
  return "drain";
}

std::optional<TimerKind> TimerKindFromName(std::string_view name) {
  return EnumFromName(name, TimerKind::kDrain, static_cast<TimerKind>(kTimerKinds - 1),
                      TimerKindName);
}

bool JoinedTextLess(const std::array<std::string_view, 3>& a,
                    const std::array<std::string_view, 3>& b) {
  // Walks both as if joined with '|', stopping at the first difference.
  size_t ia = 0, pa = 0, ib = 0, pb = 0;
  auto next = [](const std::array<std::string_view, 3>& parts, size_t& i, size_t& p,
                 unsigned char* c) {
    while (i < parts.size()) {
      if (p < parts[i].size()) {
        *c = static_cast<unsigned char>(parts[i][p++]);
        return true;
      }
      ++i;
      p = 0;
      if (i < parts.size()) {
        *c = '|';
        return true;
      }
    }
    return false;
  };
  for (;;) {
    unsigned char ca = 0, cb = 0;
    const bool has_a = next(a, ia, pa, &ca);
    const bool has_b = next(b, ib, pb, &cb);
    if (!has_a || !has_b) return !has_a && has_b;
    if (ca != cb) return ca < cb;
  }
}

bool Timer::operator<(const Timer& other) const {
  if (at_ns != other.at_ns) return at_ns < other.at_ns;
  // No kind's name is a prefix of another's, so the names decide first, in enum order.
  if (kind != other.kind) return kind < other.kind;
  char ga[24], gb[24];
  const auto ea = std::to_chars(ga, ga + sizeof ga, generation).ptr;
  const auto eb = std::to_chars(gb, gb + sizeof gb, other.generation).ptr;
  return JoinedTextLess({key, std::string_view(ga, static_cast<size_t>(ea - ga)), detail},
                        {other.key, std::string_view(gb, static_cast<size_t>(eb - gb)),
                         other.detail});
}

void Engine::AddTimer(int64_t at_ns, TimerKind kind, const std::string& key, uint64_t generation,
                      const std::string& detail) {
  timers_.insert(Timer{at_ns, kind, key, generation, detail});
  ADM_CHECK(timers_.size() <= limits_.timers_max,
            "%zu timers, over the %zu the decider keeps (kTimersMax), adding %s|%s|%llu",
            timers_.size(), limits_.timers_max, TimerKindName(kind), key.c_str(),
            static_cast<unsigned long long>(generation));
}

int64_t Engine::Backoff(const WorkloadState& wl, int64_t base_ns, int64_t max_ns,
                        uint32_t attempt) const {
  if (base_ns <= 0) return 0;
  int64_t b = base_ns;
  for (uint32_t i = 1; i < attempt && b < max_ns; ++i) b = b > INT64_MAX / 2 ? INT64_MAX : b * 2;
  if (max_ns > 0) b = std::min(b, max_ns);
  // Up to 10% jitter, a hash of (uid, attempt): workloads requeued together spread out, and a
  // replay computes the same instant.
  const uint64_t h = Fnv1a(wl.uid + "/" + std::to_string(attempt));
  return b + static_cast<int64_t>(h % static_cast<uint64_t>(b / 10 + 1));
}

void Engine::Ended(const WorkloadState& wl, int64_t now) {
  const int64_t keep =
      wl.phase == Phase::kDeactivated ? config_.retain_deactivated_ns : config_.retain_finished_ns;
  if (keep == kRetainForever) return;
  // Saturated: a retention of centuries is "never" in practice, and must not overflow.
  const int64_t at = keep > std::numeric_limits<int64_t>::max() - now
                         ? std::numeric_limits<int64_t>::max()
                         : now + std::max<int64_t>(keep, 0);
  AddTimer(at, TimerKind::kRetire, wl.key, wl.generation, wl.uid);
}

void Engine::Retire(const std::string& key, const std::string& uid, int64_t now) {
  auto it = workloads_.find(key);
  // Replaced by a new submission of the same name, or not ended (a hand-written ledger).
  if (it == workloads_.end() || it->second.uid != uid || !Terminal(it->second.phase)) return;
  const WorkloadState& wl = it->second;
  if (wl.phase == Phase::kDeactivated) {
    // Reactivated (engine v21) and deactivated again since this timer was set: the timer of
    // its latest deactivation retires it.
    const Condition* c = wl.conditions.Find(ConditionType::kDeactivated);
    if (c != nullptr && now - c->last_transition_ns < config_.retain_deactivated_ns) return;
  }
  ADM_CHECK(!wl.queued && wl.holder_index < 0, "retiring %s, which is queued or holds quota",
            key.c_str());
  UidIndex();  // folds the pending entries, so none names it after this
  auto u = uid_to_key_.find(uid);
  if (u != uid_to_key_.end() && u->second == key) uid_to_key_.erase(u);
  orphans_.erase(key);  // an orphan that ended is dropped lazily (RequeueOrphans): now
  workloads_.erase(it);
  ++retired_;
}

bool Engine::FireTimers(int64_t now) {
  bool changed = false;
  for (size_t fired = 0; !timers_.empty() && timers_.begin()->at_ns <= now; ++fired) {
    ADM_CHECK(fired < limits_.timer_fires_per_round_max,
              "%zu timers fired at %lld and more are due (kTimerFiresPerRoundMax): fires keep "
              "starting timers due at once",
              fired, static_cast<long long>(now));
    const Timer timer = std::move(timers_.extract(timers_.begin()).value());
    if (timer.kind == TimerKind::kWindow) {
      DefinitionsChanged();
      changed = true;
      continue;
    }
    if (timer.kind == TimerKind::kRetire) {  // changes nothing a decision reads
      Retire(timer.key, timer.detail, now);
      continue;
    }
    auto it = workloads_.find(timer.key);
    if (it == workloads_.end()) continue;
    if (FireWorkloadTimer(timer, it->second, now)) changed = true;
  }
  return changed;
}

bool Engine::FireWorkloadTimer(const Timer& timer, WorkloadState& wl, int64_t now) {
  const TimerKind kind = timer.kind;
  const uint64_t generation = timer.generation;
  const std::string& detail = timer.detail;
  if (kind == TimerKind::kTtl) {
    auto cs = wl.checks.find(detail);
    if (wl.phase != Phase::kReserved || wl.generation != generation || cs == wl.checks.end() ||
        cs->second.state != CheckState::kPending) {
      return false;
    }
    const AdmissionCheckSpec& spec = checks_.at(detail);
    const std::string message = "check " + detail + " still Pending after its TTL";
    if (spec.reject_on_timeout) {
      wl.after_eviction = AfterEviction::kDeactivate;
      wl.deactivate_reason = "AdmissionCheckTimeout";
      wl.deactivate_message = message;
      EvictForReason(wl, "AdmissionCheck", message, 0, 0, now);
    } else {
      ReleaseAndRetry(wl, "AdmissionCheckTimeout", message, 0, now);
    }
    return true;
  }
  if (kind == TimerKind::kRequeue) {
    if (wl.phase != Phase::kPending || wl.queued || wl.requeue_at_ns > now) return false;
    wl.requeue_at_ns = 0;
    SetCondition(wl, ConditionType::kRequeued, true, "BackoffFinished", "The backoff is over", now);
    Enqueue(wl, now);
    return true;
  }
  if (kind == TimerKind::kPodsReady) {
    if (wl.phase != Phase::kAdmitted || wl.generation != generation || wl.pods_ready) return false;
    wl.after_eviction = AfterEviction::kPodsReady;
    EvictForReason(wl, "PodsReadyTimeout", "not all pods ready within the timeout", 0, 0, now);
    return true;
  }
  if (kind == TimerKind::kDrain) {
    if (wl.phase != Phase::kEvicting || wl.generation != generation) return false;
    auto d = NewDecision(current_sequence_).initBody().initDrainDeadlinePassed();
    Ref(d.initWorkload(), wl);
    d.setGeneration(wl.generation);
    d.setMessage("the runtime did not confirm the pods gone by the drain deadline; the quota "
                 "is released");
    PodsGone(wl, "DrainDeadlinePassed", now);
    return true;
  }
  if (kind == TimerKind::kMaxExec) {
    if (!Evictable(wl.phase) || wl.generation != generation) return false;
    wl.after_eviction = AfterEviction::kDeactivate;
    wl.deactivate_reason = "MaximumExecutionTimeExceeded";
    wl.deactivate_message = "ran longer than its maximum execution time";
    EvictForReason(wl, "MaximumExecutionTimeExceeded", wl.deactivate_message, 0, 0, now);
    return true;
  }
  if (kind == TimerKind::kMaxWait) {
    if (wl.phase != Phase::kPending || wl.starvation_alerted ||
        std::to_string(wl.pending_since_ns) != detail) {
      return false;
    }
    wl.starvation_alerted = true;
    auto d = NewDecision(current_sequence_).initBody().initStarvationAlert();
    Ref(d.initWorkload(), wl);
    d.setWaitingNs(now - wl.pending_since_ns);
    d.setMessage("pending longer than the max wait of ClusterQueue " + wl.cluster_queue +
                 "; it stays queued");
    return true;
  }
  return false;
}

}  // namespace admission::projections
