// batch/v1 Job: submitted as the Workload Kueue's job controller would create for it.

#include <algorithm>
#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// The metadata every kind a job integration submits shares (Job, JobSet): managed by Kueue
// through the kueue.x-k8s.io/queue-name label, its Workload named PREFIX-<name>. Sets *queue
// and *workload_name.
bool DocumentParser::ParseManagedMeta(const YAML::Node& obj, const std::string& p,
                                      std::string_view prefix, Meta* meta, std::string* queue,
                                      std::string* workload_name) {
  if (!ReadMeta(obj, p, Scope::kNamespaced, true, meta)) return false;
  const std::string lp = Join(p, "metadata.labels");
  const auto queue_it = meta->labels.find(std::string(kQueueNameLabel));
  if (queue_it == meta->labels.end() || queue_it->second.empty()) {
    return Fail(MetaEntry(*meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                "not managed by Kueue: no kueue.x-k8s.io/queue-name label");
  }
  *queue = queue_it->second;
  if (!IsDnsSubdomain(*queue)) {
    return Fail(MetaEntry(*meta, "labels", kQueueNameLabel), MapKey(lp, kQueueNameLabel),
                Quote(*queue) + " is not a valid LocalQueue name: " + kSubdomainRule);
  }
  *workload_name = std::string(prefix) + "-" + meta->name;
  if (workload_name->size() > kNameBytesMax) {
    return Fail(meta->node, Join(p, "metadata.name"),
                "too long: the Workload name " + std::string(prefix) +
                    "-<name> must be at most " + std::to_string(kNameBytesMax) + " characters");
  }
  return true;
}

// The Workload of a managed object: name, uid (the object's own, so each object, even of a
// name used before, is a new workload the bridge knows by it; derived for a file without one),
// queue, labels (with Kueue's job-uid label), annotations and runtime limits. Sets *uid.
bool DocumentParser::FillManagedWorkload(const Meta& meta, const std::string& p,
                                         const std::string& queue,
                                         const std::string& workload_name,
                                         schema::Workload::Builder w, std::string* uid) {
  const std::string lp = Join(p, "metadata.labels");
  w.setNamespace(T(meta.ns));
  w.setName(T(workload_name));
  *uid = !meta.uid.empty() ? meta.uid : DeriveUid(meta.ns, workload_name);
  w.setUid(T(*uid));
  w.setQueueName(T(queue));
  // creationTimestampNs stays 0: a submission is created at its intake time (as in
  // ParseWorkload).
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
  return ParseRuntimeAnnotations(meta, p, kueue_max_ns,
                                 "the kueue.x-k8s.io/max-exec-time-seconds label", w);
}

// Kueue's precedence for a managed object's priority: the WorkloadPriorityClass label, else
// the pods' PriorityClass (the first pod set's that names one).
bool DocumentParser::SetManagedPriority(const Meta& meta, const std::string& p,
                                        const std::string& pod_priority_class,
                                        schema::Workload::Builder w) {
  const std::string lp = Join(p, "metadata.labels");
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

// A Job's pod count: parallelism (default 1), fewer if completions is smaller (Kueue's
// podsCount). JOB_SPEC is a batch/v1 JobSpec at path SP.
bool DocumentParser::ReadJobCounts(const YAML::Node& job_spec, const std::string& sp,
                                   int32_t* parallelism, int32_t* count) {
  *parallelism = 1;
  const YAML::Node parallelism_node = Child(job_spec, "parallelism");
  if (!Absent(parallelism_node) &&
      !ReadInt32(parallelism_node, Join(sp, "parallelism"), 0, parallelism)) {
    return false;
  }
  *count = *parallelism;
  const YAML::Node completions_node = Child(job_spec, "completions");
  if (!Absent(completions_node)) {
    int32_t completions = 0;
    if (!ReadInt32(completions_node, Join(sp, "completions"), 0, &completions)) return false;
    *count = std::min(*count, completions);
  }
  return true;
}

// A batch/v1 Job becomes the Workload Kueue's job controller would create: one podSet "main"
// of `parallelism` pods (fewer if completions is smaller), in the LocalQueue its
// kueue.x-k8s.io/queue-name label names. Kueue names that Workload "job-<job name>-<5 hex of
// the Job's uid>"; without a uid yet, this names it "job-<job name>", which is unique per
// namespace just as the Job's name is.
bool DocumentParser::ParseJob(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  std::string queue, workload_name;
  if (!ParseManagedMeta(obj, p, "job", &meta, &queue, &workload_name)) return false;
  const std::string sp = Join(p, "spec");
  const YAML::Node spec = Child(obj, "spec");
  if (Absent(spec)) return Fail(obj, sp, "required: a Job has a pod template");
  if (!ExpectMap(spec, sp)) return false;
  int32_t parallelism = 1, count = 1;
  if (!ReadJobCounts(spec, sp, &parallelism, &count)) return false;

  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<schema::Event>().getBody().initWorkloadSubmitted().initWorkload();
  std::string uid;
  if (!FillManagedWorkload(meta, p, queue, workload_name, w, &uid)) return false;
  auto ps = w.initPodSets(1)[0];
  ps.setName("main");
  std::string pod_priority_class;
  if (!ParseJobPodSet(spec, sp, meta.annotations, MetaEntry(meta, "annotations",
                                                            kJobMinParallelismAnnotation),
                      MapKey(Join(p, "metadata.annotations"), kJobMinParallelismAnnotation),
                      parallelism, count, ps, &pod_priority_class)) {
    return false;
  }
  if (!SetManagedPriority(meta, p, pod_priority_class, w)) return false;
  return Emit(message, obj, p, "Workload", "Job", meta.ns, workload_name, uid);
}

// A Job's pod set PS of COUNT pods from its JobSpec SPEC at path SP: the minimum count from
// kueue.x-k8s.io/job-min-parallelism in ANNOTATIONS (at MIN_AT, path MIN_PATH; less than
// PARALLELISM, Kueue's rule), and the pod template. Sets *pod_priority_class.
bool DocumentParser::ParseJobPodSet(const YAML::Node& spec, const std::string& sp,
                                    const std::map<std::string, std::string>& annotations,
                                    const YAML::Node& min_at, const std::string& min_path,
                                    int32_t parallelism, int32_t count, schema::PodSet::Builder ps,
                                    std::string* pod_priority_class) {
  AcceptJobSpecFields(spec);
  ps.setCount(count);
  if (const auto it = annotations.find(std::string(kJobMinParallelismAnnotation));
      it != annotations.end()) {
    Result<int64_t> min = ParseDecimal(it->second, 1, std::numeric_limits<int32_t>::max());
    if (!min.ok()) return Fail(min_at, min_path, min.status().message());
    if (*min >= parallelism) {
      return Fail(min_at, min_path,
                  "must be less than spec.parallelism (" + std::to_string(parallelism) +
                      ") (Kueue's rule)");
    }
    if (*min > count) {
      return Fail(min_at, min_path,
                  "exceeds the pod count " + std::to_string(count) +
                      " (spec.completions is below spec.parallelism)");
    }
    ps.setMinCount(static_cast<int32_t>(*min));
  }
  const YAML::Node tmpl = Child(spec, "template");
  const std::string tp = Join(sp, "template");
  if (Absent(tmpl)) return Fail(spec, tp, "required: the pod template");
  if (!ExpectMap(tmpl, tp)) return false;
  AcceptFields(tmpl, {"metadata"});
  const YAML::Node pod_spec = Child(tmpl, "spec");
  if (Absent(pod_spec)) return Fail(tmpl, Join(tp, "spec"), "required: the pod spec");
  return ParsePodSpec(pod_spec, Join(tp, "spec"), count, ps, pod_priority_class) &&
         ParseTemplateTopology(tmpl, tp, count, ps);
}

}  // namespace admission::ops::kueue_yaml_internal
