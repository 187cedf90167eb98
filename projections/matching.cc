#include <algorithm>
#include <charconv>

#include "projections/engine_internal.h"

namespace admission::projections {

bool RequirementMatches(const Requirement& r, const Labels& labels) {
  auto it = labels.find(r.key);
  const bool has = it != labels.end();
  auto in_values = [&] {
    return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
  };
  if (r.op == "In") return in_values();
  if (r.op == "NotIn") return !in_values();
  if (r.op == "Exists") return has;
  if (r.op == "DoesNotExist") return !has;
  if (r.op == "Gt" || r.op == "Lt") {
    if (!has || r.values.size() != 1) return false;
    char* end = nullptr;
    long long label = std::strtoll(it->second.c_str(), &end, 10);
    if (*end != '\0') return false;
    long long bound = std::strtoll(r.values[0].c_str(), &end, 10);
    if (*end != '\0') return false;
    return r.op == "Gt" ? label > bound : label < bound;
  }
  return false;
}

namespace {

bool Allowed(const std::vector<std::string_view>& keys, std::string_view key) {
  return std::binary_search(keys.begin(), keys.end(), key);
}

}  // namespace

bool SelectorMatchesFlavor(const PodSetSpec& ps, const Labels& flavor_labels,
                           const std::vector<std::string_view>& allowed_keys) {
  for (const auto& [key, value] : ps.node_selector) {
    if (!Allowed(allowed_keys, key)) continue;
    auto it = flavor_labels.find(key);
    if (it == flavor_labels.end() || it->second != value) return false;
  }
  for (const Requirement& r : ps.affinity) {
    if (!Allowed(allowed_keys, r.key)) continue;
    if (!RequirementMatches(r, flavor_labels)) return false;
  }
  return true;
}

const Taint* FindUntoleratedTaint(const std::vector<Taint>& taints,
                                  const std::vector<Toleration>& tolerations) {
  for (const Taint& taint : taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    bool tolerated = false;
    for (const Toleration& t : tolerations) {
      if (!t.effect.empty() && t.effect != taint.effect) continue;
      if (t.key.empty()) {
        if (t.op == "Exists") tolerated = true;
      } else if (t.key == taint.key) {
        if (t.op == "Exists" || ((t.op.empty() || t.op == "Equal") && t.value == taint.value)) {
          tolerated = true;
        }
      }
      if (tolerated) break;
    }
    if (!tolerated) return &taint;
  }
  return nullptr;
}

bool SelectorMatches(const LabelSelector& selector, const Labels& labels) {
  if (!selector.present) return true;
  for (const auto& [key, value] : selector.match_labels) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const Requirement& r : selector.match_expressions) {
    if (!RequirementMatches(r, labels)) return false;
  }
  return true;
}

std::string FormatMilli(int64_t milli) {
  // As "%lld" (whole units) or "%lldm" (milli-units) would print it; std::to_chars is that
  // decimal form without printf's format parsing, which the decider paid for every reason it
  // built.
  char buf[24];
  const bool whole = milli % 1000 == 0;
  char* end = std::to_chars(buf, buf + sizeof buf, whole ? milli / 1000 : milli).ptr;
  std::string out(buf, end);
  if (!whole) out.push_back('m');
  return out;
}

}  // namespace admission::projections
