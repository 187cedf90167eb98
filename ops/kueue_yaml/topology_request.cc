// A pod set's topology request (docs/tas.md): from its pod template's kueue.x-k8s.io/podset-*
// annotations (Job, JobSet, Workload) or a Workload's spec.podSets[].topologyRequest, validated
// as Kueue v0.17's jobframework validates the annotations (pkg/controller/jobframework/
// tas_validation.go) and built as it builds the request (tas.go).

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

namespace {

// Go's strconv.ParseBool.
bool ParseGoBool(std::string_view s, bool* out) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return *out = true, true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return *out = false, true;
  }
  return false;
}

// Go's strconv.ParseUint(s, 10, 64) succeeds: a podset-group-name that is a number.
bool IsGoUint64(std::string_view s) {
  if (s.empty() || s.size() > 20 || !std::all_of(s.begin(), s.end(), IsDigit)) return false;
  return s.size() < 20 || s <= "18446744073709551615";
}

}  // namespace

// Kueue's ValidateTASPodSetRequest and ValidateSliceSizeAnnotationUpperBound (the first error
// of its list), then its podSetTopologyRequestBuilder.Build.
bool DocumentParser::CheckTopologyFields(const TopologyFields& f, int32_t count,
                                         TopologyRequest* out) {
  const int given = f.required.found + f.preferred.found + f.unconstrained.found;
  if (given > 1) {
    return Fail(f.node, f.path,
                "must not contain more than one topology request: [" + Quote(f.required.name) +
                    ", " + Quote(f.preferred.name) + ", " + Quote(f.unconstrained.name) + "]");
  }
  for (const TopologyFields::Field* level : {&f.required, &f.preferred, &f.slice_topology}) {
    if (level->found && !IsQualifiedName(level->value)) {
      return Fail(level->node, level->path,
                  Quote(level->value) + " is not a valid label key (a topology level's node "
                                        "label): " + kLabelKeyRule);
    }
  }
  if (!CheckTopologyGroupField(f)) return false;
  bool unconstrained = false;
  if (f.unconstrained.found && !ParseGoBool(f.unconstrained.value, &unconstrained)) {
    return Fail(f.unconstrained.node, f.unconstrained.path,
                Quote(f.unconstrained.value) + " must be a boolean value");
  }
  int32_t slice_size = 0;
  if (!CheckSliceSizeField(f, count, &slice_size)) return false;
  *out = TopologyRequest{};
  if (f.required.found) {
    out->required = f.required.value;
  } else if (f.preferred.found) {
    out->preferred = f.preferred.value;
  } else if (f.unconstrained.found) {
    out->unconstrained = unconstrained;
  } else if (!f.slice_topology.found) {
    return true;  // no request: the pod set's topologyRequest stays null
  }
  out->present = true;
  if (f.slice_topology.found) {
    out->slice_topology = f.slice_topology.value;
    out->slice_size = slice_size;
  }
  if (f.group.found) out->group = f.group.value;
  return true;
}

// podset-group-name: not a number, not with slices, only with a required or preferred level.
bool DocumentParser::CheckTopologyGroupField(const TopologyFields& f) {
  if (!f.group.found) return true;
  const TopologyFields::Field& g = f.group;
  if (IsGoUint64(g.value)) return Fail(g.node, g.path, Quote(g.value) + " must not be a number");
  if (f.slice_size.found) {
    return Fail(g.node, g.path, "may not be set when " + Quote(f.slice_size.name) +
                                    " is specified");
  }
  if (f.slice_topology.found) {
    return Fail(g.node, g.path, "may not be set when " + Quote(f.slice_topology.name) +
                                    " is specified");
  }
  if (!f.preferred.found && !f.required.found) {
    return Fail(g.node, g.path, "may not be set when neither " + Quote(f.preferred.name) +
                                    " nor " + Quote(f.required.name) + " is specified");
  }
  return true;
}

