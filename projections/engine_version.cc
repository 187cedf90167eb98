#include "projections/engine_version.h"

namespace admission::projections {

const char* EngineVersionNote(uint32_t version) {
  switch (version) {
    case 1: return "first engine: no decisions are made yet (foundation)";
    default: return "unknown engine version";
  }
}

}  // namespace admission::projections
