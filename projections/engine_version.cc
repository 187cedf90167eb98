#include "projections/engine_version.h"

namespace admission::projections {

const char* EngineVersionNote(uint32_t version) {
  switch (version) {
    case 1: return "decider part 1: quota, flavors, cohorts, preemption, partial admission";
    case 2:
      return "decider part 2: admission checks, pods and fencing tokens, revocation, node "
             "capacity, quota reclaim, maintenance windows, aging, fair sharing; decisions "
             "record the causing input's actor";
    default: return "unknown engine version";
  }
}

}  // namespace admission::projections
