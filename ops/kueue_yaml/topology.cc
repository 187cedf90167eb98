// Topology (kueue.x-k8s.io, cluster-scoped): the node labels of its levels, highest first.
// Kueue v0.17's CRD validation (apis/kueue/v1beta2/topology_types.go): 1 to 16 levels, each a
// node label key, unique, kubernetes.io/hostname only at the lowest level.

#include <set>
#include <string>
#include <vector>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseTopology(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  if (!CheckSpec(spec, p)) return false;
  std::vector<std::string> levels;
  if (!ParseTopologyLevels(obj, spec, Join(p, "spec"), &levels)) return false;
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initTopologyDefined();
  def.setName(T(meta.name));
  auto list = def.initLevels(static_cast<unsigned>(levels.size()));
  for (size_t i = 0; i < levels.size(); ++i) list.set(static_cast<unsigned>(i), T(levels[i]));
  return Emit(message, obj, p, "Topology", kind_, "", meta.name);
}

// spec.levels[].nodeLabel, highest level first.
bool DocumentParser::ParseTopologyLevels(const YAML::Node& obj, const YAML::Node& spec,
                                         const std::string& sp, std::vector<std::string>* out) {
  const std::string lp = Join(sp, "levels");
  const YAML::Node levels = Child(spec, "levels");
  if (Absent(levels)) {
    return Fail(Absent(spec) ? obj : spec, lp,
                "required: 1 to " + std::to_string(kTopologyLevelsMax) +
                    " levels, each a node label, highest first (Kueue's rule)");
  }
  if (!ExpectSequence(levels, lp, kTopologyLevelsMax)) return false;
  if (levels.size() == 0) {
    return Fail(levels, lp, "must list at least one level (Kueue's rule: minItems 1)");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string ip = Index(lp, i);
    if (!ExpectMap(levels[i], ip)) return false;
    std::string label;
    if (!ReqString(levels[i], "nodeLabel", ip, &label, "the node label of the level")) {
      return false;
    }
    const YAML::Node at = Child(levels[i], "nodeLabel");
    const std::string np = Join(ip, "nodeLabel");
    if (!IsQualifiedName(label)) {
      return Fail(at, np, Quote(label) + " is not a valid node label key: " + kLabelKeyRule);
    }
    if (!seen.insert(label).second) {
      return Fail(at, np, Quote(label) + " is the node label of an earlier level too: levels "
                                         "must be unique (Kueue's rule)");
    }
    if (label == kHostnameLabel && i + 1 != levels.size()) {
      return Fail(at, np, "the kubernetes.io/hostname label can only be used at the lowest level "
                          "of topology (Kueue's rule)");
    }
    out->push_back(std::move(label));
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
