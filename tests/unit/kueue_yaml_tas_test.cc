// The Kueue YAML reader's part of topology-aware scheduling (docs/tas.md): Topology
// definitions, pod sets' topology requests and imported topology assignments.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

const SubmitContext kSeed{"seed-a", ""};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

std::string Error(const Result<std::vector<ParsedObject>>& r) {
  EXPECT_FALSE(r.ok()) << "accepted";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

// Replaces the first `from` in `text`.
std::string With(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

constexpr const char* kTopology = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: cloud.example.com/block
  - nodeLabel: cloud.example.com/rack
  - nodeLabel: kubernetes.io/hostname
)";

TEST(KueueYamlTas, ATopologyIsDefinedWithItsLevelsHighestFirst) {
  for (const char* version : {"v1beta1", "v1beta2"}) {
    const std::string text = With(kTopology, "v1beta2", version);
    Result<std::vector<ParsedObject>> r = ParseApplyYaml(text);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].kind, "Topology");
    EXPECT_EQ((*r)[0].ns, "");
    EXPECT_EQ((*r)[0].name, "default");
    auto decoded = schema::DecodeEvent((*r)[0].event);
    ASSERT_TRUE(decoded.ok());
    auto def = decoded->root().getBody().getTopologyDefined();
    EXPECT_EQ(std::string(def.getName()), "default");
    ASSERT_EQ(def.getLevels().size(), 3u);
    EXPECT_EQ(std::string(def.getLevels()[0]), "cloud.example.com/block");
    EXPECT_EQ(std::string(def.getLevels()[2]), "kubernetes.io/hostname");
  }
  // Deleted by name, as the other definitions.
  Result<std::vector<ParsedObject>> del = ParseDeleteYaml(kTopology);
  ASSERT_TRUE(del.ok()) << del.status().ToString();
  auto decoded = schema::DecodeEvent((*del)[0].event);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(std::string(decoded->root().getBody().getObjectDeleted().getKind()), "Topology");
}

TEST(KueueYamlTas, ATopologyKueueRefusesIsRefusedNamingTheField) {
  const std::string levels = "  levels:\n  - nodeLabel: cloud.example.com/block\n"
                             "  - nodeLabel: cloud.example.com/rack\n"
                             "  - nodeLabel: kubernetes.io/hostname\n";
  auto error = [&](const std::string& replacement) {
    return Error(ParseApplyYaml(With(kTopology, levels, replacement)));
  };
  EXPECT_CONTAINS(error(""), "spec.levels: required: 1 to 16 levels");
  EXPECT_CONTAINS(error("  levels: []\n"), "spec.levels: must list at least one level");
  std::string seventeen = "  levels:\n";
  for (int i = 0; i < 17; ++i) seventeen += "  - nodeLabel: l" + std::to_string(i) + "\n";
  EXPECT_CONTAINS(error(seventeen), "spec.levels: has 17 items; at most 16 are allowed");
  EXPECT_CONTAINS(error("  levels:\n  - {}\n"), "spec.levels[0].nodeLabel: required");
  EXPECT_CONTAINS(error("  levels:\n  - nodeLabel: Bad_/x\n"),
                  "spec.levels[0].nodeLabel: 'Bad_/x' is not a valid node label key");
  EXPECT_CONTAINS(error("  levels:\n  - nodeLabel: rack\n  - nodeLabel: rack\n"),
                  "spec.levels[1].nodeLabel: 'rack' is the node label of an earlier level");
  EXPECT_CONTAINS(error("  levels:\n  - nodeLabel: kubernetes.io/hostname\n"
                        "  - nodeLabel: rack\n"),
                  "spec.levels[0].nodeLabel: the kubernetes.io/hostname label can only be used "
                  "at the lowest level");
  EXPECT_CONTAINS(error("  levels:\n  - nodeLabel: rack\n    rank: 1\n"),
                  "spec.levels[0].rank: unknown field");
  EXPECT_CONTAINS(Error(ParseApplyYaml(With(kTopology, "kueue.x-k8s.io/v1beta2", "v1"))),
                  "apiVersion: 'v1' is not supported for Topology");
  EXPECT_CONTAINS(Error(ParseSubmitYaml(kTopology, kSeed)), "'Topology' cannot be submitted");
}

