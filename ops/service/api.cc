#include "ops/service/api.h"

#include <algorithm>
#include <functional>

#include "ops/views/query.h"
#include "ops/views/render.h"
#include "projections/engine_version.h"
#include "replay/explain.h"
#include "schema/event_codec.h"

namespace admission::ops {

bool NamespaceScope::Allows(const std::string& ns) const {
  return namespaces.empty() ||
         std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
}

WorkloadInfo InfoOf(const projections::WorkloadState& wl) {
  WorkloadInfo info;
  info.ns = wl.ns;
  info.name = wl.name;
  info.uid = wl.uid;
  info.generation = wl.generation;
  info.fencing_token = wl.fencing_token;
  return info;
}

Result<std::string> RenderGet(const projections::Engine& engine, const std::string& what,
                              const std::string& format, const NamespaceScope& scope,
                              const GetQuery& query) {
  if (format != "table" && format != "wide" && format != "json" && format != "yaml" &&
      format != "name") {
    return Status(Code::kInvalidArgument, "output format '" + format +
                                              "': expected table, wide, json, yaml or name");
  }
  NamespaceFilter allow;
  if (!scope.namespaces.empty()) {
    allow = [&scope](const std::string& ns) { return scope.Allows(ns); };
  }
  if (what == "pendingworkloads" || what == "pendingworkload") {
    auto summary = PendingWorkloadsJson(engine, query, allow);
    if (!summary.ok()) return summary.status();
    if (format == "json") return summary->dump(2) + "\n";
    if (format == "yaml") return ToYaml(*summary);
    std::string text;
    if (format == "name") {
      for (const Json& i : (*summary)["items"]) {
        text += "workload.kueue.x-k8s.io/" + i["metadata"]["name"].get<std::string>() + "\n";
      }
      return text;
    }
    return RenderTable(PendingWorkloadsTable(*summary, engine));
  }
  Json items;
  // The table's rows, built only for a table (a bridge copies every queue's JSON many times a
  // second).
  std::function<TableRows()> rows;
  std::string kind;  // the Kubernetes kind and group, for -o name
  const bool wide = format == "wide";
  if (what == "workloads" || what == "workload" || what == "wl") {
    items = WorkloadsJson(engine, allow);
    rows = [&] { return WorkloadsTable(engine, allow, wide); };
    kind = "workload.kueue.x-k8s.io";
  } else if (what == "clusterqueues" || what == "clusterqueue" || what == "cq") {
    items = ClusterQueuesJson(engine);
    rows = [&] { return ClusterQueuesTable(engine); };
    kind = "clusterqueue.kueue.x-k8s.io";
  } else if (what == "localqueues" || what == "localqueue" || what == "lq") {
    items = LocalQueuesJson(engine, allow);
    rows = [&] { return LocalQueuesTable(engine, allow); };
    kind = "localqueue.kueue.x-k8s.io";
  } else if (what == "cohorts" || what == "cohort") {
    items = CohortsJson(engine);
    rows = [&] { return CohortsTable(engine); };
    kind = "cohort.kueue.x-k8s.io";
  } else if (what == "nodes" || what == "node") {
    items = NodesJson(engine, allow);
    rows = [&] { return NodesTable(engine, wide, allow); };
    kind = "node";
  } else {
    return Status(Code::kInvalidArgument, "kind '" + what +
                                              "': expected workloads, clusterqueues, "
                                              "localqueues, cohorts, nodes or "
                                              "pendingworkloads");
  }
  auto selected = SelectItems(std::move(items), kind, query);
  if (!selected.ok()) return selected.status();
  if (format == "name") {
    std::string out;
    for (const Json& item : *selected) {
      out += kind + "/" + item["metadata"]["name"].get<std::string>() + "\n";
    }
    return out;
  }
  // One object named: the object itself, as kubectl get NAME -o json|yaml|jsonpath gives it.
  if (!query.name.empty() && selected->size() == 1 && (format == "json" || format == "yaml")) {
    const Json& item = (*selected)[0];
    return format == "json" ? item.dump(2) + "\n" : ToYaml(item);
  }
  const bool nodes = what == "nodes" || what == "node";
  if (format == "json" || format == "yaml") {
    Json list = ListOf(std::move(*selected));
    // The nodes' list also says whether the node inventory is complete (engine v19).
    if (nodes) list["inventoryComplete"] = engine.node_inventory_complete();
    return format == "json" ? list.dump(2) + "\n" : ToYaml(list);
  }
  std::string text = RenderTable(SelectRows(rows(), *selected));
  if (nodes) text += std::string("inventory complete: ") +
                     (engine.node_inventory_complete() ? "yes" : "no") + "\n";
  return text;
}

Result<std::string> RenderExplain(ledger::EventLog& log, const std::string& ns_name, uint64_t at,
                                  const std::string& format,
                                  const std::function<void(uint64_t, uint64_t)>& progress,
                                  ledger::SnapshotStore* snapshots) {
  auto slash = ns_name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ns_name.size()) {
    return Status(Code::kInvalidArgument,
                  "workload '" + ns_name + "': expected NAMESPACE/NAME, e.g. default/job-sample");
  }
  if (format != "text" && format != "json" && format != "html") {
    return Status(Code::kInvalidArgument,
                  "output format '" + format + "': expected text, json or html");
  }
  auto x = replay::Explain(log, ns_name.substr(0, slash), ns_name.substr(slash + 1), at, progress,
                           snapshots);
  if (!x.ok()) return x.status();
  return format == "json"   ? replay::ExplainJson(*x) + "\n"
         : format == "html" ? replay::ExplainHtml(*x)
                            : replay::ExplainText(*x);
}

