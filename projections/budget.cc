// Budgets: the policy's periods, scope and usage sums (docs/budgets.md). The decision itself is
// Engine::EvaluateBudget (budget_check.cc).

#include "projections/budget.h"

#include <algorithm>

#include <date/date.h>

namespace admission::projections {

namespace {

constexpr int64_t kDayMs = 24LL * 3600 * 1000;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// The zone's offset (seconds) in force at `utc_ms`: the last recorded one from at or before it.
int32_t OffsetAt(const BudgetPolicySpec& p, int64_t utc_ms) {
  auto it = std::upper_bound(p.offsets.begin(), p.offsets.end(), utc_ms,
                             [](int64_t t, const auto& o) { return t < o.first; });
  if (it == p.offsets.begin()) return p.offsets.empty() ? 0 : p.offsets.front().second;
  return std::prev(it)->second;
}

// The UTC instant of a local wall time (a skipped local time resolves past the gap).
int64_t LocalToUtc(const BudgetPolicySpec& p, int64_t local_ms) {
  const int64_t guess = local_ms - int64_t{OffsetAt(p, local_ms)} * 1000;
  return local_ms - int64_t{OffsetAt(p, guess)} * 1000;
}

std::string Hours(int64_t ms) {
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  return std::to_string(ms / 60'000) + "m";
}

std::string Zone(const BudgetPolicySpec& p) {
  return " (" + (p.time_zone.empty() ? std::string("UTC") : p.time_zone) + ")";
}

}  // namespace

BudgetPolicySpec ToBudgetPolicy(schema::BudgetPolicyDef::Reader def) {
  BudgetPolicySpec p;
  p.name = def.getName().cStr();
  switch (def.getScopeKind()) {
    case schema::BudgetScopeKind::LOCAL_QUEUE: p.scope = BudgetScope::kLocalQueue; break;
    case schema::BudgetScopeKind::CLUSTER_QUEUE: p.scope = BudgetScope::kClusterQueue; break;
    case schema::BudgetScopeKind::COHORT: p.scope = BudgetScope::kCohort; break;
    default: p.scope = BudgetScope::kNamespace; break;
  }
  p.scope_ns = def.getScopeNamespace().cStr();
  p.scope_name = def.getScopeName().cStr();
  for (auto l : def.getLimits()) p.limits[l.getResource().cStr()] = l.getMilliUnitHours();
  switch (def.getPeriod()) {
    case schema::BudgetPeriodKind::WEEK: p.period = BudgetPeriod::kWeek; break;
    case schema::BudgetPeriodKind::ROLLING: p.period = BudgetPeriod::kRolling; break;
    default: p.period = BudgetPeriod::kMonth; break;
  }
  p.time_zone = def.getTimeZone().cStr();
  for (auto o : def.getUtcOffsets()) {
    p.offsets.emplace_back(FloorDiv(o.getFromNs(), 1'000'000), o.getOffsetSeconds());
  }
  p.window_ms = def.getWindowNs() / 1'000'000;
  p.half_life_ms = def.getHalfLifeNs() / 1'000'000;
  p.reject_unknown = def.getUnknownRuntime() == schema::UnknownRuntime::REJECT;
  return p;
}

std::string ScopeText(const BudgetPolicySpec& p) {
  switch (p.scope) {
    case BudgetScope::kNamespace: return "namespace " + p.scope_ns;
    case BudgetScope::kLocalQueue: return "LocalQueue " + p.scope_ns + "/" + p.scope_name;
    case BudgetScope::kClusterQueue: return "ClusterQueue " + p.scope_name;
    case BudgetScope::kCohort: return "cohort " + p.scope_name;
  }
  return "";
}

UsageKey UsageKeyOf(const Attribution& to) {
  return UsageKey{to.ns, to.local_queue, to.cluster_queue, to.cohort, to.resource};
}

bool InScope(const BudgetPolicySpec& p, const UsageKey& key) {
  switch (p.scope) {
    case BudgetScope::kNamespace: return key.ns == p.scope_ns;
    case BudgetScope::kLocalQueue: return key.ns == p.scope_ns && key.local_queue == p.scope_name;
    case BudgetScope::kClusterQueue: return key.cluster_queue == p.scope_name;
    case BudgetScope::kCohort: return !key.cohort.empty() && key.cohort == p.scope_name;
  }
  return false;
}

BudgetWindow WindowAt(const BudgetPolicySpec& p, int64_t now_ms) {
  using namespace date;
  BudgetWindow w;
  if (p.period == BudgetPeriod::kRolling) {
    w.start_ms = FloorDiv(now_ms - p.window_ms, kUsageBucketMs) * kUsageBucketMs;
    w.label = "the " + Hours(p.window_ms) + " before now";
    const int64_t step = std::max(kUsageBucketMs, (p.window_ms / 24 + kUsageBucketMs - 1) /
                                                      kUsageBucketMs * kUsageBucketMs);
    w.retry_at_ms = now_ms + step;
  } else {
    const int64_t local = now_ms + int64_t{OffsetAt(p, now_ms)} * 1000;
    const sys_days today{days{FloorDiv(local, kDayMs)}};
    sys_days first, next;
    if (p.period == BudgetPeriod::kMonth) {
      const year_month_day ymd{today};
      first = sys_days{ymd.year() / ymd.month() / 1};
      next = sys_days{(ymd.year() / ymd.month() / 1) + months{1}};
      const unsigned m = static_cast<unsigned>(ymd.month());
      w.label = std::to_string(static_cast<int>(ymd.year())) + (m < 10 ? "-0" : "-") +
                std::to_string(m) + Zone(p);
    } else {
      first = today - (weekday{today} - Monday);
      next = first + days{7};
      const year_month_day ymd{first};
      const unsigned m = static_cast<unsigned>(ymd.month());
      const unsigned d = static_cast<unsigned>(ymd.day());
      w.label = "the week from " + std::to_string(static_cast<int>(ymd.year())) +
                (m < 10 ? "-0" : "-") + std::to_string(m) + (d < 10 ? "-0" : "-") +
                std::to_string(d) + Zone(p);
    }
    w.start_ms = LocalToUtc(p, first.time_since_epoch().count() * kDayMs);
    w.end_ms = LocalToUtc(p, next.time_since_epoch().count() * kDayMs);
    w.retry_at_ms = w.end_ms;
  }
  if (p.half_life_ms > 0) {
    const int64_t boundary = (FloorDiv(now_ms, p.half_life_ms) + 1) * p.half_life_ms;
    w.retry_at_ms = std::min(w.retry_at_ms, boundary);
  }
  return w;
}

__int128 Weighted(int64_t milli, int64_t start_ms, int64_t end_ms, int64_t now_ms,
                  int64_t half_life_ms) {
  if (end_ms <= start_ms) return 0;
  if (half_life_ms <= 0) return static_cast<__int128>(milli) * (end_ms - start_ms);
  const int64_t now_epoch = FloorDiv(now_ms, half_life_ms);
  __int128 total = 0;
  for (int64_t s = start_ms; s < end_ms;) {
    const int64_t epoch = FloorDiv(s, half_life_ms);
    const int64_t e = std::min(end_ms, (epoch + 1) * half_life_ms);
    const int64_t shift = now_epoch - epoch;
    if (shift < 120) {
      total += (static_cast<__int128>(milli) * (e - s)) >> std::max<int64_t>(shift, 0);
    }
    s = e;
  }
  return total;
}

void UsageBuckets::Add(const Interval& interval, int64_t keep_from_ms) {
  const int64_t from = std::max(interval.start_ms, keep_from_ms);
  if (interval.end_ms <= from || interval.milli == 0) return;
  std::map<int64_t, __int128>& sums = buckets_[UsageKeyOf(interval.to)];
  for (int64_t s = from; s < interval.end_ms;) {
    const int64_t bucket = FloorDiv(s, kUsageBucketMs) * kUsageBucketMs;
    const int64_t e = std::min(interval.end_ms, bucket + kUsageBucketMs);
    sums[bucket] += static_cast<__int128>(interval.milli) * (e - s);
    s = e;
  }
}

void UsageBuckets::Prune(int64_t before_ms) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    auto& sums = it->second;
    sums.erase(sums.begin(), sums.lower_bound(before_ms));
    it = sums.empty() ? buckets_.erase(it) : std::next(it);
  }
}

