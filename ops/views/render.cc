#include "ops/views/render.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "schema/event_codec.h"
#include "schema/fencing_token.h"
#include "schema/quantity.h"
#include "schema/time_format.h"

namespace admission::ops {

namespace {

using projections::Engine;
using projections::Phase;
using projections::WorkloadState;

Json Condition(const projections::Condition& c) {
  Json j;
  j["type"] = std::string(c.type_name());
  j["status"] = c.status ? "True" : "False";
  j["reason"] = c.reason;
  j["message"] = c.message;
  j["lastTransitionTime"] = FormatRfc3339Seconds(c.last_transition_ns);
  return j;
}

// Kueue's condition order for a workload.
const char* const kConditionOrder[] = {"QuotaReserved", "Admitted", "Evicted", "Preempted",
                                       "Requeued", "Deactivated", "Finished"};

// A ClusterQueue's usage per flavor and covered resource, as Kueue's cache reports it
// (getUsage): `total`, and `borrowed`, what exceeds the nominal quota (none without a cohort).
// `usage` is the reserved usage (status.flavorsReservation) or the admitted one
// (status.flavorsUsage).
Json FlavorsUsage(const Engine& engine, const std::string& cq_name,
                  const projections::FrQuantities& usage) {
  Json out = Json::array();
  const auto& cq = engine.cluster_queues().at(cq_name);
  if (!cq.spec) return out;
  const int node = engine.tree().FindClusterQueue(cq_name);
  const bool in_cohort = node >= 0 && !cq.spec->cohort.empty();
  for (const auto& group : cq.spec->resource_groups) {
    for (const auto& fq : group.flavors) {
      Json flavor;
      flavor["name"] = engine.flavor_names().Name(fq.flavor);
      Json resources = Json::array();
      for (int r : group.covered) {
        const std::string& rname = engine.resource_names().Name(r);
        const projections::Fr fr = projections::MakeFr(fq.flavor, r);
        auto u = usage.find(fr);
        const int64_t total = u == usage.end() ? 0 : u->second;
        Json res;
        res["name"] = rname;
        res["total"] = schema::FormatQuantityMilli(total, rname);
        const int64_t borrowed =
            in_cohort ? std::max<int64_t>(0, total - engine.tree().Nominal(node, fr)) : 0;
        res["borrowed"] = schema::FormatQuantityMilli(borrowed, rname);
        resources.push_back(std::move(res));
      }
      flavor["resources"] = std::move(resources);
      out.push_back(std::move(flavor));
    }
  }
  return out;
}

// Kueue's AdmittedUsage: the usage of the ClusterQueue's admitted workloads only.
projections::FrQuantities AdmittedUsage(const projections::ClusterQueueState& cq) {
  projections::FrQuantities admitted;
  for (const projections::Holder& h : cq.holders) {
    if (h.wl->phase != Phase::kAdmitted) continue;
    for (const auto& [fr, amount] : h.wl->admission.usage) admitted[fr] += amount;
  }
  return admitted;
}

// Strings that a YAML reader would take for a boolean, null or number are quoted, so
// "False" in a condition stays the string Kubernetes means.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const char* const kWords[] = {"true", "false", "yes", "no", "on", "off", "null", "~",
                                       "True", "False", "Yes", "No", "On", "Off", "Null",
                                       "TRUE", "FALSE", "YES", "NO", "ON", "OFF", "NULL"};
  for (const char* w : kWords) {
    if (s == w) return true;
  }
  bool numeric = true;
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
          c == 'e' || c == 'E')) {
      numeric = false;
    }
  }
  return numeric;
}

void EmitYaml(YAML::Emitter& out, const Json& j) {
  switch (j.type()) {
    case Json::value_t::object:
      out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        out << YAML::Key << it.key() << YAML::Value;
        EmitYaml(out, it.value());
      }
      out << YAML::EndMap;
      return;
    case Json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& v : j) EmitYaml(out, v);
      out << YAML::EndSeq;
      return;
    case Json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (NeedsQuotes(s)) out << YAML::DoubleQuoted;
      out << s;
      return;
    }
    case Json::value_t::boolean: out << j.get<bool>(); return;
    case Json::value_t::number_integer: out << j.get<int64_t>(); return;
    case Json::value_t::number_unsigned: out << j.get<uint64_t>(); return;
    case Json::value_t::null: out << YAML::Null; return;
    default: out << j.dump(); return;
  }
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out << row[i];
      if (i + 1 < row.size()) out << std::string(widths[i] - row[i].size() + 3, ' ');
    }
    out << "\n";
  }
  return out.str();
}

