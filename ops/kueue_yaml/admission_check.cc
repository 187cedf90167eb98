// AdmissionCheck: its controller, and our timeout and retry annotations.

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseAdmissionCheck(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  AcceptFields(spec, {"retryDelayMinutes"});  // Kueue's, not modelled
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
  const YAML::Node params = Child(spec, "parameters");
  if (controller == kBudgetController) {
    // The ledger decides this check from the BudgetPolicy its parameters name (engine v25).
    const std::string pp = Join(sp, "parameters");
    if (Absent(params)) return Fail(spec, pp, "required: the BudgetPolicy this check decides by");
    if (!ExpectMap(params, pp)) return false;
    std::string group, kind, name;
    if (!OptString(params, "apiGroup", pp, &group) || !OptString(params, "kind", pp, &kind) ||
        !ReqString(params, "name", pp, &name, "the BudgetPolicy's name")) {
      return false;
    }
    if (group != "admission-ledger.io" || kind != "BudgetPolicy") {
      return Fail(params, pp, "a budget check names apiGroup admission-ledger.io, kind "
                              "BudgetPolicy (got " + Quote(group) + ", " + Quote(kind) + ")");
    }
    def.setParameters(T(name));
  } else {
    AcceptFields(spec, {"parameters"});  // another controller's: not ours to read
  }

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
