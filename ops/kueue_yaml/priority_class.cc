// WorkloadPriorityClass: a name and a value.

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParsePriorityClass(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initPriorityClassDefined();
  def.setName(T(meta.name));
  const YAML::Node value = Child(obj, "value");
  if (Absent(value)) return Fail(obj, Join(p, "value"), "required: the priority of the class");
  int32_t v = 0;
  if (!ReadInt32(value, Join(p, "value"), std::numeric_limits<int32_t>::min(), &v)) return false;
  def.setValue(v);
  std::string description;
  if (!OptString(obj, "description", p, &description)) return false;
  def.setDescription(T(description));
  return Emit(message, obj, p, "WorkloadPriorityClass", kind_, "", meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
