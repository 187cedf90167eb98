// Workload: submitted (queued) or imported (already admitted, with its status.admission).

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// The uid of a workload whose manifest names none: from the caller's uid seed (its request id:
// a retry is the same workload, a later submission of the same file a new one), else from the
// namespace and name alone.
std::string DocumentParser::DeriveUid(std::string_view ns, std::string_view name) const {
  const std::string seed = ctx_ == nullptr ? std::string() : ctx_->uid_seed;
  if (!seed.empty()) return UuidFromDigest(Sha256Parts({"uid", ns, name, "seed", seed}));
  return UuidFromDigest(Sha256Parts({"uid", ns, name}));
}

// expectedRuntime and maxExecution from our annotations (and Kueue's own field or label).
bool DocumentParser::ParseRuntimeAnnotations(const Meta& meta, const std::string& p,
                                             int64_t kueue_max_execution_ns,
                                             const std::string& kueue_field,
                                             schema::Workload::Builder w) {
  int64_t expected = 0, max_execution = 0;
  if (!ReadDurationAnnotation(meta.annotations, kExpectedRuntimeAnnotation, meta.node, p,
                              &expected) ||
      !ReadDurationAnnotation(meta.annotations, kMaxExecutionAnnotation, meta.node, p,
                              &max_execution)) {
    return false;
  }
  if (max_execution != 0 && kueue_max_execution_ns != 0 &&
      max_execution != kueue_max_execution_ns) {
    return Fail(MetaEntry(meta, "annotations", kMaxExecutionAnnotation),
                MapKey(Join(p, "metadata.annotations"), kMaxExecutionAnnotation),
                "conflicts with " + kueue_field);
  }
  w.setExpectedRuntimeNs(expected);
  w.setMaxExecutionNs(max_execution != 0 ? max_execution : kueue_max_execution_ns);
  return true;
}

bool DocumentParser::ParseWorkload(const YAML::Node& obj, const std::string& p, bool v1beta2,
                                   bool import) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kNamespaced, !import, &meta)) return false;
  const std::string sp = Join(p, "spec");
  const YAML::Node spec = Child(obj, "spec");
  if (Absent(spec)) return Fail(obj, sp, "required: a Workload has podSets");
  if (!ExpectMap(spec, sp)) return false;

  capnp::MallocMessageBuilder message;
  auto body = message.initRoot<schema::Event>().getBody();
  schema::Workload::Builder w = import ? body.initWorkloadImported().initWorkload()
                                       : body.initWorkloadSubmitted().initWorkload();
  w.setNamespace(T(meta.ns));
  w.setName(T(meta.name));
  const std::string uid = !meta.uid.empty() ? meta.uid : DeriveUid(meta.ns, meta.name);
  w.setUid(T(uid));
  // Kubernetes sets creationTimestamp itself on create, ignoring the client's; a submission
  // that carried one could jump its queue. Only an import keeps the original time.
  w.setCreationTimestampNs(import ? meta.creation_ns : 0);
  SetLabels(w.initLabels(static_cast<unsigned>(meta.labels.size())), meta.labels);
  SetLabels(w.initAnnotations(static_cast<unsigned>(meta.annotations.size())), meta.annotations);

  AcceptFields(spec, {"preemptionGates"});  // not modelled
  if (!ParseWorkloadSpec(meta, spec, p, v1beta2, w)) return false;
  std::map<std::string, int32_t> counts;  // podSet name -> count, for the admission
  if (!ParsePodSets(spec, sp, w, &counts)) return false;

  if (import) {
    // Without status.admission: a pending workload, its creation time and backoff kept.
    const bool admitted = !Absent(Child(Child(obj, "status"), "admission"));
    if (admitted &&
        !ParseAdmission(obj, p, v1beta2, counts, body.getWorkloadImported().initAdmission())) {
      return false;
    }
    if (!ParseImportedStatus(obj, p, admitted, body.getWorkloadImported())) return false;
  } else if (!Absent(Child(Child(obj, "status"), "admission"))) {
    // Submitting an admitted workload would queue it a second time while it runs.
    return Fail(Child(Child(obj, "status"), "admission"), Join(p, "status.admission"),
                "the workload is already admitted: import it instead of submitting it");
  }
  return Emit(message, obj, p, "Workload", kind_, meta.ns, meta.name, uid);
}

