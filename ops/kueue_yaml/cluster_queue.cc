// ClusterQueue: cohort, quota, queueing strategy, namespaceSelector, stop policy, preemption,
// flavor fungibility and admission checks.

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

bool DocumentParser::ParseClusterQueue(const YAML::Node& obj, const std::string& p, bool v1beta2) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  // Kueue's, not modelled.
  AcceptFields(spec, {"concurrentAdmissionPolicy", "defaultLocalQueue"});
  if (!CheckSpec(spec, p)) return false;
  const std::string sp = Join(p, "spec");
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initClusterQueueDefined();
  def.setName(T(meta.name));

  // v1beta1 spec.cohort became v1beta2 spec.cohortName (Kueue's conversion maps one to the
  // other). The wrong spelling would be dropped by Kueue as unknown, silently leaving the
  // queue outside its cohort; refuse it instead.
  const std::string_view cohort_key = v1beta2 ? "cohortName" : "cohort";
  const std::string_view other_key = v1beta2 ? "cohort" : "cohortName";
  if (!Absent(Child(spec, other_key))) {
    return Fail(Child(spec, other_key), Join(sp, other_key),
                Quote(other_key) + " is the " + (v1beta2 ? "v1beta1" : "v1beta2") +
                    " spelling; in " + std::string(v1beta2 ? kApiV1beta2 : kApiV1beta1) +
                    " write spec." + std::string(cohort_key));
  }
  std::string cohort;
  if (!OptString(spec, cohort_key, sp, &cohort)) return false;
  if (!cohort.empty() && !CheckSubdomain(Child(spec, cohort_key), Join(sp, cohort_key), cohort)) {
    return false;
  }
  def.setCohortName(T(cohort));
  if (!ParseResourceGroups(spec, sp, !cohort.empty(),
                           "a cohort (spec." + std::string(cohort_key) + ")", def)) {
    return false;
  }

  const YAML::Node strategy = Child(spec, "queueingStrategy");
  if (!Absent(strategy)) {
    std::string s;
    if (!ReadEnum(strategy, Join(sp, "queueingStrategy"), {"StrictFIFO", "BestEffortFIFO"}, &s)) {
      return false;
    }
    def.setQueueingStrategy(s == "StrictFIFO" ? schema::QueueingStrategy::STRICT_FIFO
                                              : schema::QueueingStrategy::BEST_EFFORT_FIFO);
  }

  // Absent namespaceSelector: Kueue (v1beta1 and v1beta2 alike, "Defaults to null which is a
  // nothing selector") admits from no namespace. `{}` admits from every namespace.
  const YAML::Node selector = Child(spec, "namespaceSelector");
  if (!Absent(selector) &&
      !ParseLabelSelector(selector, Join(sp, "namespaceSelector"), def.initNamespaceSelector())) {
    return false;
  }

  schema::StopPolicy stop = schema::StopPolicy::NONE;
  if (!ParseStopPolicy(spec, sp, &stop)) return false;
  def.setStopPolicy(stop);
  if (!ParsePreemption(spec, sp, def.initPreemption())) return false;
  if (!ParseFlavorFungibility(spec, sp, v1beta2, def.initFlavorFungibility())) return false;
  if (!ParseAdmissionChecks(spec, sp, def)) return false;
  if (!ParseFairSharing(spec, sp, def)) return false;
  // spec.admissionScope.admissionMode (admission fair sharing; engine v14).
  const YAML::Node scope = Child(spec, "admissionScope");
  if (!Absent(scope)) {
    const std::string ap = Join(sp, "admissionScope");
    if (!ExpectMap(scope, ap)) return false;
    const YAML::Node mode = Child(scope, "admissionMode");
    if (Absent(mode)) return Fail(scope, Join(ap, "admissionMode"), "required");
    std::string m;
    if (!ReadEnum(mode, Join(ap, "admissionMode"),
                  {"UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"}, &m)) {
      return false;
    }
    def.setAdmissionMode(m == "UsageBasedAdmissionFairSharing"
                             ? schema::AdmissionMode::USAGE_BASED_ADMISSION_FAIR_SHARING
                             : schema::AdmissionMode::NO_ADMISSION_FAIR_SHARING);
  }

  int64_t max_wait_ns = 0;
  if (!ReadDurationAnnotation(meta.annotations, kMaxWaitAnnotation, meta.node, p, &max_wait_ns)) {
    return false;
  }
  def.setMaxWaitNs(max_wait_ns);
  return Emit(message, obj, p, "ClusterQueue", kind_, "", meta.name);
}