constexpr const char* kJob = R"(apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: gpus}
spec:
  parallelism: 4
  template:
    metadata:
      labels: {app: train}
      annotations: ANNOTATIONS
    spec:
      containers: [{name: c, resources: {requests: {nvidia.com/gpu: "1"}}}]
)";

std::string JobWith(const std::string& annotations) {
  return With(kJob, "ANNOTATIONS", annotations);
}

// The first pod set's request of the one workload the file submits.
struct Request {
  bool present = false;
  std::string required, preferred, slice, group;
  bool unconstrained = false;
  int32_t slice_size = 0;
};
Request FirstRequest(Result<std::vector<ParsedObject>> r, unsigned pod_set = 0) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  Request out;
  if (!r.ok()) return out;
  auto decoded = schema::DecodeEvent((*r)[0].event);
  EXPECT_TRUE(decoded.ok());
  auto body = decoded->root().getBody();
  auto w = body.isWorkloadSubmitted() ? body.getWorkloadSubmitted().getWorkload()
                                      : body.getWorkloadImported().getWorkload();
  auto ps = w.getPodSets()[pod_set];
  out.present = ps.hasTopologyRequest();
  if (!out.present) return out;
  auto t = ps.getTopologyRequest();
  out.required = t.getRequired().cStr();
  out.preferred = t.getPreferred().cStr();
  out.unconstrained = t.getUnconstrained();
  out.slice = t.getSliceRequiredTopology().cStr();
  out.slice_size = t.getSliceSize();
  out.group = t.getGroupName().cStr();
  return out;
}

TEST(KueueYamlTas, AJobsTemplateAnnotationsGiveItsPodSetsTopologyRequest) {
  Request none = FirstRequest(ParseSubmitYaml(JobWith("{}"), kSeed));
  EXPECT_FALSE(none.present);
  Request required = FirstRequest(ParseSubmitYaml(
      JobWith("{kueue.x-k8s.io/podset-required-topology: cloud.example.com/rack}"), kSeed));
  EXPECT_TRUE(required.present);
  EXPECT_EQ(required.required, "cloud.example.com/rack");
  EXPECT_EQ(required.preferred, "");
  Request preferred = FirstRequest(ParseSubmitYaml(
      JobWith("{kueue.x-k8s.io/podset-preferred-topology: cloud.example.com/block, "
              "kueue.x-k8s.io/podset-slice-required-topology: kubernetes.io/hostname, "
              "kueue.x-k8s.io/podset-slice-size: \"2\"}"),
      kSeed));
  EXPECT_EQ(preferred.preferred, "cloud.example.com/block");
  EXPECT_EQ(preferred.slice, "kubernetes.io/hostname");
  EXPECT_EQ(preferred.slice_size, 2);
  Request unconstrained = FirstRequest(ParseSubmitYaml(
      JobWith("{kueue.x-k8s.io/podset-unconstrained-topology: \"true\"}"), kSeed));
  EXPECT_TRUE(unconstrained.present);
  EXPECT_TRUE(unconstrained.unconstrained);
  Request not_unconstrained = FirstRequest(ParseSubmitYaml(
      JobWith("{kueue.x-k8s.io/podset-unconstrained-topology: \"false\"}"), kSeed));
  EXPECT_TRUE(not_unconstrained.present);  // Kueue: Unconstrained = ptr(false)
  EXPECT_FALSE(not_unconstrained.unconstrained);
  Request slices_only = FirstRequest(ParseSubmitYaml(
      JobWith("{kueue.x-k8s.io/podset-slice-required-topology: cloud.example.com/rack, "
              "kueue.x-k8s.io/podset-slice-size: \"4\"}"),
      kSeed));
  EXPECT_TRUE(slices_only.present);
  EXPECT_EQ(slices_only.slice_size, 4);
  EXPECT_EQ(slices_only.required, "");
}

