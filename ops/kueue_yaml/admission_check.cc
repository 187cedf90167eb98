// AdmissionCheck: its controller, and our timeout and retry annotations.

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseAdmissionCheck(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  AcceptFields(spec, {"parameters", "retryDelayMinutes"});  // Kueue's, not modelled
  if (!CheckSpec(spec, p)) return false;
  const std::string sp = Join(p, "spec");
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initAdmissionCheckDefined();
  def.setName(T(meta.name));
  std::string controller;
  if (Absent(spec)) return Fail(obj, Join(sp, "controllerName"), "required: the check's owner");
  if (!ReqString(spec, "controllerName", sp, &controller,
                 "the controller that owns the check (the only reporter allowed)")) {
    return false;
  }
  if (controller.size() > kNameBytesMax) {
    return Fail(Child(spec, "controllerName"), Join(sp, "controllerName"),
                "longer than " + std::to_string(kNameBytesMax) + " characters");
  }
  def.setControllerName(T(controller));

  const std::string ap = Join(p, "metadata.annotations");
  int64_t ttl = 0, base = 0, max = 0;
  if (!ReadDurationAnnotation(meta.annotations, kPendingTtlAnnotation, meta.node, p, &ttl) ||
      !ReadDurationAnnotation(meta.annotations, kBackoffBaseAnnotation, meta.node, p, &base) ||
      !ReadDurationAnnotation(meta.annotations, kBackoffMaxAnnotation, meta.node, p, &max)) {
    return false;
  }
  if (base != 0 && max != 0 && base > max) {
    return Fail(MetaEntry(meta, "annotations", kBackoffBaseAnnotation),
                MapKey(ap, kBackoffBaseAnnotation), "backoff-base must not exceed backoff-max");
  }
  def.setPendingTtlNs(ttl);
  def.setBackoffBaseNs(base);
  def.setBackoffMaxNs(max);
  if (auto it = meta.annotations.find(std::string(kOnTimeoutAnnotation));
      it != meta.annotations.end()) {
    if (it->second != "Retry" && it->second != "Reject") {
      return Fail(MetaEntry(meta, "annotations", kOnTimeoutAnnotation),
                  MapKey(ap, kOnTimeoutAnnotation),
                  Quote(it->second) + " is not one of Retry, Reject");
    }
    def.setOnTimeout(it->second == "Reject" ? schema::OnTimeout::REJECT
                                            : schema::OnTimeout::RETRY);
  }
  // Kueue retries a check as often as its controller asks: no limit unless ours is set.
  def.setRetryLimit(kNoRetryLimit);
  if (auto it = meta.annotations.find(std::string(kRetryLimitAnnotation));
      it != meta.annotations.end()) {
    Result<int64_t> limit = ParseDecimal(it->second, 0, std::numeric_limits<uint32_t>::max());
    if (!limit.ok()) {
      return Fail(MetaEntry(meta, "annotations", kRetryLimitAnnotation),
                  MapKey(ap, kRetryLimitAnnotation), limit.status().message());
    }
    def.setRetryLimit(static_cast<uint32_t>(*limit));
  }
  return Emit(message, obj, p, "AdmissionCheck", kind_, "", meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
