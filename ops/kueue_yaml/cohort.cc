// Cohort: its parent, its own quota and its fair-sharing weight.

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseCohort(const YAML::Node& obj, const std::string& p, bool v1beta2) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  if (!CheckSpec(spec, p)) return false;
  const std::string sp = Join(p, "spec");
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initCohortDefined();
  def.setName(T(meta.name));

  // v1beta2 spells it parentName; v1beta1 said `parent` in early releases, parentName later.
  std::string parent, legacy_parent;
  if (!OptString(spec, "parentName", sp, &parent)) return false;
  const YAML::Node legacy = Child(spec, "parent");
  if (!Absent(legacy)) {
    if (v1beta2) {
      return Fail(legacy, Join(sp, "parent"),
                  "'parent' is the early v1beta1 spelling; in kueue.x-k8s.io/v1beta2 write "
                  "spec.parentName");
    }
    if (!ReadString(legacy, Join(sp, "parent"), &legacy_parent)) return false;
    if (!parent.empty() && parent != legacy_parent) {
      return Fail(legacy, Join(sp, "parent"), "conflicts with spec.parentName " + Quote(parent));
    }
    parent = legacy_parent;
  }
  const YAML::Node parent_node = Absent(legacy) ? Child(spec, "parentName") : legacy;
  if (!parent.empty() && !CheckSubdomain(parent_node, Join(sp, "parentName"), parent)) {
    return false;
  }
  if (parent == meta.name) {
    return Fail(parent_node, Join(sp, "parentName"), "a Cohort cannot be its own parent");
  }
  def.setParentName(T(parent));
  if (!ParseResourceGroups(spec, sp, !parent.empty(), "a parent (spec.parentName)", def)) {
    return false;
  }
  if (!ParseFairSharing(spec, sp, def)) return false;
  return Emit(message, obj, p, "Cohort", kind_, "", meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
