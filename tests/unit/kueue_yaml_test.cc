#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMi = int64_t{1} << 20;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The examples folder, or empty (and the test skipped) when it is not there.
std::filesystem::path ExamplesDir() { return KUEUE_EXAMPLES_DIR; }

#define SKIP_WITHOUT_EXAMPLES()                                                                  \
  do {                                                                                           \
    if (!std::filesystem::is_directory(ExamplesDir())) {                                         \
      GTEST_SKIP() << "no Kueue examples at " << ExamplesDir() << " (../shared/kueue-examples)"; \
    }                                                                                            \
  } while (0)

std::string Example(const std::string& name) { return ReadFile(ExamplesDir() / name); }

const SubmitContext kSeedA{"seed-a", ""};
const SubmitContext kSeedB{"seed-b", ""};

// Parses the file expecting success; failures print the reason.
std::vector<ParsedObject> MustApply(const std::string& yaml) {
  Result<std::vector<ParsedObject>> r = ParseApplyYaml(yaml);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<ParsedObject>{};
}

std::vector<ParsedObject> MustSubmit(const std::string& yaml, const SubmitContext& ctx = kSeedA) {
  Result<std::vector<ParsedObject>> r = ParseSubmitYaml(yaml, ctx);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<ParsedObject>{};
}

// The refusal message of a file that must fail.
std::string ApplyError(const std::string& yaml) {
  Result<std::vector<ParsedObject>> r = ParseApplyYaml(yaml);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

std::string SubmitError(const std::string& yaml) {
  Result<std::vector<ParsedObject>> r = ParseSubmitYaml(yaml, kSeedA);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.status().message();
}

std::string ImportError(const std::string& yaml) {
  Result<std::vector<ParsedObject>> r = ParseImportYaml(yaml, kSeedA);
  EXPECT_FALSE(r.ok()) << "accepted:\n" << yaml;
  return r.ok() ? "" : r.status().message();
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

constexpr const char* kGoodFlavorForStuckParser =
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n";

// Found by tests/fuzz/yaml_fuzz.cc: yaml-cpp 0.7's LoadAll never returned on a stray ',' (it
// collected empty documents until memory ran out); such a file is refused, naming the line.
TEST(KueueYaml, RefusesAFileTheYamlParserCannotGetPast) {
  for (const std::string& yaml : {std::string(",\n"), std::string(",ap\373: a\220kap\373: a")}) {
    for (int mode = 0; mode < 3; ++mode) {
      Result<std::vector<ParsedObject>> r = mode == 0   ? ParseApplyYaml(yaml)
                                            : mode == 1 ? ParseSubmitYaml(yaml, kSeedA)
                                                        : ParseImportYaml(yaml, kSeedA);
      ASSERT_FALSE(r.ok()) << yaml;
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
      EXPECT_NE(r.status().message().find("not valid YAML"), std::string::npos)
          << r.status().message();
    }
  }
  // After a good document: the line is the file's.
  const std::string error = ApplyError(std::string(kGoodFlavorForStuckParser) + "---\n,\n");
  EXPECT_NE(error.find("line 5"), std::string::npos) << error;
  EXPECT_NE(error.find("not valid YAML"), std::string::npos) << error;
}

TEST(KueueYaml, EveryKueueExampleParses) {
  SKIP_WITHOUT_EXAMPLES();
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ExamplesDir())) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string text = ReadFile(entry.path());
    const bool is_job = text.find("kind: Job") != std::string::npos;
    Result<std::vector<ParsedObject>> r =
        is_job ? ParseSubmitYaml(text, kSeedA) : ParseApplyYaml(text);
    ASSERT_TRUE(r.ok()) << entry.path() << ": " << r.status().ToString();
    EXPECT_FALSE(r->empty()) << entry.path();
    for (const ParsedObject& o : *r) {
      Result<schema::DecodedEvent> decoded = schema::DecodeEvent(o.event);
      ASSERT_TRUE(decoded.ok()) << entry.path() << ": " << decoded.status().ToString();
      EXPECT_TRUE(decoded->canonical()) << entry.path();
      EXPECT_EQ(decoded->root().getSequence(), 0u);  // envelope left to intake
      EXPECT_FALSE(o.name.empty());
    }
    ++files;
  }
  EXPECT_GE(files, 13u);
}

TEST(KueueYaml, SingleClusterQueueSetupHasExactQuotas) {
  SKIP_WITHOUT_EXAMPLES();
  std::vector<ParsedObject> objects = MustApply(Example("admin-single-clusterqueue-setup.yaml"));
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0].kind, "ResourceFlavor");
  EXPECT_EQ(objects[0].name, "default-flavor");
  EXPECT_EQ(objects[1].kind, "ClusterQueue");
  EXPECT_EQ(objects[2].kind, "LocalQueue");
  EXPECT_EQ(objects[2].ns, "default");

  auto decoded = schema::DecodeEvent(objects[1].event);
  ASSERT_TRUE(decoded.ok());
  auto cq = decoded->root().getBody().getClusterQueueDefined();
  EXPECT_EQ(std::string(cq.getName()), "cluster-queue");
  EXPECT_EQ(std::string(cq.getCohortName()), "");
  EXPECT_TRUE(cq.getNamespaceSelector().getMatchesAll());
  EXPECT_EQ(cq.getQueueingStrategy(), schema::QueueingStrategy::BEST_EFFORT_FIFO);
  EXPECT_EQ(cq.getFairSharingWeightMilli(), 1000);
  EXPECT_EQ(cq.getFlavorFungibility().getWhenCanBorrow(), schema::FungibilityAction::BORROW);
  EXPECT_EQ(cq.getFlavorFungibility().getWhenCanPreempt(),
            schema::FungibilityAction::TRY_NEXT_FLAVOR);
  ASSERT_EQ(cq.getResourceGroups().size(), 1u);
  auto group = cq.getResourceGroups()[0];
  ASSERT_EQ(group.getCoveredResources().size(), 2u);
  EXPECT_EQ(std::string(group.getCoveredResources()[1]), "memory");
  ASSERT_EQ(group.getFlavors().size(), 1u);
  auto resources = group.getFlavors()[0].getResources();
  ASSERT_EQ(resources.size(), 2u);
  EXPECT_EQ(std::string(resources[0].getName()), "cpu");
  EXPECT_EQ(resources[0].getNominalQuotaMilli(), 9000);
  EXPECT_EQ(resources[1].getNominalQuotaMilli(), 36 * kGi * 1000);
  EXPECT_FALSE(resources[1].getHasBorrowingLimit());

  auto lq = schema::DecodeEvent(objects[2].event);
  ASSERT_TRUE(lq.ok());
  auto def = lq->root().getBody().getLocalQueueDefined();
  EXPECT_EQ(std::string(def.getNamespace()), "default");
  EXPECT_EQ(std::string(def.getName()), "user-queue");
  EXPECT_EQ(std::string(def.getClusterQueue()), "cluster-queue");
}