bool DocumentParser::ParseStopPolicy(const YAML::Node& spec, const std::string& sp,
                                     schema::StopPolicy* out) {
  const YAML::Node n = Child(spec, "stopPolicy");
  if (Absent(n)) return true;
  std::string s;
  if (!ReadEnum(n, Join(sp, "stopPolicy"), {"None", "Hold", "HoldAndDrain"}, &s)) return false;
  *out = s == "Hold"           ? schema::StopPolicy::HOLD
         : s == "HoldAndDrain" ? schema::StopPolicy::HOLD_AND_DRAIN
                               : schema::StopPolicy::NONE;
  return true;
}

bool DocumentParser::ParsePreemption(const YAML::Node& spec, const std::string& sp,
                                     schema::PreemptionPolicy::Builder b) {
  const YAML::Node n = Child(spec, "preemption");
  if (Absent(n)) return true;  // Kueue's defaults: Never everywhere, the enum zeros
  const std::string pp = Join(sp, "preemption");
  if (!ExpectMap(n, pp)) return false;
  std::string within = "Never", reclaim = "Never", borrow = "Never";
  const YAML::Node within_node = Child(n, "withinClusterQueue");
  if (!Absent(within_node) &&
      !ReadEnum(within_node, Join(pp, "withinClusterQueue"),
                {"Never", "LowerPriority", "LowerOrNewerEqualPriority"}, &within)) {
    return false;
  }
  const YAML::Node reclaim_node = Child(n, "reclaimWithinCohort");
  if (!Absent(reclaim_node) && !ReadEnum(reclaim_node, Join(pp, "reclaimWithinCohort"),
                                         {"Never", "LowerPriority", "Any"}, &reclaim)) {
    return false;
  }
  const YAML::Node borrow_node = Child(n, "borrowWithinCohort");
  if (!Absent(borrow_node)) {
    const std::string bp = Join(pp, "borrowWithinCohort");
    if (!ExpectMap(borrow_node, bp)) return false;
    const YAML::Node policy = Child(borrow_node, "policy");
    if (!Absent(policy) &&
        !ReadEnum(policy, Join(bp, "policy"), {"Never", "LowerPriority"}, &borrow)) {
      return false;
    }
    const YAML::Node threshold = Child(borrow_node, "maxPriorityThreshold");
    if (!Absent(threshold)) {
      int32_t v = 0;
      if (!ReadInt32(threshold, Join(bp, "maxPriorityThreshold"),
                     std::numeric_limits<int32_t>::min(), &v)) {
        return false;
      }
      b.setHasMaxPriorityThreshold(true);
      b.setMaxPriorityThreshold(v);
    }
    if (reclaim == "Never" && borrow != "Never") {
      return Fail(borrow_node, Join(bp, "policy"),
                  "must be Never when reclaimWithinCohort is Never (Kueue's rule)");
    }
  }
  b.setWithinClusterQueue(within == "LowerPriority"
                              ? schema::WithinClusterQueuePolicy::LOWER_PRIORITY
                          : within == "LowerOrNewerEqualPriority"
                              ? schema::WithinClusterQueuePolicy::LOWER_OR_NEWER_EQUAL_PRIORITY
                              : schema::WithinClusterQueuePolicy::NEVER);
  b.setReclaimWithinCohort(reclaim == "LowerPriority"
                               ? schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY
                           : reclaim == "Any" ? schema::ReclaimWithinCohortPolicy::ANY
                                              : schema::ReclaimWithinCohortPolicy::NEVER);
  b.setBorrowWithinCohort(borrow == "LowerPriority"
                              ? schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY
                              : schema::ReclaimWithinCohortPolicy::NEVER);
  return true;
}

// v1beta1 says Borrow and Preempt where v1beta2 says MayStopSearch; both are accepted in
// both versions, as they mean the same.
bool DocumentParser::ParseFlavorFungibility(const YAML::Node& spec, const std::string& sp,
                                            bool v1beta2, schema::FlavorFungibility::Builder b) {
  const YAML::Node n = Child(spec, "flavorFungibility");
  if (Absent(n)) return true;
  const std::string fp = Join(sp, "flavorFungibility");
  if (!ExpectMap(n, fp)) return false;
  std::string when_borrow = "MayStopSearch", when_preempt = "TryNextFlavor";
  const YAML::Node borrow = Child(n, "whenCanBorrow");
  if (!Absent(borrow) && !ReadEnum(borrow, Join(fp, "whenCanBorrow"),
                                   {"Borrow", "MayStopSearch", "TryNextFlavor"}, &when_borrow)) {
    return false;
  }
  const YAML::Node preempt = Child(n, "whenCanPreempt");
  if (!Absent(preempt) &&
      !ReadEnum(preempt, Join(fp, "whenCanPreempt"),
                {"Preempt", "MayStopSearch", "TryNextFlavor"}, &when_preempt)) {
    return false;
  }
  b.setWhenCanBorrow(when_borrow == "TryNextFlavor" ? schema::FungibilityAction::TRY_NEXT_FLAVOR
                                                    : schema::FungibilityAction::BORROW);
  b.setWhenCanPreempt(when_preempt == "TryNextFlavor" ? schema::FungibilityAction::TRY_NEXT_FLAVOR
                                                      : schema::FungibilityAction::PREEMPT);
  const YAML::Node preference = Child(n, "preference");
  if (!Absent(preference)) {
    std::string s;
    if (!ReadEnum(preference, Join(fp, "preference"),
                  {"BorrowingOverPreemption", "PreemptionOverBorrowing"}, &s)) {
      return false;
    }
    if (v1beta2 && (when_borrow != "TryNextFlavor" || when_preempt != "TryNextFlavor")) {
      return Fail(preference, Join(fp, "preference"),
                  "can only be set when both whenCanBorrow and whenCanPreempt are "
                  "TryNextFlavor (Kueue's rule)");
    }
    b.setPreference(s == "PreemptionOverBorrowing"
                        ? schema::FungibilityPreference::PREEMPTION_OVER_BORROWING
                        : schema::FungibilityPreference::BORROWING_OVER_PREEMPTION);
  }
  return true;
}

