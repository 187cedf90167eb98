#pragma once
// The what-if report (docs/whatif.md): recorded against simulated, per ClusterQueue, LocalQueue
// and priority class, and the workloads whose outcome changed most; as text, JSON or a
// self-contained HTML page with plots. Deterministic: the same result gives the same bytes.

#include <cstdint>
#include <string>
#include <vector>

#include "replay/forward.h"

namespace admission::replay {

// One group's figures on one side.
struct SideStats {
  uint64_t workloads = 0, admitted = 0, pending_at_end = 0, preemptions = 0, rejections = 0;
  int64_t wait_p50_ms = 0, wait_p90_ms = 0, wait_max_ms = 0;  // admitted ones; max also pending
  __int128 gpu_used = 0, gpu_idle = 0;  // milli-GPU x ms within [from, to]
  __int128 gpu_nominal = 0;             // milli-GPU x ms of nominal quota within [from, to]
};

struct GroupStats {
  std::string kind;  // "ClusterQueue", "LocalQueue", "priority class"
  std::string name;
  SideStats recorded, simulated;
};

struct ChangedWorkload {
  std::string key, cluster_queue;
  int64_t recorded_wait_ms = 0, simulated_wait_ms = 0;  // to the end when never admitted
  std::string recorded_outcome, simulated_outcome;    // "admitted (flavors)", "pending", ...
};

struct WhatIfSummary {
  int64_t from_ns = 0, to_ns = 0;
  uint64_t workloads = 0;       // submitted in the range (both sides)
  uint64_t exact_matches = 0;   // same admission instant, flavors, preemptions and rejection
  std::map<RuntimeSource, size_t> runtime_sources;
  std::vector<GroupStats> groups;
  std::vector<ChangedWorkload> changed;  // the largest changes of wait first, at most 20
  uint64_t recorded_decisions = 0, simulated_decisions = 0;
};

WhatIfSummary Summarize(const ForwardResult& result);

std::string WhatIfText(const WhatIfSummary& summary, const std::vector<std::string>& changes);
std::string WhatIfJson(const WhatIfSummary& summary, const std::vector<std::string>& changes);
// A page with its plots inline (SVG): waits as distributions per ClusterQueue, GPUs held over
// time per ClusterQueue; recorded and simulated side by side.
std::string WhatIfHtml(const WhatIfSummary& summary, const ForwardResult& result,
                       const std::vector<std::string>& changes);

// "1h2m3s", "45s", "0s".
std::string Duration(int64_t ms);

}  // namespace admission::replay