TEST(KueueYaml, SharedQuotaSetupSkipsTheCommentPreambleAndKeepsGroupsApart) {
  SKIP_WITHOUT_EXAMPLES();
  std::vector<ParsedObject> objects = MustApply(Example("admin-shared-quota-setup.yaml"));
  ASSERT_EQ(objects.size(), 5u);  // 3 flavors, 1 ClusterQueue, 1 LocalQueue
  auto decoded = schema::DecodeEvent(objects[3].event);
  ASSERT_TRUE(decoded.ok());
  auto groups = decoded->root().getBody().getClusterQueueDefined().getResourceGroups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].getFlavors().size(), 2u);
  EXPECT_EQ(std::string(groups[1].getFlavors()[0].getName()), "credits");
  EXPECT_EQ(groups[1].getFlavors()[0].getResources()[0].getNominalQuotaMilli(), 14000);

  auto flavor = schema::DecodeEvent(objects[1].event);
  ASSERT_TRUE(flavor.ok());
  auto labels = flavor->root().getBody().getFlavorDefined().getNodeLabels();
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(std::string(labels[0].getKey()), "node-type");
  EXPECT_EQ(std::string(labels[0].getValue()), "spot");
}

TEST(KueueYaml, FlavorTaintsTolerationsAndCheckStrategyAreKept) {
  SKIP_WITHOUT_EXAMPLES();
  auto taints = MustApply(Example("admin-resource-flavor-taints.yaml"));
  ASSERT_EQ(taints.size(), 1u);
  auto t = schema::DecodeEvent(taints[0].event);
  ASSERT_TRUE(t.ok());
  auto taint = t->root().getBody().getFlavorDefined().getNodeTaints()[0];
  EXPECT_EQ(std::string(taint.getKey()), "spot");
  EXPECT_EQ(std::string(taint.getValue()), "true");
  EXPECT_EQ(std::string(taint.getEffect()), "NoSchedule");

  auto tolerations = MustApply(Example("admin-resource-flavor-tolerations.yaml"));
  auto tol = schema::DecodeEvent(tolerations[0].event);
  ASSERT_TRUE(tol.ok());
  auto toleration = tol->root().getBody().getFlavorDefined().getTolerations()[0];
  EXPECT_EQ(std::string(toleration.getOperator()), "Exists");
  EXPECT_EQ(std::string(toleration.getKey()), "spot-taint");

  auto minimal = MustApply(Example("admin-minimal-cq.yaml"));
  auto cq = schema::DecodeEvent(minimal[0].event);
  ASSERT_TRUE(cq.ok());
  auto rules = cq->root().getBody().getClusterQueueDefined().getAdmissionChecksStrategy();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(std::string(rules[0].getName()), "sample-prov");
  ASSERT_EQ(rules[0].getOnFlavors().size(), 1u);
  EXPECT_EQ(std::string(rules[0].getOnFlavors()[0]), "default-flavor");
  EXPECT_EQ(rules[1].getOnFlavors().size(), 0u);
}

TEST(KueueYaml, PartialAdmissionJobBecomesAWorkloadWithMinCount) {
  SKIP_WITHOUT_EXAMPLES();
  auto objects = MustSubmit(Example("jobs-sample-job-partial-admission.yaml"));
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].kind, "Workload");
  EXPECT_EQ(objects[0].source_kind, "Job");
  EXPECT_EQ(objects[0].name, "job-sample-job-partial-admission");
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto w = decoded->root().getBody().getWorkloadSubmitted().getWorkload();
  EXPECT_EQ(std::string(w.getNamespace()), "default");
  EXPECT_EQ(std::string(w.getQueueName()), "user-queue");
  EXPECT_EQ(w.getUid().size(), 36u);
  ASSERT_EQ(w.getPodSets().size(), 1u);
  auto ps = w.getPodSets()[0];
  EXPECT_EQ(std::string(ps.getName()), "main");
  EXPECT_EQ(ps.getCount(), 20);
  EXPECT_EQ(ps.getMinCount(), 5);
  ASSERT_EQ(ps.getRequests().size(), 2u);  // sorted by name
  EXPECT_EQ(std::string(ps.getRequests()[0].getName()), "cpu");
  EXPECT_EQ(ps.getRequests()[0].getMilli(), 1000);
  EXPECT_EQ(std::string(ps.getRequests()[1].getName()), "memory");
  EXPECT_EQ(ps.getRequests()[1].getMilli(), 200 * kMi * 1000);
}

TEST(KueueYaml, GenerateNameIsStablePerSeedAndDiffersAcrossSeeds) {
  SKIP_WITHOUT_EXAMPLES();
  const std::string job = Example("jobs-sample-job.yaml");
  auto a1 = MustSubmit(job, kSeedA);
  auto a2 = MustSubmit(job, kSeedA);
  auto b = MustSubmit(job, kSeedB);
  ASSERT_EQ(a1.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a1[0].name, a2[0].name);
  EXPECT_EQ(a1[0].event, a2[0].event);  // the same bytes, uid included
  EXPECT_NE(a1[0].name, b[0].name);
  EXPECT_TRUE(a1[0].name.starts_with("job-sample-job-")) << a1[0].name;
  EXPECT_EQ(a1[0].name.size(), std::string("job-sample-job-").size() + 5);
  auto wa = schema::DecodeEvent(a1[0].event);
  auto wb = schema::DecodeEvent(b[0].event);
  ASSERT_TRUE(wa.ok() && wb.ok());
  EXPECT_NE(std::string(wa->root().getBody().getWorkloadSubmitted().getWorkload().getUid()),
            std::string(wb->root().getBody().getWorkloadSubmitted().getWorkload().getUid()));
}

TEST(KueueYaml, CohortSpellingFollowsTheApiVersion) {
  const std::string v1beta1 = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a
spec:
  cohort: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: "1.5"
        borrowingLimit: 500m
        lendingLimit: 1
)";
  auto objects = MustApply(v1beta1);
  ASSERT_EQ(objects.size(), 1u);
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto cq = decoded->root().getBody().getClusterQueueDefined();
  EXPECT_EQ(std::string(cq.getCohortName()), "research");
  auto quota = cq.getResourceGroups()[0].getFlavors()[0].getResources()[0];
  EXPECT_EQ(quota.getNominalQuotaMilli(), 1500);
  EXPECT_TRUE(quota.getHasBorrowingLimit());
  EXPECT_EQ(quota.getBorrowingLimitMilli(), 500);
  EXPECT_TRUE(quota.getHasLendingLimit());
  EXPECT_EQ(quota.getLendingLimitMilli(), 1000);

  std::string v1beta2 = v1beta1;
  v1beta2.replace(v1beta2.find("v1beta1"), 7, "v1beta2");
  v1beta2.replace(v1beta2.find("cohort:"), 7, "cohortName:");
  auto objects2 = MustApply(v1beta2);
  ASSERT_EQ(objects2.size(), 1u);
  EXPECT_EQ(objects2[0].event, objects[0].event);  // the same definition either way

  // The other version's spelling would be dropped by Kueue; here it is refused.
  std::string wrong = v1beta1;
  wrong.replace(wrong.find("cohort:"), 7, "cohortName:");
  const std::string error = ApplyError(wrong);
  EXPECT_CONTAINS(error, "spec.cohortName: 'cohortName' is the v1beta2 spelling");
}

