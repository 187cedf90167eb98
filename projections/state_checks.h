#pragma once
// Invariants of the decider's state, as the property tests and the simulator check them after
// every append. Each returns the first violation found, naming the invariant, the workload or
// queue and the values; nullopt when it holds.

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "projections/engine.h"

namespace admission::projections {

struct Violation {
  std::string invariant;  // a short name: "quota", "admitted-without-ready-checks", ...
  std::string object;     // the workload (NS/NAME) or ClusterQueue it is about; may be empty
  std::string detail;     // the values involved
  std::string ToString() const;
};

// Quota held never above what nominal quota, borrowing and lending limits allow, at every node
// of the cohort tree, draining workloads included; a ClusterQueue's usage is the sum of the
// admissions of the workloads holding quota in it (and the decider's own quota invariants,
// Engine::CheckInvariants, hold).
std::optional<Violation> CheckQuota(const Engine& engine);

// CheckQuota where capacity may shrink (quota reclaims, node failures): workloads evicted by
// the decrease hold their quota while they drain, so usage may stay above the new limits until
// they are gone, but only by them: without the draining workloads every node is within its
// limits, and with them every flavor-resource that a reservation of this append (of a workload
// in `reserved`, by NS/NAME) uses is within its limits at its ClusterQueue and every cohort
// above it (nothing new is reserved into quota that draining workloads still hold).
std::optional<Violation> CheckQuotaAfterDecreases(const Engine& engine,
                                                   const std::set<std::string>& reserved);

// Engine v19: no reservation of this append took a flavor-resource bounded by node capacity
// beyond it: for each, the usage of every ClusterQueue together is at most the larger of the
// healthy nodes' capacity and `usage_before` (the usage before the append, which a node lost in
// it may leave above the capacity until the evicted workloads' pods are gone). Returns the
// usage now in *usage_after, for the next call.
std::optional<Violation> CheckNodeCapacity(const Engine& engine, const FrQuantities& usage_before,
                                           FrQuantities* usage_after);

// The admitted podSets' flavors satisfy their node selectors and tolerate the flavors' taints.
std::optional<Violation> CheckFlavors(const Engine& engine);

// Admitted only with every required check Ready for the current generation, with the token of
// that generation (and no token otherwise); every workload is admitted, holds a reservation
// waiting for checks, is pending with a reason (or queued, or waiting out a backoff), or ended
// with a reason.
std::optional<Violation> CheckWorkloads(const Engine& engine);
// CheckQuota and CheckWorkloads.
std::optional<Violation> CheckLifecycle(const Engine& engine);

// No workload has waited past its ClusterQueue's max wait at `now_ns` without a starvation
// alert. REQUIRES: the decider has folded an input recorded at `now_ns` (its timers due by then
// have fired).
std::optional<Violation> CheckStarvationAlerts(const Engine& engine, int64_t now_ns);

}  // namespace admission::projections
