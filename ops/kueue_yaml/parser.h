#pragma once
// Internal to the Kueue YAML parser (ops/kueue_yaml/kueue_yaml.h is its public face): the parser of one
// document, whose methods live in the files of this folder, one file per Kueue kind, and the
// small pieces they share. Nothing outside ops/kueue_yaml/ includes it.
//
//   ops/kueue_yaml/kueue_yaml.cc  the file: documents, the YAML parser's guards, the public functions
//   object.cc              one object: List, apiVersion and kind, metadata, the emitted event
//   reads.cc               errors and typed reads (strings, integers, quantities, maps)
//   names.cc               paths, Kubernetes names, YAML scalars, generated names and uids
//   selectors.cc           tolerations, label selectors and node selector requirements
//   quota.cc               resourceGroups and fairSharing (ClusterQueue, Cohort, LocalQueue)
//   resource_flavor.cc, cohort.cc, cluster_queue.cc, local_queue.cc, admission_check.cc,
//   priority_class.cc      the definitions, one file per kind
//   workload.cc, pod_spec.cc, job.cc   submissions and imports
//   topology.cc            Topology (topology-aware scheduling, docs/tas.md)
//   topology_request.cc    pod sets' topology requests (annotations, Workload spec)
//   topology_assignment.cc an imported admission's topology assignments
//
//   fields.cc              unknown fields (kubectl's strict field validation)
//
// Kueue fields accepted but not modelled (ignored), so that manifests written for Kueue load:
//   ClusterQueue  spec.concurrentAdmissionPolicy, spec.defaultLocalQueue
//   ResourceFlavor spec.resourceWeights
//   LocalQueue    spec.wallTimePolicy
//   AdmissionCheck spec.parameters, spec.retryDelayMinutes
//   Workload      topologyRequest's podIndexLabel, subGroupIndexLabel and subGroupCount,
//                 template.metadata but its annotations, nodeSelectorTerms matchFields,
//                 preferred node affinity, pod (anti-)affinity, status other than admission
//   Workload      spec.preemptionGates
//   Job, JobSet   every field of their specs but the pod counts and templates (fields.cc)
//   Pod template  every field of PodSpec and Container but those that ask for resources or
//                 place pods (fields.cc)
// Any other field is unknown: refused by default (ParseOptions::field_validation, kubectl's
// --validate), naming its path and the nearest known field; a known field of the wrong type or
// with an invalid value is refused always.

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <capnp/message.h>
#include <yaml-cpp/yaml.h>

#include "ops/kueue_yaml/fields.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"
#include "schema/k8s_names.h"