TEST(KueueYaml, ClusterQueuePoliciesAreRead) {
  auto objects = MustApply(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
  annotations:
    admission-ledger.io/max-wait: 1h30m
spec:
  cohortName: research
  queueingStrategy: StrictFIFO
  stopPolicy: HoldAndDrain
  namespaceSelector:
    matchLabels: {team: b}
    matchExpressions:
    - {key: tier, operator: In, values: [gold, silver]}
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  flavorFungibility:
    whenCanBorrow: TryNextFlavor
    whenCanPreempt: TryNextFlavor
    preference: PreemptionOverBorrowing
  fairSharing: {weight: 2.5}
  admissionChecks: [prov]
)");
  ASSERT_EQ(objects.size(), 1u);
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto cq = decoded->root().getBody().getClusterQueueDefined();
  EXPECT_EQ(cq.getQueueingStrategy(), schema::QueueingStrategy::STRICT_FIFO);
  EXPECT_EQ(cq.getStopPolicy(), schema::StopPolicy::HOLD_AND_DRAIN);
  EXPECT_FALSE(cq.getNamespaceSelector().getMatchesAll());
  EXPECT_EQ(cq.getNamespaceSelector().getMatchLabels().size(), 1u);
  ASSERT_EQ(cq.getNamespaceSelector().getMatchExpressions().size(), 1u);
  EXPECT_EQ(cq.getNamespaceSelector().getMatchExpressions()[0].getValues().size(), 2u);
  auto preemption = cq.getPreemption();
  EXPECT_EQ(preemption.getWithinClusterQueue(),
            schema::WithinClusterQueuePolicy::LOWER_OR_NEWER_EQUAL_PRIORITY);
  EXPECT_EQ(preemption.getReclaimWithinCohort(), schema::ReclaimWithinCohortPolicy::ANY);
  EXPECT_EQ(preemption.getBorrowWithinCohort(), schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY);
  EXPECT_TRUE(preemption.getHasMaxPriorityThreshold());
  EXPECT_EQ(preemption.getMaxPriorityThreshold(), 100);
  EXPECT_EQ(cq.getFlavorFungibility().getWhenCanBorrow(),
            schema::FungibilityAction::TRY_NEXT_FLAVOR);
  EXPECT_EQ(cq.getFlavorFungibility().getPreference(),
            schema::FungibilityPreference::PREEMPTION_OVER_BORROWING);
  EXPECT_EQ(cq.getFairSharingWeightMilli(), 2500);
  ASSERT_EQ(cq.getAdmissionChecks().size(), 1u);
  EXPECT_EQ(cq.getMaxWaitNs(), int64_t{5400} * 1'000'000'000);
}

TEST(KueueYaml, AbsentNamespaceSelectorSelectsNothingAsInKueue) {
  auto objects = MustApply(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: closed}
spec: {}
)");
  ASSERT_EQ(objects.size(), 1u);
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto selector = decoded->root().getBody().getClusterQueueDefined().getNamespaceSelector();
  EXPECT_FALSE(selector.getMatchesAll());
  EXPECT_EQ(selector.getMatchLabels().size(), 0u);
}

TEST(KueueYaml, OtherDefinitionsAreRead) {
  auto objects = MustApply(R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: research}
spec:
  parent: org
  fairSharing: {weight: "0.5"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: prov
  annotations:
    admission-ledger.io/pending-ttl: 10m
    admission-ledger.io/on-timeout: Reject
    admission-ledger.io/retry-limit: "3"
    admission-ledger.io/backoff-base: 30s
    admission-ledger.io/backoff-max: 1h
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
description: "important work"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec:
  clusterQueue: cq
  stopPolicy: Hold
  fairSharing: {weight: 3}
)");
  ASSERT_EQ(objects.size(), 4u);
  auto cohort = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(cohort.ok());
  EXPECT_EQ(std::string(cohort->root().getBody().getCohortDefined().getParentName()), "org");
  EXPECT_EQ(cohort->root().getBody().getCohortDefined().getFairSharingWeightMilli(), 500);

  auto check = schema::DecodeEvent(objects[1].event);
  ASSERT_TRUE(check.ok());
  auto ac = check->root().getBody().getAdmissionCheckDefined();
  EXPECT_EQ(std::string(ac.getControllerName()), "kueue.x-k8s.io/provisioning-request");
  EXPECT_EQ(ac.getPendingTtlNs(), int64_t{600} * 1'000'000'000);
  EXPECT_EQ(ac.getOnTimeout(), schema::OnTimeout::REJECT);
  EXPECT_EQ(ac.getRetryLimit(), 3u);
  EXPECT_EQ(ac.getBackoffBaseNs(), int64_t{30} * 1'000'000'000);
  EXPECT_EQ(ac.getBackoffMaxNs(), int64_t{3600} * 1'000'000'000);

  auto pc = schema::DecodeEvent(objects[2].event);
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ(pc->root().getBody().getPriorityClassDefined().getValue(), 1000);
  EXPECT_EQ(std::string(pc->root().getBody().getPriorityClassDefined().getDescription()),
            "important work");

  auto lq = schema::DecodeEvent(objects[3].event);
  ASSERT_TRUE(lq.ok());
  auto def = lq->root().getBody().getLocalQueueDefined();
  EXPECT_EQ(std::string(def.getNamespace()), "team-a");
  EXPECT_EQ(def.getStopPolicy(), schema::StopPolicy::HOLD);
  EXPECT_EQ(def.getFairSharingWeightMilli(), 3000);
}

// Kueue's plain AdmissionCheck: retried as often as its controller asks (no limit).
TEST(KueueYaml, AnAdmissionCheckWithoutOurAnnotationsHasNoRetryLimit) {
  auto objects = MustApply(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: scan}
spec: {controllerName: scan.example.com/images}
)");
  ASSERT_EQ(objects.size(), 1u);
  auto check = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(check.ok());
  auto ac = check->root().getBody().getAdmissionCheckDefined();
  EXPECT_EQ(ac.getRetryLimit(), kNoRetryLimit);
  EXPECT_EQ(ac.getBackoffBaseNs(), 0);
}

// A BudgetPolicy (docs/budgets.md): the scope, limits in milli-unit-hours, a named zone's
// offsets recorded (Europe/Berlin: +1h in winter, +2h in summer), and its budget check's policy.
TEST(KueueYaml, ABudgetPolicyIsReadWithItsZonesOffsets) {
  auto objects = MustApply(R"(
apiVersion: admission-ledger.io/v1alpha1
kind: BudgetPolicy
metadata: {name: team-a}
spec:
  scope: {namespace: team-a, localQueue: main}
  limits: {nvidia.com/gpu: "2000", memory: 64Gi}
  period: {calendar: Week, timeZone: Europe/Berlin}
  halfLife: 168h
  unknownRuntime: Reject
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec:
  controllerName: admission-ledger.io/budget
  parameters: {apiGroup: admission-ledger.io, kind: BudgetPolicy, name: team-a}
)");
  ASSERT_EQ(objects.size(), 2u);
  auto policy = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(policy.ok());
  auto p = policy->root().getBody().getBudgetPolicyDefined();
  EXPECT_EQ(p.getScopeKind(), schema::BudgetScopeKind::LOCAL_QUEUE);
  EXPECT_EQ(std::string(p.getScopeNamespace().cStr()) + "/" + p.getScopeName().cStr(), "team-a/main");
  ASSERT_EQ(p.getLimits().size(), 2u);
  EXPECT_EQ(std::string(p.getLimits()[0].getResource().cStr()), "memory");
  EXPECT_EQ(p.getLimits()[0].getMilliUnitHours(), 64LL * 1024 * 1024 * 1024 * 1000);
  EXPECT_EQ(p.getLimits()[1].getMilliUnitHours(), 2'000'000);
  EXPECT_EQ(p.getPeriod(), schema::BudgetPeriodKind::WEEK);
  EXPECT_EQ(p.getHalfLifeNs(), 168LL * 3600 * 1'000'000'000);
  EXPECT_EQ(p.getUnknownRuntime(), schema::UnknownRuntime::REJECT);
  bool winter = false, summer = false;
  for (auto o : p.getUtcOffsets()) {
    winter = winter || o.getOffsetSeconds() == 3600;
    summer = summer || o.getOffsetSeconds() == 7200;
  }
  EXPECT_TRUE(winter && summer) << p.getUtcOffsets().size() << " offsets";
  // Two changes a year from 1980 to 2037, where the system tz database's transitions end.
  EXPECT_GT(p.getUtcOffsets().size(), 110u);
  auto check = schema::DecodeEvent(objects[1].event);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(std::string(check->root().getBody().getAdmissionCheckDefined().getParameters().cStr()),
            "team-a");
}

TEST(KueueYaml, ABadBudgetPolicyIsRefusedNamingTheField) {
  const std::string head = "apiVersion: admission-ledger.io/v1alpha1\nkind: BudgetPolicy\n"
                           "metadata: {name: p}\nspec: ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {calendar: Month, timeZone: Mars/X}})",
       "spec.period.timeZone: 'Mars/X' is not a time zone"},
      {R"({scope: {namespace: a, cohort: b}, limits: {cpu: "1"}, period: {calendar: Week}})",
       "spec.scope: names exactly one of"},
      {R"({scope: {localQueue: q}, limits: {cpu: "1"}, period: {calendar: Week}})",
       "spec.scope: names exactly one of"},
      {R"({scope: {namespace: a}, limits: {cpu: "0"}, period: {calendar: Week}})",
       "spec.limits[\"cpu\"]: must be more than 0"},
      {R"({scope: {namespace: a}, period: {calendar: Week}})", "spec.limits: required"},
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {calendar: Year}})",
       "spec.period.calendar: 'Year' is not one of Month, Week"},
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {rolling: 800h}})",
       "spec.period.rolling: '800h' is not a window"},
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {calendar: Week, rolling: 1h}})",
       "spec.period: names exactly one of calendar"},
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {calendar: Week}, halfLife: 10m})",
       "spec.halfLife: '10m' is not a whole number of quarter hours"},
      {R"({scope: {namespace: a}, limits: {cpu: "1"}, period: {calendar: Week}, unknownRuntime: X})",
       "spec.unknownRuntime: 'X' is not one of MaximumExecutionTime, Reject"},
  };
  for (const auto& [spec, want] : cases) {
    const std::string error = ApplyError(head + spec + "\n");
    EXPECT_NE(error.find(want), std::string::npos) << spec << "\n -> " << error;
  }
  EXPECT_NE(ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: BudgetPolicy\nmetadata: {name: p}\n")
                .find("expected admission-ledger.io/v1alpha1"),
            std::string::npos);
  EXPECT_NE(ApplyError(R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: b}
spec:
  controllerName: admission-ledger.io/budget
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: x}
)").find("a budget check names apiGroup admission-ledger.io, kind BudgetPolicy"),
            std::string::npos);
}

