#include "ops/views/query.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "schema/time_format.h"

namespace admission::ops {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Splits at commas outside parentheses.
std::vector<std::string> SplitRequirements(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(Trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(Trim(cur));
  return parts;
}

Result<LabelRequirement> ParseRequirement(const std::string& r) {
  auto bad = [&r](const std::string& why) -> Status {
    return Status(Code::kInvalidArgument, "label selector requirement '" + r + "': " + why);
  };
  if (r.empty()) return bad("empty");
  LabelRequirement req;
  if (r[0] == '!') {
    req.key = Trim(r.substr(1));
    req.op = LabelRequirement::Op::kDoesNotExist;
    if (req.key.empty()) return bad("no key after '!'");
    return req;
  }
  for (const auto& [word, op] : {std::pair{" notin ", LabelRequirement::Op::kNotIn},
                                 std::pair{" in ", LabelRequirement::Op::kIn}}) {
    const size_t at = r.find(word);
    if (at == std::string::npos) continue;
    req.key = Trim(r.substr(0, at));
    req.op = op;
    std::string set = Trim(r.substr(at + std::string(word).size()));
    if (set.size() < 2 || set.front() != '(' || set.back() != ')') {
      return bad("expected a set of values in parentheses, as in 'env in (prod,dev)'");
    }
    for (const std::string& v : SplitRequirements(set.substr(1, set.size() - 2))) {
      req.values.push_back(v);
    }
    return req;
  }
  const size_t ne = r.find("!=");
  const size_t eq = r.find('=');
  if (ne != std::string::npos) {
    req.key = Trim(r.substr(0, ne));
    req.op = LabelRequirement::Op::kNotIn;
    req.values = {Trim(r.substr(ne + 2))};
  } else if (eq != std::string::npos) {
    req.key = Trim(r.substr(0, eq));
    req.op = LabelRequirement::Op::kIn;
    const size_t value_at = r.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
    req.values = {Trim(r.substr(value_at))};
  } else {
    req.key = r;
  }
  if (req.key.empty() || req.key.find_first_of(" ()=!") != std::string::npos) {
    return bad("not a label key");
  }
  return req;
}

bool Matches(const std::vector<LabelRequirement>& selector, const Json& labels) {
  for (const LabelRequirement& r : selector) {
    const bool has = labels.is_object() && labels.contains(r.key);
    const std::string value = has ? labels[r.key].get<std::string>() : "";
    const bool in = has && std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case LabelRequirement::Op::kExists:
        if (!has) return false;
        break;
      case LabelRequirement::Op::kDoesNotExist:
        if (has) return false;
        break;
      case LabelRequirement::Op::kIn:
        if (!in) return false;
        break;
      case LabelRequirement::Op::kNotIn:
        if (in) return false;
        break;
    }
  }
  return true;
}

std::string Str(const Json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string()
             ? object[field].get<std::string>()
             : "";
}

}  // namespace

