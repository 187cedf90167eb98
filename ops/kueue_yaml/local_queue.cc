// LocalQueue: the ClusterQueue behind it, its stop policy and fair-sharing weight, and the
// admission fair sharing usage Kueue persisted in its status.

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseLocalQueue(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kNamespaced, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  AcceptFields(spec, {"wallTimePolicy"});  // Kueue's, not modelled
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
  // status.fairSharing.admissionFairSharingStatus.consumedResources: the usage Kueue persisted,
  // which admission fair sharing starts from (as Kueue's initializeAfsIfNeeded).
  const YAML::Node afs =
      Child(Child(Child(obj, "status"), "fairSharing"), "admissionFairSharingStatus");
  if (!Absent(afs)) {
    const std::string ap = Join(p, "status.fairSharing.admissionFairSharingStatus");
    if (!ExpectMap(afs, ap)) return false;
    std::map<std::string, int64_t> consumed;
    const YAML::Node resources = Child(afs, "consumedResources");
    if (!Absent(resources) && !ReadResourceMap(resources, Join(ap, "consumedResources"), &consumed)) {
      return false;
    }
    def.setConsumedResourcesGiven(true);
    auto list = def.initConsumedResources(static_cast<unsigned>(consumed.size()));
    unsigned i = 0;
    for (const auto& [name, milli] : consumed) {
      list[i].setName(T(name));
      list[i++].setMilli(milli);
    }
  }
  return Emit(message, obj, p, "LocalQueue", kind_, meta.ns, meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
