#pragma once
// Read models rendered as Kueue-shaped objects (JSON, YAML, tables), and decisions described
// in one line for people.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
Json NodesJson(const projections::Engine& engine, const NamespaceFilter& allow = nullptr);

// `kind: List` with the items, as `kubectl get -o json` prints it.
Json ListOf(Json items);
std::string ToYaml(const Json& value);

// Fixed-width tables for people: rows (the header first) and their text.
using TableRows = std::vector<std::vector<std::string>>;
std::string RenderTable(const TableRows& rows);
// Kueue's reason for a workload's state, as the REASON column shows it (never a message):
// WaitingForQuota, WaitingForAdmissionChecks, Preempted, ExceedsMaxQuota, ...
std::string StateReason(const projections::WorkloadState& wl);
// The workloads; AGE is against the ledger's time (its last event), not the wall clock. `wide`
// (-o wide) adds the admission generation, the fencing token and the reason's message.
TableRows WorkloadsTable(const projections::Engine& engine, const NamespaceFilter& allow = nullptr,
                         bool wide = false);
TableRows ClusterQueuesTable(const projections::Engine& engine);
TableRows LocalQueuesTable(const projections::Engine& engine,
                           const NamespaceFilter& allow = nullptr);
TableRows CohortsTable(const projections::Engine& engine);
// The nodes (RenderGet adds whether the node inventory is complete), with what holds the room
// of each node's flavor: the ledger bounds admissions by a flavor's healthy nodes together, so
// its usage and the workloads holding it (those `allow` passes; wide: all of them, else three).
TableRows NodesTable(const projections::Engine& engine, bool wide,
                     const NamespaceFilter& allow = nullptr);
// A duration as kubectl's AGE column shows it: 45s, 12m, 3h, 5d.
std::string ShortDuration(int64_t ns);

// "admitted team-a/train-1 in ClusterQueue gpu-a: main[nvidia.com/gpu=h100] x4 (borrowing)".
std::string DescribeDecision(schema::Event::Reader event);

}  // namespace admission::ops
