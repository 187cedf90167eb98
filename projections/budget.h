#pragma once
// Budgets (engine v25, docs/budgets.md): resource-hours per period, decided by the ledger from
// the usage fold it shares with billing. Pure: the policy's time zone is recorded in its
// definition (UTC offsets), usage comes from the fold, time is ledger time.

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "projections/usage.h"
#include "schema/events.capnp.h"

namespace admission::projections {

// The controllerName of an AdmissionCheck the ledger decides itself.
inline constexpr char kBudgetController[] = "admission-ledger.io/budget";
// Closed usage is summed per quarter hour: every local midnight of every zone is a multiple of
// a quarter hour in UTC, so calendar periods are exact.
inline constexpr int64_t kUsageBucketMs = 15LL * 60 * 1000;
// How long summed usage is kept: the longest period (a calendar month, a rolling window <= 31d).
inline constexpr int64_t kBudgetHorizonMs = 32LL * 24 * 3600 * 1000;
inline constexpr int64_t kRollingWindowMaxMs = 31LL * 24 * 3600 * 1000;
inline constexpr int64_t kMilliMsPerMilliHour = 3'600'000;  // milli-unit-hours -> milli x ms

enum class BudgetScope { kNamespace, kLocalQueue, kClusterQueue, kCohort };
enum class BudgetPeriod { kMonth, kWeek, kRolling };

struct BudgetPolicySpec {
  std::string name;
  BudgetScope scope = BudgetScope::kNamespace;
  std::string scope_ns, scope_name;
  std::map<std::string, int64_t> limits;  // resource -> milli-unit-hours
  BudgetPeriod period = BudgetPeriod::kMonth;
  std::string time_zone;
  std::vector<std::pair<int64_t, int32_t>> offsets;  // (from, ms UTC; offset, seconds)
  int64_t window_ms = 0;
  int64_t half_life_ms = 0;  // 0: no decay
  bool reject_unknown = false;
  std::string def_bytes;  // the definition event's canonical bytes (snapshots store these)
  uint64_t version = 0;   // the sequence that defined it
};
BudgetPolicySpec ToBudgetPolicy(schema::BudgetPolicyDef::Reader def);
// "namespace team-a", "LocalQueue team-a/main", "ClusterQueue gpu", "cohort research".
std::string ScopeText(const BudgetPolicySpec& policy);

// What usage is summed by: an attribution without flavor and priority class.
struct UsageKey {
  std::string ns, local_queue, cluster_queue, cohort, resource;
  auto operator<=>(const UsageKey&) const = default;
};
UsageKey UsageKeyOf(const Attribution& to);
// Whether usage of `key` (its resource not compared) is the policy's.
bool InScope(const BudgetPolicySpec& policy, const UsageKey& key);

// The period in force at `now_ms`: [start_ms, end_ms) (end 0: a rolling window ending now),
// its label for people ("2026-12 (Europe/Berlin)"), and when a Retry is decided again.
struct BudgetWindow {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::string label;
  int64_t retry_at_ms = 0;
};
BudgetWindow WindowAt(const BudgetPolicySpec& policy, int64_t now_ms);

// milli x (end - start), decayed: halved for each half-life boundary (from the Unix epoch)
// between the instant and `now_ms`.
__int128 Weighted(int64_t milli, int64_t start_ms, int64_t end_ms, int64_t now_ms,
                  int64_t half_life_ms);

// Closed usage summed per key and quarter hour (milli x ms), for the last kBudgetHorizonMs.
class UsageBuckets {
 public:
  using Map = std::map<UsageKey, std::map<int64_t, __int128>>;
  // Adds a closed interval, split at quarter hours; parts before `keep_from_ms` are dropped.
  void Add(const Interval& interval, int64_t keep_from_ms);
  // Forgets the buckets that start before `before_ms`.
  void Prune(int64_t before_ms);
  // The policy's usage of `resource` in [start_ms, now_ms), decayed as the policy says.
  __int128 Sum(const BudgetPolicySpec& policy, const std::string& resource, int64_t start_ms,
               int64_t now_ms) const;
  const Map& entries() const { return buckets_; }
  void Put(const UsageKey& key, int64_t bucket_ms, __int128 milli_ms) {
    buckets_[key][bucket_ms] = milli_ms;
  }

 private:
  Map buckets_;
};

// The policy's usage of `resource` in [start_ms, now_ms): the summed closed usage and the holds
// still open (`open`: UsageFold::OpenUntil(now_ms)).
__int128 UsedInWindow(const BudgetPolicySpec& policy, const std::string& resource,
                      const UsageBuckets& buckets, const std::vector<Interval>& open,
                      int64_t start_ms, int64_t now_ms);

// Resource-time for people: milli x ms as unit-hours, 3 decimals, rounded down ("1930.5").
std::string UnitHours(__int128 milli_ms);

// Where a policy stands at an instant, per limited resource (metrics, the dashboard, billing).
struct BudgetStanding {
  std::string policy, resource;
  BudgetWindow window;
  __int128 limit = 0, used = 0, committed = 0;  // milli x ms
};

}  // namespace admission::projections
