#pragma once
// Read models rendered as Kueue-shaped objects (JSON, YAML, tables), and decisions described
// in one line for people.

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "projections/engine.h"
#include "schema/events.capnp.h"

namespace admission::ops {

using Json = nlohmann::ordered_json;

// A namespace filter for a caller that may see only some namespaces; null: every one.
using NamespaceFilter = std::function<bool(const std::string& ns)>;

// One workload as `get workloads -o json` shows it, and its status alone.
Json WorkloadJson(const projections::Engine& engine, const projections::WorkloadState& wl);
Json WorkloadStatusJson(const projections::Engine& engine, const projections::WorkloadState& wl);
Json WorkloadsJson(const projections::Engine& engine, const NamespaceFilter& allow = nullptr);
Json ClusterQueuesJson(const projections::Engine& engine);
Json LocalQueuesJson(const projections::Engine& engine, const NamespaceFilter& allow = nullptr);
Json CohortsJson(const projections::Engine& engine);
// The nodes reported to the ledger (docs/semantics.md, "Node capacity"): name, flavor, capacity
// (canonical quantities) and whether it is failed.
Json NodesJson(const projections::Engine& engine);

// `kind: List` with the items, as `kubectl get -o json` prints it.
Json ListOf(const Json& items);
std::string ToYaml(const Json& value);

// Fixed-width tables for people.
// Kueue's reason for a workload's state, as the REASON column shows it (never a message):
// WaitingForQuota, WaitingForAdmissionChecks, Preempted, ExceedsMaxQuota, ...
std::string StateReason(const projections::WorkloadState& wl);
std::string WorkloadsTable(const projections::Engine& engine,
                           const NamespaceFilter& allow = nullptr);
std::string ClusterQueuesTable(const projections::Engine& engine);
std::string LocalQueuesTable(const projections::Engine& engine,
                             const NamespaceFilter& allow = nullptr);
std::string CohortsTable(const projections::Engine& engine);
// The nodes, then whether the node inventory is complete.
std::string NodesTable(const projections::Engine& engine);

// "admitted team-a/train-1 in ClusterQueue gpu-a: main[nvidia.com/gpu=h100] x4 (borrowing)".
std::string DescribeDecision(schema::Event::Reader event);

}  // namespace admission::ops
