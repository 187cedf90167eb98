#pragma once
// Exact parsers for the unit-suffixed numbers that Kubernetes manifests carry: resource
// quantities ("1.5", "100m", "36Gi", "1e3") as integer milli-units, and Go durations ("1h30m")
// as nanoseconds. No floating point: the decider must see the same integers on every machine.

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/result.h"

namespace admission::schema {

// Longest quantity text accepted. Kubernetes sets no limit, but nothing sensible comes near it,
// and it bounds the exact decimal arithmetic below.
inline constexpr size_t kQuantityTextBytesMax = 128;
// Longest duration text accepted ("1h2m3s4ms" is 9).
inline constexpr size_t kDurationTextBytesMax = 64;

// Parses Kubernetes quantity syntax into milli-units (value x 1000), exactly:
//   <sign>?<digits>[.<digits>]<suffix>?  with suffix one of
//   decimal SI  n u m k M G T P E      ("100m" -> 100, "2k" -> 2000000)
//   binary SI   Ki Mi Gi Ti Pi Ei      ("1Ki" -> 1024000)
//   exponent    e<int> or E<int>       ("1e3" -> 1000000; "1E" alone is exa)
// A value that is not a whole number of milli-units is ROUNDED UP in magnitude, as Kubernetes
// does for MilliValue() (cpu "0.0001" is 1m; "-0.0001" is -1m, so Parse(-x) == -Parse(x)).
// Refuses with kInvalidArgument and the reason: empty text, spaces, a missing number, an unknown
// suffix, text longer than kQuantityTextBytesMax, and magnitudes beyond int64 milli-units
// (about 9.2e15 units, 8 Ei bytes). Negative values parse; refusing them is the caller's job.
Result<int64_t> ParseQuantityMilli(std::string_view text);

// A canonical, readable Kubernetes form that ParseQuantityMilli maps back to `milli`:
//   not a whole unit            -> "<milli>m"            (1500 -> "1500m")
//   bytes (memory, storage, ephemeral-storage, hugepages-*), a whole multiple of a binary
//   suffix                      -> the largest exact one (38654705664000 -> "36Gi")
//   otherwise                   -> plain units            (2000 -> "2", 1000500000 -> "1000500")
std::string FormatQuantityMilli(int64_t milli, std::string_view resource);

// Parses the subset of Go's time.ParseDuration syntax that policy annotations use: a sequence
// of <number><unit> with unit h, m, s or ms, numbers optionally decimal ("1.5h"), and a bare
// "0". Refuses negative durations, unknown units, results that are not whole nanoseconds, and
// results beyond int64 nanoseconds (about 292 years).
Result<int64_t> ParseDurationNs(std::string_view text);

// A retention (Kueue's objectRetentionPolicies.workloads): a duration as above, or "never"
// (kept for ever), which is -1.
Result<int64_t> ParseRetentionNs(std::string_view text);

}  // namespace admission::schema