std::string FlavorSummary(const Engine& engine, const WorkloadState& wl) {
  std::string out;
  for (const auto& psa : wl.admission.pod_sets) {
    std::vector<std::string> flavors;
    for (const auto& [r, f] : psa.flavors) flavors.push_back(engine.flavor_names().Name(f));
    std::sort(flavors.begin(), flavors.end());
    flavors.erase(std::unique(flavors.begin(), flavors.end()), flavors.end());
    std::string joined;
    for (const auto& f : flavors) joined += (joined.empty() ? "" : ",") + f;
    // "main:3@h100": pod set, admitted count, flavors.
    out += (out.empty() ? "" : " ") + psa.name + ":" + std::to_string(psa.count) + "@" + joined;
  }
  return out;
}

// Tolerations as a pod spec has them (empty fields left out).
Json TolerationsJson(const std::vector<projections::Toleration>& tolerations) {
  Json ts = Json::array();
  for (const auto& t : tolerations) {
    Json tj = Json::object();
    if (!t.key.empty()) tj["key"] = t.key;
    if (!t.op.empty()) tj["operator"] = t.op;
    if (!t.value.empty()) tj["value"] = t.value;
    if (!t.effect.empty()) tj["effect"] = t.effect;
    ts.push_back(tj);
  }
  return ts;
}

// Kueue's AdmissionCheckState.podSetUpdates, as its JSON has them.
Json PodSetUpdatesJson(const std::vector<projections::PodSetUpdate>& updates) {
  Json out = Json::array();
  for (const auto& u : updates) {
    Json j{{"name", u.pod_set}};
    if (!u.labels.empty()) j["labels"] = u.labels;
    if (!u.annotations.empty()) j["annotations"] = u.annotations;
    if (!u.node_selector.empty()) j["nodeSelector"] = u.node_selector;
    if (!u.tolerations.empty()) j["tolerations"] = TolerationsJson(u.tolerations);
    out.push_back(j);
  }
  return out;
}

// A podSet as Kueue's Workload has it: what the ledger keeps of its pod template (one container
// with the per-pod requests, the node selector, tolerations and required node affinity), so
// `get workloads -o yaml` imports again as it is.
Json PodSetJson(const Engine& engine, const projections::PodSetSpec& ps) {
  Json p{{"name", ps.name}, {"count", ps.count}};
  if (ps.min_count > 0) p["minCount"] = ps.min_count;
  Json requests = Json::object();
  for (const auto& [r, v] : ps.requests) {
    const std::string& rn = engine.resource_names().Name(r);
    requests[rn] = schema::FormatQuantityMilli(v, rn);
  }
  Json spec{{"containers", Json::array({{{"name", "main"}, {"resources", {{"requests", requests}}}}})}};
  if (!ps.node_selector.empty()) spec["nodeSelector"] = ps.node_selector;
  if (!ps.tolerations.empty()) spec["tolerations"] = TolerationsJson(ps.tolerations);
  if (!ps.affinity.empty()) {
    Json exprs = Json::array();
    for (const auto& r : ps.affinity) {
      Json e{{"key", r.key}, {"operator", r.op}};
      if (!r.values.empty()) e["values"] = r.values;
      exprs.push_back(e);
    }
    spec["affinity"] = {{"nodeAffinity",
                         {{"requiredDuringSchedulingIgnoredDuringExecution",
                           {{"nodeSelectorTerms", Json::array({{{"matchExpressions", exprs}}})}}}}}};
  }
  p["template"] = {{"spec", spec}};
  return p;
}

// A workload's metadata and spec, as Kueue's Workload has them.
Json WorkloadSpecJson(const Engine& engine, const projections::WorkloadState& wl) {
  Json w;
  w["apiVersion"] = "kueue.x-k8s.io/v1beta2";
  w["kind"] = "Workload";
  w["metadata"] = {{"name", wl.name},
                   {"namespace", wl.ns},
                   {"uid", wl.uid},
                   {"creationTimestamp", FormatRfc3339Seconds(wl.creation_ns)}};
  if (!wl.labels.empty()) w["metadata"]["labels"] = wl.labels;
  Json pod_sets = Json::array();
  for (const auto& ps : wl.pod_sets) pod_sets.push_back(PodSetJson(engine, ps));
  w["spec"] = {{"queueName", wl.queue_name}, {"priority", wl.priority}, {"podSets", pod_sets}};
  if (!wl.priority_class.empty()) w["spec"]["priorityClassName"] = wl.priority_class;
  w["spec"]["active"] = projections::IsActive(wl);
  return w;
}

}  // namespace

