// LocalQueue: the ClusterQueue behind it, its stop policy and fair-sharing weight.

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseLocalQueue(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kNamespaced, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  if (!CheckSpec(spec, p)) return false;
  const std::string sp = Join(p, "spec");
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initLocalQueueDefined();
  def.setNamespace(T(meta.ns));
  def.setName(T(meta.name));
  std::string cq;
  if (Absent(spec)) {
    return Fail(obj, Join(sp, "clusterQueue"), "required: the ClusterQueue behind this queue");
  }
  if (!ReqString(spec, "clusterQueue", sp, &cq, "the ClusterQueue behind this queue")) {
    return false;
  }
  if (!CheckSubdomain(Child(spec, "clusterQueue"), Join(sp, "clusterQueue"), cq)) return false;
  def.setClusterQueue(T(cq));
  schema::StopPolicy stop = schema::StopPolicy::NONE;
  if (!ParseStopPolicy(spec, sp, &stop)) return false;
  def.setStopPolicy(stop);
  if (!ParseFairSharing(spec, sp, def)) return false;
  return Emit(message, obj, p, "LocalQueue", kind_, meta.ns, meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