namespace admission::ops::kueue_yaml_internal {

// Limits. Kueue's where it has one (its CRD validation), else ours, bounding work per document.

inline constexpr size_t kNameBytesMax = 253;  // RFC 1123 subdomain: object names
inline constexpr size_t kLabelBytesMax = 63;  // RFC 1123 label: namespaces, podSet names
inline constexpr size_t kGenerateNamePrefixMax = 58;  // Kubernetes: 63 minus the random suffix
inline constexpr size_t kGeneratedSuffixLength = 5;
inline constexpr size_t kResourceGroupsMax = 16;
inline constexpr size_t kGroupResourcesMax = 64;
inline constexpr size_t kGroupFlavorsMax = 64;
inline constexpr size_t kFlavorsTotalMax = 256;
inline constexpr size_t kCoveredResourcesTotalMax = 256;
inline constexpr size_t kAdmissionChecksMax = 64;
inline constexpr size_t kOnFlavorsMax = 64;
inline constexpr size_t kFlavorNodeLabelsMax = 8;
inline constexpr size_t kFlavorTaintsMax = 8;
inline constexpr size_t kFlavorTolerationsMax = 8;
inline constexpr size_t kPodSetsMax = 8;
inline constexpr size_t kContainersMax = 64;  // ours
inline constexpr size_t kMapEntriesMax = 256;  // ours: labels, nodeSelector, requests
inline constexpr size_t kListItemsMax = 256;  // ours: tolerations, requirements, values
inline constexpr size_t kAnnotationsBytesMax = 256 * 1024;  // Kubernetes' total annotation size
inline constexpr size_t kTopologyLevelsMax = 16;
inline constexpr size_t kTopologySlicesMax = 1000;         // Kueue's (v1beta2 slices)
inline constexpr size_t kTopologyDomainsMax = 100000;      // Kueue's (v1beta2 roots)

inline constexpr std::string_view kApiV1beta1 = "kueue.x-k8s.io/v1beta1";
inline constexpr std::string_view kApiV1beta2 = "kueue.x-k8s.io/v1beta2";
inline constexpr std::string_view kApiBatchV1 = "batch/v1";
inline constexpr std::string_view kApiBudgetV1alpha1 = "admission-ledger.io/v1alpha1";
inline constexpr std::string_view kBudgetController = "admission-ledger.io/budget";
inline constexpr std::string_view kApiJobSetV1alpha2 = "jobset.x-k8s.io/v1alpha2";

// Kueue's labels and annotations.
inline constexpr std::string_view kQueueNameLabel = "kueue.x-k8s.io/queue-name";
inline constexpr std::string_view kJobUidLabel = "kueue.x-k8s.io/job-uid";
inline constexpr std::string_view kPriorityClassLabel = "kueue.x-k8s.io/priority-class";
inline constexpr std::string_view kMaxExecTimeLabel = "kueue.x-k8s.io/max-exec-time-seconds";
inline constexpr std::string_view kJobMinParallelismAnnotation =
    "kueue.x-k8s.io/job-min-parallelism";
// Kueue's topology-aware scheduling (docs/tas.md): a pod template's annotations.
inline constexpr std::string_view kRequiredTopologyAnnotation =
    "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kPreferredTopologyAnnotation =
    "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr std::string_view kUnconstrainedTopologyAnnotation =
    "kueue.x-k8s.io/podset-unconstrained-topology";
inline constexpr std::string_view kSliceRequiredTopologyAnnotation =
    "kueue.x-k8s.io/podset-slice-required-topology";
inline constexpr std::string_view kSliceSizeAnnotation = "kueue.x-k8s.io/podset-slice-size";
inline constexpr std::string_view kSliceConstraintsAnnotation =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
inline constexpr std::string_view kPodSetGroupNameAnnotation = "kueue.x-k8s.io/podset-group-name";
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
// Ours: policies that Kueue keeps elsewhere (controller flags) or not at all.
inline constexpr std::string_view kPendingTtlAnnotation = "admission-ledger.io/pending-ttl";
inline constexpr std::string_view kOnTimeoutAnnotation = "admission-ledger.io/on-timeout";
inline constexpr std::string_view kRetryLimitAnnotation = "admission-ledger.io/retry-limit";
inline constexpr std::string_view kBackoffBaseAnnotation = "admission-ledger.io/backoff-base";
inline constexpr std::string_view kBackoffMaxAnnotation = "admission-ledger.io/backoff-max";
inline constexpr std::string_view kMaxWaitAnnotation = "admission-ledger.io/max-wait";
inline constexpr std::string_view kExpectedRuntimeAnnotation =
    "admission-ledger.io/expected-runtime";
inline constexpr std::string_view kMaxExecutionAnnotation =
    "admission-ledger.io/max-execution";
// kubectl's copy of the whole object: noise in a ledger, and up to the annotation size limit.
inline constexpr std::string_view kLastAppliedAnnotation =
    "kubectl.kubernetes.io/last-applied-configuration";

inline constexpr std::string_view kWorkloadPriorityClassSource =
    "kueue.x-k8s.io/workloadpriorityclass";
inline constexpr std::string_view kPodPriorityClassSource = "scheduling.k8s.io/priorityclass";

inline constexpr int64_t kNsPerSecond = 1'000'000'000;

enum class Mode { kApply, kSubmit, kImport, kDelete };

// ---------------------------------------------------------------------------------------------
// Paths and names (names.cc).

std::string Join(const std::string& path, std::string_view key);
std::string Index(const std::string& path, size_t i);
std::string MapKey(const std::string& path, std::string_view key);
std::string Quote(std::string_view s);

inline capnp::Text::Reader T(const std::string& s) {
  return capnp::Text::Reader(s.data(), s.size());
}

bool IsDigit(char c);
// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDnsLabel(std::string_view s);
// RFC 1123 subdomains, label and annotation keys, label values (schema/k8s_names.h).
using schema::IsDnsSubdomain;
using schema::IsLabelValue;
using schema::IsQualifiedName;
// Resource names ("cpu", "nvidia.com/gpu", "hugepages-2Mi", "cpu_credits"): a qualified name.
bool IsResourceName(std::string_view s);

inline constexpr const char* kSubdomainRule =
    "must be lowercase alphanumerics, '-' or '.', start and end with an alphanumeric, at most "
    "253 characters (RFC 1123 subdomain)";
inline constexpr const char* kLabelKeyRule =
    "[prefix/]name, the prefix an RFC 1123 subdomain, the name at most 63 alphanumerics, '-', "
    "'_' or '.', starting and ending with an alphanumeric";
inline constexpr const char* kLabelRule =
    "must be lowercase alphanumerics or '-', start and end with an alphanumeric, at most 63 "
    "characters (RFC 1123 label)";

// Plain YAML scalars that Kubernetes' YAML reader (YAML 1.1) does not read as strings: a string
// field given one of these is refused by the API server, so it is refused here too.
enum class ScalarKind { kString, kNull, kBool, kInt, kFloat };
ScalarKind KindOfScalar(const YAML::Node& n);
// "a mapping", "a list", "an integer"...: what a node is, for error messages.
const char* DescribeNode(const YAML::Node& n);

// Absent: missing or null (Kubernetes reads `field:` and `field: null` as unset).
inline bool Absent(const YAML::Node& n) { return !n.IsDefined() || n.IsNull(); }

// The value under `key`, undefined when the key is missing or `parent` is not a mapping.
// Never yaml-cpp's "zombie" node for a missing key, on which most operations throw.
// Nodes are references in yaml-cpp: assigning one node to another overwrites the document, so
// nodes here are only ever initialized, never assigned.
YAML::Node Child(const YAML::Node& parent, std::string_view key);

using Digest = std::array<uint8_t, 32>;
// SHA-256 over length-prefixed parts, so that ("ab", "c") and ("a", "bc") differ.
Digest Sha256Parts(std::initializer_list<std::string_view> parts);
// Five characters of Kubernetes' alphabet for generated names, from a digest.
std::string GeneratedSuffix(const Digest& digest);
// A UUID (RFC 9562 version 8, "custom") from the first 16 bytes of a digest.
std::string UuidFromDigest(Digest digest);

void SetLabels(capnp::List<schema::Label>::Builder list,
               const std::map<std::string, std::string>& labels);
void SetResources(capnp::List<schema::ResourceAmount>::Builder list,
                  const std::map<std::string, int64_t>& amounts);

// A document's text and where it starts in the file.
struct RawDocument {
  std::string_view text;
  size_t first_line;  // 1-based
};

// A pod set's topology request (schema::PodSetTopologyRequest), as Kueue's jobframework builds
// it (pkg/controller/jobframework/tas.go). !present: none (the pod set's field stays null).
struct TopologyRequest {
  bool present = false;
  std::string required, preferred;
  bool unconstrained = false;
  std::string slice_topology;
  int32_t slice_size = 0;
  std::string group;
  bool operator==(const TopologyRequest&) const = default;
};

// What a pod set gives for its topology request, as text, wherever it gives it (a pod
// template's annotations, a Workload's spec.podSets[].topologyRequest), to be validated by one
// set of rules (Kueue's tas_validation.go).
struct TopologyFields {
  struct Field {
    std::string_view name;  // the annotation or field, for messages
    bool found = false;
    std::string value;
    YAML::Node node;  // where it is, for the line
    std::string path;
  };
  YAML::Node node;  // the annotations (or topologyRequest) mapping
  std::string path;
  Field required, preferred, unconstrained, slice_topology, slice_size, group, constraints;
};

// ---------------------------------------------------------------------------------------------
// The parser of one document. Every Read/Parse method returns false after recording the first
// error (with the path and line of the offending node); callers return false at once.

class DocumentParser {
 public:
  DocumentParser(Mode mode, const SubmitContext* ctx, size_t document_number,
                 const RawDocument& raw, std::vector<ParsedObject>* out,
                 const ParseOptions* options)
      : mode_(mode), ctx_(ctx), options_(options), raw_(raw), out_(out) {
    error_.document_number = document_number;
  }

