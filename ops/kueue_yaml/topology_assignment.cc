// An imported admission's topology assignment (status.admission.podSetAssignments[]
// .topologyAssignment; docs/tas.md): Kueue's levels and, per domain, its values at those levels
// and its pod count. kueue.x-k8s.io/v1beta1 lists the domains; v1beta2 compresses them into
// slices (apis/kueue/v1beta2/workload_types.go, TopologyAssignmentSlice), expanded here.

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

using Domains = std::vector<std::pair<std::vector<std::string>, int32_t>>;

bool DocumentParser::ParseTopologyAssignment(const YAML::Node& ta, const std::string& tap,
                                             bool v1beta2, int32_t count,
                                             schema::PodSetAssignment::Builder b) {
  if (!ExpectMap(ta, tap)) return false;
  std::vector<std::string> levels;
  if (!ReadAssignmentLevels(ta, tap, &levels)) return false;
  Domains domains;
  if (v1beta2 ? !ReadAssignmentSlices(ta, tap, levels.size(), &domains)
              : !ReadAssignmentDomains(ta, tap, levels.size(), &domains)) {
    return false;
  }
  const std::string what = v1beta2 ? "slices" : "domains";
  int64_t total = 0;
  std::set<std::vector<std::string>> seen;
  for (const auto& [values, pods] : domains) {
    total += pods;
    if (!seen.insert(values).second) {
      std::string shown;
      for (const std::string& v : values) shown += (shown.empty() ? "" : "/") + v;
      return Fail(Child(ta, what), Join(tap, what),
                  "the domain " + Quote(shown) + " is assigned twice");
    }
  }
  if (total != count) {
    return Fail(Child(ta, what), Join(tap, what),
                "the domains' counts sum to " + std::to_string(total) +
                    ", not the assignment's count " + std::to_string(count));
  }
  auto out = b.initTopologyAssignment();
  auto level_list = out.initLevels(static_cast<unsigned>(levels.size()));
  for (size_t i = 0; i < levels.size(); ++i) {
    level_list.set(static_cast<unsigned>(i), T(levels[i]));
  }
  auto domain_list = out.initDomains(static_cast<unsigned>(domains.size()));
  for (size_t i = 0; i < domains.size(); ++i) {
    auto d = domain_list[static_cast<unsigned>(i)];
    auto values = d.initValues(static_cast<unsigned>(domains[i].first.size()));
    for (size_t j = 0; j < domains[i].first.size(); ++j) {
      values.set(static_cast<unsigned>(j), T(domains[i].first[j]));
    }
    d.setCount(domains[i].second);
  }
  return true;
}

// levels: 1 to 16 node label keys, unique.
bool DocumentParser::ReadAssignmentLevels(const YAML::Node& ta, const std::string& tap,
                                          std::vector<std::string>* levels) {
  const std::string lp = Join(tap, "levels");
  const YAML::Node node = Child(ta, "levels");
  if (Absent(node)) return Fail(ta, lp, "required: the node labels of the assigned levels");
  if (!ReadStringList(node, lp, kTopologyLevelsMax, levels)) return false;
  if (levels->empty()) return Fail(node, lp, "must list at least one level");
  std::set<std::string> seen;
  for (size_t i = 0; i < levels->size(); ++i) {
    const std::string& level = (*levels)[i];
    if (!IsQualifiedName(level)) {
      return Fail(node[i], Index(lp, i),
                  Quote(level) + " is not a valid node label key: " + kLabelKeyRule);
    }
    if (!seen.insert(level).second) {
      return Fail(node[i], Index(lp, i), Quote(level) + " is given twice");
    }
  }
  return true;
}

// v1beta1: domains[] {values: one per level, count >= 1}.
bool DocumentParser::ReadAssignmentDomains(const YAML::Node& ta, const std::string& tap,
                                           size_t levels, Domains* out) {
  const std::string dp = Join(tap, "domains");
  const YAML::Node domains = Child(ta, "domains");
  if (Absent(domains)) {
    return Fail(ta, dp, !Absent(Child(ta, "slices"))
                            ? "required: the pods' domains and counts ('slices' is the "
                              "kueue.x-k8s.io/v1beta2 spelling)"
                            : "required: the pods' domains and counts");
  }
  if (!ExpectSequence(domains, dp, kTopologyDomainsMax)) return false;
  for (size_t i = 0; i < domains.size(); ++i) {
    const std::string ip = Index(dp, i);
    if (!ExpectMap(domains[i], ip)) return false;
    std::vector<std::string> values;
    const YAML::Node values_node = Child(domains[i], "values");
    if (Absent(values_node)) return Fail(domains[i], Join(ip, "values"), "required");
    if (!ReadStringList(values_node, Join(ip, "values"), kTopologyLevelsMax, &values)) {
      return false;
    }
    if (values.size() != levels) {
      return Fail(values_node, Join(ip, "values"),
                  "has " + std::to_string(values.size()) + " values; the assignment has " +
                      std::to_string(levels) + " levels (one value per level)");
    }
    for (size_t j = 0; j < values.size(); ++j) {
      if (!IsLabelValue(values[j]) || values[j].empty()) {
        return Fail(values_node[j], Index(Join(ip, "values"), j),
                    Quote(values[j]) + " is not a valid node label value");
      }
    }
    int32_t count = 0;
    const YAML::Node count_node = Child(domains[i], "count");
    if (Absent(count_node)) return Fail(domains[i], Join(ip, "count"), "required");
    if (!ReadInt32(count_node, Join(ip, "count"), 1, &count)) return false;
    out->emplace_back(std::move(values), count);
  }
  return true;
}

