// ResourceFlavor: node labels, taints, tolerations and topology.

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseResourceFlavor(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  AcceptFields(spec, {"resourceWeights"});  // Kueue's, not modelled
  if (!CheckSpec(spec, p)) return false;
  const std::string sp = Join(p, "spec");
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initFlavorDefined();
  def.setName(T(meta.name));

  std::map<std::string, std::string> node_labels;
  const YAML::Node labels = Child(spec, "nodeLabels");
  if (!Absent(labels) && !ReadStringMap(labels, Join(sp, "nodeLabels"), kFlavorNodeLabelsMax,
                                        KeyRule::kLabel, &node_labels)) {
    return false;
  }
  SetLabels(def.initNodeLabels(static_cast<unsigned>(node_labels.size())), node_labels);

  const YAML::Node taints = Child(spec, "nodeTaints");
  if (!Absent(taints) && !ParseTaints(taints, Join(sp, "nodeTaints"), def)) return false;

  const YAML::Node tolerations = Child(spec, "tolerations");
  if (!Absent(tolerations)) {
    auto init = [&def](unsigned n) { return def.initTolerations(n); };
    if (!ParseTolerations(tolerations, Join(sp, "tolerations"), kFlavorTolerationsMax, init)) {
      return false;
    }
  }

  std::string topology;
  if (!OptString(spec, "topologyName", sp, &topology)) return false;
  if (!topology.empty()) {
    if (!CheckSubdomain(Child(spec, "topologyName"), Join(sp, "topologyName"), topology)) {
      return false;
    }
    if (node_labels.empty()) {
      return Fail(Child(spec, "topologyName"), Join(sp, "topologyName"),
                  "needs at least one nodeLabel (Kueue: a topology flavor selects its nodes)");
    }
  }
  def.setTopologyName(T(topology));
  return Emit(message, obj, p, "ResourceFlavor", kind_, "", meta.name);
}

bool DocumentParser::ParseTaints(const YAML::Node& taints, const std::string& tp,
                                 schema::ResourceFlavorDef::Builder def) {
  if (!ExpectSequence(taints, tp, kFlavorTaintsMax)) return false;
  auto list = def.initNodeTaints(static_cast<unsigned>(taints.size()));
  for (size_t i = 0; i < taints.size(); ++i) {
    const YAML::Node taint = taints[i];
    const std::string tpi = Index(tp, i);
    if (!ExpectMap(taint, tpi)) return false;
    std::string key, value, effect;
    if (!ReqString(taint, "key", tpi, &key, "the taint's key")) return false;
    if (!IsQualifiedName(key)) {
      return Fail(Child(taint, "key"), Join(tpi, "key"), Quote(key) + " is not a valid taint key");
    }
    if (!OptString(taint, "value", tpi, &value)) return false;
    const YAML::Node effect_node = Child(taint, "effect");
    if (Absent(effect_node)) return Fail(taint, Join(tpi, "effect"), "required");
    if (!ReadEnum(effect_node, Join(tpi, "effect"),
                  {"NoSchedule", "PreferNoSchedule", "NoExecute"}, &effect)) {
      return false;
    }
    auto b = list[static_cast<unsigned>(i)];
    b.setKey(T(key));
    b.setValue(T(value));
    b.setEffect(T(effect));
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
