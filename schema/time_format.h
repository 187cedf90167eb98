#pragma once
// RFC 3339 timestamps <-> nanoseconds since the Unix epoch (UTC), exactly, without the C
// library's time zone state.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/result.h"

namespace admission {

// Accepts "2026-11-29T10:00:00Z", fractional seconds up to nanoseconds, and "+hh:mm"/"-hh:mm"
// offsets. Refuses anything else with the position and reason.
Result<int64_t> ParseRfc3339(std::string_view text);

// "2026-11-29T10:00:00.123456789Z" (fraction only when non-zero, trailing zeros trimmed).
std::string FormatRfc3339(int64_t ns);
// Kubernetes' form of a metav1.Time: whole seconds, the fraction dropped (floor), as the API
// server writes creationTimestamp and conditions' lastTransitionTime.
std::string FormatRfc3339Seconds(int64_t ns);

}  // namespace admission
