#pragma once
// Unknown fields, as kubectl's strict field validation finds them (internal to
// ops/kueue_yaml/). While one object is parsed, the parser's every lookup of a key in a mapping
// is recorded (Child); a mapping read whole (labels, annotations, resource maps) and the fields
// the parser knows but does not read (AcceptFields: Kueue's fields it does not model, a Pod's
// image and command) are recorded too. After the object parsed, a key of a mapping the parser
// looked into that was never looked up nor accepted is an unknown field. A mapping the parser
// never looked into (an accepted field's value, status) is not checked: its fields are not ours
// to know.

#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace admission::ops::kueue_yaml_internal {

class FieldTracker {
 public:
  void Looked(const YAML::Node& map, std::string_view key);
  void Whole(const YAML::Node& map);
  void Accept(const YAML::Node& map, std::initializer_list<std::string_view> keys);

  struct Unknown {
    YAML::Node key;          // the key's node, for its line
    std::string path;        // "spec.resourceGroup"
    std::string name;        // "resourceGroup"
    std::string suggestion;  // the nearest known key of that mapping, or empty
  };
  // The first unknown field of `obj` (at `path`) in document order. The top-level status
  // (written by the server) is not checked; metadata is checked against ObjectMeta's fields.
  std::optional<Unknown> FindUnknown(const YAML::Node& obj, const std::string& path) const;

 private:
  struct Seen {
    bool whole = false;
    std::set<std::string, std::less<>> keys;
  };
  const Seen* Find(const YAML::Node& map) const;
  std::optional<Unknown> Walk(const YAML::Node& n, const std::string& path) const;

  std::map<int, Seen> maps_;  // by the mapping's position in the document (YAML::Mark::pos)
};

// The tracker of the object being parsed, or null (no check). Set by TrackFields.
FieldTracker* CurrentFieldTracker();

// Makes `tracker` the current one for its lifetime (nested scopes restore the outer one).
class TrackFields {
 public:
  explicit TrackFields(FieldTracker* tracker);
  ~TrackFields();
  TrackFields(const TrackFields&) = delete;
  TrackFields& operator=(const TrackFields&) = delete;

 private:
  FieldTracker* outer_;
};

// Records, in the current tracker, keys of `map` that are known fields the parser does not
// read (their values are not checked).
void AcceptFields(const YAML::Node& map, std::initializer_list<std::string_view> keys);
// Records that every key of `map` is known (a map of free-form keys).
void AcceptAllFields(const YAML::Node& map);

// The fields of Kubernetes' types (v1.34 core/v1 and batch/v1, JobSet v1alpha2) that the parser
// accepts without reading: every field of the type but those it reads itself.
void AcceptObjectMetaFields(const YAML::Node& metadata);
void AcceptPodSpecFields(const YAML::Node& pod_spec);
void AcceptContainerFields(const YAML::Node& container);
void AcceptJobSpecFields(const YAML::Node& job_spec);
void AcceptJobSetSpecFields(const YAML::Node& jobset_spec);

}  // namespace admission::ops::kueue_yaml_internal
