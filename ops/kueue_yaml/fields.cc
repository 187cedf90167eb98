#include "ops/kueue_yaml/fields.h"

#include <algorithm>
#include <vector>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

namespace {

thread_local FieldTracker* current_tracker = nullptr;

// A mapping's identity within its document: where it starts. -1: not from the text.
int PositionOf(const YAML::Node& map) { return map.Mark().pos; }

// Levenshtein distance, for "did you mean".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known key nearest to `name`, when near enough to be a misspelling of it.
std::string Nearest(std::string_view name, const std::set<std::string, std::less<>>& known) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (const std::string& k : known) {
    const size_t d = EditDistance(name, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

constexpr std::string_view kObjectMetaFields[] = {
    "annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
    "finalizers",  "generateName",      "generation",                 "labels",
    "managedFields", "name",            "namespace",                  "ownerReferences",
    "resourceVersion", "selfLink",      "uid"};

}  // namespace

void FieldTracker::Looked(const YAML::Node& map, std::string_view key) {
  const int pos = PositionOf(map);
  if (pos >= 0) maps_[pos].keys.emplace(key);
}

void FieldTracker::Whole(const YAML::Node& map) {
  const int pos = PositionOf(map);
  if (pos >= 0) maps_[pos].whole = true;
}

void FieldTracker::Accept(const YAML::Node& map, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) Looked(map, k);
}

const FieldTracker::Seen* FieldTracker::Find(const YAML::Node& map) const {
  auto it = maps_.find(PositionOf(map));
  return it == maps_.end() ? nullptr : &it->second;
}

std::optional<FieldTracker::Unknown> FieldTracker::FindUnknown(const YAML::Node& obj,
                                                               const std::string& path) const {
  if (!obj.IsMap()) return std::nullopt;
  const Seen* seen = Find(obj);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = it->first.Scalar();
    const std::string kp = Join(path, key);
    if (key == "status") continue;  // the server's
    if (key == "metadata") {
      // ObjectMeta: its fields are known; labels and annotations are read whole.
      const YAML::Node meta = it->second;
      if (!meta.IsMap()) continue;
      for (auto m = meta.begin(); m != meta.end(); ++m) {
        const std::string mk = m->first.Scalar();
        if (std::find(std::begin(kObjectMetaFields), std::end(kObjectMetaFields), mk) ==
            std::end(kObjectMetaFields)) {
          std::set<std::string, std::less<>> known(std::begin(kObjectMetaFields),
                                                   std::end(kObjectMetaFields));
          return Unknown{m->first, Join(kp, mk), mk, Nearest(mk, known)};
        }
      }
      continue;
    }
    if (seen != nullptr && !seen->whole && !seen->keys.contains(key)) {
      return Unknown{it->first, kp, key, Nearest(key, seen->keys)};
    }
    if (auto u = Walk(it->second, kp)) return u;
  }
  return std::nullopt;
}

std::optional<FieldTracker::Unknown> FieldTracker::Walk(const YAML::Node& n,
                                                        const std::string& path) const {
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (auto u = Walk(n[i], Index(path, i))) return u;
    }
    return std::nullopt;
  }
  if (!n.IsMap()) return std::nullopt;
  const Seen* seen = Find(n);
  if (seen == nullptr || seen->whole) return std::nullopt;  // not looked into, or free-form
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (!seen->keys.contains(key)) {
      return Unknown{it->first, Join(path, key), key, Nearest(key, seen->keys)};
    }
    if (auto u = Walk(it->second, Join(path, key))) return u;
  }
  return std::nullopt;
}

FieldTracker* CurrentFieldTracker() { return current_tracker; }

TrackFields::TrackFields(FieldTracker* tracker) : outer_(current_tracker) {
  current_tracker = tracker;
}

TrackFields::~TrackFields() { current_tracker = outer_; }

void AcceptFields(const YAML::Node& map, std::initializer_list<std::string_view> keys) {
  if (current_tracker != nullptr && map.IsDefined() && map.IsMap()) {
    current_tracker->Accept(map, keys);
  }
}

void AcceptAllFields(const YAML::Node& map) {
  if (current_tracker != nullptr && map.IsDefined() && map.IsMap()) current_tracker->Whole(map);
}

void AcceptObjectMetaFields(const YAML::Node& metadata) {
  if (current_tracker == nullptr || !metadata.IsDefined() || !metadata.IsMap()) return;
  for (std::string_view k : kObjectMetaFields) current_tracker->Looked(metadata, k);
}

void AcceptPodSpecFields(const YAML::Node& pod_spec) {
  // Read: affinity, containers, initContainers, nodeSelector, overhead, tolerations (and
  // priorityClassName where a Job's pods name one).
  AcceptFields(pod_spec,
               {"activeDeadlineSeconds", "automountServiceAccountToken", "dnsConfig", "dnsPolicy",
                "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC",
                "hostNetwork", "hostPID", "hostUsers", "hostname", "hostnameOverride",
                "imagePullSecrets", "nodeName", "os", "preemptionPolicy", "priority",
                "priorityClassName", "readinessGates", "resourceClaims", "resources",
                "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates",
                "securityContext", "serviceAccount", "serviceAccountName", "setHostnameAsFQDN",
                "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds",
                "topologySpreadConstraints", "volumes"});
}

void AcceptContainerFields(const YAML::Node& container) {
  // Read: resources (requests and limits).
  AcceptFields(container,
               {"args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle",
                "livenessProbe", "name", "ports", "readinessProbe", "resizePolicy",
                "restartPolicy", "restartPolicyRules", "securityContext", "startupProbe",
                "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy",
                "tty", "volumeDevices", "volumeMounts", "workingDir"});
  AcceptFields(Child(container, "resources"), {"claims"});
}

void AcceptJobSpecFields(const YAML::Node& job_spec) {
  // Read: parallelism, completions, template.
  AcceptFields(job_spec,
               {"activeDeadlineSeconds", "backoffLimit", "backoffLimitPerIndex", "completionMode",
                "managedBy", "manualSelector", "maxFailedIndexes", "podFailurePolicy",
                "podReplacementPolicy", "selector", "successPolicy", "suspend",
                "ttlSecondsAfterFinished"});
}

void AcceptJobSetSpecFields(const YAML::Node& jobset_spec) {
  // Read: replicatedJobs.
  AcceptFields(jobset_spec, {"coordinator", "failurePolicy", "managedBy", "network",
                             "startupPolicy", "successPolicy", "suspend",
                             "ttlSecondsAfterFinished"});
}

}  // namespace admission::ops::kueue_yaml_internal