// v1beta2: slices[] {domainCount, valuesPerLevel (one per level), podCounts}, their union.
bool DocumentParser::ReadAssignmentSlices(const YAML::Node& ta, const std::string& tap,
                                          size_t levels, Domains* out) {
  const std::string sp = Join(tap, "slices");
  const YAML::Node slices = Child(ta, "slices");
  if (Absent(slices)) {
    return Fail(ta, sp, !Absent(Child(ta, "domains"))
                            ? "required: the pods' domains and counts ('domains' is the "
                              "kueue.x-k8s.io/v1beta1 spelling)"
                            : "required: the pods' domains and counts");
  }
  if (!ExpectSequence(slices, sp, kTopologySlicesMax)) return false;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (!ReadSlice(slices[i], Index(sp, i), levels, out)) return false;
    if (out->size() > kTopologyDomainsMax) {
      return Fail(slices[i], Index(sp, i),
                  "more than " + std::to_string(kTopologyDomainsMax) + " domains in all");
    }
  }
  return true;
}

bool DocumentParser::ReadSlice(const YAML::Node& slice, const std::string& sp, size_t levels,
                               Domains* out) {
  if (!ExpectMap(slice, sp)) return false;
  int64_t domain_count = 0;
  const YAML::Node dc = Child(slice, "domainCount");
  if (Absent(dc)) return Fail(slice, Join(sp, "domainCount"), "required");
  if (!ReadInt(dc, Join(sp, "domainCount"), 1, kTopologyDomainsMax, &domain_count)) return false;
  const auto domains = static_cast<int32_t>(domain_count);
  const std::string vp = Join(sp, "valuesPerLevel");
  const YAML::Node per_level = Child(slice, "valuesPerLevel");
  if (Absent(per_level)) return Fail(slice, vp, "required: one entry per level");
  if (!ExpectSequence(per_level, vp, kTopologyLevelsMax)) return false;
  if (per_level.size() != levels) {
    return Fail(per_level, vp,
                "has " + std::to_string(per_level.size()) + " entries; the assignment has " +
                    std::to_string(levels) + " levels (one entry per level)");
  }
  std::vector<std::vector<std::string>> values(static_cast<size_t>(domains));
  for (size_t l = 0; l < levels; ++l) {
    std::vector<std::string> level_values;
    if (!ReadSliceLevel(per_level[l], Index(vp, l), domains, &level_values)) return false;
    for (size_t d = 0; d < values.size(); ++d) values[d].push_back(level_values[d]);
  }
  const std::string pp = Join(sp, "podCounts");
  const YAML::Node counts = Child(slice, "podCounts");
  if (Absent(counts)) return Fail(slice, pp, "required: the pods per domain");
  if (!ExpectMap(counts, pp)) return false;
  const YAML::Node universal = Child(counts, "universal");
  const YAML::Node individual = Child(counts, "individual");
  if (Absent(universal) == Absent(individual)) {
    return Fail(counts, pp, "exactly one of universal, individual must be set");
  }
  std::vector<int32_t> pods(static_cast<size_t>(domains));
  if (!Absent(universal)) {
    int32_t n = 0;
    if (!ReadInt32(universal, Join(pp, "universal"), 1, &n)) return false;
    std::fill(pods.begin(), pods.end(), n);
  } else {
    const std::string ip = Join(pp, "individual");
    if (!ExpectSequence(individual, ip, kTopologyDomainsMax)) return false;
    if (individual.size() != pods.size()) {
      return Fail(individual, ip, "must have length equal to domainCount (" +
                                      std::to_string(domains) + ")");
    }
    for (size_t d = 0; d < pods.size(); ++d) {
      if (!ReadInt32(individual[d], Index(ip, d), 1, &pods[d])) return false;
    }
  }
  for (size_t d = 0; d < pods.size(); ++d) out->emplace_back(std::move(values[d]), pods[d]);
  return true;
}

// One valuesPerLevel entry: universal (every domain's value) or individual (prefix + root +
// suffix per domain).
bool DocumentParser::ReadSliceLevel(const YAML::Node& level, const std::string& lp,
                                    int32_t domains, std::vector<std::string>* values) {
  if (!ExpectMap(level, lp)) return false;
  const YAML::Node universal = Child(level, "universal");
  const YAML::Node individual = Child(level, "individual");
  if (Absent(universal) == Absent(individual)) {
    return Fail(level, lp, "exactly one of universal, individual must be set");
  }
  if (!Absent(universal)) {
    std::string v;
    if (!ReadString(universal, Join(lp, "universal"), &v)) return false;
    if (v.empty() || !IsLabelValue(v)) {
      return Fail(universal, Join(lp, "universal"), Quote(v) + " is not a valid node label value");
    }
    values->assign(static_cast<size_t>(domains), v);
    return true;
  }
  const std::string ip = Join(lp, "individual");
  if (!ExpectMap(individual, ip)) return false;
  std::string prefix, suffix;
  if (!OptString(individual, "prefix", ip, &prefix) ||
      !OptString(individual, "suffix", ip, &suffix)) {
    return false;
  }
  const std::string rp = Join(ip, "roots");
  const YAML::Node roots = Child(individual, "roots");
  if (Absent(roots)) return Fail(individual, rp, "required: one root per domain");
  std::vector<std::string> root_values;
  if (!ReadStringList(roots, rp, kTopologyDomainsMax, &root_values)) return false;
  if (root_values.size() != static_cast<size_t>(domains)) {
    return Fail(roots, rp, "must have length equal to domainCount (" + std::to_string(domains) +
                               ")");
  }
  for (size_t d = 0; d < root_values.size(); ++d) {
    std::string v = prefix + root_values[d] + suffix;
    if (v.empty() || !IsLabelValue(v)) {
      return Fail(roots[d], Index(rp, d), Quote(v) + " is not a valid node label value");
    }
    values->push_back(std::move(v));
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