// ---- Unknown fields (kubectl's strict field validation).

constexpr const char* kMisspeltQueue = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-bad3}
spec:
  namespaceSelector: {}
  resourceGroup:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4}]
)";

TEST(KueueYaml, AnUnknownFieldIsRefusedWithItsPathAndTheNearestKnownName) {
  const std::string error = ApplyError(kMisspeltQueue);
  EXPECT_CONTAINS(error, "ClusterQueue cq-bad3, line 6");
  EXPECT_CONTAINS(error, "spec.resourceGroup: unknown field 'resourceGroup'; did you mean "
                         "'resourceGroups'?");
  // Nested, in a list, and at the top.
  EXPECT_CONTAINS(ApplyError(R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 4, borowingLimit: 2}]
)"),
                  "spec.resourceGroups[0].flavors[0].resources[0].borowingLimit: unknown field "
                  "'borowingLimit'; did you mean 'borrowingLimit'?");
  EXPECT_CONTAINS(ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                             "metadata: {name: f}\nsepc: {}\n"),
                  "sepc: unknown field 'sepc'; did you mean 'spec'?");
  EXPECT_CONTAINS(ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                             "metadata: {name: f, lables: {a: b}}\n"),
                  "metadata.lables: unknown field 'lables'; did you mean 'labels'?");
}

TEST(KueueYaml, UnknownFieldsCanBeWarnedAboutOrIgnoredAsKubectlValidateSays) {
  std::vector<std::string> warnings;
  ParseOptions warn{FieldValidation::kWarn, &warnings};
  Result<std::vector<ParsedObject>> r = ParseApplyYaml(kMisspeltQueue, warn);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_CONTAINS(warnings[0], "ClusterQueue cq-bad3: unknown field 'spec.resourceGroup'");
  warnings.clear();
  ParseOptions ignore{FieldValidation::kIgnore, &warnings};
  EXPECT_TRUE(ParseApplyYaml(kMisspeltQueue, ignore).ok());
  EXPECT_TRUE(warnings.empty());
}

// What Kubernetes, Kueue and kubectl write is known: a Job with the usual pod fields, and a
// Workload as `kubectl get -o yaml` prints it (managedFields, status).
TEST(KueueYaml, KubernetesOwnFieldsAreKnown) {
  MustSubmit(R"(apiVersion: batch/v1
kind: Job
metadata:
  name: sample
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
spec:
  parallelism: 2
  completions: 4
  backoffLimit: 3
  completionMode: Indexed
  suspend: true
  ttlSecondsAfterFinished: 60
  template:
    metadata: {labels: {app: sample}}
    spec:
      restartPolicy: Never
      serviceAccountName: trainer
      affinity:
        podAntiAffinity: {}
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution: []
      volumes: [{name: data, emptyDir: {}}]
      containers:
      - name: main
        image: registry.example/trainer:1
        command: [python, train.py]
        env: [{name: EPOCHS, value: "3"}]
        volumeMounts: [{name: data, mountPath: /data}]
        resources:
          requests: {cpu: "1", memory: 2Gi}
          limits: {nvidia.com/gpu: "1"}
)");
  Result<std::vector<ParsedObject>> r = ParseImportYaml(R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: w
  namespace: ml
  uid: 0b6a1a54-6f1d-4cb5-9a8e-3c5b0e2f7d11
  resourceVersion: "12345"
  generation: 1
  creationTimestamp: "2026-11-29T10:00:00Z"
  managedFields: [{manager: kueue, operation: Update}]
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: sample, uid: x}]
spec:
  queueName: lq
  active: true
  podSets:
  - name: main
    count: 1
    template:
      metadata: {}
      spec:
        containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
