#pragma once
// The decider's behaviour version. Every decision records it; a behaviour change bumps it.

#include <cstdint>

namespace admission::projections {

inline constexpr uint32_t kEngineVersion = 5;

// A human-readable description of what each engine version changed.
const char* EngineVersionNote(uint32_t version);

}  // namespace admission::projections