// The spec of a Workload but its podSets: queue, priority, active, maximum execution time.
bool DocumentParser::ParseWorkloadSpec(const Meta& meta, const YAML::Node& spec,
                                       const std::string& p, bool v1beta2,
                                       schema::Workload::Builder w) {
  const std::string sp = Join(p, "spec");
  std::string queue;
  if (!ReqString(spec, "queueName", sp, &queue, "the LocalQueue to queue in")) return false;
  if (!CheckSubdomain(Child(spec, "queueName"), Join(sp, "queueName"), queue)) return false;
  w.setQueueName(T(queue));

  const YAML::Node priority = Child(spec, "priority");
  if (!Absent(priority)) {
    int32_t v = 0;
    if (!ReadInt32(priority, Join(sp, "priority"), std::numeric_limits<int32_t>::min(), &v)) {
      return false;
    }
    w.setHasPriority(true);
    w.setPriority(v);
  }
  if (!ParseWorkloadPriorityClass(spec, sp, v1beta2, w)) return false;

  const YAML::Node active = Child(spec, "active");
  if (!Absent(active)) {
    bool v = true;
    if (!ReadBool(active, Join(sp, "active"), &v)) return false;
    w.setActive(v);
  }
  int64_t kueue_max_ns = 0;
  const YAML::Node max_seconds = Child(spec, "maximumExecutionTimeSeconds");
  if (!Absent(max_seconds)) {
    int32_t v = 0;
    if (!ReadInt32(max_seconds, Join(sp, "maximumExecutionTimeSeconds"), 1, &v)) return false;
    kueue_max_ns = int64_t{v} * kNsPerSecond;
  }
  return ParseRuntimeAnnotations(meta, p, kueue_max_ns, "spec.maximumExecutionTimeSeconds", w);
}

// spec.podSets; `counts` gets each podSet's name and count.
bool DocumentParser::ParsePodSets(const YAML::Node& spec, const std::string& sp,
                                  schema::Workload::Builder w,
                                  std::map<std::string, int32_t>* counts) {
  const YAML::Node pod_sets = Child(spec, "podSets");
  const std::string pp = Join(sp, "podSets");
  if (Absent(pod_sets)) return Fail(spec, pp, "required: at least one podSet");
  if (!ExpectSequence(pod_sets, pp, kPodSetsMax)) return false;
  if (pod_sets.size() == 0) return Fail(pod_sets, pp, "must list at least one podSet");
  auto list = w.initPodSets(static_cast<unsigned>(pod_sets.size()));
  size_t with_min_count = 0;
  for (size_t i = 0; i < pod_sets.size(); ++i) {
    const YAML::Node ps = pod_sets[i];
    const std::string psp = Index(pp, i);
    if (!ExpectMap(ps, psp)) return false;
    std::string name = "main";  // Kueue's default podSet name
    if (!OptString(ps, "name", psp, &name)) return false;
    if (!IsDnsLabel(name)) {
      return Fail(Child(ps, "name"), Join(psp, "name"),
                  Quote(name) + " is not a valid podSet name: " + kLabelRule);
    }
    int32_t count = 1;
    const YAML::Node count_node = Child(ps, "count");
    if (!Absent(count_node) && !ReadInt32(count_node, Join(psp, "count"), 0, &count)) {
      return false;
    }
    if (!counts->emplace(name, count).second) {
      return Fail(Child(ps, "name"), Join(psp, "name"),
                  "podSet " + Quote(name) + " appears twice");
    }
    auto b = list[static_cast<unsigned>(i)];
    b.setName(T(name));
    b.setCount(count);
    const YAML::Node min_node = Child(ps, "minCount");
    if (!Absent(min_node)) {
      int32_t min_count = 0;
      if (!ReadInt32(min_node, Join(psp, "minCount"), 1, &min_count)) return false;
      if (min_count > count) {
        return Fail(min_node, Join(psp, "minCount"),
                    "must not exceed count (" + std::to_string(count) + ")");
      }
      if (++with_min_count > 1) {
        return Fail(min_node, Join(psp, "minCount"),
                    "at most one podSet can use minCount (Kueue's rule)");
      }
      b.setMinCount(min_count);
    }
    const YAML::Node tmpl = Child(ps, "template");
    const std::string tp = Join(psp, "template");
    if (Absent(tmpl)) return Fail(ps, tp, "required: the pod template");
    if (!ExpectMap(tmpl, tp)) return false;
    AcceptFields(tmpl, {"metadata"});
    const YAML::Node pod_spec = Child(tmpl, "spec");
    if (Absent(pod_spec)) return Fail(tmpl, Join(tp, "spec"), "required: the pod spec");
    std::string ignored_priority_class;  // a Workload names its class in spec
    if (!ParsePodSpec(pod_spec, Join(tp, "spec"), count, b, &ignored_priority_class) ||
        !ParseWorkloadTopology(ps, psp, count, b)) {
      return false;
    }
  }
  return true;
}

