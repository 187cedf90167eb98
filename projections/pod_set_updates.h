#pragma once
// Engine v17: admission checks' pod template updates (Kueue's AdmissionCheckState.podSetUpdates):
// what intake accepts of them, and how they merge with each other and with the flavors' node
// labels and tolerations (Kueue: pkg/podset/podset.go, PodSetInfo.Merge, and the job
// reconciler's getPodSetsInfoFromStatus). Pure functions only.

#include <optional>
#include <string>
#include <vector>

#include "projections/model.h"
#include "schema/event_codec.h"

namespace admission::projections {

// A check's updates of one report, in the order given, and back.
std::vector<PodSetUpdate> ToPodSetUpdates(capnp::List<schema::PodSetUpdate>::Reader list);
void PutPodSetUpdates(capnp::List<schema::PodSetUpdate>::Builder out,
                      const std::vector<PodSetUpdate>& updates);

// Intake's check of one report's updates against the workload's podSets, as Kueue's workload
// webhook (validatePodSetUpdates) and the API server's list-map rule: every podSet named once
// and known; label and nodeSelector keys qualified names and values label values; annotation
// keys qualified names; tolerations as Kubernetes validates them, at most
// kPodSetUpdateTolerationsMax. Returns what is wrong (field path, value, rule), or nullopt.
inline constexpr size_t kPodSetUpdateTolerationsMax = 8;
inline constexpr size_t kPodSetUpdateAnnotationsBytesMax = 256 * 1024;
std::optional<std::string> InvalidPodSetUpdates(capnp::List<schema::PodSetUpdate>::Reader list,
                                                const std::vector<PodSetSpec>& pod_sets);

// Merges `from` into `*into` as Kueue's PodSetInfo.Merge: a key of labels, annotations or
// nodeSelector that `*into` holds with another value is a conflict, and nothing is merged; a
// toleration is added unless an equal one (operator "" being Equal) is there. Returns the
// conflict in Kueue's words ("invalid admission check PodSetUpdate: conflict for labels:
// conflict for key=K, value1=INTO, value2=FROM"), the first key in key order (Kueue's is the
// first of a map iteration: random), or nullopt.
std::optional<std::string> MergePodSetUpdate(const PodSetUpdate& from, PodSetUpdate* into);

}  // namespace admission::projections