// podset-slice-size: an int32 of at least 1 and at most the pod set's count, given exactly when
// podset-slice-required-topology is; the multi-layer constraints need a feature gate that is
// off in Kueue v0.17.
bool DocumentParser::CheckSliceSizeField(const TopologyFields& f, int32_t count, int32_t* size) {
  const TopologyFields::Field& s = f.slice_size;
  int64_t value = 0;
  if (s.found) {
    Result<int64_t> v = ParseDecimal(s.value, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max());
    if (!v.ok()) return Fail(s.node, s.path, Quote(s.value) + " must be a numeric value");
    if (*v < 1) return Fail(s.node, s.path, Quote(s.value) + " must be greater than or equal to 1");
    value = *v;
  }
  if (f.slice_topology.found && !s.found) {
    return Fail(f.slice_topology.node, s.path,
                "required: must be set when " + Quote(f.slice_topology.name) + " is specified");
  }
  if (!f.slice_topology.found && s.found) {
    return Fail(s.node, s.path, "may not be set when " + Quote(f.slice_topology.name) +
                                    " is not specified");
  }
  if (f.constraints.found) {
    return Fail(f.constraints.node, f.constraints.path,
                "the TASMultiLayerTopology feature gate must be enabled to use this (Kueue "
                "v0.17: alpha, off by default; the ledger does not model multi-layer slices)");
  }
  if (value > count) {
    return Fail(s.node, s.path, Quote(s.value) + " must not be greater than pod set count " +
                                    std::to_string(count));
  }
  *size = static_cast<int32_t>(value);
  return true;
}

// The request of a pod template (TMPL at path TP) of COUNT pods, from its annotations.
bool DocumentParser::ReadTemplateTopology(const YAML::Node& tmpl, const std::string& tp,
                                          int32_t count, TopologyRequest* out) {
  *out = TopologyRequest{};
  const YAML::Node metadata = Child(tmpl, "metadata");
  if (Absent(metadata)) return true;
  const std::string mp = Join(tp, "metadata");
  if (!ExpectMap(metadata, mp)) return false;
  AcceptObjectMetaFields(metadata);
  TopologyFields f;
  f.node = Child(metadata, "annotations");
  f.path = Join(mp, "annotations");
  if (Absent(f.node)) return true;
  std::map<std::string, std::string> annotations;
  if (!ReadStringMap(f.node, f.path, kMapEntriesMax, KeyRule::kAnnotation, &annotations)) {
    return false;
  }
  auto read = [&](TopologyFields::Field& field, std::string_view key) {
    field.name = key;
    field.path = MapKey(f.path, key);
    const auto it = annotations.find(std::string(key));
    if (it == annotations.end()) return;
    field.found = true;
    field.value = it->second;
    field.node = Child(f.node, key);
  };
  read(f.required, kRequiredTopologyAnnotation);
  read(f.preferred, kPreferredTopologyAnnotation);
  read(f.unconstrained, kUnconstrainedTopologyAnnotation);
  read(f.slice_topology, kSliceRequiredTopologyAnnotation);
  read(f.slice_size, kSliceSizeAnnotation);
  read(f.group, kPodSetGroupNameAnnotation);
  read(f.constraints, kSliceConstraintsAnnotation);
  return CheckTopologyFields(f, count, out);
}

// A Workload's spec.podSets[].topologyRequest (PS at path PSP), by the same rules. Kueue's
// podIndexLabel, subGroupIndexLabel and subGroupCount (how the bridge's pods are indexed) are
// accepted and not modelled.
bool DocumentParser::ReadSpecTopology(const YAML::Node& ps, const std::string& psp,
                                      int32_t count, TopologyRequest* out) {
  *out = TopologyRequest{};
  TopologyFields f;
  f.node = Child(ps, "topologyRequest");
  f.path = Join(psp, "topologyRequest");
  if (Absent(f.node)) return true;
  if (!ExpectMap(f.node, f.path)) return false;
  AcceptFields(f.node, {"podIndexLabel", "subGroupIndexLabel", "subGroupCount"});
  enum class Type { kString, kBool, kInt, kAny };
  auto read = [&](TopologyFields::Field& field, std::string_view key, Type type) {
    field.name = key;
    field.path = Join(f.path, key);
    field.node = Child(f.node, key);
    if (Absent(field.node)) return true;
    field.found = true;
    if (type == Type::kBool) {
      bool v = false;
      if (!ReadBool(field.node, field.path, &v)) return false;
      field.value = v ? "true" : "false";
      return true;
    }
    if (type == Type::kInt) {
      int32_t v = 0;
      if (!ReadInt32(field.node, field.path, std::numeric_limits<int32_t>::min(), &v)) {
        return false;
      }
      field.value = std::to_string(v);
      return true;
    }
    return type == Type::kAny || ReadString(field.node, field.path, &field.value);
  };
  if (!read(f.required, "required", Type::kString) ||
      !read(f.preferred, "preferred", Type::kString) ||
      !read(f.unconstrained, "unconstrained", Type::kBool) ||
      !read(f.slice_topology, "podSetSliceRequiredTopology", Type::kString) ||
      !read(f.slice_size, "podSetSliceSize", Type::kInt) ||
      !read(f.group, "podSetGroupName", Type::kString) ||
      !read(f.constraints, "podsetSliceRequiredTopologyConstraints", Type::kAny)) {
    return false;
  }
  return CheckTopologyFields(f, count, out);
}