// v1beta1: priorityClassName + priorityClassSource; v1beta2: priorityClassRef{group,kind,name}.
bool DocumentParser::ParseWorkloadPriorityClass(const YAML::Node& spec, const std::string& sp,
                                                bool v1beta2, schema::Workload::Builder w) {
  std::string name, source;
  const YAML::Node ref = Child(spec, "priorityClassRef");
  if (v1beta2) {
    for (std::string_view old_key : {"priorityClassName", "priorityClassSource"}) {
      if (!Absent(Child(spec, old_key))) {
        return Fail(Child(spec, old_key), Join(sp, old_key),
                    Quote(old_key) +
                        " is the v1beta1 spelling; in kueue.x-k8s.io/v1beta2 write "
                        "spec.priorityClassRef {group, kind, name}");
      }
    }
    if (!Absent(ref)) {
      const std::string rp = Join(sp, "priorityClassRef");
      if (!ExpectMap(ref, rp)) return false;
      std::string group, kind;
      if (!ReqString(ref, "group", rp, &group, "kueue.x-k8s.io or scheduling.k8s.io") ||
          !ReqString(ref, "kind", rp, &kind, "WorkloadPriorityClass or PriorityClass") ||
          !ReqString(ref, "name", rp, &name, "the class's name")) {
        return false;
      }
      if (group == "kueue.x-k8s.io" && kind == "WorkloadPriorityClass") {
        source = kWorkloadPriorityClassSource;
      } else if (group == "scheduling.k8s.io" && kind == "PriorityClass") {
        source = kPodPriorityClassSource;
      } else {
        return Fail(ref, rp,
                    "group/kind " + Quote(group + "/" + kind) +
                        " is not kueue.x-k8s.io/WorkloadPriorityClass or "
                        "scheduling.k8s.io/PriorityClass");
      }
      if (!CheckSubdomain(Child(ref, "name"), Join(rp, "name"), name)) return false;
    }
  } else {
    if (!Absent(ref)) {
      return Fail(ref, Join(sp, "priorityClassRef"),
                  "'priorityClassRef' is the v1beta2 spelling; in kueue.x-k8s.io/v1beta1 write "
                  "spec.priorityClassName and spec.priorityClassSource");
    }
    if (!OptString(spec, "priorityClassName", sp, &name)) return false;
    const YAML::Node source_node = Child(spec, "priorityClassSource");
    if (!Absent(source_node) &&
        !ReadEnum(source_node, Join(sp, "priorityClassSource"),
                  {kWorkloadPriorityClassSource, kPodPriorityClassSource, ""}, &source)) {
      return false;
    }
    if (!name.empty() &&
        !CheckSubdomain(Child(spec, "priorityClassName"), Join(sp, "priorityClassName"), name)) {
      return false;
    }
  }
  w.setPriorityClassName(T(name));
  w.setPriorityClassSource(T(source));
  return true;
}