bool DocumentParser::ParseAdmissionChecks(const YAML::Node& spec, const std::string& sp,
                                          schema::ClusterQueueDef::Builder def) {
  const YAML::Node checks = Child(spec, "admissionChecks");
  const YAML::Node strategy = Child(spec, "admissionChecksStrategy");
  if (!Absent(checks) && !Absent(strategy)) {
    return Fail(strategy, Join(sp, "admissionChecksStrategy"),
                "either admissionChecks or admissionChecksStrategy can be set, not both");
  }
  if (!Absent(checks)) {
    const std::string cp = Join(sp, "admissionChecks");
    std::vector<std::string> names;
    if (!ReadStringList(checks, cp, kAdmissionChecksMax, &names)) return false;
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!CheckSubdomain(checks[i], Index(cp, i), names[i])) return false;
      if (!seen.insert(names[i]).second) {
        return Fail(checks[i], Index(cp, i),
                    "admission check " + Quote(names[i]) + " is listed twice");
      }
    }
    auto list = def.initAdmissionChecks(static_cast<unsigned>(names.size()));
    for (size_t i = 0; i < names.size(); ++i) list.set(static_cast<unsigned>(i), T(names[i]));
  }
  return Absent(strategy) || ParseAdmissionChecksStrategy(strategy, sp, def);
}

// admissionChecksStrategy: the checks, each applying to all flavors or to those it names.
bool DocumentParser::ParseAdmissionChecksStrategy(const YAML::Node& strategy,
                                                  const std::string& sp,
                                                  schema::ClusterQueueDef::Builder def) {
  const std::string stp = Join(sp, "admissionChecksStrategy");
  if (!ExpectMap(strategy, stp)) return false;
  const YAML::Node rules = Child(strategy, "admissionChecks");
  const std::string rp = Join(stp, "admissionChecks");
  if (Absent(rules)) return Fail(strategy, rp, "required: at least one admission check");
  if (!ExpectSequence(rules, rp, kAdmissionChecksMax)) return false;
  if (rules.size() == 0) return Fail(rules, rp, "must list at least one admission check");
  auto list = def.initAdmissionChecksStrategy(static_cast<unsigned>(rules.size()));
  std::set<std::string> seen;
  for (size_t i = 0; i < rules.size(); ++i) {
    const YAML::Node rule = rules[i];
    const std::string rpi = Index(rp, i);
    if (!ExpectMap(rule, rpi)) return false;
    std::string name;
    if (!ReqString(rule, "name", rpi, &name, "the AdmissionCheck's name")) return false;
    if (!CheckSubdomain(Child(rule, "name"), Join(rpi, "name"), name)) return false;
    if (!seen.insert(name).second) {
      return Fail(Child(rule, "name"), Join(rpi, "name"),
                  "admission check " + Quote(name) + " is listed twice");
    }
    std::vector<std::string> on_flavors;
    const YAML::Node flavors = Child(rule, "onFlavors");
    if (!Absent(flavors)) {
      if (!ReadStringList(flavors, Join(rpi, "onFlavors"), kOnFlavorsMax, &on_flavors)) {
        return false;
      }
      for (size_t f = 0; f < on_flavors.size(); ++f) {
        if (!CheckSubdomain(flavors[f], Index(Join(rpi, "onFlavors"), f), on_flavors[f])) {
          return false;
        }
      }
    }
    auto b = list[static_cast<unsigned>(i)];
    b.setName(T(name));
    auto flavors_builder = b.initOnFlavors(static_cast<unsigned>(on_flavors.size()));
    for (size_t f = 0; f < on_flavors.size(); ++f) {
      flavors_builder.set(static_cast<unsigned>(f), T(on_flavors[f]));
    }
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