status:
  conditions: [{type: Admitted, status: "True"}]
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 1
      flavors: {cpu: default}
      resourceUsage: {cpu: "1"}
)",
                                                        kSeedA);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_CONTAINS(SubmitError(R"(apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ml, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  template:
    spec:
      containers:
      - name: main
        image: i
        resource: {requests: {cpu: "1"}}
)"),
                  "spec.template.spec.containers[0].resource: unknown field 'resource'; did "
                  "you mean 'resources'?");
}

TEST(KueueYaml, DeleteReadsOnlyWhatNamesTheObject) {
  auto objects = ParseDeleteYaml(R"(
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: ClusterQueue
  metadata: {name: team-a}
  spec: {queueingStrategy: NotEvenValid}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: LocalQueue
  metadata: {name: lq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team}
)");
  ASSERT_TRUE(objects.ok()) << objects.status().ToString();
  ASSERT_EQ(objects->size(), 3u);
  const std::vector<std::vector<std::string>> expected = {
      {"ClusterQueue", "", "team-a"}, {"LocalQueue", "default", "lq"}, {"LocalQueue", "team", "lq"}};
  for (size_t i = 0; i < expected.size(); ++i) {
    auto event = schema::DecodeEvent((*objects)[i].event);
    ASSERT_TRUE(event.ok());
    ASSERT_TRUE(event->root().getBody().isObjectDeleted());
    auto del = event->root().getBody().getObjectDeleted();
    EXPECT_EQ(std::vector<std::string>({del.getKind().cStr(), del.getNamespace().cStr(),
                                        del.getName().cStr()}),
              expected[i]);
  }
  auto workload = ParseDeleteYaml("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n");
  ASSERT_FALSE(workload.ok());
  EXPECT_NE(workload.status().message().find("'Job' cannot be deleted here"), std::string::npos)
      << workload.status().ToString();
  EXPECT_NE(workload.status().message().find("admitctl delete NAMESPACE/NAME"), std::string::npos);
  auto nameless = ParseDeleteYaml("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {}\n");
  ASSERT_FALSE(nameless.ok());
  EXPECT_NE(nameless.status().message().find("metadata.name: required"), std::string::npos)
      << nameless.status().ToString();
}

TEST(KueueYaml, LabelOrderDoesNotChangeTheEvent) {
  const char* kFlavor = R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
spec:
  nodeLabels: {%s}
)";
  char a[512], b[512];
  std::snprintf(a, sizeof(a), kFlavor, "zone: a, model: h100");
  std::snprintf(b, sizeof(b), kFlavor, "model: h100, zone: a");
  EXPECT_EQ(MustApply(a)[0].event, MustApply(b)[0].event);
}