TEST(KueueYamlTas, AnnotationsKueueRefusesAreRefusedNamingTheAnnotation) {
  const std::string ap = "spec.template.metadata.annotations";
  auto error = [](const std::string& annotations) {
    return Error(ParseSubmitYaml(JobWith(annotations), kSeed));
  };
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-required-topology: rack, "
                        "kueue.x-k8s.io/podset-preferred-topology: block}"),
                  ap + ": must not contain more than one topology request");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-required-topology: \"a b\"}"),
                  ap + "[\"kueue.x-k8s.io/podset-required-topology\"]: 'a b' is not a valid "
                       "label key");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-unconstrained-topology: \"yes\"}"),
                  ap + "[\"kueue.x-k8s.io/podset-unconstrained-topology\"]: 'yes' must be a "
                       "boolean value");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-slice-required-topology: rack}"),
                  ap + "[\"kueue.x-k8s.io/podset-slice-size\"]: required: must be set when");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-slice-size: \"2\"}"),
                  ap + "[\"kueue.x-k8s.io/podset-slice-size\"]: may not be set when "
                       "'kueue.x-k8s.io/podset-slice-required-topology' is not specified");
  const std::string slice = "kueue.x-k8s.io/podset-slice-required-topology: rack, ";
  EXPECT_CONTAINS(error("{" + slice + "kueue.x-k8s.io/podset-slice-size: two}"),
                  "podset-slice-size\"]: 'two' must be a numeric value");
  EXPECT_CONTAINS(error("{" + slice + "kueue.x-k8s.io/podset-slice-size: \"0\"}"),
                  "podset-slice-size\"]: '0' must be greater than or equal to 1");
  EXPECT_CONTAINS(error("{" + slice + "kueue.x-k8s.io/podset-slice-size: \"5\"}"),
                  "podset-slice-size\"]: '5' must not be greater than pod set count 4");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-required-topology: rack, "
                        "kueue.x-k8s.io/podset-group-name: \"12\"}"),
                  "podset-group-name\"]: '12' must not be a number");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-group-name: g}"),
                  "podset-group-name\"]: may not be set when neither");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-required-topology: rack, " + slice +
                        "kueue.x-k8s.io/podset-slice-size: \"2\", "
                        "kueue.x-k8s.io/podset-group-name: g}"),
                  "podset-group-name\"]: may not be set when 'kueue.x-k8s.io/podset-slice-size'");
  EXPECT_CONTAINS(error("{kueue.x-k8s.io/podset-slice-required-topology-constraints: \"[]\"}"),
                  "the TASMultiLayerTopology feature gate must be enabled");
}

constexpr const char* kJobSet = R"(apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: gpus}
spec:
  replicatedJobs:
  - name: leader
    template:
      spec:
        template:
          metadata:
            annotations: LEADER
          spec:
            containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        template:
          metadata:
            annotations: WORKERS
          spec:
            containers: [{name: c, resources: {requests: {nvidia.com/gpu: "8"}}}]
)";

std::string JobSetWith(const std::string& leader, const std::string& workers) {
  return With(With(kJobSet, "LEADER", leader), "WORKERS", workers);
}

TEST(KueueYamlTas, AJobSetsReplicatedJobsCarryTheirRequestsAndGroups) {
  const std::string grouped = "{kueue.x-k8s.io/podset-required-topology: rack, "
                              "kueue.x-k8s.io/podset-group-name: g}";
  Result<std::vector<ParsedObject>> r = ParseSubmitYaml(JobSetWith(grouped, grouped), kSeed);
  Request leader = FirstRequest(r, 0);
  Request workers = FirstRequest(r, 1);
  EXPECT_EQ(leader.required, "rack");
  EXPECT_EQ(leader.group, "g");
  EXPECT_EQ(workers.group, "g");
  Request none = FirstRequest(ParseSubmitYaml(JobSetWith("{}", "{}"), kSeed), 1);
  EXPECT_FALSE(none.present);

  const std::string lp = "spec.replicatedJobs[0].template.spec.template.metadata.annotations";
  EXPECT_CONTAINS(Error(ParseSubmitYaml(JobSetWith(grouped, "{}"), kSeed)),
                  lp + "[\"kueue.x-k8s.io/podset-group-name\"]: 'g': can only define groups of "
                       "exactly 2 pod sets, got: 1 pod set(s)");
  EXPECT_CONTAINS(Error(ParseSubmitYaml(
                      JobSetWith(grouped, "{kueue.x-k8s.io/podset-preferred-topology: rack, "
                                          "kueue.x-k8s.io/podset-group-name: g}"),
                      kSeed)),
                  lp + ": must specify 'kueue.x-k8s.io/podset-required-topology' or "
                       "'kueue.x-k8s.io/podset-preferred-topology' topology consistent with");
  const std::string big_leader = With(JobSetWith(grouped, grouped), "  - name: leader\n",
                                      "  - name: leader\n    replicas: 2\n");
  EXPECT_CONTAINS(Error(ParseSubmitYaml(big_leader, kSeed)),
                  "can only define groups where at least one pod set has only 1 replica, got: "
                  "2 replica(s) and 4 replica(s)");
  EXPECT_CONTAINS(Error(ParseSubmitYaml(
                      JobSetWith("{}", "{kueue.x-k8s.io/podset-slice-required-topology: rack, "
                                       "kueue.x-k8s.io/podset-slice-size: \"5\"}"),
                      kSeed)),
                  "spec.replicatedJobs[1].template.spec.template.metadata.annotations[\"kueue."
                  "x-k8s.io/podset-slice-size\"]: '5' must not be greater than pod set count 4");
}