  const YamlError& error() const { return error_; }

  // Records an error found by the caller (YAML syntax) at a line relative to the document.
  void FailAtLine(size_t relative_line, std::string reason) {
    error_.line = raw_.first_line + relative_line;
    error_.reason = std::move(reason);
  }

  // Parses one object (or, at the top level, a List of objects) and appends its events.
  bool ParseObject(const YAML::Node& obj, const std::string& p, bool top_level,
                   std::string_view default_api_version = {}, std::string_view default_kind = {});
  // One object (not a List) in mode_, then its unknown fields as options_ says.
  bool ParseOneObject(const YAML::Node& obj, const std::string& p, const std::string& api_version,
                      const std::string& kind);

 private:
  struct Meta {
    explicit Meta(const YAML::Node& obj) : node(Child(obj, "metadata")) {}
    std::string name;
    std::string ns;
    std::string uid;
    std::map<std::string, std::string> labels;
    std::map<std::string, std::string> annotations;
    int64_t creation_ns = 0;
    const YAML::Node node;  // metadata
  };
  enum class Scope { kCluster, kNamespaced };
  enum class KeyRule { kLabel, kAnnotation, kResource };
  using InitTolerations = std::function<capnp::List<schema::Toleration>::Builder(unsigned)>;
  using InitRequirements =
      std::function<capnp::List<schema::SelectorRequirement>::Builder(unsigned)>;