// The REASON column: Kueue's reason for the workload's state (never a message). Pending: its
// pending reason (WaitingForQuota, ...), else the QuotaReserved condition's (Pending until the
// decider has looked at it); Reserved: waiting for its checks; Evicting: the Evicted condition's
// (Preempted, Revoked, ...); Rejected: why it can never fit (ExceedsMaxQuota, NoMatchingFlavor)
// or its condition's; Deactivated, Admitted and Finished: their condition's.
std::string StateReason(const WorkloadState& wl) {
  using projections::ConditionType;
  auto reason_of = [&](ConditionType type) -> std::string {
    const projections::Condition* c = wl.conditions.Find(type);
    return c != nullptr ? c->reason : "";
  };
  switch (wl.phase) {
    case Phase::kPending: {
      if (!wl.pending_reason.empty()) return wl.pending_reason;
      std::string r = reason_of(ConditionType::kRequeued);
      return r.empty() ? "Pending" : r;
    }
    case Phase::kReserved:
      return "WaitingForAdmissionChecks";
    case Phase::kAdmitted:
      return reason_of(ConditionType::kAdmitted);
    case Phase::kEvicting:
      return reason_of(ConditionType::kEvicted);
    case Phase::kRejected: {
      if (!wl.pending_reason.empty()) return wl.pending_reason;  // ExceedsMaxQuota, ...
      std::string r = reason_of(ConditionType::kFinished);
      return r.empty() ? reason_of(ConditionType::kQuotaReserved) : r;
    }
    case Phase::kDeactivated:
      return reason_of(ConditionType::kDeactivated);
    case Phase::kFinished:
      return reason_of(ConditionType::kFinished);
    case Phase::kDeleted:
      return "";
  }
  return "";
}

// Kueue's Workload status as the ledger holds it.
Json WorkloadStatusJson(const Engine& engine, const projections::WorkloadState& wl) {
  Json status;
  Json conditions = Json::array();
  for (const char* type : kConditionOrder) {
    const projections::Condition* c = wl.conditions.Find(type);
    if (c != nullptr && !c->reason.empty()) {
      conditions.push_back(Condition(*c));
    }
  }
  status["conditions"] = conditions;
  if (!wl.checks.empty()) {
    Json checks = Json::array();
    for (const auto& [name, cs] : wl.checks) {
      checks.push_back({{"name", name},
                        {"state", projections::CheckStateName(cs.state)},
                        {"lastTransitionTime", FormatRfc3339Seconds(cs.last_transition_ns)},
                        {"message", cs.message},
                        {"retryCount", wl.check_retries},
                        {"reportSequence", cs.report_sequence}});
      if (!cs.pod_set_updates.empty()) {
        checks.back()["podSetUpdates"] = PodSetUpdatesJson(cs.pod_set_updates);
      }
    }
    status["admissionChecks"] = checks;
  }
  if (projections::HoldsQuota(wl.phase)) {
    Json psas = Json::array();
    for (const auto& psa : wl.admission.pod_sets) {
      Json flavors = Json::object(), usage = Json::object();
      for (const auto& [r, f] : psa.flavors) {
        flavors[engine.resource_names().Name(r)] = engine.flavor_names().Name(f);
      }
      for (const auto& [r, v] : psa.usage) {
        const std::string& rn = engine.resource_names().Name(r);
        usage[rn] = schema::FormatQuantityMilli(v, rn);
      }
      psas.push_back({{"name", psa.name},
                      {"flavors", flavors},
                      {"resourceUsage", usage},
                      {"count", psa.count}});
      if (psa.topology) {  // Kueue's topologyAssignment (v1beta1 shape), engine v26
        Json domains = Json::array();
        for (const auto& d : psa.topology->domains) {
          domains.push_back({{"values", d.values}, {"count", d.count}});
        }
        psas.back()["topologyAssignment"] = {{"levels", psa.topology->levels},
                                             {"domains", domains}};
      }
    }
    status["admission"] = {{"clusterQueue", wl.cluster_queue}, {"podSetAssignments", psas}};
    status["quotaVersion"] = wl.quota_version;
  }
  if (wl.generation > 0) status["admissionGeneration"] = wl.generation;
  if (!wl.fencing_token.empty()) status["fencingToken"] = wl.fencing_token;
  // The runtime reported the current admission's pods ready (`pods ready`): the bridge shows
  // it as the Workload's PodsReady condition.
  if (wl.pods_ready) status["podsReady"] = true;
  if (wl.phase == Phase::kEvicting) {
    status["podsReleased"] = wl.pods_released;
    // The token a report that the evicted admission's pods are gone carries.
    if (wl.generation > 0) {
      status["evictingToken"] = schema::FencingToken(wl.uid, wl.generation);
    }
    if (wl.drain_deadline_ns > 0) {
      status["drainDeadline"] = FormatRfc3339Seconds(wl.drain_deadline_ns);
    }
  }
  status["phase"] = projections::PhaseName(wl.phase);
  if (wl.phase == Phase::kPending && !wl.pending_reason.empty()) {
    status["pendingReason"] = {{"reason", wl.pending_reason}, {"message", wl.pending_message}};
  }
  // Kueue's requeueState: the requeue count and the end of a backoff being waited out.
  if (wl.requeue_count > 0) status["requeueState"]["count"] = wl.requeue_count;
  if (wl.requeue_at_ns > 0) {
    status["requeueState"]["requeueAt"] = FormatRfc3339Seconds(wl.requeue_at_ns);
  }
  return status;
}