constexpr const char* kWorkload = R"(apiVersion: kueue.x-k8s.io/VERSION
kind: Workload
metadata:
  name: w
  namespace: ml
  uid: 11111111-2222-4333-8444-555555555555
spec:
  queueName: gpus
  podSets:
  - name: main
    count: 4
    TOPOLOGY
    template:
      metadata:
        annotations: ANNOTATIONS
      spec:
        containers: [{name: c, resources: {requests: {nvidia.com/gpu: "1"}}}]
STATUS)";

std::string WorkloadWith(const std::string& topology, const std::string& annotations,
                         const std::string& status = "", const std::string& version = "v1beta1") {
  return With(With(With(With(kWorkload, "VERSION", version), "TOPOLOGY", topology),
                   "ANNOTATIONS", annotations),
              "STATUS", status);
}

TEST(KueueYamlTas, AWorkloadsTopologyRequestIsRead) {
  Request none = FirstRequest(ParseSubmitYaml(WorkloadWith("", "{}"), kSeed));
  EXPECT_FALSE(none.present);
  // Kueue's own Workload for a Job without TAS annotations: the pod index label only.
  Request index_only = FirstRequest(ParseSubmitYaml(
      WorkloadWith("topologyRequest: {podIndexLabel: batch.kubernetes.io/job-completion-index}",
                   "{}"),
      kSeed));
  EXPECT_FALSE(index_only.present);
  Request spec = FirstRequest(ParseSubmitYaml(
      WorkloadWith("topologyRequest: {preferred: rack, podSetSliceRequiredTopology: "
                   "kubernetes.io/hostname, podSetSliceSize: 2, podIndexLabel: x}",
                   "{}"),
      kSeed));
  EXPECT_TRUE(spec.present);
  EXPECT_EQ(spec.preferred, "rack");
  EXPECT_EQ(spec.slice, "kubernetes.io/hostname");
  EXPECT_EQ(spec.slice_size, 2);
  Request unconstrained = FirstRequest(ParseSubmitYaml(
      WorkloadWith("topologyRequest: {unconstrained: true}", "{}", "", "v1beta2"), kSeed));
  EXPECT_TRUE(unconstrained.unconstrained);
  // The template's annotations, when the spec gives none; both, when they agree.
  Request annotated = FirstRequest(ParseSubmitYaml(
      WorkloadWith("", "{kueue.x-k8s.io/podset-required-topology: rack}"), kSeed));
  EXPECT_EQ(annotated.required, "rack");
  Request both = FirstRequest(ParseSubmitYaml(
      WorkloadWith("topologyRequest: {required: rack}",
                   "{kueue.x-k8s.io/podset-required-topology: rack}"),
      kSeed));
  EXPECT_EQ(both.required, "rack");
}