  // The object (object.cc).
  static bool IsKueueApi(std::string_view api_version);
  static bool ApiOfKind(std::string_view kind, std::string_view api_version);
  static bool IsApplyKind(std::string_view kind);
  bool ParseList(const YAML::Node& obj, const std::string& p, bool top_level,
                 const std::string& api_version, const std::string& kind);
  bool FailApiVersion(const YAML::Node& obj, const std::string& p, const std::string& api_version);
  bool ParseApplyObject(const YAML::Node& obj, const std::string& p, const std::string& api_version,
                        const std::string& kind);
  bool ParseSubmitObject(const YAML::Node& obj, const std::string& p,
                         const std::string& api_version, const std::string& kind);
  bool ParseImportObject(const YAML::Node& obj, const std::string& p,
                         const std::string& api_version, const std::string& kind);
  bool ParseDeleteObject(const YAML::Node& obj, const std::string& p,
                         const std::string& api_version, const std::string& kind);
  static YAML::Node MetaEntry(const Meta& meta, std::string_view field, std::string_view key);
  bool ReadMeta(const YAML::Node& obj, const std::string& p, Scope scope, bool generate,
                Meta* meta);
  bool CheckSpec(const YAML::Node& spec, const std::string& p);
  bool Emit(capnp::MallocMessageBuilder& message, const YAML::Node& at, const std::string& p,
            std::string kind, std::string source_kind, std::string ns, std::string name,
            std::string uid = "");

