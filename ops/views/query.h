#pragma once
// What `admitctl get` selects, as kubectl get does: a name, a namespace, a label selector
// (-l: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated,
// all must hold), and the output (table, wide, json, yaml, name).

#include <cstdint>
#include <string>
#include <vector>

#include "ops/views/render.h"
#include "schema/result.h"

namespace admission::ops {

struct LabelRequirement {
  std::string key;
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist } op = Op::kExists;
  std::vector<std::string> values;
};

// kInvalidArgument naming the requirement that does not parse.
Result<std::vector<LabelRequirement>> ParseLabelSelector(const std::string& text);

struct GetQuery {
  std::string name;       // empty: every object
  std::string ns;         // empty: every namespace the caller may see
  std::string selector;   // -l; empty: no label condition
  // pendingworkloads (Kueue's visibility API): one ClusterQueue's, or one LocalQueue's
  // ("NAMESPACE/NAME"), from `offset` on, at most `limit` (Kueue's default 1000).
  std::string cluster_queue, local_queue;
  uint64_t limit = 1000, offset = 0;
};

// Kueue's PendingWorkloadsSummary (visibility.kueue.x-k8s.io/v1beta2) of the query's ClusterQueue
// or LocalQueue: its pending workloads in the decider's order, each with its priority,
// LocalQueue and positions (from 0) in its ClusterQueue and LocalQueue. kNotFound for a queue
// the ledger does not define; kInvalidArgument unless exactly one queue is named.
Result<Json> PendingWorkloadsJson(const projections::Engine& engine, const GetQuery& query,
                                  const NamespaceFilter& allow);
TableRows PendingWorkloadsTable(const Json& summary, const projections::Engine& engine);

// Keeps the items (Kubernetes objects, as the *Json functions give them) the query selects;
// kNotFound when a name was asked for and no item has it (kubectl's "NotFound").
Result<Json> SelectItems(Json items, const std::string& kind, const GetQuery& query);

// Keeps the table rows (header kept) of the selected items: rows are matched on their NAMESPACE
// and NAME columns (NAME alone for a kind without namespaces).
TableRows SelectRows(const TableRows& rows, const Json& selected);

}  // namespace admission::ops
