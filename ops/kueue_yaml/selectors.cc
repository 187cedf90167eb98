// Tolerations, label selectors and node selector requirements: shared by ResourceFlavors,
// ClusterQueues (namespaceSelector) and pod specs.

#include <limits>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops::kueue_yaml_internal {

// `init(n)` initializes the destination list of n tolerations.
bool DocumentParser::ParseTolerations(const YAML::Node& n, const std::string& path,
                                      size_t max_items, const InitTolerations& init) {
  if (!ExpectSequence(n, path, max_items)) return false;
  auto list = init(static_cast<unsigned>(n.size()));
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node t = n[i];
    const std::string tp = Index(path, i);
    if (!ExpectMap(t, tp)) return false;
    std::string key, op = "Equal", value, effect;
    if (!OptString(t, "key", tp, &key)) return false;
    const YAML::Node op_node = Child(t, "operator");
    if (!Absent(op_node) && !ReadEnum(op_node, Join(tp, "operator"), {"Equal", "Exists"}, &op)) {
      return false;
    }
    if (!OptString(t, "value", tp, &value)) return false;
    const YAML::Node effect_node = Child(t, "effect");
    if (!Absent(effect_node) &&
        !ReadEnum(effect_node, Join(tp, "effect"),
                  {"NoSchedule", "PreferNoSchedule", "NoExecute"}, &effect)) {
      return false;
    }
    if (!key.empty() && !IsQualifiedName(key)) {
      return Fail(Child(t, "key"), Join(tp, "key"), Quote(key) + " is not a valid taint key");
    }
    if (key.empty() && op != "Exists") {
      return Fail(t, Join(tp, "operator"),
                  "must be Exists when key is empty (which matches every taint)");
    }
    if (op == "Exists" && !value.empty()) {
      return Fail(Child(t, "value"), Join(tp, "value"), "must be empty when operator is Exists");
    }
    const YAML::Node seconds = Child(t, "tolerationSeconds");
    if (!Absent(seconds)) {
      int64_t ignored = 0;  // eviction timing is the kubelet's business, not admission's
      if (!ReadInt(seconds, Join(tp, "tolerationSeconds"), std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max(), &ignored)) {
        return false;
      }
      if (effect != "NoExecute") {
        return Fail(seconds, Join(tp, "tolerationSeconds"), "needs effect NoExecute");
      }
    }
    auto b = list[static_cast<unsigned>(i)];
    b.setKey(T(key));
    b.setOperator(T(op));
    b.setValue(T(value));
    b.setEffect(T(effect));
  }
  return true;
}

// matchExpressions of a label selector (namespaceSelector) or a nodeSelectorTerm.
// `init(n)` initializes the destination list of n requirements.
bool DocumentParser::ParseRequirements(const YAML::Node& n, const std::string& path,
                                       bool node_selector, const InitRequirements& init) {
  if (!ExpectSequence(n, path, kListItemsMax)) return false;
  auto list = init(static_cast<unsigned>(n.size()));
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node req = n[i];
    const std::string rp = Index(path, i);
    if (!ExpectMap(req, rp)) return false;
    std::string key, op;
    if (!ReqString(req, "key", rp, &key, "the label key")) return false;
    if (!IsQualifiedName(key)) {
      return Fail(Child(req, "key"), Join(rp, "key"), Quote(key) + " is not a valid label key");
    }
    const YAML::Node op_node = Child(req, "operator");
    if (Absent(op_node)) return Fail(req, Join(rp, "operator"), "required");
    if (node_selector) {
      if (!ReadEnum(op_node, Join(rp, "operator"),
                    {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}, &op)) {
        return false;
      }
    } else if (!ReadEnum(op_node, Join(rp, "operator"), {"In", "NotIn", "Exists", "DoesNotExist"},
                         &op)) {
      return false;
    }
    std::vector<std::string> values;
    const YAML::Node values_node = Child(req, "values");
    if (!Absent(values_node) &&
        !ReadStringList(values_node, Join(rp, "values"), kListItemsMax, &values)) {
      return false;
    }
    if ((op == "In" || op == "NotIn") && values.empty()) {
      return Fail(req, Join(rp, "values"), "must not be empty when operator is " + op);
    }
    if ((op == "Exists" || op == "DoesNotExist") && !values.empty()) {
      return Fail(values_node, Join(rp, "values"), "must be empty when operator is " + op);
    }
    if (op == "Gt" || op == "Lt") {
      if (values.size() != 1 || !ParseDecimal(values[0], std::numeric_limits<int64_t>::min(),
                                              std::numeric_limits<int64_t>::max())
                                     .ok()) {
        return Fail(req, Join(rp, "values"),
                    "must be exactly one integer when operator is " + op);
      }
    }
    auto b = list[static_cast<unsigned>(i)];
    b.setKey(T(key));
    b.setOperator(T(op));
    auto values_builder = b.initValues(static_cast<unsigned>(values.size()));
    for (size_t v = 0; v < values.size(); ++v)
      values_builder.set(static_cast<unsigned>(v), T(values[v]));
  }
  return true;
}

bool DocumentParser::ParseLabelSelector(const YAML::Node& n, const std::string& path,
                                        schema::LabelSelector::Builder b) {
  if (!ExpectMap(n, path)) return false;
  std::map<std::string, std::string> match_labels;
  const YAML::Node labels = Child(n, "matchLabels");
  if (!Absent(labels) && !ReadStringMap(labels, Join(path, "matchLabels"), kMapEntriesMax,
                                        KeyRule::kLabel, &match_labels)) {
    return false;
  }
  SetLabels(b.initMatchLabels(static_cast<unsigned>(match_labels.size())), match_labels);
  size_t expressions = 0;
  const YAML::Node exprs = Child(n, "matchExpressions");
  if (!Absent(exprs)) {
    auto init = [&b](unsigned count) { return b.initMatchExpressions(count); };
    if (!ParseRequirements(exprs, Join(path, "matchExpressions"), false, init)) return false;
    expressions = exprs.size();
  }
  // A selector with no requirements selects everything (Kubernetes' LabelSelectorAsSelector).
  b.setMatchesAll(match_labels.empty() && expressions == 0);
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