__int128 UsageBuckets::Sum(const BudgetPolicySpec& p, const std::string& resource,
                           int64_t start_ms, int64_t now_ms) const {
  __int128 total = 0;
  const int64_t now_epoch = p.half_life_ms > 0 ? FloorDiv(now_ms, p.half_life_ms) : 0;
  for (const auto& [key, sums] : buckets_) {
    if (key.resource != resource || !InScope(p, key)) continue;
    for (auto it = sums.lower_bound(start_ms); it != sums.end() && it->first < now_ms; ++it) {
      if (p.half_life_ms <= 0) {
        total += it->second;
        continue;
      }
      // A half-life is a whole number of quarter hours: a bucket lies in one half-life.
      const int64_t shift = now_epoch - FloorDiv(it->first, p.half_life_ms);
      if (shift < 120) total += it->second >> std::max<int64_t>(shift, 0);
    }
  }
  return total;
}

__int128 UsedInWindow(const BudgetPolicySpec& p, const std::string& resource,
                      const UsageBuckets& buckets, const std::vector<Interval>& open,
                      int64_t start_ms, int64_t now_ms) {
  __int128 total = buckets.Sum(p, resource, start_ms, now_ms);
  for (const Interval& in : open) {
    if (in.to.resource != resource || !InScope(p, UsageKeyOf(in.to))) continue;
    total += Weighted(in.milli, std::max(in.start_ms, start_ms), std::min(in.end_ms, now_ms),
                      now_ms, p.half_life_ms);
  }
  return total;
}

std::string UnitHours(__int128 milli_ms) { return ExactDecimal(milli_ms / 3'600'000, 3); }

}  // namespace admission::projections