TEST(KueueYamlTas, AWorkloadsBadTopologyRequestIsRefusedNamingTheField) {
  auto error = [](const std::string& topology, const std::string& annotations = "{}") {
    return Error(ParseSubmitYaml(WorkloadWith(topology, annotations), kSeed));
  };
  const std::string tp = "spec.podSets[0].topologyRequest";
  EXPECT_CONTAINS(error("topologyRequest: {required: rack, unconstrained: true}"),
                  tp + ": must not contain more than one topology request");
  EXPECT_CONTAINS(error("topologyRequest: {podSetSliceSize: 2}"),
                  tp + ".podSetSliceSize: may not be set when 'podSetSliceRequiredTopology'");
  EXPECT_CONTAINS(error("topologyRequest: {podSetSliceRequiredTopology: rack}"),
                  tp + ".podSetSliceSize: required");
  EXPECT_CONTAINS(error("topologyRequest: {podSetSliceRequiredTopology: rack, "
                        "podSetSliceSize: 9}"),
                  tp + ".podSetSliceSize: '9' must not be greater than pod set count 4");
  EXPECT_CONTAINS(error("topologyRequest: {unconstrained: \"true\"}"),
                  tp + ".unconstrained: expected true or false");
  EXPECT_CONTAINS(error("topologyRequest: {required: rack, podSetGroupName: \"7\"}"),
                  tp + ".podSetGroupName: '7' must not be a number");
  EXPECT_CONTAINS(error("topologyRequest: {podsetSliceRequiredTopologyConstraints: []}"),
                  tp + ".podsetSliceRequiredTopologyConstraints: the TASMultiLayerTopology");
  EXPECT_CONTAINS(error("topologyRequest: {requird: rack}"),
                  tp + ".requird: unknown field 'requird'; did you mean 'required'?");
  EXPECT_CONTAINS(error("topologyRequest: {required: rack}",
                        "{kueue.x-k8s.io/podset-required-topology: block}"),
                  tp + ": differs from the request of the template's");
  EXPECT_CONTAINS(error("", "{kueue.x-k8s.io/podset-unconstrained-topology: maybe}"),
                  "spec.podSets[0].template.metadata.annotations[\"kueue.x-k8s.io/podset-"
                  "unconstrained-topology\"]: 'maybe' must be a boolean value");
}

constexpr const char* kAdmitted = R"(status:
  conditions:
  - {type: QuotaReserved, status: "True", lastTransitionTime: "2026-11-29T10:00:00Z"}
  - {type: Admitted, status: "True", lastTransitionTime: "2026-11-29T10:00:00Z"}
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      flavors: {nvidia.com/gpu: tas-flavor}
      count: 4
      topologyAssignment:
ASSIGNMENT)";

std::string Imported(const std::string& assignment, const std::string& version = "v1beta1") {
  return WorkloadWith("topologyRequest: {required: cloud.example.com/rack}", "{}",
                      With(kAdmitted, "ASSIGNMENT", assignment), version);
}

// (levels, "values...=count" per domain) of the imported workload's first assignment.
std::vector<std::string> Assigned(const std::string& text) {
  Result<std::vector<ParsedObject>> r = ParseImportYaml(text, kSeed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto decoded = schema::DecodeEvent((*r)[0].event);
  auto a = decoded->root().getBody().getWorkloadImported().getAdmission();
  auto psa = a.getPodSetAssignments()[0];
  std::vector<std::string> out;
  if (!psa.hasTopologyAssignment()) return out;
  std::string levels;
  for (auto l : psa.getTopologyAssignment().getLevels()) levels += std::string(l.cStr()) + " ";
  out.push_back(levels);
  for (auto d : psa.getTopologyAssignment().getDomains()) {
    std::string s;
    for (auto v : d.getValues()) s += std::string(v.cStr()) + " ";
    out.push_back(s + "=" + std::to_string(d.getCount()));
  }
  return out;
}

TEST(KueueYamlTas, AnImportedTopologyAssignmentIsKept) {
  const std::string v1beta1 = R"(        levels: [cloud.example.com/block, cloud.example.com/rack]
        domains:
        - {values: [b1, r1], count: 3}
        - {values: [b1, r2], count: 1}
)";
  EXPECT_EQ(Assigned(Imported(v1beta1)),
            (std::vector<std::string>{"cloud.example.com/block cloud.example.com/rack ",
                                      "b1 r1 =3", "b1 r2 =1"}));
  // v1beta2's slices: a universal block, individual racks with a prefix, counts per domain.
  const std::string v1beta2 = R"(        levels: [cloud.example.com/block, cloud.example.com/rack]
        slices:
        - domainCount: 2
          valuesPerLevel:
          - universal: b1
          - individual: {prefix: r, roots: ["1", "2"]}
          podCounts: {individual: [3, 1]}
)";
  EXPECT_EQ(Assigned(Imported(v1beta2, "v1beta2")),
            (std::vector<std::string>{"cloud.example.com/block cloud.example.com/rack ",
                                      "b1 r1 =3", "b1 r2 =1"}));
  const std::string hosts = R"(        levels: [kubernetes.io/hostname]
        slices:
        - {domainCount: 2, valuesPerLevel: [{individual: {roots: [n1, n2]}}],
           podCounts: {universal: 2}}
)";
  EXPECT_EQ(Assigned(Imported(hosts, "v1beta2")),
            (std::vector<std::string>{"kubernetes.io/hostname ", "n1 =2", "n2 =2"}));
  // Without one, none.
  const std::string plain = WorkloadWith("", "{}",
                                         With(kAdmitted, "      topologyAssignment:\nASSIGNMENT",
                                              ""));
  EXPECT_TRUE(Assigned(plain).empty());
}