Json WorkloadJson(const Engine& engine, const projections::WorkloadState& wl) {
  Json w = WorkloadSpecJson(engine, wl);
  w["status"] = WorkloadStatusJson(engine, wl);
  return w;
}

Json WorkloadsJson(const Engine& engine, const NamespaceFilter& allow) {
  Json items = Json::array();
  for (const auto& [key, wl] : engine.workloads()) {
    if (allow && !allow(wl.ns)) continue;
    items.push_back(WorkloadJson(engine, wl));
  }
  return items;
}

Json ClusterQueuesJson(const Engine& engine) {
  Json items = Json::array();
  for (const auto& [name, cq] : engine.cluster_queues()) {
    // A deleted ClusterQueue is shown while workloads still reserve quota in it: Kueue's
    // terminating ClusterQueue, kept by its finalizer until it is empty.
    const bool terminating = !cq.spec;
    if (terminating && cq.holders.empty()) continue;
    Json c;
    c["apiVersion"] = "kueue.x-k8s.io/v1beta2";
    c["kind"] = "ClusterQueue";
    c["metadata"] = {{"name", name}};
    c["spec"] = Json::object();
    if (!terminating) {
      c["spec"] = {{"cohortName", cq.spec->cohort},
                   {"queueingStrategy",
                    cq.spec->queueing == projections::QueueingStrategy::kStrictFifo
                        ? "StrictFIFO"
                        : "BestEffortFIFO"}};
    }
    size_t admitted = 0;
    for (const projections::Holder& h : cq.holders) {
      if (h.wl->phase == Phase::kAdmitted) ++admitted;  // reserving counts all
    }
    Json status;
    status["flavorsReservation"] = FlavorsUsage(engine, name, cq.usage);
    status["flavorsUsage"] = FlavorsUsage(engine, name, AdmittedUsage(cq));
    status["pendingWorkloads"] = cq.pending;
    status["reservingWorkloads"] = cq.holders.size();
    status["admittedWorkloads"] = admitted;
    if (!terminating) status["quotaVersion"] = cq.spec->version;
    // Kueue's reasons: Ready, Terminating (being deleted), Stopped (stopPolicy), else why it is
    // inactive.
    const bool stopped = !terminating && cq.spec->stop_policy != projections::StopPolicy::kNone;
    const bool active = cq.inactive_reason.empty() && !stopped;
    const char* reason = terminating ? "Terminating"
                         : stopped   ? "Stopped"
                         : active    ? "Ready"
                                     : "Inactive";
    const std::string message =
        terminating ? "Can't admit new workloads; clusterQueue is terminating"
        : stopped   ? "Can't admit new workloads; clusterQueue is stopped"
        : active    ? "Can admit new workloads"
                    : cq.inactive_reason;
    status["conditions"] = Json::array({{{"type", "Active"},
                                         {"status", active ? "True" : "False"},
                                         {"reason", reason},
                                         {"message", message}}});
    c["status"] = std::move(status);
    items.push_back(std::move(c));
  }
  return items;
}

