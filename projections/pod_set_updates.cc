// Engine v17: admission checks' pod template updates (projections/pod_set_updates.h).

#include "projections/pod_set_updates.h"

#include <algorithm>
#include <set>

#include "projections/engine_internal.h"
#include "schema/k8s_names.h"

namespace admission::projections {

namespace {

Labels ToLabelMap(capnp::List<schema::Label>::Reader list) {
  Labels out;
  for (auto l : list) out[std::string(View(l.getKey()))].assign(View(l.getValue()));
  return out;
}

void PutLabels(capnp::List<schema::Label>::Builder out, const Labels& labels) {
  unsigned i = 0;
  for (const auto& [key, value] : labels) {
    out[i].setKey(Txt(key));
    out[i].setValue(Txt(value));
    ++i;
  }
}

std::string Quoted(std::string_view s) { return Cat({"\"", s, "\""}); }

// Keys and values of a label-like list: `values_are_labels` for labels and nodeSelector.
std::optional<std::string> InvalidLabels(capnp::List<schema::Label>::Reader list,
                                         const std::string& path, bool values_are_labels) {
  std::set<std::string_view> seen;
  size_t bytes = 0;
  for (auto l : list) {
    const std::string_view key = View(l.getKey());
    const std::string_view value = View(l.getValue());
    const std::string at = Cat({path, "[", Quoted(key), "]"});
    if (!seen.insert(key).second) return at + ": the key appears twice";
    if (!schema::IsQualifiedName(key)) {
      return at + ": " + Quoted(key) +
             " is not a valid key: [prefix/]name, the prefix a DNS subdomain, the name at most 63 "
             "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";
    }
    if (values_are_labels && !schema::IsLabelValue(value)) {
      return at + ": " + Quoted(value) +
             " is not a valid label value: empty, or at most 63 alphanumerics, '-', '_' or '.', "
             "starting and ending with an alphanumeric";
    }
    bytes += key.size() + value.size();
  }
  if (!values_are_labels && bytes > kPodSetUpdateAnnotationsBytesMax) {
    return path + ": the annotations take " + std::to_string(bytes) + " bytes, more than " +
           std::to_string(kPodSetUpdateAnnotationsBytesMax);
  }
  return std::nullopt;
}

std::optional<std::string> InvalidToleration(schema::Toleration::Reader t, const std::string& at) {
  const std::string_view key = View(t.getKey());
  const std::string_view op = View(t.getOperator());
  const std::string_view value = View(t.getValue());
  const std::string_view effect = View(t.getEffect());
  if (!key.empty() && !schema::IsQualifiedName(key)) {
    return at + ".key: " + Quoted(key) + " is not a valid label key";
  }
  if (op != "" && op != "Equal" && op != "Exists") {
    return at + ".operator: " + Quoted(op) + " is not supported: Equal (the default) or Exists";
  }
  if (key.empty() && op != "Exists") {
    return at + ".operator: must be Exists when the key is empty (match every key and value)";
  }
  if (op == "Exists" && !value.empty()) {
    return at + ".value: must be empty when the operator is Exists, not " + Quoted(value);
  }
  if (op != "Exists" && !schema::IsLabelValue(value)) {
    return at + ".value: " + Quoted(value) + " is not a valid label value";
  }
  if (effect != "" && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
      effect != "NoExecute") {
    return at + ".effect: " + Quoted(effect) +
           " is not supported: NoSchedule, PreferNoSchedule or NoExecute (empty: every effect)";
  }
  return std::nullopt;
}

std::optional<std::string> Conflict(const char* field, const Labels& into, const Labels& from) {
  for (const auto& [key, value] : into) {
    auto other = from.find(key);
    if (other != from.end() && other->second != value) {
      return Cat({"invalid admission check PodSetUpdate: conflict for ", field,
                  ": conflict for key=", key, ", value1=", value, ", value2=", other->second});
    }
  }
  return std::nullopt;
}

bool SameToleration(Toleration a, Toleration b) {
  if (a.op.empty()) a.op = "Equal";
  if (b.op.empty()) b.op = "Equal";
  return a == b;
}

}  // namespace

std::vector<PodSetUpdate> ToPodSetUpdates(capnp::List<schema::PodSetUpdate>::Reader list) {
  std::vector<PodSetUpdate> out;
  out.reserve(list.size());
  for (auto u : list) {
    PodSetUpdate update;
    update.pod_set.assign(View(u.getPodSet()));
    update.labels = ToLabelMap(u.getLabels());
    update.annotations = ToLabelMap(u.getAnnotations());
    update.node_selector = ToLabelMap(u.getNodeSelector());
    for (auto t : u.getTolerations()) {
      update.tolerations.push_back(Toleration{std::string(View(t.getKey())),
                                              std::string(View(t.getOperator())),
                                              std::string(View(t.getValue())),
                                              std::string(View(t.getEffect()))});
    }
    out.push_back(std::move(update));
  }
  return out;
}

void PutPodSetUpdates(capnp::List<schema::PodSetUpdate>::Builder out,
                      const std::vector<PodSetUpdate>& updates) {
  for (unsigned i = 0; i < updates.size(); ++i) {
    const PodSetUpdate& u = updates[i];
    auto b = out[i];
    b.setPodSet(Txt(u.pod_set));
    if (!u.labels.empty()) PutLabels(b.initLabels(static_cast<unsigned>(u.labels.size())), u.labels);
    if (!u.annotations.empty()) {
      PutLabels(b.initAnnotations(static_cast<unsigned>(u.annotations.size())), u.annotations);
    }
    if (!u.node_selector.empty()) {
      PutLabels(b.initNodeSelector(static_cast<unsigned>(u.node_selector.size())), u.node_selector);
    }
    if (!u.tolerations.empty()) {
      auto ts = b.initTolerations(static_cast<unsigned>(u.tolerations.size()));
      for (unsigned j = 0; j < u.tolerations.size(); ++j) {
        ts[j].setKey(Txt(u.tolerations[j].key));
        ts[j].setOperator(Txt(u.tolerations[j].op));
        ts[j].setValue(Txt(u.tolerations[j].value));
        ts[j].setEffect(Txt(u.tolerations[j].effect));
      }
    }
  }
}

std::optional<std::string> InvalidPodSetUpdates(capnp::List<schema::PodSetUpdate>::Reader list,
                                                const std::vector<PodSetSpec>& pod_sets) {
  std::set<std::string_view> seen;
  for (unsigned i = 0; i < list.size(); ++i) {
    auto u = list[i];
    const std::string at = "podSetUpdates[" + std::to_string(i) + "]";
    const std::string_view name = View(u.getPodSet());
    const bool known = std::any_of(pod_sets.begin(), pod_sets.end(),
                                   [&](const PodSetSpec& ps) { return ps.name == name; });
    if (!known) {
      std::string names;
      for (const PodSetSpec& ps : pod_sets) names += (names.empty() ? "" : ", ") + ps.name;
      return at + ".podSet: " + Quoted(name) + " is not a podSet of the workload (its podSets: " +
             names + ")";
    }
    if (!seen.insert(name).second) {
      return at + ".podSet: " + Quoted(name) + " is updated twice; one update per podSet";
    }
    if (auto e = InvalidLabels(u.getLabels(), at + ".labels", true)) return e;
    if (auto e = InvalidLabels(u.getAnnotations(), at + ".annotations", false)) return e;
    if (auto e = InvalidLabels(u.getNodeSelector(), at + ".nodeSelector", true)) return e;
    auto tolerations = u.getTolerations();
    if (tolerations.size() > kPodSetUpdateTolerationsMax) {
      return at + ".tolerations: " + std::to_string(tolerations.size()) + " tolerations, at most " +
             std::to_string(kPodSetUpdateTolerationsMax);
    }
    for (unsigned j = 0; j < tolerations.size(); ++j) {
      if (auto e = InvalidToleration(tolerations[j], at + ".tolerations[" + std::to_string(j) + "]")) {
        return e;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> MergePodSetUpdate(const PodSetUpdate& from, PodSetUpdate* into) {
  if (auto c = Conflict("annotations", into->annotations, from.annotations)) return c;
  if (auto c = Conflict("labels", into->labels, from.labels)) return c;
  if (auto c = Conflict("nodeSelector", into->node_selector, from.node_selector)) return c;
  into->annotations.insert(from.annotations.begin(), from.annotations.end());
  into->labels.insert(from.labels.begin(), from.labels.end());
  into->node_selector.insert(from.node_selector.begin(), from.node_selector.end());
  for (const Toleration& t : from.tolerations) {
    const bool present = std::any_of(into->tolerations.begin(), into->tolerations.end(),
                                     [&](const Toleration& e) { return SameToleration(e, t); });
    if (!present) into->tolerations.push_back(t);
  }
  return std::nullopt;
}

}  // namespace admission::projections