  // Errors and typed reads (reads.cc).
  bool Fail(const YAML::Node& at, const std::string& path, std::string reason);
  // What an import cannot honour: refused, or with ParseOptions::lenient dropped and listed.
  bool Unhonoured(const YAML::Node& at, const std::string& path, const std::string& reason);
  bool ExpectMap(const YAML::Node& n, const std::string& path);
  bool ExpectSequence(const YAML::Node& n, const std::string& path, size_t max_items);
  bool ReadString(const YAML::Node& n, const std::string& path, std::string* out);
  bool OptString(const YAML::Node& parent, std::string_view key, const std::string& p,
                 std::string* out);
  bool ReqString(const YAML::Node& parent, std::string_view key, const std::string& p,
                 std::string* out, std::string_view what);
  bool ReadInt(const YAML::Node& n, const std::string& path, int64_t min, int64_t max,
               int64_t* out);
  static Result<int64_t> ParseDecimal(std::string_view s, int64_t min, int64_t max);
  bool ReadInt32(const YAML::Node& n, const std::string& path, int64_t min, int32_t* out);
  bool ReadBool(const YAML::Node& n, const std::string& path, bool* out);
  bool ReadQuantity(const YAML::Node& n, const std::string& path, int64_t* out);
  bool ReadEnum(const YAML::Node& n, const std::string& path,
                std::initializer_list<std::string_view> allowed, std::string* out);
  bool ReadStringList(const YAML::Node& n, const std::string& path, size_t max_items,
                      std::vector<std::string>* out);
  bool ReadStringMap(const YAML::Node& n, const std::string& path, size_t max_entries, KeyRule rule,
                     std::map<std::string, std::string>* out);
  bool ReadResourceMap(const YAML::Node& n, const std::string& path,
                       std::map<std::string, int64_t>* out);
  bool CheckSubdomain(const YAML::Node& at, const std::string& path, const std::string& name);
  bool ReadDurationAnnotation(const std::map<std::string, std::string>& annotations,
                              std::string_view key, const YAML::Node& metadata,
                              const std::string& p, int64_t* out_ns);

  // Selectors (selectors.cc).
  bool ParseTolerations(const YAML::Node& n, const std::string& path, size_t max_items,
                        const InitTolerations& init);
  bool ParseRequirements(const YAML::Node& n, const std::string& path, bool node_selector,
                         const InitRequirements& init);
  bool ParseLabelSelector(const YAML::Node& n, const std::string& path,
                          schema::LabelSelector::Builder b);

  // Quota (quota.cc). DefBuilder: schema::ClusterQueueDef, CohortDef (and for fairSharing,
  // LocalQueueDef) builders.
  template <typename DefBuilder>
  bool ParseResourceGroups(const YAML::Node& spec, const std::string& sp, bool can_borrow,
                           std::string_view needs, DefBuilder def);
  bool ParseResourceGroup(const YAML::Node& group, const std::string& gpi, bool can_borrow,
                          std::string_view needs, schema::ResourceGroup::Builder group_builder,
                          std::set<std::string>* all_resources,
                          std::set<std::string>* all_flavors);
  bool ParseCoveredResources(const YAML::Node& group, const std::string& gpi,
                             schema::ResourceGroup::Builder group_builder,
                             std::set<std::string>* all_resources,
                             std::vector<std::string>* covered);
  bool ParseFlavorQuotas(const YAML::Node& flavor, const std::string& fpi, bool can_borrow,
                         std::string_view needs, const std::vector<std::string>& covered,
                         schema::FlavorQuotas::Builder flavor_builder,
                         std::set<std::string>* all_flavors);
  bool ParseResourceQuota(const YAML::Node& resource, const std::string& rpi, bool can_borrow,
                          std::string_view needs, const std::string& flavor_name,
                          const std::string& covered_name, size_t r,
                          schema::ResourceQuota::Builder quota);
  template <typename DefBuilder>
  bool ParseFairSharing(const YAML::Node& spec, const std::string& sp, DefBuilder def);