bool DocumentParser::ParseAdmission(const YAML::Node& obj, const std::string& p, bool v1beta2,
                                    const std::map<std::string, int32_t>& counts,
                                    schema::Admission::Builder a) {
  const std::string ap = Join(p, "status.admission");
  const YAML::Node status = Child(obj, "status");
  const YAML::Node admission = Child(status, "admission");
  if (!Absent(status) && !ExpectMap(status, Join(p, "status"))) return false;
  if (Absent(admission)) {
    return Fail(obj, ap,
                "nothing to import: no status.admission (the workload is not admitted; "
                "submit it instead)");
  }
  if (!ExpectMap(admission, ap)) return false;
  std::string cq;
  if (!ReqString(admission, "clusterQueue", ap, &cq,
                 "the ClusterQueue that admitted the workload")) {
    return false;
  }
  if (!CheckSubdomain(Child(admission, "clusterQueue"), Join(ap, "clusterQueue"), cq)) {
    return false;
  }
  a.setClusterQueue(T(cq));
  const YAML::Node assignments = Child(admission, "podSetAssignments");
  const std::string sp = Join(ap, "podSetAssignments");
  if (Absent(assignments)) return Fail(admission, sp, "required: one assignment per podSet");
  if (!ExpectSequence(assignments, sp, kPodSetsMax)) return false;
  auto list = a.initPodSetAssignments(static_cast<unsigned>(assignments.size()));
  std::set<std::string> seen;
  for (size_t i = 0; i < assignments.size(); ++i) {
    if (!ParsePodSetAssignment(assignments[i], Index(sp, i), v1beta2, counts, &seen,
                               list[static_cast<unsigned>(i)])) {
      return false;
    }
  }
  if (seen.size() != counts.size()) {
    for (const auto& [name, count] : counts) {
      if (seen.count(name) == 0) {
        return Fail(assignments, sp, "podSet " + Quote(name) + " has no assignment");
      }
    }
  }
  return true;
}

// One podSetAssignment of status.admission: a podSet of spec.podSets, once, with its flavors,
// usage and count (at most the podSet's).
bool DocumentParser::ParsePodSetAssignment(const YAML::Node& as, const std::string& asp,
                                           bool v1beta2,
                                           const std::map<std::string, int32_t>& counts,
                                           std::set<std::string>* seen,
                                           schema::PodSetAssignment::Builder b) {
  if (!ExpectMap(as, asp)) return false;
  std::string name = "main";
  if (!OptString(as, "name", asp, &name)) return false;
  const auto count_it = counts.find(name);
  if (count_it == counts.end()) {
    return Fail(Child(as, "name"), Join(asp, "name"),
                "no podSet " + Quote(name) + " in spec.podSets");
  }
  if (!seen->insert(name).second) {
    return Fail(Child(as, "name"), Join(asp, "name"),
                "podSet " + Quote(name) + " is assigned twice");
  }
  b.setName(T(name));
  std::map<std::string, std::string> flavors;
  const YAML::Node flavors_node = Child(as, "flavors");
  if (!Absent(flavors_node)) {
    if (!ReadStringMap(flavors_node, Join(asp, "flavors"), kMapEntriesMax, KeyRule::kResource,
                       &flavors)) {
      return false;
    }
    for (const auto& [resource, flavor] : flavors) {
      if (!CheckSubdomain(flavors_node[resource], MapKey(Join(asp, "flavors"), resource),
                          flavor)) {
        return false;
      }
    }
  }
  auto flavor_refs = b.initFlavors(static_cast<unsigned>(flavors.size()));
  unsigned f = 0;
  for (const auto& [resource, flavor] : flavors) {
    flavor_refs[f].setResource(T(resource));
    flavor_refs[f].setFlavor(T(flavor));
    ++f;
  }
  std::map<std::string, int64_t> usage;
  const YAML::Node usage_node = Child(as, "resourceUsage");
  if (!Absent(usage_node) && !ReadResourceMap(usage_node, Join(asp, "resourceUsage"), &usage)) {
    return false;
  }
  SetResources(b.initResourceUsage(static_cast<unsigned>(usage.size())), usage);
  int32_t count = count_it->second;  // Kueue: a missing count means the podSet's count
  const YAML::Node count_node = Child(as, "count");
  if (!Absent(count_node) && !ReadInt32(count_node, Join(asp, "count"), 0, &count)) {
    return false;
  }
  if (count > count_it->second) {
    return Fail(count_node, Join(asp, "count"),
                "exceeds the podSet's count (" + std::to_string(count_it->second) + ")");
  }
  b.setCount(count);
  const YAML::Node ta = Child(as, "topologyAssignment");
  if (Absent(ta)) return true;
  return ParseTopologyAssignment(ta, Join(asp, "topologyAssignment"), v1beta2, count, b);
}

}  // namespace admission::ops::kueue_yaml_internal