Json LocalQueuesJson(const Engine& engine, const NamespaceFilter& allow) {
  // Each LocalQueue's counts as the engine keeps them (not a pass over every workload: a
  // thousand queues' status is copied many times a second). Admitted as the ClusterQueue's.
  const auto& counts = engine.local_queue_counts();
  Json items = Json::array();
  for (const auto& [key, lq] : engine.local_queues()) {
    if (allow && !allow(lq.ns)) continue;
    auto found = counts.find(key);
    const projections::LocalQueueCounts c =
        found == counts.end() ? projections::LocalQueueCounts{} : found->second;
    const size_t pending = c.pending, reserving = c.reserving, admitted = c.admitted;
    Json l;
    l["apiVersion"] = "kueue.x-k8s.io/v1beta2";
    l["kind"] = "LocalQueue";
    l["metadata"] = {{"name", lq.name}, {"namespace", lq.ns}};
    l["spec"] = {{"clusterQueue", lq.cluster_queue}};
    l["status"] = {{"pendingWorkloads", pending},
                   {"reservingWorkloads", reserving},
                   {"admittedWorkloads", admitted}};
    // Kueue's status.fairSharing.admissionFairSharingStatus (engine v14): the consumed usage
    // as of its last sampling tick or settlement.
    auto afs = engine.afs_entries().find(key);
    if (afs != engine.afs_entries().end()) {
      Json consumed = Json::object();
      for (const auto& [r, milli] : afs->second.consumed) {
        const std::string& rn = engine.resource_names().Name(r);
        consumed[rn] = schema::FormatQuantityMilli(milli, rn);
      }
      l["status"]["fairSharing"] = {
          {"admissionFairSharingStatus",
           {{"consumedResources", consumed},
            {"lastUpdate", FormatRfc3339Seconds(afs->second.last_update_ns)}}}};
    }
    items.push_back(std::move(l));
  }
  return items;
}

Json CohortsJson(const Engine& engine) {
  Json items = Json::array();
  const auto& tree = engine.tree();
  for (size_t id = 0; id < tree.size(); ++id) {
    const auto& node = tree.node(static_cast<int>(id));
    if (node.is_cluster_queue) continue;
    Json c;
    c["apiVersion"] = "kueue.x-k8s.io/v1beta2";
    c["kind"] = "Cohort";
    c["metadata"] = {{"name", node.name}};
    c["spec"] = {{"parentName", node.parent >= 0 ? tree.node(node.parent).name : ""}};
    Json members = Json::array();
    for (int child : node.children) members.push_back(tree.node(child).name);
    Json resources = Json::array();
    for (const auto& [fr, quota] : node.subtree) {
      const std::string& rn = engine.resource_names().Name(projections::FrResource(fr));
      auto u = node.usage.find(fr);
      resources.push_back(
          {{"flavor", engine.flavor_names().Name(projections::FrFlavor(fr))},
           {"resource", rn},
           {"subtreeQuota", schema::FormatQuantityMilli(quota, rn)},
           {"usage", schema::FormatQuantityMilli(u == node.usage.end() ? 0 : u->second, rn)}});
    }
    c["status"] = {{"members", members}, {"resources", resources}};
    items.push_back(std::move(c));
  }
  return items;
}

namespace {

// What holds each flavor's room (the ledger bounds admissions by a flavor's healthy nodes
// together, not node by node): its healthy capacity, the usage of the workloads holding quota
// in it, and those workloads (namespace/name, in name order).
struct FlavorRoom {
  std::map<int, int64_t> capacity, usage;
  std::vector<std::string> holders;
};

std::map<std::string, FlavorRoom> FlavorRooms(const Engine& engine, const NamespaceFilter& allow) {
  std::map<std::string, FlavorRoom> rooms;
  for (const auto& [name, node] : engine.nodes()) {
    FlavorRoom& room = rooms[node.flavor];
    if (node.failed) continue;
    for (const auto& [r, milli] : node.capacity) room.capacity[r] += milli;
  }
  for (const auto& [key, wl] : engine.workloads()) {
    if (!projections::HoldsQuota(wl.phase)) continue;
    std::set<std::string> held;
    for (const auto& [fr, amount] : wl.admission.usage) {
      const std::string& flavor = engine.flavor_names().Name(projections::FrFlavor(fr));
      auto room = rooms.find(flavor);
      if (room == rooms.end()) continue;
      room->second.usage[projections::FrResource(fr)] += amount;
      if (held.insert(flavor).second && (!allow || allow(wl.ns))) {
        room->second.holders.push_back(key);
      }
    }
  }
  return rooms;
}

Json Quantities(const Engine& engine, const std::map<int, int64_t>& amounts) {
  Json out = Json::object();
  for (const auto& [r, milli] : amounts) {
    const std::string& rn = engine.resource_names().Name(r);
    out[rn] = schema::FormatQuantityMilli(milli, rn);
  }
  return out;
}

}  // namespace

