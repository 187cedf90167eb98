// Partial admission: Kueue's PodSetReducer (pkg/scheduler/flavorassigner/podset_reducer.go)
// and its use in the scheduler's nomination (pkg/scheduler/scheduler.go, partial admission).

#include <cstdint>
#include <optional>
#include <vector>

#include "projections/engine.h"
#include "projections/engine_internal.h"

namespace admission::projections {

// Shrinks every podSet with a minCount by the same fraction of its slack, binary-searching the
// smallest reduction that fits (with victims, when only preempting makes room).
std::optional<Nomination> Engine::NominatePartially(const WorkloadState& wl,
                                                    const ClusterQueueSpec& spec, int node) {
  int64_t total_delta = 0;
  for (const PodSetSpec& ps : wl.pod_sets) {
    if (ps.min_count > 0 && ps.min_count < ps.count) total_delta += ps.count - ps.min_count;
  }
  if (total_delta == 0) return std::nullopt;
  auto counts_for = [&](int64_t k) {
    std::vector<int32_t> counts;
    for (const PodSetSpec& ps : wl.pod_sets) {
      int64_t delta = (ps.min_count > 0 && ps.min_count < ps.count) ? ps.count - ps.min_count : 0;
      // Kueue's PodSetReducer: floor(delta_i * k / totalDelta); k == totalDelta is minCount.
      int64_t reduce = delta * k / total_delta;
      counts.push_back(static_cast<int32_t>(ps.count - reduce));
    }
    return counts;
  };
  int64_t lo = 1, hi = total_delta;
  std::optional<Nomination> found;
  while (lo <= hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    Nomination candidate = AssignFlavors(wl, spec, node, counts_for(mid));
    bool fits = candidate.mode == kFit;
    if (candidate.mode == kPreempt) {
      FindVictims(wl, spec, node, candidate);
      fits = !candidate.victims.empty();
    }
    if (fits) {
      found = std::move(candidate);
      hi = mid - 1;
    } else {
      lo = mid + 1;
    }
  }
  if (found) found->partial = true;
  return found;
}

}  // namespace admission::projections