Result<std::vector<LabelRequirement>> ParseLabelSelector(const std::string& text) {
  std::vector<LabelRequirement> out;
  if (Trim(text).empty()) return out;
  for (const std::string& part : SplitRequirements(text)) {
    auto r = ParseRequirement(part);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

Result<Json> SelectItems(Json items, const std::string& kind, const GetQuery& query) {
  auto selector = ParseLabelSelector(query.selector);
  if (!selector.ok()) return selector.status();
  // Nothing to select by: every item, moved (a bridge reads a thousand queues many times a
  // second).
  if (query.name.empty() && query.ns.empty() && selector->empty()) return items;
  static const Json kNone = Json::object();
  Json out = Json::array();
  for (Json& item : items) {
    const Json& meta = item.contains("metadata") ? item["metadata"] : kNone;
    if (!query.name.empty() && Str(meta, "name") != query.name) continue;
    if (!query.ns.empty() && meta.contains("namespace") && Str(meta, "namespace") != query.ns) {
      continue;
    }
    if (!Matches(*selector, meta.contains("labels") ? meta["labels"] : kNone)) continue;
    out.push_back(std::move(item));
  }
  if (!query.name.empty() && out.empty()) {
    return Status(Code::kNotFound, kind + " \"" + query.name + "\" not found" +
                                       (query.ns.empty() ? "" : " in namespace " + query.ns));
  }
  return out;
}

TableRows SelectRows(const TableRows& rows, const Json& selected) {
  if (rows.empty()) return rows;
  const bool namespaced = rows[0].size() > 1 && rows[0][0] == "NAMESPACE";
  std::set<std::pair<std::string, std::string>> keep;
  for (const Json& item : selected) {
    const Json& meta = item["metadata"];
    keep.emplace(namespaced ? Str(meta, "namespace") : "", Str(meta, "name"));
  }
  TableRows out{rows[0]};
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto key = namespaced ? std::pair{rows[i][0], rows[i][1]} : std::pair{std::string(), rows[i][0]};
    if (keep.contains(key)) out.push_back(rows[i]);
  }
  return out;
}

Result<Json> PendingWorkloadsJson(const projections::Engine& engine, const GetQuery& query,
                                  const NamespaceFilter& allow) {
  if (query.cluster_queue.empty() == query.local_queue.empty()) {
    return Status(Code::kInvalidArgument,
                  "pendingworkloads: name one queue, --cluster-queue CQ or --local-queue NS/LQ");
  }
  std::string cq = query.cluster_queue, lq_key;
  if (!query.local_queue.empty()) {
    const size_t slash = query.local_queue.find('/');
    if (slash == std::string::npos) {
      return Status(Code::kInvalidArgument,
                    "--local-queue " + query.local_queue + ": expected NAMESPACE/NAME");
    }
    auto lq = engine.local_queues().find(query.local_queue);
    if (lq == engine.local_queues().end() || (allow && !allow(lq->second.ns))) {
      return Status(Code::kNotFound, "localqueue \"" + query.local_queue + "\" not found");
    }
    lq_key = query.local_queue;
    cq = lq->second.cluster_queue;
  } else if (engine.cluster_queues().count(cq) == 0) {
    return Status(Code::kNotFound, "clusterqueue \"" + cq + "\" not found");
  }
  Json items = Json::array();
  std::map<std::string, uint64_t> per_lq;
  uint64_t in_cq = 0, listed = 0;
  for (const std::string& key : engine.PendingInOrder(cq)) {
    auto it = engine.workloads().find(key);
    if (it == engine.workloads().end()) continue;
    const projections::WorkloadState& wl = it->second;
    const uint64_t cq_position = in_cq++;
    const uint64_t lq_position = per_lq[wl.local_queue_key]++;
    if (!lq_key.empty() && wl.local_queue_key != lq_key) continue;
    if (allow && !allow(wl.ns)) continue;
    if (listed++ < query.offset || items.size() >= query.limit) continue;
    items.push_back({{"metadata",
                      {{"name", wl.name},
                       {"namespace", wl.ns},
                       {"creationTimestamp", FormatRfc3339Seconds(wl.creation_ns)}}},
                     {"priority", wl.priority},
                     {"localQueueName", wl.queue_name},
                     {"positionInClusterQueue", cq_position},
                     {"positionInLocalQueue", lq_position}});
  }
  return Json{{"apiVersion", "visibility.kueue.x-k8s.io/v1beta2"},
              {"kind", "PendingWorkloadsSummary"},
              {"metadata", Json::object()},
              {"items", items}};
}

TableRows PendingWorkloadsTable(const Json& summary, const projections::Engine& engine) {
  TableRows rows{{"NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY", "POSITION IN CQ",
                  "POSITION IN LQ", "AGE"}};
  for (const Json& i : summary["items"]) {
    const Json& meta = i["metadata"];
    auto created = ParseRfc3339(meta["creationTimestamp"].get<std::string>());
    rows.push_back({meta["namespace"], meta["name"], i["localQueueName"],
                    std::to_string(i["priority"].get<int64_t>()),
                    std::to_string(i["positionInClusterQueue"].get<uint64_t>()),
                    std::to_string(i["positionInLocalQueue"].get<uint64_t>()),
                    created.ok() ? ShortDuration(engine.now_ns() - *created) : ""});
  }
  return rows;
}

}  // namespace admission::ops
