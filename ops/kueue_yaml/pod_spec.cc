// A pod template's spec as a PodSet: effective requests, nodeSelector, tolerations, node
// affinity.

#include <algorithm>
#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// The requests of one container: requests, and limits where a request is missing (Kubernetes
// defaults a missing request to the limit; Kueue counts it so).
bool DocumentParser::ContainerRequests(const YAML::Node& container, const std::string& cp,
                                       std::map<std::string, int64_t>* out) {
  if (!ExpectMap(container, cp)) return false;
  const YAML::Node resources = Child(container, "resources");
  if (Absent(resources)) return true;
  const std::string rp = Join(cp, "resources");
  if (!ExpectMap(resources, rp)) return false;
  const YAML::Node requests = Child(resources, "requests");
  if (!Absent(requests) && !ReadResourceMap(requests, Join(rp, "requests"), out)) return false;
  const YAML::Node limits = Child(resources, "limits");
  if (!Absent(limits)) {
    std::map<std::string, int64_t> limit_values;
    if (!ReadResourceMap(limits, Join(rp, "limits"), &limit_values)) return false;
    for (const auto& [name, milli] : limit_values) out->emplace(name, milli);  // keeps requests
  }
  return true;
}

bool DocumentParser::AddInto(std::map<std::string, int64_t>* total,
                             const std::map<std::string, int64_t>& add, const YAML::Node& at,
                             const std::string& path) {
  for (const auto& [name, milli] : add) {
    int64_t& slot = (*total)[name];
    if (__builtin_add_overflow(slot, milli, &slot)) {
      return Fail(at, path,
                  "the sum of " + Quote(name) + " requests overflows int64 milli-units");
    }
  }
  return true;
}

void DocumentParser::MaxInto(std::map<std::string, int64_t>* total,
                             const std::map<std::string, int64_t>& other) {
  for (const auto& [name, milli] : other) {
    int64_t& slot = (*total)[name];
    slot = std::max(slot, milli);
  }
}

// A pod template's spec into a PodSet: per-pod requests by Kubernetes' effective request
// rules, nodeSelector, tolerations and the required node affinity.
//   requests = max(sum(containers) + sum(sidecars), max over init containers of (its
//              requests + the sidecars started before it)) + overhead
// where sidecars are init containers with restartPolicy Always.
bool DocumentParser::ParsePodSpec(const YAML::Node& spec, const std::string& sp, int64_t count,
                                  schema::PodSet::Builder ps, std::string* priority_class_name) {
  if (!ExpectMap(spec, sp)) return false;
  AcceptPodSpecFields(spec);
  if (!PodRequests(spec, sp, count, ps)) return false;

  std::map<std::string, std::string> node_selector;
  const YAML::Node selector = Child(spec, "nodeSelector");
  if (!Absent(selector) && !ReadStringMap(selector, Join(sp, "nodeSelector"), kMapEntriesMax,
                                          KeyRule::kLabel, &node_selector)) {
    return false;
  }
  SetLabels(ps.initNodeSelector(static_cast<unsigned>(node_selector.size())), node_selector);

  const YAML::Node tolerations = Child(spec, "tolerations");
  if (!Absent(tolerations)) {
    auto init = [&ps](unsigned n) { return ps.initTolerations(n); };
    if (!ParseTolerations(tolerations, Join(sp, "tolerations"), kListItemsMax, init)) {
      return false;
    }
  }

  if (!ParseNodeAffinity(spec, sp, ps)) return false;
  return OptString(spec, "priorityClassName", sp, priority_class_name);
}