Json NodesJson(const Engine& engine, const NamespaceFilter& allow) {
  Json items = Json::array();
  const std::map<std::string, FlavorRoom> rooms = FlavorRooms(engine, allow);
  for (const auto& [name, node] : engine.nodes()) {
    const FlavorRoom& room = rooms.at(node.flavor);
    items.push_back({{"kind", "Node"},
                     {"metadata", {{"name", name}}},
                     {"flavor", node.flavor},
                     {"capacity", Quantities(engine, node.capacity)},
                     {"failed", node.failed},
                     {"flavorRoom",
                      {{"capacity", Quantities(engine, room.capacity)},
                       {"usage", Quantities(engine, room.usage)},
                       {"heldBy", room.holders}}}});
    if (!node.labels.empty()) {
      // Engine v26 (TAS): what the node reports keep, for the bridge to compare.
      Json taints = Json::array();
      for (const auto& t : node.taints) {
        taints.push_back({{"key", t.key}, {"value", t.value}, {"effect", t.effect}});
      }
      items.back()["labels"] = node.labels;
      items.back()["taints"] = taints;
      items.back()["nonTasUsage"] = Quantities(engine, node.non_tas_usage);
    }
  }
  return items;
}

Json ListOf(Json items) {
  Json list = Json::object();
  list["apiVersion"] = "v1";
  list["kind"] = "List";
  list["items"] = std::move(items);
  return list;
}

std::string ToYaml(const Json& value) {
  YAML::Emitter out;
  EmitYaml(out, value);
  return std::string(out.c_str()) + "\n";
}

std::string RenderTable(const TableRows& rows) { return Table(rows); }

