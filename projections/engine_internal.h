#pragma once
// Helpers shared by the engine's translation units. Pure functions only.

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <capnp/blob.h>

#include "projections/model.h"

namespace admission::projections {

// Kueue's node matching, restricted to the label keys the resource group's flavors use.
bool SelectorMatchesFlavor(const PodSetSpec& ps, const Labels& flavor_labels,
                           const std::vector<std::string_view>& allowed_keys);
// The first taint (NoSchedule/NoExecute) the tolerations do not tolerate, or nullptr.
const Taint* FindUntoleratedTaint(const std::vector<Taint>& taints,
                                  const std::vector<Toleration>& tolerations);
bool SelectorMatches(const LabelSelector& selector, const Labels& labels);
// One node selector requirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) against labels.
bool RequirementMatches(const Requirement& r, const Labels& labels);

std::string FormatMilli(int64_t milli);

struct WorkloadState;
// The fencing token of a workload's current generation: "uid/generation" (lifecycle.cc).
std::string TokenOf(const WorkloadState& wl);

// 2^(-num/den) in Q62 fixed point (2^62 is 1), for num >= 0 and den > 0, computed with integer
// operations only (admission fair sharing's decay; admission_fair_sharing.cc).
uint64_t Pow2NegQ62(uint64_t num, uint64_t den);

// A capnp text as a view, without a temporary std::string. Cut at its first NUL, exactly as
// `cStr()` read into a std::string was: a text may hold an embedded NUL (nothing rejects one),
// and the decider must read such an input as it always has, or a recorded decision would no
// longer replay under the same engine version.
inline std::string_view View(capnp::Text::Reader text) {
  std::string_view view(text.begin(), text.size());
  const size_t nul = view.find('\0');
  return nul == std::string_view::npos ? view : view.substr(0, nul);
}

// A decider string as a capnp text, by its size. Text::Reader's conversion from a std::string
// goes through c_str() and measures it again (strlen) for every field of every decision. Equal
// to that conversion: no string of the decider holds a NUL, since every input text is cut at
// its first (View) and the rest are built from those and literals.
inline capnp::Text::Reader Txt(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

// The parts joined, in one allocation (the decider builds a reason string for every flavor a
// nominated head does not fit, every cycle it stays pending).
inline std::string Cat(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) out.append(p);
  return out;
}

// Whether the parts of `a` joined with '|' compare below those of `b` joined so, as texts,
// without joining them (Timer's order).
bool JoinedTextLess(const std::array<std::string_view, 3>& a,
                    const std::array<std::string_view, 3>& b);

}  // namespace admission::projections
