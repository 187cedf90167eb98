#pragma once
// Billing reports from the usage fold: resource-seconds used and idle per group and bucket over
// a period of ledger time, exact (milli-units x milliseconds, summed in 128 bits). The same
// ledger range gives the same bytes. See docs/billing.md.

#include <cstdint>
#include <string>
#include <vector>

#include "consumers/billing/usage.h"

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
};

struct ReportRow {
  std::vector<std::string> keys;  // in the order of ReportOptions::by
  int64_t bucket_start_ms = 0;    // with a bucket
  std::string resource;
  __int128 used = 0;  // milli-units x milliseconds
  __int128 idle = 0;
};

struct Report {
  ReportOptions options;
  uint64_t first_sequence = 0;
  uint64_t last_sequence = 0;
  int64_t ledger_end_ms = 0;  // open holds count until here (or `to`, whichever is first)
  std::vector<ReportRow> rows;  // sorted by keys, bucket, resource
};

// REQUIRES: options.from_ms < options.to_ms.
Report BuildReport(const UsageFold& fold, const ReportOptions& options);

// Resource-seconds as an exact decimal string ("12.5", "0.000001").
std::string ResourceSeconds(__int128 milli_ms);

std::string ReportJson(const Report& report);
std::string ReportCsv(const Report& report);
std::string ReportTable(const Report& report);

}  // namespace admission::consumers::billing