// The per-pod requests of the pod spec (the rules above); refused when they times `count`
// overflow.
bool DocumentParser::PodRequests(const YAML::Node& spec, const std::string& sp, int64_t count,
                                 schema::PodSet::Builder ps) {
  const YAML::Node containers = Child(spec, "containers");
  const std::string cp = Join(sp, "containers");
  if (Absent(containers)) return Fail(spec, cp, "required: a pod has at least one container");
  if (!ExpectSequence(containers, cp, kContainersMax)) return false;
  if (containers.size() == 0) return Fail(containers, cp, "must list at least one container");
  std::map<std::string, int64_t> total;
  for (size_t i = 0; i < containers.size(); ++i) {
    std::map<std::string, int64_t> requests;
    AcceptContainerFields(containers[i]);
    if (!ContainerRequests(containers[i], Index(cp, i), &requests)) return false;
    if (!AddInto(&total, requests, containers[i], Index(cp, i))) return false;
  }
  const YAML::Node init_containers = Child(spec, "initContainers");
  if (!Absent(init_containers)) {
    const std::string ip = Join(sp, "initContainers");
    if (!ExpectSequence(init_containers, ip, kContainersMax)) return false;
    std::map<std::string, int64_t> sidecars;
    std::map<std::string, int64_t> init_max;
    for (size_t i = 0; i < init_containers.size(); ++i) {
      const YAML::Node c = init_containers[i];
      const std::string cpi = Index(ip, i);
      std::map<std::string, int64_t> requests;
      AcceptContainerFields(c);
      if (!ContainerRequests(c, cpi, &requests)) return false;
      std::string restart_policy;
      if (!OptString(c, "restartPolicy", cpi, &restart_policy)) return false;
      if (restart_policy == "Always") {
        if (!AddInto(&total, requests, c, cpi) || !AddInto(&sidecars, requests, c, cpi)) {
          return false;
        }
        MaxInto(&init_max, sidecars);
      } else {
        if (!AddInto(&requests, sidecars, c, cpi)) return false;
        MaxInto(&init_max, requests);
      }
    }
    MaxInto(&total, init_max);
  }
  const YAML::Node overhead = Child(spec, "overhead");
  if (!Absent(overhead)) {
    std::map<std::string, int64_t> amounts;
    if (!ReadResourceMap(overhead, Join(sp, "overhead"), &amounts)) return false;
    if (!AddInto(&total, amounts, overhead, Join(sp, "overhead"))) return false;
  }
  for (const auto& [name, milli] : total) {
    int64_t product = 0;
    if (__builtin_mul_overflow(milli, count, &product)) {
      return Fail(spec, sp,
                  Quote(name) + " requests times the pod count " + std::to_string(count) +
                      " overflow int64 milli-units");
    }
  }
  SetResources(ps.initRequests(static_cast<unsigned>(total.size())), total);
  return true;
}

// The required node affinity: at most one nodeSelectorTerm, as PodSet.requiredAffinity.
bool DocumentParser::ParseNodeAffinity(const YAML::Node& spec, const std::string& sp,
                                       schema::PodSet::Builder ps) {
  const YAML::Node affinity = Child(spec, "affinity");
  if (Absent(affinity)) return true;
  const std::string ap = Join(sp, "affinity");
  if (!ExpectMap(affinity, ap)) return false;
  AcceptFields(affinity, {"podAffinity", "podAntiAffinity"});  // not modelled
  const YAML::Node node_affinity = Child(affinity, "nodeAffinity");
  const std::string np = Join(ap, "nodeAffinity");
  if (!Absent(node_affinity) && !ExpectMap(node_affinity, np)) return false;
  AcceptFields(node_affinity, {"preferredDuringSchedulingIgnoredDuringExecution"});
  const YAML::Node required =
      Child(node_affinity, "requiredDuringSchedulingIgnoredDuringExecution");
  const std::string rp = Join(np, "requiredDuringSchedulingIgnoredDuringExecution");
  if (!Absent(required)) {
    if (!ExpectMap(required, rp)) return false;
    const YAML::Node terms = Child(required, "nodeSelectorTerms");
    const std::string tp = Join(rp, "nodeSelectorTerms");
    if (!Absent(terms)) {
      if (!ExpectSequence(terms, tp, kListItemsMax)) return false;
      // Several terms are ORed; PodSet.requiredAffinity holds one ANDed term, so taking
      // only the first would silently narrow where the pods may go.
      if (terms.size() > 1) {
        return Fail(terms, tp,
                    "has " + std::to_string(terms.size()) +
                        " terms; only one nodeSelectorTerm (ORed terms are not "
                        "supported) can be admitted");
      }
      if (terms.size() == 1) {
        const YAML::Node term = terms[0];
        if (!ExpectMap(term, Index(tp, 0))) return false;
        AcceptFields(term, {"matchFields"});  // not modelled
        const YAML::Node exprs = Child(term, "matchExpressions");
        if (!Absent(exprs)) {
          auto init = [&ps](unsigned n) { return ps.initRequiredAffinity(n); };
          if (!ParseRequirements(exprs, Join(Index(tp, 0), "matchExpressions"), true, init)) {
            return false;
          }
        }
      }
    }
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