TEST(KueueYaml, WorkloadRequestsFollowKubernetesEffectiveRequestRules) {
  auto objects = MustSubmit(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: train
  namespace: ml
  uid: 0b7c2f1e-0000-4000-8000-000000000001
  annotations:
    admission-ledger.io/expected-runtime: 2h
spec:
  queueName: ml-queue
  priority: 50
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  maximumExecutionTimeSeconds: 3600
  active: false
  podSets:
  - name: workers
    count: 4
    minCount: 2
    template:
      spec:
        nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100}
        tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - {key: zone, operator: In, values: [a, b]}
        initContainers:
        - name: fetch            # runs alone before the sidecar: 3 cpu
          resources: {requests: {cpu: 3}}
        - name: proxy            # a sidecar: runs alongside everything after it
          restartPolicy: Always
          resources: {requests: {cpu: 500m, memory: 1Gi}}
        - name: warmup           # runs with the sidecar: 2 + 0.5 cpu
          resources: {requests: {cpu: 2}}
        containers:
        - name: a
          resources:
            requests: {cpu: 1, memory: 2Gi}
        - name: b
          resources:
            limits: {cpu: 1, nvidia.com/gpu: 1}   # requests default to limits
        overhead: {cpu: 100m}
)");
  ASSERT_EQ(objects.size(), 1u);
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto w = decoded->root().getBody().getWorkloadSubmitted().getWorkload();
  EXPECT_EQ(std::string(w.getUid()), "0b7c2f1e-0000-4000-8000-000000000001");
  EXPECT_TRUE(w.getHasPriority());
  EXPECT_EQ(w.getPriority(), 50);
  EXPECT_EQ(std::string(w.getPriorityClassName()), "high");
  EXPECT_EQ(std::string(w.getPriorityClassSource()), "kueue.x-k8s.io/workloadpriorityclass");
  EXPECT_FALSE(w.getActive());
  EXPECT_EQ(w.getMaxExecutionNs(), int64_t{3600} * 1'000'000'000);
  EXPECT_EQ(w.getExpectedRuntimeNs(), int64_t{7200} * 1'000'000'000);
  auto ps = w.getPodSets()[0];
  EXPECT_EQ(ps.getCount(), 4);
  EXPECT_EQ(ps.getMinCount(), 2);
  // cpu: max(1 + 1 + 0.5 sidecar, max(3, 2 + 0.5)) + 0.1 overhead = 3.1
  // memory: 2Gi + 1Gi sidecar; gpu: 1 from the limit.
  ASSERT_EQ(ps.getRequests().size(), 3u);
  EXPECT_EQ(std::string(ps.getRequests()[0].getName()), "cpu");
  EXPECT_EQ(ps.getRequests()[0].getMilli(), 3100);
  EXPECT_EQ(std::string(ps.getRequests()[1].getName()), "memory");
  EXPECT_EQ(ps.getRequests()[1].getMilli(), 3 * kGi * 1000);
  EXPECT_EQ(std::string(ps.getRequests()[2].getName()), "nvidia.com/gpu");
  EXPECT_EQ(ps.getRequests()[2].getMilli(), 1000);
  ASSERT_EQ(ps.getNodeSelector().size(), 1u);
  ASSERT_EQ(ps.getTolerations().size(), 1u);
  EXPECT_EQ(std::string(ps.getTolerations()[0].getOperator()), "Exists");
  ASSERT_EQ(ps.getRequiredAffinity().size(), 1u);
  EXPECT_EQ(std::string(ps.getRequiredAffinity()[0].getKey()), "zone");
}

TEST(KueueYaml, JobPriorityAndCountFollowKueue) {
  auto objects = MustSubmit(R"(
apiVersion: batch/v1
kind: Job
metadata:
  name: small
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/priority-class: high
    kueue.x-k8s.io/max-exec-time-seconds: "600"
spec:
  parallelism: 5
  completions: 2
  template:
    spec:
      priorityClassName: pod-high
      containers: [{name: c, resources: {requests: {cpu: 250m}}}]
)");
  ASSERT_EQ(objects.size(), 1u);
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto w = decoded->root().getBody().getWorkloadSubmitted().getWorkload();
  EXPECT_EQ(std::string(w.getName()), "job-small");
  EXPECT_EQ(w.getPodSets()[0].getCount(), 2);  // completions < parallelism
  EXPECT_EQ(std::string(w.getPriorityClassName()), "high");
  EXPECT_EQ(std::string(w.getPriorityClassSource()), "kueue.x-k8s.io/workloadpriorityclass");
  EXPECT_FALSE(w.getHasPriority());  // resolved from the class by the decider
  EXPECT_EQ(w.getMaxExecutionNs(), int64_t{600} * 1'000'000'000);
}

TEST(KueueYaml, ImportReadsTheAdmissionOfAWorkloadList) {
  const std::string list = R"(
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: Workload
  metadata:
    name: job-sample-job-x7k2p
    namespace: default
    uid: 11111111-2222-4333-8444-555555555555
    creationTimestamp: "2026-11-29T10:00:00Z"
  spec:
    queueName: user-queue
    priorityClassName: high
    priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
    podSets:
    - name: main
      count: 3
      template:
        spec:
          containers: [{name: c, resources: {requests: {cpu: "1", memory: 200Mi}}}]
  status:
    admission:
      clusterQueue: cluster-queue
      podSetAssignments:
      - name: main
        flavors: {cpu: default-flavor, memory: default-flavor}
        resourceUsage: {cpu: "3", memory: 600Mi}
        count: 3
)";
  Result<std::vector<ParsedObject>> r = ParseImportYaml(list, kSeedA);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  auto decoded = schema::DecodeEvent((*r)[0].event);
  ASSERT_TRUE(decoded.ok());
  auto imported = decoded->root().getBody().getWorkloadImported();
  EXPECT_EQ(std::string(imported.getWorkload().getUid()), "11111111-2222-4333-8444-555555555555");
  EXPECT_EQ(imported.getWorkload().getCreationTimestampNs(), 1795946400LL * 1'000'000'000);
  EXPECT_EQ(std::string(imported.getWorkload().getPriorityClassSource()),
            "kueue.x-k8s.io/workloadpriorityclass");
  auto admission = imported.getAdmission();
  EXPECT_EQ(std::string(admission.getClusterQueue()), "cluster-queue");
  auto assignment = admission.getPodSetAssignments()[0];
  EXPECT_EQ(assignment.getCount(), 3);
  ASSERT_EQ(assignment.getFlavors().size(), 2u);
  EXPECT_EQ(std::string(assignment.getFlavors()[0].getResource()), "cpu");
  EXPECT_EQ(std::string(assignment.getFlavors()[0].getFlavor()), "default-flavor");
  EXPECT_EQ(assignment.getResourceUsage()[1].getMilli(), 600 * kMi * 1000);

  // Submitting it instead would queue a running workload a second time.
  const std::string item = list.substr(list.find("- apiVersion") + 2);
  std::string as_document;
  for (size_t pos = 0; pos < item.size();) {  // un-indent the list item by two spaces
    const size_t eol = item.find('\n', pos);
    const std::string line = item.substr(pos, eol - pos);
    as_document += (line.starts_with("  ") ? line.substr(2) : line) + "\n";
    pos = eol == std::string::npos ? item.size() : eol + 1;
  }
  EXPECT_CONTAINS(SubmitError(as_document),
                  "status.admission: the workload is already admitted: import it instead");

  // Without status.admission it is a pending workload (engine v22): no admission, its creation
  // time kept for its place in the queue.
  std::string without = list.substr(0, list.find("  status:"));
  Result<std::vector<ParsedObject>> pending = ParseImportYaml(without, kSeedA);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  auto pending_event = schema::DecodeEvent((*pending)[0].event);
  ASSERT_TRUE(pending_event.ok());
  auto pending_import = pending_event->root().getBody().getWorkloadImported();
  EXPECT_EQ(pending_import.getAdmission().getClusterQueue().size(), 0u);
  EXPECT_EQ(pending_import.getWorkload().getCreationTimestampNs(), 1795946400LL * 1'000'000'000);
}

// What an import cannot honour of Kueue's record is refused, naming the field, or with
// ParseOptions::lenient dropped and listed.
TEST(KueueYaml, AnImportRefusesWhatItCannotHonourOrDropsItWhenLenient) {
  const std::string evicting = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ml, uid: u-1}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
status:
  conditions:
  - {type: Evicted, status: "True", reason: Preempted, lastTransitionTime: "2026-12-06T11:59:00Z"}
  admissionChecks:
  - {name: scan, state: Retry, lastTransitionTime: "2026-12-06T11:59:00Z"}
  admission:
    clusterQueue: cq
    podSetAssignments:
    - {name: main, count: 1, flavors: {cpu: f}, resourceUsage: {cpu: "1"}}
)";
  // The eviction in progress is Kueue's record too; the check still in Retry is not honoured.
  EXPECT_CONTAINS(ImportError(evicting),
                  "status.admissionChecks[0]: check 'scan' is 'Retry', not Ready");
  std::vector<std::string> warnings;
  ParseOptions lenient;
  lenient.lenient = true;
  lenient.warnings = &warnings;
  Result<std::vector<ParsedObject>> r = ParseImportYaml(evicting, kSeedA, lenient);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_CONTAINS(warnings[0], "status.admissionChecks[0]: dropped: check 'scan' is 'Retry', not Ready");
  auto decoded = schema::DecodeEvent((*r)[0].event);
  ASSERT_TRUE(decoded.ok());
  auto imported = decoded->root().getBody().getWorkloadImported();
  EXPECT_EQ(imported.getChecks().size(), 0u);
  EXPECT_EQ(std::string(imported.getEvictionReason()), "Preempted");
  EXPECT_EQ(imported.getEvictedAtNs(), 1796558340LL * 1'000'000'000);  // 2026-12-06T11:59:00Z
}

// ---------------------------------------------------------------------------------------------
// Refusals: the document (1-based), the field path and the reason; nothing is returned.

constexpr const char* kGoodFlavor = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
)";

TEST(KueueYaml, BadQuantityNamesDocumentPathAndReason) {
  const std::string error = ApplyError(std::string(kGoodFlavor) + R"(---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 9
      - name: memory
        nominalQuota: 36Gi
    - name: spot
      resources:
      - name: cpu
        nominalQuota: 9Qi
      - name: memory
        nominalQuota: 1Gi
)");
  EXPECT_CONTAINS(error,
                  "document 2 (ClusterQueue team-a, line 23): spec.resourceGroups[0].flavors[1]"
                  ".resources[0].nominalQuota: '9Qi' is not a quantity: unknown suffix 'Qi'");
}

TEST(KueueYaml, FailingFileReturnsNoObjects) {
  // The first document is valid; the file still yields nothing.
  Result<std::vector<ParsedObject>> r = ParseApplyYaml(std::string(kGoodFlavor) + R"(---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {}
)");
  ASSERT_FALSE(r.ok());
  EXPECT_CONTAINS(r.status().message(),
                  "document 2 (ResourceFlavor, line 8): metadata.name: required");
}

TEST(KueueYaml, RefusesUnknownKindsAndVersions) {
  EXPECT_CONTAINS(
      ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Queue\nmetadata: {name: q}\n"),
      "document 1 (Queue, line 2): kind: 'Queue' cannot be applied");
  EXPECT_CONTAINS(ApplyError("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: ResourceFlavor\n"
                             "metadata: {name: f}\n"),
                  "apiVersion: 'kueue.x-k8s.io/v1alpha1' is not supported for ResourceFlavor: "
                  "expected kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2");
  EXPECT_CONTAINS(ApplyError("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n"),
                  "workloads are submitted, not applied");
  EXPECT_CONTAINS(SubmitError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n"
                              "metadata: {name: c}\n"),
                  "definitions are applied");
  EXPECT_CONTAINS(ApplyError("kind: ResourceFlavor\nmetadata: {name: f}\n"),
                  "apiVersion: required");
  EXPECT_CONTAINS(ApplyError("- just\n- a list\n"), "expected a Kubernetes object");
}