  // The definitions, one file per kind.
  bool ParseResourceFlavor(const YAML::Node& obj, const std::string& p);
  bool ParseTaints(const YAML::Node& taints, const std::string& tp,
                   schema::ResourceFlavorDef::Builder def);
  bool ParseCohort(const YAML::Node& obj, const std::string& p, bool v1beta2);
  bool ParseClusterQueue(const YAML::Node& obj, const std::string& p, bool v1beta2);
  bool ParseStopPolicy(const YAML::Node& spec, const std::string& sp, schema::StopPolicy* out);
  bool ParsePreemption(const YAML::Node& spec, const std::string& sp,
                       schema::PreemptionPolicy::Builder b);
  bool ParseFlavorFungibility(const YAML::Node& spec, const std::string& sp, bool v1beta2,
                              schema::FlavorFungibility::Builder b);
  bool ParseAdmissionChecks(const YAML::Node& spec, const std::string& sp,
                            schema::ClusterQueueDef::Builder def);
  bool ParseAdmissionChecksStrategy(const YAML::Node& strategy, const std::string& sp,
                                    schema::ClusterQueueDef::Builder def);
  bool ParseLocalQueue(const YAML::Node& obj, const std::string& p);
  bool ParseAdmissionCheck(const YAML::Node& obj, const std::string& p);
  bool ParsePriorityClass(const YAML::Node& obj, const std::string& p);
  // Topology (topology.cc).
  bool ParseTopology(const YAML::Node& obj, const std::string& p);
  bool ParseTopologyLevels(const YAML::Node& obj, const YAML::Node& spec, const std::string& sp,
                           std::vector<std::string>* out);
  // Pod sets' topology requests (topology_request.cc).
  bool ReadTemplateTopology(const YAML::Node& tmpl, const std::string& tp, int32_t count,
                            TopologyRequest* out);
  bool ReadSpecTopology(const YAML::Node& ps, const std::string& psp, int32_t count,
                        TopologyRequest* out);
  bool CheckTopologyFields(const TopologyFields& f, int32_t count, TopologyRequest* out);
  bool CheckTopologyGroupField(const TopologyFields& f);
  bool CheckSliceSizeField(const TopologyFields& f, int32_t count, int32_t* size);
  bool ParseTemplateTopology(const YAML::Node& tmpl, const std::string& tp, int32_t count,
                             schema::PodSet::Builder ps);
  bool ParseWorkloadTopology(const YAML::Node& ps_node, const std::string& psp, int32_t count,
                             schema::PodSet::Builder ps);
  struct GroupMember {
    std::string pod_set, group, required, preferred, path;
    int32_t count = 0;
    YAML::Node node;
  };
  bool CheckPodSetGroups(const std::vector<GroupMember>& members);
  // An imported admission's topology assignment (topology_assignment.cc).
  bool ParseTopologyAssignment(const YAML::Node& ta, const std::string& tap, bool v1beta2,
                               int32_t count, schema::PodSetAssignment::Builder b);
  bool ReadAssignmentLevels(const YAML::Node& ta, const std::string& tap,
                            std::vector<std::string>* levels);
  bool ReadAssignmentDomains(const YAML::Node& ta, const std::string& tap, size_t levels,
                             std::vector<std::pair<std::vector<std::string>, int32_t>>* out);
  bool ReadAssignmentSlices(const YAML::Node& ta, const std::string& tap, size_t levels,
                            std::vector<std::pair<std::vector<std::string>, int32_t>>* out);
  bool ReadSlice(const YAML::Node& slice, const std::string& sp, size_t levels,
                 std::vector<std::pair<std::vector<std::string>, int32_t>>* out);
  bool ReadSliceLevel(const YAML::Node& level, const std::string& lp, int32_t domains,
                      std::vector<std::string>* values);
  // BudgetPolicy (budget_policy.cc).
  bool ParseBudgetPolicy(const YAML::Node& obj, const std::string& p);
  bool ParseBudgetScope(const YAML::Node& spec, const std::string& sp,
                        schema::BudgetPolicyDef::Builder def);
  bool ParseBudgetPeriod(const YAML::Node& spec, const std::string& sp,
                         schema::BudgetPolicyDef::Builder def);

  // Pod specs (pod_spec.cc).
  bool ContainerRequests(const YAML::Node& container, const std::string& cp,
                         std::map<std::string, int64_t>* out);
  bool AddInto(std::map<std::string, int64_t>* total, const std::map<std::string, int64_t>& add,
               const YAML::Node& at, const std::string& path);
  static void MaxInto(std::map<std::string, int64_t>* total,
                      const std::map<std::string, int64_t>& other);
  bool ParsePodSpec(const YAML::Node& spec, const std::string& sp, int64_t count,
                    schema::PodSet::Builder ps, std::string* priority_class_name);
  bool PodRequests(const YAML::Node& spec, const std::string& sp, int64_t count,
                   schema::PodSet::Builder ps);
  bool ParseNodeAffinity(const YAML::Node& spec, const std::string& sp,
                         schema::PodSet::Builder ps);

