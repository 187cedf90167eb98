#pragma once
// The dashboard's read models (docs/dashboard.md): JSON documents the pages served by admitd
// render, computed from the decider's state and the ledger's tail, each limited to the
// namespaces the caller may see.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/views/render.h"
#include "projections/engine.h"

namespace admission::ops {

// ClusterQueues with usage per flavor and resource against nominal quota and what they borrow,
// pending workloads by reason, checks pending with the oldest, idle GPUs, the ledger's head,
// and the latest evictions, preemptions and rejections (from the last `tail` events).
// Check rejections so far, by check (the metrics fold's admission_check_reports_total).
using CheckRejections = std::map<std::string, uint64_t>;

// The ledger's head and its last events (sequence, stored bytes), oldest first: the caller reads
// them (views read no storage).
struct LedgerTail {
  uint64_t head_sequence = 0;
  std::string head_hash_hex;
  std::vector<std::pair<uint64_t, std::string>> events;
};
// Events the dashboard's overview looks back over for its latest decisions.
inline constexpr size_t kDashboardTailEvents = 2000;

Json DashboardOverview(const projections::Engine& engine, const LedgerTail& tail,
                       const NamespaceFilter& allow, const CheckRejections& rejected = {});
// Every workload the caller may see, with its LocalQueue, ClusterQueue, state, reason, priority
// and its position in its ClusterQueue and LocalQueue (from 0, as Kueue's visibility API).
Json DashboardWorkloads(const projections::Engine& engine, const NamespaceFilter& allow);
// Cohorts as a tree: each with its parent, its ClusterQueues, and their reservation against
// nominal quota per flavor and resource.
Json DashboardCohorts(const projections::Engine& engine);
// Admission checks: controller, reservations waiting, the oldest wait, and rejections so far.
Json DashboardChecks(const projections::Engine& engine, const NamespaceFilter& allow,
                     const CheckRejections& rejected = {});

}  // namespace admission::ops