TEST(KueueYaml, RefusesAFlavorMissingACoveredResource) {
  const std::string error = ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
)");
  EXPECT_CONTAINS(error,
                  "spec.resourceGroups[0].flavors[0].resources: flavor 'default-flavor' "
                  "gives quota for 1 resources but coveredResources lists 2 (cpu, memory)");

  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: memory, nominalQuota: 9}
      - {name: cpu, nominalQuota: 9}
)"),
                  "resources[0].name: 'memory' is not coveredResources[0] 'cpu'");

  EXPECT_CONTAINS(
      ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu}
)"),
      "resources[0].nominalQuota: required: flavor 'default-flavor' needs a nominalQuota");
}

TEST(KueueYaml, RefusesTypeErrors) {
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: cpu
)"),
                  "spec.resourceGroups[0].coveredResources: expected a list, got a string");
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeTaints:
  - {key: spot, value: true, effect: NoSchedule}
)"),
                  "spec.nodeTaints[0].value: expected a string, got a boolean (true); quote it");
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: "1000"
)"),
                  "value: expected an integer, got a string (1000)");
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  queueingStrategy: FIFO
)"),
                  "spec.queueingStrategy: 'FIFO' is not one of StrictFIFO, BestEffortFIFO");
  EXPECT_CONTAINS(ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                             "metadata: {name: Bad_Name}\n"),
                  "metadata.name: 'Bad_Name' is not a valid name");
  EXPECT_CONTAINS(ApplyError("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                             "metadata: {name: a, name: b}\n"),
                  "metadata.name: duplicate key 'name'");
}

TEST(KueueYaml, RefusesWhatKueuesWebhookRefuses) {
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: solo}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: 1}
)"),
                  "borrowingLimit: must not be set without a cohort (spec.cohortName)");
  EXPECT_CONTAINS(
      ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]
  - coveredResources: [cpu]
    flavors: [{name: g, resources: [{name: cpu, nominalQuota: 1}]}]
)"),
      "spec.resourceGroups[1].coveredResources[0]: resource 'cpu' is covered more than once");
  EXPECT_CONTAINS(ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: -1}]}]
)"),
                  "nominalQuota: '-1' must not be negative");
  EXPECT_CONTAINS(
      ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}
)"),
      "spec.preemption.borrowWithinCohort.policy: must be Never when reclaimWithinCohort is Never");
  EXPECT_CONTAINS(
      ApplyError(R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: prov
  annotations: {admission-ledger.io/pending-ttl: 10 minutes}
spec: {controllerName: x}
)"),
      "metadata.annotations[\"admission-ledger.io/pending-ttl\"]: '10 minutes' is not a duration");
}

TEST(KueueYaml, RefusesJobsKueueDoesNotManage) {
  const std::string error = SubmitError(R"(
apiVersion: batch/v1
kind: Job
metadata: {name: unmanaged}
spec:
  template:
    spec:
      containers: [{name: c}]
)");
  EXPECT_CONTAINS(
      error,
      "document 1 (Job unmanaged, line 4): metadata.labels[\"kueue.x-k8s.io/queue-name\"]: "
      "not managed by Kueue: no kueue.x-k8s.io/queue-name label");
  EXPECT_CONTAINS(SubmitError(R"(
apiVersion: batch/v1
kind: Job
metadata:
  name: j
  labels: {kueue.x-k8s.io/queue-name: lq}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "3"}
spec:
  parallelism: 3
  template: {spec: {containers: [{name: c}]}}
)"),
                  "must be less than spec.parallelism (3)");
  EXPECT_CONTAINS(SubmitError(R"(
apiVersion: batch/v1
kind: Job
metadata:
  name: j
  labels: {kueue.x-k8s.io/queue-name: lq}
  annotations: {kueue.x-k8s.io/job-min-parallelism: "3"}
spec:
  parallelism: 5
  completions: 2
  template: {spec: {containers: [{name: c}]}}
)"),
                  "exceeds the pod count 2");
}

// A JobSet is one Workload "jobset-<name>" with a pod set per replicated job: replicas x the
// Job's pod count (parallelism, fewer if completions is smaller), as Kueue's JobSet
// integration; the WorkloadPriorityClass label sets its priority.
TEST(KueueYaml, JobSetBecomesAWorkloadWithAPodSetPerReplicatedJob) {
  auto objects = MustSubmit(R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: ml
  uid: 6a1f0c52-4f7e-4a4b-9e0e-2b4a52a2b9a1
  labels: {kueue.x-k8s.io/queue-name: gpus, kueue.x-k8s.io/priority-class: high}
spec:
  suspend: true
  replicatedJobs:
  - name: leader
    template:
      spec:
        template:
          spec:
            containers: [{name: c, resources: {requests: {cpu: "2"}}}]
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 3
        completions: 2
        template:
          spec:
            containers: [{name: c, resources: {limits: {nvidia.com/gpu: "8"}}}]
  - name: elastic
    template:
      spec:
        parallelism: 4
        template:
          spec:
            containers: [{name: c, resources: {requests: {cpu: "1"}}}]
)");
  ASSERT_EQ(objects.size(), 1u);
  EXPECT_EQ(objects[0].kind, "Workload");
  EXPECT_EQ(objects[0].source_kind, "JobSet");
  EXPECT_EQ(objects[0].name, "jobset-train");
  auto decoded = schema::DecodeEvent(objects[0].event);
  ASSERT_TRUE(decoded.ok());
  auto w = decoded->root().getBody().getWorkloadSubmitted().getWorkload();
  EXPECT_EQ(std::string(w.getUid()), "6a1f0c52-4f7e-4a4b-9e0e-2b4a52a2b9a1");
  EXPECT_EQ(std::string(w.getQueueName()), "gpus");
  EXPECT_EQ(std::string(w.getPriorityClassName()), "high");
  ASSERT_EQ(w.getPodSets().size(), 3u);
  EXPECT_EQ(std::string(w.getPodSets()[0].getName()), "leader");
  EXPECT_EQ(w.getPodSets()[0].getCount(), 1);
  EXPECT_EQ(std::string(w.getPodSets()[1].getName()), "workers");
  EXPECT_EQ(w.getPodSets()[1].getCount(), 4);  // 2 replicas x min(3, 2)
  EXPECT_EQ(w.getPodSets()[1].getMinCount(), 0);
  ASSERT_EQ(w.getPodSets()[1].getRequests().size(), 1u);
  EXPECT_EQ(std::string(w.getPodSets()[1].getRequests()[0].getName()), "nvidia.com/gpu");
  EXPECT_EQ(w.getPodSets()[1].getRequests()[0].getMilli(), 8000);
  EXPECT_EQ(w.getPodSets()[2].getCount(), 4);
  EXPECT_EQ(w.getPodSets()[2].getMinCount(), 0);
}