  // Workloads and Jobs (workload.cc, job.cc).
  std::string DeriveUid(std::string_view ns, std::string_view name) const;
  bool ParseRuntimeAnnotations(const Meta& meta, const std::string& p,
                               int64_t kueue_max_execution_ns, const std::string& kueue_field,
                               schema::Workload::Builder w);
  bool ParseWorkload(const YAML::Node& obj, const std::string& p, bool v1beta2, bool import);
  bool ParseWorkloadSpec(const Meta& meta, const YAML::Node& spec, const std::string& p,
                         bool v1beta2, schema::Workload::Builder w);
  bool ParsePodSets(const YAML::Node& spec, const std::string& sp, schema::Workload::Builder w,
                    std::map<std::string, int32_t>* counts);
  bool ParseWorkloadPriorityClass(const YAML::Node& spec, const std::string& sp, bool v1beta2,
                                  schema::Workload::Builder w);
  bool ParseAdmission(const YAML::Node& obj, const std::string& p, bool v1beta2,
                      const std::map<std::string, int32_t>& counts, schema::Admission::Builder a);
  // Kueue's record of an imported admission (import_status.cc): its conditions' times,
  // PodsReady, the admission checks and the requeue count.
  bool ParseImportedStatus(const YAML::Node& obj, const std::string& p, bool admitted,
                           schema::WorkloadImported::Builder imported);
  bool ParseImportedChecks(const YAML::Node& checks, const std::string& stp,
                           schema::WorkloadImported::Builder imported);
  bool ReadTime(const YAML::Node& parent, std::string_view key, const std::string& p,
                int64_t* out_ns);
  bool ParsePodSetAssignment(const YAML::Node& as, const std::string& asp, bool v1beta2,
                             const std::map<std::string, int32_t>& counts,
                             std::set<std::string>* seen,
                             schema::PodSetAssignment::Builder b);
  bool ParseManagedMeta(const YAML::Node& obj, const std::string& p, std::string_view prefix,
                        Meta* meta, std::string* queue, std::string* workload_name);
  bool FillManagedWorkload(const Meta& meta, const std::string& p, const std::string& queue,
                           const std::string& workload_name, schema::Workload::Builder w,
                           std::string* uid);
  bool SetManagedPriority(const Meta& meta, const std::string& p,
                          const std::string& pod_priority_class, schema::Workload::Builder w);
  bool ReadJobCounts(const YAML::Node& job_spec, const std::string& sp, int32_t* parallelism,
                     int32_t* count);
  bool ParseJob(const YAML::Node& obj, const std::string& p);
  bool ParseJobPodSet(const YAML::Node& spec, const std::string& sp,
                      const std::map<std::string, std::string>& annotations,
                      const YAML::Node& min_at, const std::string& min_path,
                      int32_t parallelism, int32_t count, schema::PodSet::Builder ps,
                      std::string* pod_priority_class);
  // JobSets (jobset.cc).
  bool ParseJobSet(const YAML::Node& obj, const std::string& p);
  bool CheckJobSetGroups(const YAML::Node& replicated, const std::string& rp,
                         capnp::List<schema::PodSet>::Reader pod_sets);
  bool ParseReplicatedJob(const YAML::Node& rj, const std::string& rp,
                          std::set<std::string>* names, schema::PodSet::Builder ps,
                          std::string* pod_priority_class);

  const Mode mode_;
  const SubmitContext* const ctx_;  // null in apply mode
  const ParseOptions* const options_;
  const RawDocument raw_;
  std::vector<ParsedObject>* const out_;
  std::string kind_;  // of the object being parsed, for error messages
  std::string name_;
  YamlError error_;
};

}  // namespace admission::ops::kueue_yaml_internal