TEST(KueueYamlTas, ABadTopologyAssignmentIsRefusedNamingTheField) {
  const std::string tap = "status.admission.podSetAssignments[0].topologyAssignment";
  auto error = [](const std::string& assignment, const std::string& version = "v1beta1") {
    return Error(ParseImportYaml(Imported(assignment, version), kSeed));
  };
  EXPECT_CONTAINS(error("        levels: [rack]\n        domains: [{values: [r1], count: 3}]\n"),
                  tap + ".domains: the domains' counts sum to 3, not the assignment's count 4");
  EXPECT_CONTAINS(error("        levels: [block, rack]\n"
                        "        domains: [{values: [r1], count: 4}]\n"),
                  tap + ".domains[0].values: has 1 values; the assignment has 2 levels");
  EXPECT_CONTAINS(error("        levels: [rack]\n        domains: [{values: [r1], count: 0}]\n"),
                  tap + ".domains[0].count: '0' is out of range");
  EXPECT_CONTAINS(error("        levels: [rack]\n"
                        "        domains: [{values: [r1], count: 2}, {values: [r1], count: 2}]\n"),
                  tap + ".domains: the domain 'r1' is assigned twice");
  EXPECT_CONTAINS(error("        levels: [rack, rack]\n        domains: []\n"),
                  tap + ".levels[1]: 'rack' is given twice");
  EXPECT_CONTAINS(error("        domains: []\n"), tap + ".levels: required");
  EXPECT_CONTAINS(error("        levels: [rack]\n        slices: []\n"),
                  tap + ".domains: required: the pods' domains and counts ('slices' is the "
                        "kueue.x-k8s.io/v1beta2 spelling)");
  EXPECT_CONTAINS(error("        levels: [rack]\n        domains: []\n", "v1beta2"),
                  tap + ".slices: required: the pods' domains and counts ('domains' is the "
                        "kueue.x-k8s.io/v1beta1 spelling)");
  EXPECT_CONTAINS(error("        levels: [rack]\n"
                        "        slices: [{domainCount: 2, valuesPerLevel: [{universal: r}],\n"
                        "                  podCounts: {individual: [2]}}]\n",
                        "v1beta2"),
                  tap + ".slices[0].podCounts.individual: must have length equal to domainCount");
  EXPECT_CONTAINS(error("        levels: [rack]\n"
                        "        slices: [{domainCount: 1, valuesPerLevel: [{universal: r}],\n"
                        "                  podCounts: {universal: 4, individual: [4]}}]\n",
                        "v1beta2"),
                  tap + ".slices[0].podCounts: exactly one of universal, individual");
  EXPECT_CONTAINS(error("        levels: [rack]\n"
                        "        slices: [{domainCount: 1, valuesPerLevel: [{universal: r},\n"
                        "                  {universal: s}], podCounts: {universal: 4}}]\n",
                        "v1beta2"),
                  tap + ".slices[0].valuesPerLevel: has 2 entries; the assignment has 1 levels");
}

}  // namespace
}  // namespace admission::ops