std::string ShortDuration(int64_t ns) {
  const int64_t s = std::max<int64_t>(ns, 0) / 1'000'000'000;
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

TableRows WorkloadsTable(const Engine& engine, const NamespaceFilter& allow, bool wide) {
  TableRows rows{{"NAMESPACE", "NAME", "QUEUE", "PRIORITY", "STATE", "CLUSTERQUEUE", "ADMISSION",
                  "REASON", "AGE"}};
  if (wide) rows[0].insert(rows[0].end(), {"GENERATION", "TOKEN", "MESSAGE"});
  for (const auto& [key, wl] : engine.workloads()) {
    if (allow && !allow(wl.ns)) continue;
    rows.push_back({wl.ns, wl.name, wl.queue_name, std::to_string(wl.priority),
                    projections::PhaseName(wl.phase), wl.cluster_queue,
                    FlavorSummary(engine, wl), StateReason(wl),
                    ShortDuration(engine.now_ns() - wl.creation_ns)});
    if (!wide) continue;
    const projections::Condition* c =
        wl.conditions.Find(projections::ConditionType::kQuotaReserved);
    std::string message = wl.phase == Phase::kPending ? wl.pending_message : "";
    if (message.empty() && c != nullptr && !c->status) message = c->message;
    rows.back().insert(rows.back().end(),
                       {std::to_string(wl.generation), wl.fencing_token, message});
  }
  return rows;
}

TableRows ClusterQueuesTable(const Engine& engine) {
  std::vector<std::vector<std::string>> rows{
      {"NAME", "COHORT", "STRATEGY", "PENDING", "RESERVING", "USAGE", "ACTIVE"}};
  for (const auto& [name, cq] : engine.cluster_queues()) {
    if (!cq.spec && cq.holders.empty()) continue;  // deleted; shown while terminating
    std::string usage;
    for (const auto& [fr, amount] : cq.usage) {
      const std::string& rn = engine.resource_names().Name(projections::FrResource(fr));
      usage += (usage.empty() ? "" : " ") + engine.flavor_names().Name(projections::FrFlavor(fr)) +
               "/" + rn + "=" + schema::FormatQuantityMilli(amount, rn);
    }
    if (!cq.spec) {
      rows.push_back({name, "", "", std::to_string(cq.pending), std::to_string(cq.holders.size()),
                      usage, "Terminating"});
      continue;
    }
    rows.push_back({name, cq.spec->cohort,
                    cq.spec->queueing == projections::QueueingStrategy::kStrictFifo ? "StrictFIFO"
                                                                                    : "BestEffortFIFO",
                    std::to_string(cq.pending), std::to_string(cq.holders.size()), usage,
                    cq.spec->stop_policy != projections::StopPolicy::kNone ? "Stopped"
                    : cq.inactive_reason.empty()                           ? "True"
                                                                           : "False"});
  }
  return rows;
}

TableRows LocalQueuesTable(const Engine& engine, const NamespaceFilter& allow) {
  std::vector<std::vector<std::string>> rows{{"NAMESPACE", "NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"}};
  Json items = LocalQueuesJson(engine, allow);
  for (const auto& l : items) {
    rows.push_back({l["metadata"]["namespace"], l["metadata"]["name"], l["spec"]["clusterQueue"],
                    std::to_string(l["status"]["pendingWorkloads"].get<size_t>()),
                    std::to_string(l["status"]["admittedWorkloads"].get<size_t>())});
  }
  return rows;
}

TableRows CohortsTable(const Engine& engine) {
  std::vector<std::vector<std::string>> rows{{"NAME", "PARENT", "MEMBERS", "USAGE / QUOTA"}};
  for (const auto& c : CohortsJson(engine)) {
    std::string members, resources;
    for (const auto& m : c["status"]["members"]) members += (members.empty() ? "" : ",") + m.get<std::string>();
    for (const auto& r : c["status"]["resources"]) {
      resources += (resources.empty() ? "" : " ") + r["flavor"].get<std::string>() + "/" +
                   r["resource"].get<std::string>() + "=" + r["usage"].get<std::string>() + "/" +
                   r["subtreeQuota"].get<std::string>();
    }
    rows.push_back({c["metadata"]["name"], c["spec"]["parentName"], members, resources});
  }
  return rows;
}

TableRows NodesTable(const Engine& engine, bool wide, const NamespaceFilter& allow) {
  std::vector<std::vector<std::string>> rows{
      {"NAME", "FLAVOR", "STATE", "CAPACITY", "FLAVOR USAGE / CAPACITY", "HELD BY"}};
  for (const auto& n : NodesJson(engine, allow)) {
    std::string capacity, room;
    for (const auto& [r, q] : n["capacity"].items()) {
      capacity += (capacity.empty() ? "" : ",") + r + "=" + q.get<std::string>();
    }
    const Json& usage = n["flavorRoom"]["usage"];
    for (const auto& [r, q] : n["flavorRoom"]["capacity"].items()) {
      room += (room.empty() ? "" : ",") + r + "=" +
              (usage.contains(r) ? usage[r].get<std::string>() : "0") + "/" + q.get<std::string>();
    }
    const Json& holders = n["flavorRoom"]["heldBy"];
    std::string held;
    const size_t shown = wide ? holders.size() : std::min<size_t>(holders.size(), 3);
    for (size_t i = 0; i < shown; ++i) {
      held += (held.empty() ? "" : ",") + holders[i].get<std::string>();
    }
    if (shown < holders.size()) held += " +" + std::to_string(holders.size() - shown) + " more";
    rows.push_back({n["metadata"]["name"], n["flavor"], n["failed"] ? "Failed" : "Ready", capacity,
                    room, held.empty() ? "<none>" : held});
  }
  return rows;
}

std::string DescribeDecision(schema::Event::Reader event) {
  auto body = event.getBody();
  auto name = [](schema::WorkloadRef::Reader r) {
    return std::string(r.getNamespace().cStr()) + "/" + r.getName().cStr();
  };
  std::ostringstream out;
  switch (body.which()) {
    case schema::Event::Body::QUOTA_RESERVED: {
      auto d = body.getQuotaReserved();
      out << "quota reserved for " << name(d.getWorkload()) << " in ClusterQueue "
          << d.getAdmission().getClusterQueue().cStr() << ":";
      for (auto psa : d.getAdmission().getPodSetAssignments()) {
        out << " " << psa.getName().cStr() << " x" << psa.getCount() << " [";
        bool first = true;
        for (auto f : psa.getFlavors()) {
          out << (first ? "" : ", ") << f.getResource().cStr() << "=" << f.getFlavor().cStr();
          first = false;
        }
        out << "]";
      }
      if (d.getBorrowing()) out << " (borrowing from the cohort)";
      out << " quota version " << d.getQuotaVersion();
      break;
    }
    case schema::Event::Body::ADMITTED:
      out << "admitted " << name(body.getAdmitted().getWorkload()) << ", fencing token "
          << body.getAdmitted().getFencingToken().cStr();
      if (body.getAdmitted().getCheckVersions().size() > 0) {
        out << ", checks at sequences";
        for (auto v : body.getAdmitted().getCheckVersions()) out << " " << v;
      }
      if (body.getAdmitted().getPodSetUpdates().size() > 0) {
        out << ", pod template updates from checks: "
            << schema::DescribePodSetUpdates(body.getAdmitted().getPodSetUpdates());
      }
      break;
    case schema::Event::Body::PENDING_REASON_CHANGED: {
      auto d = body.getPendingReasonChanged();
      out << "pending " << name(d.getWorkload()) << ": " << d.getReason().cStr() << ": "
          << d.getMessage().cStr();
      break;
    }
    case schema::Event::Body::EVICTION_STARTED:
      out << "evicting " << name(body.getEvictionStarted().getWorkload()) << ": "
          << body.getEvictionStarted().getReason().cStr() << ": "
          << body.getEvictionStarted().getMessage().cStr();
      if (body.getEvictionStarted().getPodSetAction() == schema::PodSetAction::DRAIN) out << " (drain)";
      break;
    case schema::Event::Body::PREEMPTED:
      out << "preempted " << name(body.getPreempted().getWorkload()) << " for "
          << name(body.getPreempted().getPreemptor()) << " ("
          << body.getPreempted().getReason().cStr() << ")";
      break;
    case schema::Event::Body::BUDGET_DECIDED: {
      auto d = body.getBudgetDecided();
      out << "budget check " << d.getCheck().cStr() << " of " << name(d.getWorkload()) << ": "
          << schema::CheckStateName(d.getState()) << " (BudgetPolicy "
          << d.getPolicy().cStr() << "): " << d.getMessage().cStr();
      break;
    }
    case schema::Event::Body::TOPOLOGY_REPLACED:
      out << "topology of " << name(body.getTopologyReplaced().getWorkload()) << " pod set "
          << body.getTopologyReplaced().getPodSet().cStr() << ": node "
          << body.getTopologyReplaced().getNode().cStr() << " replaced";
      break;
    case schema::Event::Body::QUOTA_RELEASED:
      out << "quota released by " << name(body.getQuotaReleased().getWorkload()) << " ("
          << body.getQuotaReleased().getReason().cStr() << ")";
      break;
    case schema::Event::Body::REQUEUED:
      out << "requeued " << name(body.getRequeued().getWorkload()) << " (attempt "
          << body.getRequeued().getAttempt() << ", at "
          << FormatRfc3339(body.getRequeued().getRequeueAtNs()) << "): "
          << body.getRequeued().getReason().cStr();
      break;
    case schema::Event::Body::DEACTIVATED:
      out << "deactivated " << name(body.getDeactivated().getWorkload()) << ": "
          << body.getDeactivated().getReason().cStr() << ": "
          << body.getDeactivated().getMessage().cStr();
      break;
    case schema::Event::Body::STARVATION_ALERT:
      out << "starvation alert for " << name(body.getStarvationAlert().getWorkload()) << ": "
          << body.getStarvationAlert().getMessage().cStr();
      break;
    case schema::Event::Body::DRAIN_DEADLINE_PASSED:
      out << "drain deadline passed for " << name(body.getDrainDeadlinePassed().getWorkload())
          << ": " << body.getDrainDeadlinePassed().getMessage().cStr();
      break;
    case schema::Event::Body::REJECTED:
      out << "rejected " << name(body.getRejected().getWorkload()) << ": "
          << body.getRejected().getReason().cStr() << ": " << body.getRejected().getMessage().cStr();
      break;
    default:
      out << "decision";
  }
  return out.str();
}

}  // namespace admission::ops