TEST(KueueYaml, RefusesJobSetsKueueCannotAdmit) {
  const std::string head = R"(
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
  labels: {kueue.x-k8s.io/queue-name: lq}
)";
  const std::string pod = "      spec: {template: {spec: {containers: [{name: c}]}}}\n";
  EXPECT_CONTAINS(SubmitError(head + "spec: {}\n"),
                  "spec.replicatedJobs: required: at least one replicated job");
  EXPECT_CONTAINS(SubmitError(head + "spec:\n  replicatedJobs:\n  - name: a\n    template:\n" +
                              pod + "  - name: a\n    template:\n" + pod),
                  "spec.replicatedJobs[1].name: 'a' is the name of another replicated job");
  EXPECT_CONTAINS(SubmitError(head + "spec:\n  replicatedJobs:\n  - name: Bad_Name\n"
                                     "    template:\n" + pod),
                  "spec.replicatedJobs[0].name: 'Bad_Name' is not valid");
  // No partial admission: the JobSet controller keeps its replicated jobs' pod counts.
  EXPECT_CONTAINS(
      SubmitError(head + "spec:\n  replicatedJobs:\n  - name: w\n"
                         "    template:\n      metadata:\n        annotations: "
                         "{kueue.x-k8s.io/job-min-parallelism: \"1\"}\n"
                         "      spec: {parallelism: 4, template: {spec: {containers: "
                         "[{name: c}]}}}\n"),
      "spec.replicatedJobs[0].template.metadata.annotations[\"kueue.x-k8s.io/job-min-parallelism\"]"
      ": a JobSet cannot be admitted partially");
  std::string v1 = head;
  v1.replace(v1.find("v1alpha2"), 8, "v1");
  EXPECT_CONTAINS(SubmitError(v1 + "spec: {}\n"),
                  "'jobset.x-k8s.io/v1' is not supported for a JobSet: expected "
                  "jobset.x-k8s.io/v1alpha2");
  std::string unmanaged = head;
  unmanaged.replace(unmanaged.find("  labels"), unmanaged.find("\n", unmanaged.find("  labels")) -
                                                    unmanaged.find("  labels") + 1, "");
  EXPECT_CONTAINS(SubmitError(unmanaged + "spec: {}\n"), "not managed by Kueue");
}

TEST(KueueYaml, RefusesInvalidYamlWithTheLine) {
  const std::string error = ApplyError(std::string(kGoodFlavor) + "---\nkind: [unclosed\n");
  EXPECT_CONTAINS(error, "document 2 (line 7): not valid YAML");
}

TEST(KueueYaml, EmptyDocumentsAreSkipped) {
  auto objects = MustApply(std::string("# nothing here\n---\n---\n") + kGoodFlavor + "---\n...\n");
  EXPECT_EQ(objects.size(), 1u);
  EXPECT_EQ(MustApply("").size(), 0u);
}

// Manifests touching most fields, one per mode, for the robustness property below.
constexpr const char* kApplySink = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq, annotations: {admission-ledger.io/max-wait: 1h}}
spec:
  cohortName: c
  namespaceSelector: {matchExpressions: [{key: a, operator: In, values: [x]}]}
  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority}}
  flavorFungibility: {whenCanBorrow: MayStopSearch}
  admissionChecksStrategy: {admissionChecks: [{name: p, onFlavors: [f]}]}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: f
      resources:
      - {name: cpu, nominalQuota: 9, borrowingLimit: 1, lendingLimit: 2}
      - {name: memory, nominalQuota: 36Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec:
  nodeLabels: {a: b}
  nodeTaints: [{key: k, value: v, effect: NoSchedule}]
  tolerations: [{key: k, operator: Equal, value: v}]
)";

constexpr const char* kWorkloadSink = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: &meta {name: w, namespace: ns, labels: {a: b}}
spec:
  queueName: q
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: 1}, limits: {memory: 1Gi}}}]
        initContainers: [{name: i, restartPolicy: Always, resources: {requests: {cpu: 1}}}]
        tolerations: [{key: k, operator: Exists}]
        affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:
          {nodeSelectorTerms: [{matchExpressions: [{key: z, operator: Gt, values: ["1"]}]}]}}}
)";

constexpr const char* kJobSink = R"(---
apiVersion: batch/v1
kind: Job
metadata: {generateName: j-, labels: {kueue.x-k8s.io/queue-name: q}}
spec: {parallelism: 3, template: {spec: {containers: [{name: c}]}}}
)";

constexpr const char* kAdmission = R"(status:
  admission:
    clusterQueue: cq
    podSetAssignments: [{name: main, flavors: {cpu: f}, resourceUsage: {cpu: 2}, count: 2}]
)";

Result<std::vector<ParsedObject>> ParseInMode(int mode, const std::string& text) {
  return mode == 0   ? ParseApplyYaml(text)
         : mode == 1 ? ParseSubmitYaml(text, kSeedA)
                     : ParseImportYaml(text, kSeedA);
}

std::string SinkForMode(int mode) {
  return mode == 0   ? std::string(kApplySink)
         : mode == 1 ? std::string(kWorkloadSink) + kJobSink
                     : std::string(kWorkloadSink) + kAdmission;
}

TEST(KueueYaml, RobustnessSamplesParseUnchanged) {
  for (int mode = 0; mode < 3; ++mode) {
    Result<std::vector<ParsedObject>> r = ParseInMode(mode, SinkForMode(mode));
    ASSERT_TRUE(r.ok()) << mode << ": " << r.status().ToString();
    EXPECT_EQ(r->size(), mode == 2 ? 1u : 2u);
  }
}

// Whatever the edits, every mode either parses or refuses with a located message: no crash,
// no exception escaping, no unlocated error, and every event it gives decodes.
RC_GTEST_PROP(KueueYaml, MutatedManifestsAreParsedOrRefusedWithALocation, ()) {
  const int mode = *rc::gen::inRange(0, 3);
  std::string text = SinkForMode(mode);
  const int edits = *rc::gen::inRange(1, 6);
  for (int e = 0; e < edits; ++e) {
    const size_t at = *rc::gen::inRange<size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        text.erase(at, 1);
        break;
      case 1:
        text.insert(at, 1, *rc::gen::elementOf(std::string(":-[]{}\n #&*!|>'\"0aZ.%")));
        break;
      default: {
        const size_t end = text.find('\n', at);
        text.insert(at, text.substr(at, end == std::string::npos ? 0 : end - at + 1));
      }
    }
  }
  Result<std::vector<ParsedObject>> r = ParseInMode(mode, text);
  if (r.ok()) {
    for (const ParsedObject& o : *r) RC_ASSERT(schema::DecodeEvent(o.event).ok());
  } else {
    RC_ASSERT(r.status().message().starts_with("document "));
  }
}

}  // namespace
}  // namespace admission::ops