Result<std::string> RenderSnapshot(Service& service,
                                   const std::function<std::string(uint64_t)>& path_of,
                                   const std::string& format) {
  auto taken = service.Snapshot();
  if (!taken.ok()) return taken.status();
  const std::string path = path_of ? path_of(taken->after) : "";
  if (format == "json") {
    Json out;
    out["sequence"] = taken->after;
    out["bytes"] = taken->bytes;
    out["sha256"] = schema::HashHex(taken->hash);
    out["engineVersion"] = projections::kEngineVersion;
    out["path"] = path;
    out["loadedSnapshot"] =
        service.loaded_snapshot() ? Json(*service.loaded_snapshot()) : Json(nullptr);
    out["eventsFolded"] = service.events_folded_at_open();
    return out.dump(2) + "\n";
  }
  std::string text;
  if (service.loaded_snapshot()) {
    text += "loaded snapshot at " + std::to_string(*service.loaded_snapshot()) + ", folded " +
            std::to_string(service.events_folded_at_open()) + " events after it\n";
  } else {
    text += "folded " + std::to_string(service.events_folded_at_open()) +
            " events from the genesis\n";
  }
  text += "snapshot at sequence " + std::to_string(taken->after) + ": " +
          std::to_string(taken->bytes) + " bytes, sha256 " + schema::HashHex(taken->hash) + "\n";
  if (!path.empty()) text += path + "\n";
  return text;
}

Result<RecordOutcome> LocalApi::Record(std::vector<std::string> inputs,
                                       const IntakeOptions& options,
                                       const std::string& request_id) {
  IntakeOptions stamped = options;
  stamped.request_id = request_id;
  return service_.Record(inputs, stamped);
}

Result<WorkloadInfo> LocalApi::Workload(const std::string& ns_name) {
  const auto& workloads = service_.engine().workloads();
  auto it = workloads.find(ns_name);
  if (it == workloads.end()) {
    return Status(Code::kNotFound, "no workload " + ns_name + " in the ledger");
  }
  return InfoOf(it->second);
}

Result<std::string> LocalApi::Get(const std::string& kind, const std::string& format,
                                  const GetQuery& query) {
  return RenderGet(service_.engine(), kind, format, {}, query);
}

Result<std::string> DefinitionOf(const Service& service, const std::string& key) {
  auto it = service.definitions().find(key);
  if (it == service.definitions().end()) {
    const size_t a = key.find('/'), b = key.find('/', a + 1);
    const std::string ns = key.substr(a + 1, b - a - 1);
    return Status(Code::kNotFound, key.substr(0, a) + " " + (ns.empty() ? "" : ns + "/") +
                                       key.substr(b + 1) + " is not defined in the ledger");
  }
  return it->second;
}

Result<std::string> LocalApi::Definition(const std::string& key) {
  return DefinitionOf(service_, key);
}

Result<std::string> LocalApi::Explain(const std::string& ns_name, uint64_t at,
                                      const std::string& format) {
  return RenderExplain(log_, ns_name, at, format, nullptr);
}

Result<std::string> LocalApi::Snapshot(const std::string& format) {
  return RenderSnapshot(service_, snapshot_path_, format);
}

}  // namespace admission::ops
