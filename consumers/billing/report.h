#pragma once
// Billing reports from the usage fold: resource-seconds used and idle per group and bucket over
// a period of ledger time, exact (milli-units x milliseconds, summed in 128 bits). The same
// ledger range gives the same bytes. See docs/billing.md.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "consumers/billing/usage.h"
#include "projections/budget.h"

namespace admission::consumers::billing {

enum class GroupKey { kNamespace, kLocalQueue, kClusterQueue, kCohort, kFlavor, kPriorityClass };
// "namespace", "localqueue", "clusterqueue", "cohort", "flavor", "priority"; the JSON names are
// namespace, localQueue, clusterQueue, cohort, flavor, priorityClass.
Result<GroupKey> ParseGroupKey(const std::string& text);
const char* JsonName(GroupKey key);

struct ReportOptions {
  int64_t from_ms = 0;  // inclusive
  int64_t to_ms = 0;    // exclusive
  std::vector<GroupKey> by;
  int64_t bucket_ms = 0;  // 0: one bucket for the whole period; else hours or days (UTC)
  // Only intervals whose quota was released (what the streaming consumer has published); else
  // holds still open count up to the ledger's last event too.
  bool closed_only = false;
  // A price book: the price of one unit of a resource of a flavor for one hour, in micro-units
  // of `currency`. With one, every row gets a cost: what was held (used + idle) at its price;
  // a flavor and resource without a price cost nothing and are listed in `unpriced`.
  std::map<std::pair<std::string, std::string>, int64_t> price_micro_per_hour;  // (flavor, resource)
  std::string currency;
  // The table and CSV in exact resource-seconds; else in unit-hours for people (GPU-hours,
  // core-hours, GiB-hours), rounded to 3 decimals. JSON is always exact resource-seconds.
  bool exact_seconds = false;
};

struct ReportRow {
  std::vector<std::string> keys;  // in the order of ReportOptions::by
  int64_t bucket_start_ms = 0;    // with a bucket
  std::string resource;
  __int128 used = 0;  // milli-units x milliseconds
  __int128 idle = 0;
  __int128 cost = 0;  // (milli-units x milliseconds) x micro-units per hour; see CostMicro
  bool unpriced = false;  // with a price book: some of it had no price (costs nothing)
};

// A row's cost in micro-units of the currency, rounded down.
__int128 CostMicro(const ReportRow& row);

// A ClusterQueue's nominal quota of a flavor and resource in a bucket: how much was there
// (nominal x time), how much was reserved (used + idle of its admissions), and the rest.
struct QuotaRow {
  std::string cluster_queue, flavor, resource;
  int64_t bucket_start_ms = 0;
  __int128 nominal = 0;   // milli-units x milliseconds
  __int128 reserved = 0;
  __int128 unused() const { return nominal > reserved ? nominal - reserved : 0; }
};

// A budget policy in one period that overlaps the report's range (docs/budgets.md).
struct BudgetRow {
  std::string policy, scope, resource, period;  // period: its label ("2026-12 (UTC)")
  int64_t start_ms = 0, end_ms = 0;             // the period (end 0: a rolling window ending now)
  __int128 limit = 0;
  __int128 used = 0;  // held in the scope during the period, within the report's range
  // The period in force at the ledger's end: the decider's figures (its used is decayed when
  // the policy says so), and what is left of the limit.
  bool current = false;
  __int128 budget_used = 0, committed = 0;
  __int128 remaining() const {
    const __int128 left = limit - budget_used - committed;
    return left > 0 ? left : 0;
  }
};

// A policy and where it stands at the ledger's end (Engine::BudgetStandings).
struct BudgetNow {
  projections::BudgetPolicySpec policy;
  std::vector<projections::BudgetStanding> standings;
};

struct Report {
  ReportOptions options;
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;
  int64_t ledger_end_ms = 0;  // open holds count until here (or `to`, whichever is first)
  std::vector<ReportRow> rows;  // sorted by keys, bucket, resource
  std::vector<std::pair<std::string, std::string>> unpriced;  // (flavor, resource) held, no price
  std::vector<QuotaRow> quota;  // sorted by ClusterQueue, flavor, resource, bucket
  std::vector<BudgetRow> budgets;  // by policy, resource, period
};

// REQUIRES: options.from_ms < options.to_ms.
Report BuildReport(const UsageFold& fold, const ReportOptions& options);

// Per policy, resource and period overlapping [options.from_ms, options.to_ms): the limit and
// what the scope held (the fold's intervals); the current period with the decider's figures.
std::vector<BudgetRow> BudgetRows(const UsageFold& fold, const std::vector<BudgetNow>& budgets,
                                  const ReportOptions& options, int64_t ledger_end_ms);

using projections::ExactDecimal;
// Resource-seconds (milli-units x milliseconds) as an exact decimal ("12.5", "0.000001").
std::string ResourceSeconds(__int128 milli_ms);
// The unit a resource's amounts read in for people: "GPU-hours" (nvidia.com/gpu and any */gpu),
// "core-hours" (cpu), "GiB-hours" (memory, *memory, *storage), "pod-hours" (pods), else
// "unit-hours".
std::string HourUnit(const std::string& resource);
// Resource-seconds of `resource` in HourUnit(resource), rounded half up to 3 decimals
// ("4.8", "0.001").
std::string Hours(const std::string& resource, __int128 milli_ms);

std::string ReportJson(const Report& report);
std::string ReportCsv(const Report& report);
std::string ReportTable(const Report& report);

}  // namespace admission::consumers::billing
