// jobset.x-k8s.io/v1alpha2 JobSet: submitted as the Workload Kueue's JobSet integration would
// create for it.

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// A JobSet becomes one Workload "jobset-<name>" (Kueue adds a hash of the uid) with one pod set
// per replicated job, named as the replicated job, of replicas x the Job's pod count (Kueue's
// podsCount), in the LocalQueue its kueue.x-k8s.io/queue-name label names. Its priority: the
// WorkloadPriorityClass label, else the first pod template's PriorityClass.
bool DocumentParser::ParseJobSet(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  std::string queue, workload_name;
  if (!ParseManagedMeta(obj, p, "jobset", &meta, &queue, &workload_name)) return false;
  const std::string sp = Join(p, "spec");
  const YAML::Node spec = Child(obj, "spec");
  if (Absent(spec)) return Fail(obj, sp, "required: a JobSet has replicated jobs");
  if (!ExpectMap(spec, sp)) return false;
  AcceptJobSetSpecFields(spec);
  const std::string rp = Join(sp, "replicatedJobs");
  const YAML::Node replicated = Child(spec, "replicatedJobs");
  if (Absent(replicated)) return Fail(spec, rp, "required: at least one replicated job");
  if (!ExpectSequence(replicated, rp, kPodSetsMax)) return false;
  if (replicated.size() == 0) return Fail(replicated, rp, "required: at least one replicated job");

  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<schema::Event>().getBody().initWorkloadSubmitted().initWorkload();
  std::string uid;
  if (!FillManagedWorkload(meta, p, queue, workload_name, w, &uid)) return false;
  auto pod_sets = w.initPodSets(static_cast<unsigned>(replicated.size()));
  std::set<std::string> names;
  std::string pod_priority_class;
  for (size_t i = 0; i < replicated.size(); ++i) {
    std::string priority_class;
    if (!ParseReplicatedJob(replicated[i], Index(rp, i), &names,
                            pod_sets[static_cast<unsigned>(i)], &priority_class)) {
      return false;
    }
    if (pod_priority_class.empty()) pod_priority_class = priority_class;
  }
  if (!CheckJobSetGroups(replicated, rp, w.asReader().getPodSets())) return false;
  if (!SetManagedPriority(meta, p, pod_priority_class, w)) return false;
  return Emit(message, obj, p, "Workload", "JobSet", meta.ns, workload_name, uid);
}

// One replicated job: its name (a DNS label, unique in the JobSet), replicas (default 1) and
// Job template. No partial admission: a JobSet's replicated jobs cannot change their pod counts
// once created (the JobSet controller's webhook leaves only the pod templates' labels,
// annotations, nodeSelector, tolerations and scheduling gates mutable), so a smaller admission
// could never run; Kueue's JobSet integration has none either. kueue.x-k8s.io/job-min-parallelism
// on a Job template is refused rather than ignored.
bool DocumentParser::ParseReplicatedJob(const YAML::Node& rj, const std::string& rp,
                                        std::set<std::string>* names, schema::PodSet::Builder ps,
                                        std::string* pod_priority_class) {
  if (!ExpectMap(rj, rp)) return false;
  AcceptFields(rj, {"dependsOn", "groupName"});  // not modelled
  std::string name;
  const YAML::Node name_node = Child(rj, "name");
  if (Absent(name_node)) return Fail(rj, Join(rp, "name"), "required: the replicated job's name");
  if (!ReadString(name_node, Join(rp, "name"), &name)) return false;
  if (!IsDnsLabel(name)) {
    return Fail(name_node, Join(rp, "name"), Quote(name) + " is not valid: " + kLabelRule);
  }
  if (!names->insert(name).second) {
    return Fail(name_node, Join(rp, "name"),
                Quote(name) + " is the name of another replicated job");
  }
  ps.setName(T(name));
  int32_t replicas = 1;
  const YAML::Node replicas_node = Child(rj, "replicas");
  if (!Absent(replicas_node) && !ReadInt32(replicas_node, Join(rp, "replicas"), 0, &replicas)) {
    return false;
  }
  const std::string tp = Join(rp, "template");
  const YAML::Node tmpl = Child(rj, "template");
  if (Absent(tmpl)) return Fail(rj, tp, "required: the Job template");
  if (!ExpectMap(tmpl, tp)) return false;
  AcceptObjectMetaFields(Child(tmpl, "metadata"));
  std::map<std::string, std::string> annotations;
  const std::string ap = Join(tp, "metadata.annotations");
  const YAML::Node annotations_node = Child(Child(tmpl, "metadata"), "annotations");
  if (!Absent(annotations_node) &&
      !ReadStringMap(annotations_node, ap, kMapEntriesMax, KeyRule::kAnnotation, &annotations)) {
    return false;
  }
  const std::string jsp = Join(tp, "spec");
  const YAML::Node job_spec = Child(tmpl, "spec");
  if (Absent(job_spec)) return Fail(tmpl, jsp, "required: the Job spec");
  if (!ExpectMap(job_spec, jsp)) return false;
  int32_t parallelism = 1, per_replica = 1;
  if (!ReadJobCounts(job_spec, jsp, &parallelism, &per_replica)) return false;
  const int64_t count = int64_t{replicas} * per_replica;
  if (count > std::numeric_limits<int32_t>::max()) {
    return Fail(rj, rp, "replicas x the Job's pod count is " + std::to_string(count) +
                            ", more than a pod set's count can be");
  }
  const std::string min_path = MapKey(ap, kJobMinParallelismAnnotation);
  const YAML::Node min_at = Child(annotations_node, kJobMinParallelismAnnotation);
  if (annotations.count(std::string(kJobMinParallelismAnnotation)) != 0) {
    return Fail(min_at, min_path,
                "a JobSet cannot be admitted partially: its replicated jobs' pod counts cannot "
                "change once it exists (the JobSet controller's webhook), so fewer pods could "
                "never run");
  }
  return ParseJobPodSet(job_spec, jsp, annotations, min_at, min_path, parallelism,
                        static_cast<int32_t>(count), ps, pod_priority_class);
}

// Kueue's grouping rules over the replicated jobs' podset-group-name annotations.
bool DocumentParser::CheckJobSetGroups(const YAML::Node& replicated, const std::string& rp,
                                       capnp::List<schema::PodSet>::Reader pod_sets) {
  std::vector<GroupMember> members;
  for (unsigned i = 0; i < pod_sets.size(); ++i) {
    const schema::PodSet::Reader ps = pod_sets[i];
    if (!ps.hasTopologyRequest()) continue;
    const auto r = ps.getTopologyRequest();
    GroupMember m;
    m.pod_set = ps.getName().cStr();
    m.group = r.getGroupName().cStr();
    m.required = r.getRequired().cStr();
    m.preferred = r.getPreferred().cStr();
    m.count = ps.getCount();
    m.path = Join(Index(rp, i), "template.spec.template.metadata.annotations");
    m.node = Child(Child(Child(Child(Child(Child(replicated[i], "template"), "spec"), "template"),
                               "metadata"),
                         "annotations"),
                   kPodSetGroupNameAnnotation);
    members.push_back(std::move(m));
  }
  return CheckPodSetGroups(members);
}

}  // namespace admission::ops::kueue_yaml_internal
