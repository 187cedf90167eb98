#pragma once
// The decider's behaviour version. Every decision records it; a behaviour change bumps it.

#include <cstdint>

namespace admission::projections {

inline constexpr uint32_t kEngineVersion = 28;
// The oldest behaviour this build can still decide with (replay of older ledgers).
inline constexpr uint32_t kEngineVersionOldestDecidable = 5;

// The behaviour a batch is decided with, from the engineVersion of its last input (the input
// with endsBatch): intake stamps every input with the version of the decider that sequenced it
// (engine v6 on). Inputs written before v6 carry 0, and are decided as v5 decided them (v4 and
// v5 decide alike; see EngineVersionNote(5)).
inline uint32_t DecidingVersion(uint32_t input_version) {
  return input_version == 0 ? 5 : input_version;
}
// Whether this build can decide a batch as that version did.
inline bool EngineVersionDecidable(uint32_t version) {
  return version >= kEngineVersionOldestDecidable && version <= kEngineVersion;
}

// A human-readable description of what each engine version changed.
const char* EngineVersionNote(uint32_t version);

}  // namespace admission::projections