namespace {

void SetRequest(const TopologyRequest& r, schema::PodSet::Builder ps) {
  if (!r.present) return;
  auto b = ps.initTopologyRequest();
  b.setRequired(T(r.required));
  b.setPreferred(T(r.preferred));
  b.setUnconstrained(r.unconstrained);
  b.setSliceRequiredTopology(T(r.slice_topology));
  b.setSliceSize(r.slice_size);
  b.setGroupName(T(r.group));
}

}  // namespace

// A Job's or JobSet's pod template: its annotations' request.
bool DocumentParser::ParseTemplateTopology(const YAML::Node& tmpl, const std::string& tp,
                                           int32_t count, schema::PodSet::Builder ps) {
  TopologyRequest r;
  if (!ReadTemplateTopology(tmpl, tp, count, &r)) return false;
  SetRequest(r, ps);
  return true;
}

// A Workload's pod set: spec.podSets[].topologyRequest, else its template's annotations. Kueue
// writes both into the Workloads it creates for jobs; given both, they must agree.
bool DocumentParser::ParseWorkloadTopology(const YAML::Node& ps_node, const std::string& psp,
                                           int32_t count, schema::PodSet::Builder ps) {
  TopologyRequest from_spec, from_template;
  if (!ReadSpecTopology(ps_node, psp, count, &from_spec)) return false;
  const std::string tp = Join(psp, "template");
  if (!ReadTemplateTopology(Child(ps_node, "template"), tp, count, &from_template)) return false;
  if (from_spec.present && from_template.present && !(from_spec == from_template)) {
    return Fail(Child(ps_node, "topologyRequest"), Join(psp, "topologyRequest"),
                "differs from the request of the template's kueue.x-k8s.io/podset-* "
                "annotations (" + Join(tp, "metadata.annotations") + "); give it once, or the "
                "same in both");
  }
  SetRequest(from_spec.present ? from_spec : from_template, ps);
  return true;
}

// Kueue's ValidatePodSetGroupingTopology (JobSet's webhook): a podset-group-name groups exactly
// two pod sets, at least one of a single pod, both asking for the same required or preferred
// level.
bool DocumentParser::CheckPodSetGroups(const std::vector<GroupMember>& members) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const GroupMember*>> groups;
  for (const GroupMember& m : members) {
    if (m.group.empty()) continue;
    if (groups[m.group].empty()) order.push_back(m.group);
    groups[m.group].push_back(&m);
  }
  for (const std::string& name : order) {
    const std::vector<const GroupMember*>& g = groups[name];
    const std::string key_path = MapKey(g[0]->path, kPodSetGroupNameAnnotation);
    const YAML::Node at = g[0]->node;
    if (g.size() != 2) {
      return Fail(at, key_path, Quote(name) + ": can only define groups of exactly 2 pod sets, "
                                "got: " + std::to_string(g.size()) + " pod set(s)");
    }
    if (g[0]->count != 1 && g[1]->count != 1) {
      return Fail(at, key_path,
                  Quote(name) + ": can only define groups where at least one pod set has only "
                                "1 replica, got: " + std::to_string(g[0]->count) +
                      " replica(s) and " + std::to_string(g[1]->count) +
                      " replica(s) in the group");
    }
    if (g[0]->required != g[1]->required || g[0]->preferred != g[1]->preferred) {
      return Fail(at, g[0]->path,
                  "must specify " + Quote(kRequiredTopologyAnnotation) + " or " +
                      Quote(kPreferredTopologyAnnotation) + " topology consistent with " +
                      Quote(g[1]->path) + " in group " + Quote(name));
    }
  }
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
