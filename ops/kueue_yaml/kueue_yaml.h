#pragma once
// Kueue manifests (YAML, as an operator already has them on disk) to ledger input events.
//
// Each non-empty YAML document becomes one serialized schema::Event in canonical form with only
// the body set; intake stamps the envelope (time, actor) later. A file is all or nothing: the
// first invalid document fails the whole file, nothing is returned, and the error names the
// document, the line, the field path and the reason, e.g.
//   document 2 (ClusterQueue team-a, line 14): spec.resourceGroups[0].flavors[1].resources[0]
//   .nominalQuota: '9Qi' is not a quantity: unknown suffix 'Qi' (...)
// Documents are numbered from 1, counting only non-empty documents (a comment-only preamble
// before the first `---` is not a document); lines are numbered from 1 in the whole file.
//
// Maps (labels, nodeSelector, requests) are written sorted by key, so the same object always
// yields the same bytes whatever the key order in the file.
//
// Pure: no I/O, no clock. Generated names and uids are hashes of the caller's seed and the text.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/event_log.h"
#include "schema/result.h"

namespace admission::ops {

// Limits on one file. A file must fit one atomic intake append.
inline constexpr size_t kYamlBytesMax = 16 << 20;
// An AdmissionCheck's retryLimit without our retry-limit annotation: none, as in Kueue.
inline constexpr uint32_t kNoRetryLimit = 0xFFFFFFFFu;
inline constexpr size_t kYamlObjectsMax = ledger::kAppendBatchEventsMax;

// One object of the file, as the event that defines or submits it.
struct ParsedObject {
  std::string kind;         // the kind the event carries: ResourceFlavor, Cohort, ClusterQueue,
                            // LocalQueue, AdmissionCheck, WorkloadPriorityClass, Topology,
                            // BudgetPolicy or Workload
  std::string source_kind;  // the kind written in the file: `kind`, or "Job" / "JobSet" for a
                            // batch/v1 Job / jobset.x-k8s.io JobSet
  std::string ns;           // empty for cluster-scoped kinds
  std::string name;         // for a generateName object, the generated name
  std::string event;        // canonical schema::Event bytes, only the body set
  std::string uid;          // a workload's uid; empty for definitions
};

// Where and why a file was refused. ToString() is the message of the returned Status.
struct YamlError {
  size_t document_number = 0;  // 1-based, non-empty documents only
  size_t line = 0;             // 1-based line in the file of the offending node; 0: unknown
  std::string kind;            // of the object, when it was read before the error
  std::string name;
  std::string field_path;  // "spec.resourceGroups[0].flavors[1]..."; empty: the document
  std::string reason;
  std::string ToString() const;
};

struct SubmitContext {
  // Mixed into names made from generateName (and so into their uids), so that resubmitting the
  // same file later creates new workloads, while replaying the same submission creates the
  // same ones. The caller sets it, e.g. to the ledger's head sequence.
  std::string name_seed;
  // Mixed into the uid of a workload whose manifest gives none (a Workload without
  // metadata.uid, a Job without one), so that submitting the same file after its workload
  // ended makes a new workload (a new uid), while a retry of the same request (the same seed)
  // is the same input. The caller sets it to its request id; empty: the uid comes from the
  // namespace and name alone (the demo's fixed uids).
  std::string uid_seed;
};

// A field the parser does not know (a misspelling, a field of another version), as kubectl's
// --validate: kStrict refuses the file with the field's path and the nearest known name (kubectl
// apply's default, server-side strict field validation), kWarn accepts it with a warning in
// `warnings` ("unknown field ..."), kIgnore accepts it silently (the bridge: the API server
// validated the object already).
enum class FieldValidation { kStrict, kWarn, kIgnore };
struct ParseOptions {
  FieldValidation field_validation = FieldValidation::kStrict;
  std::vector<std::string>* warnings = nullptr;  // kWarn's and lenient's, when not null
  // import: Kueue's status fields the ledger cannot honour (checks not Ready, a reservation not
  // admitted) are dropped and listed as warnings instead of refused.
  bool lenient = false;
};

// The idempotency key of a submitted or imported workload: "VERB/NS/NAME/UID". The uid makes it
// the key of this object, not of its name: a new object of a name used before (deleted, or
// finished) is a new workload, and a retry of the same object is known by it.
// REQUIRES: verb is "submit" or "import"; `object` a workload from ParseSubmitYaml/ParseImportYaml.
std::string WorkloadKey(std::string_view verb, const ParsedObject& object);

// The objects' events, each workload's keyed with WorkloadKey(verb, object).
// REQUIRES: as WorkloadKey.
std::vector<std::string> KeyedWorkloadEvents(std::string_view verb,
                                             const std::vector<ParsedObject>& objects);

// Definitions: kueue.x-k8s.io/v1beta1 or v1beta2 ResourceFlavor, Cohort, ClusterQueue,
// LocalQueue, AdmissionCheck, WorkloadPriorityClass and Topology, also inside a `kind: List`.
// Refusals are kInvalidArgument with YamlError::ToString().
Result<std::vector<ParsedObject>> ParseApplyYaml(std::string_view text,
                                                  const ParseOptions& options = {});

// Submissions: kueue.x-k8s.io Workloads and batch/v1 Jobs labelled kueue.x-k8s.io/queue-name
// (body workloadSubmitted), also inside a `kind: List`. A Job becomes the Workload Kueue would
// create for it, named "job-<job name>". A Workload carrying status.admission is refused (import
// it); metadata.creationTimestamp is ignored, as Kubernetes does on create.
Result<std::vector<ParsedObject>> ParseSubmitYaml(std::string_view text, const SubmitContext& ctx,
                                                   const ParseOptions& options = {});

// Imports of admitted workloads: kueue.x-k8s.io Workloads carrying status.admission (body
// workloadImported), e.g. `kubectl get workloads -o yaml`, a `kind: List` or `WorkloadList`.
Result<std::vector<ParsedObject>> ParseImportYaml(std::string_view text, const SubmitContext& ctx,
                                                   const ParseOptions& options = {});

// Deletions of definitions (body objectDeleted {kind, namespace, name}): the kinds of
// ParseApplyYaml, also inside a `kind: List`, read as `kubectl delete -f` reads them: apiVersion,
// kind and metadata only (a LocalQueue's namespace defaults to "default"); the spec is ignored.
Result<std::vector<ParsedObject>> ParseDeleteYaml(std::string_view text);

}  // namespace admission::ops
