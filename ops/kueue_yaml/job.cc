// batch/v1 Job: submitted as the Workload Kueue's job controller would create for it.

#include <algorithm>
#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// A batch/v1 Job becomes the Workload Kueue's job controller would create: one podSet "main"
// of `parallelism` pods (fewer if completions is smaller), in the LocalQueue its
// kueue.x-k8s.io/queue-name label names. Kueue names that Workload "job-<job name>-<5 hex of
// the Job's uid>"; without a uid yet, this names it "job-<job name>", which is unique per
// namespace just as the Job's name is.
bool DocumentParser::ParseJob(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kNamespaced, true, &meta)) return false;
  const std::string lp = Join(p, "metadata.labels");
  const auto queue_it = meta.labels.find(std::string(kQueueNameLabel));
  if (queue_it == meta.labels.end() || queue_it->second.empty()) {
    return Fail(MetaEntry(meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                "not managed by Kueue: no kueue.x-k8s.io/queue-name label");
  }
  const std::string& queue = queue_it->second;
  if (!IsDnsSubdomain(queue)) {
    return Fail(MetaEntry(meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                Quote(queue) + " is not a valid LocalQueue name: " + kSubdomainRule);
  }
  const std::string workload_name = "job-" + meta.name;
  if (workload_name.size() > kNameBytesMax) {
    return Fail(meta.node, Join(p, "metadata.name"),
                "too long: the Workload name job-<name> must be at most " +
                    std::to_string(kNameBytesMax) + " characters");
  }
  const std::string sp = Join(p, "spec");
  const YAML::Node spec = Child(obj, "spec");
  if (Absent(spec)) return Fail(obj, sp, "required: a Job has a pod template");
  if (!ExpectMap(spec, sp)) return false;
  int32_t parallelism = 1;
  const YAML::Node parallelism_node = Child(spec, "parallelism");
  if (!Absent(parallelism_node) &&
      !ReadInt32(parallelism_node, Join(sp, "parallelism"), 0, &parallelism)) {
    return false;
  }
  int32_t count = parallelism;
  const YAML::Node completions_node = Child(spec, "completions");
  if (!Absent(completions_node)) {
    int32_t completions = 0;
    if (!ReadInt32(completions_node, Join(sp, "completions"), 0, &completions)) return false;
    count = std::min(count, completions);
  }

  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<schema::Event>().getBody().initWorkloadSubmitted().initWorkload();
  w.setNamespace(T(meta.ns));
  w.setName(T(workload_name));
  // The Job's uid is its workload's in the ledger: each Job, even of a name used before, is a
  // new workload, and the bridge knows its Job's workload by it. Without one (a file), derived.
  const std::string uid = !meta.uid.empty() ? meta.uid : DeriveUid(meta.ns, workload_name);
  w.setUid(T(uid));
  w.setQueueName(T(queue));
  // creationTimestampNs stays 0: a submission is created at its intake time (as in
  // ParseWorkload).
  // Kueue labels the Workload of a Job with the Job's uid: which Job of a name reused after
  // its workload ended the workload is (the bridge tells its Jobs apart by it).
  std::map<std::string, std::string> labels = meta.labels;
  if (!meta.uid.empty()) labels[std::string(kJobUidLabel)] = meta.uid;
  SetLabels(w.initLabels(static_cast<unsigned>(labels.size())), labels);
  SetLabels(w.initAnnotations(static_cast<unsigned>(meta.annotations.size())), meta.annotations);

  int64_t kueue_max_ns = 0;
  if (const auto it = meta.labels.find(std::string(kMaxExecTimeLabel)); it != meta.labels.end()) {
    Result<int64_t> seconds = ParseDecimal(it->second, 1, std::numeric_limits<int32_t>::max());
    if (!seconds.ok()) {
      return Fail(MetaEntry(meta, "labels", kMaxExecTimeLabel), MapKey(lp, kMaxExecTimeLabel),
                  seconds.status().message());
    }
    kueue_max_ns = *seconds * kNsPerSecond;
  }
  if (!ParseRuntimeAnnotations(meta, p, kueue_max_ns,
                               "the kueue.x-k8s.io/max-exec-time-seconds label", w)) {
    return false;
  }
  if (!ParseJobPodSet(spec, sp, meta, p, parallelism, count, w)) return false;
  return Emit(message, obj, p, "Workload", "Job", meta.ns, workload_name, uid);
}

// The Job's one podSet "main" (minimum count from kueue.x-k8s.io/job-min-parallelism) and the
// Workload's priority class.
bool DocumentParser::ParseJobPodSet(const YAML::Node& spec, const std::string& sp, const Meta& meta,
                                    const std::string& p, int32_t parallelism, int32_t count,
                                    schema::Workload::Builder w) {
  const std::string lp = Join(p, "metadata.labels");
  auto ps = w.initPodSets(1)[0];
  ps.setName("main");
  ps.setCount(count);
  if (const auto it = meta.annotations.find(std::string(kJobMinParallelismAnnotation));
      it != meta.annotations.end()) {
    const std::string path =
        MapKey(Join(p, "metadata.annotations"), kJobMinParallelismAnnotation);
    Result<int64_t> min = ParseDecimal(it->second, 1, std::numeric_limits<int32_t>::max());
    const YAML::Node at = MetaEntry(meta, "annotations", kJobMinParallelismAnnotation);
    if (!min.ok()) return Fail(at, path, min.status().message());
    if (*min >= parallelism) {
      return Fail(at, path,
                  "must be less than spec.parallelism (" + std::to_string(parallelism) +
                      ") (Kueue's rule)");
    }
    if (*min > count) {
      return Fail(at, path,
                  "exceeds the pod count " + std::to_string(count) +
                      " (spec.completions is below spec.parallelism)");
    }
    ps.setMinCount(static_cast<int32_t>(*min));
  }
  const YAML::Node tmpl = Child(spec, "template");
  const std::string tp = Join(sp, "template");
  if (Absent(tmpl)) return Fail(spec, tp, "required: the pod template");
  if (!ExpectMap(tmpl, tp)) return false;
  const YAML::Node pod_spec = Child(tmpl, "spec");
  if (Absent(pod_spec)) return Fail(tmpl, Join(tp, "spec"), "required: the pod spec");
  std::string pod_priority_class;
  if (!ParsePodSpec(pod_spec, Join(tp, "spec"), count, ps, &pod_priority_class)) return false;

  // Kueue's precedence: the WorkloadPriorityClass label, else the pod's PriorityClass.
  if (const auto it = meta.labels.find(std::string(kPriorityClassLabel));
      it != meta.labels.end()) {
    if (!IsDnsSubdomain(it->second)) {
      return Fail(MetaEntry(meta, "labels", kPriorityClassLabel), MapKey(lp, kPriorityClassLabel),
                  Quote(it->second) + " is not a valid class name: " + kSubdomainRule);
    }
    w.setPriorityClassName(T(it->second));
    w.setPriorityClassSource(T(std::string(kWorkloadPriorityClassSource)));
  } else if (!pod_priority_class.empty()) {
    w.setPriorityClassName(T(pod_priority_class));
    w.setPriorityClassSource(T(std::string(kPodPriorityClassSource)));
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
