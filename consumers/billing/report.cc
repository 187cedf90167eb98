#include "consumers/billing/report.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "schema/time_format.h"

namespace admission::consumers::billing {

namespace {

const std::string& KeyOf(const Attribution& to, GroupKey key) {
  switch (key) {
    case GroupKey::kNamespace: return to.ns;
    case GroupKey::kLocalQueue: return to.local_queue;
    case GroupKey::kClusterQueue: return to.cluster_queue;
    case GroupKey::kCohort: return to.cohort;
    case GroupKey::kFlavor: return to.flavor;
    case GroupKey::kPriorityClass: return to.priority_class;
  }
  return to.ns;
}

std::string Rfc3339Ms(int64_t ms) { return FormatRfc3339(ms * 1'000'000); }

}  // namespace

Result<GroupKey> ParseGroupKey(const std::string& text) {
  if (text == "namespace") return GroupKey::kNamespace;
  if (text == "localqueue") return GroupKey::kLocalQueue;
  if (text == "clusterqueue") return GroupKey::kClusterQueue;
  if (text == "cohort") return GroupKey::kCohort;
  if (text == "flavor") return GroupKey::kFlavor;
  if (text == "priority") return GroupKey::kPriorityClass;
  return Status(Code::kInvalidArgument,
                "--by " + text + ": expected namespace, localqueue, clusterqueue, cohort, "
                "flavor or priority");
}

const char* JsonName(GroupKey key) {
  switch (key) {
    case GroupKey::kNamespace: return "namespace";
    case GroupKey::kLocalQueue: return "localQueue";
    case GroupKey::kClusterQueue: return "clusterQueue";
    case GroupKey::kCohort: return "cohort";
    case GroupKey::kFlavor: return "flavor";
    case GroupKey::kPriorityClass: return "priorityClass";
  }
  return "?";
}

// milli-units x milliseconds = 1e-6 resource-seconds.
std::string ResourceSeconds(__int128 milli_ms) { return ExactDecimal(milli_ms, 6); }

namespace {
bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool InGiB(const std::string& resource) {
  return EndsWith(resource, "memory") || EndsWith(resource, "storage");
}
}  // namespace

std::string HourUnit(const std::string& resource) {
  if (resource == "cpu") return "core-hours";
  if (resource == "pods") return "pod-hours";
  if (resource == "gpu" || EndsWith(resource, "/gpu")) return "GPU-hours";
  if (InGiB(resource)) return "GiB-hours";
  return "unit-hours";
}

std::string Hours(const std::string& resource, __int128 milli_ms) {
  // milli-units x milliseconds in one unit-hour (of GiB: 2^30 bytes).
  __int128 per_hour = static_cast<__int128>(1000) * 3'600'000;
  if (InGiB(resource)) per_hour <<= 30;
  const bool negative = milli_ms < 0;
  const __int128 v = negative ? -milli_ms : milli_ms;
  const __int128 thousandths = (v * 1000 + per_hour / 2) / per_hour;
  return ExactDecimal(negative ? -thousandths : thousandths, 3);
}

Report BuildReport(const UsageFold& fold, const ReportOptions& options) {
  ADM_CHECK(options.from_ms < options.to_ms, "report period [%lld, %lld)",
            static_cast<long long>(options.from_ms), static_cast<long long>(options.to_ms));
  Report report;
  report.options = options;
  report.first_sequence = fold.last_sequence() > 0 ? 1 : 0;
  report.last_sequence = fold.last_sequence();
  report.ledger_end_ms = fold.last_time_ms();
  using RowKey = std::tuple<std::vector<std::string>, int64_t, std::string>;
  std::map<RowKey, ReportRow> rows;
  std::set<std::pair<std::string, std::string>> unpriced;
  auto add = [&](const Interval& in) {
    int64_t start = std::max(in.start_ms, options.from_ms);
    const int64_t end = std::min(in.end_ms, options.to_ms);
    std::vector<std::string> keys;
    for (GroupKey k : options.by) keys.push_back(KeyOf(in.to, k));
    while (start < end) {
      int64_t bucket = 0;
      int64_t piece_end = end;
      if (options.bucket_ms > 0) {
        bucket = start - start % options.bucket_ms;  // ledger times are after 1970
        piece_end = std::min(end, bucket + options.bucket_ms);
      }
      ReportRow& row = rows[RowKey{keys, bucket, in.to.resource}];
      row.keys = keys;
      row.bucket_start_ms = bucket;
      row.resource = in.to.resource;
      const __int128 amount = static_cast<__int128>(in.milli) * (piece_end - start);
      (in.kind == UsageKind::kUsed ? row.used : row.idle) += amount;
      if (!options.price_micro_per_hour.empty()) {
        auto price = options.price_micro_per_hour.find({in.to.flavor, in.to.resource});
        if (price != options.price_micro_per_hour.end()) {
          row.cost += amount * price->second;
        } else {
          unpriced.insert({in.to.flavor, in.to.resource});
          row.unpriced = true;
        }
      }
      start = piece_end;
    }
  };
  // Nominal quota per ClusterQueue, flavor, resource and bucket, and what was reserved of it.
  using QuotaKey = std::tuple<std::string, std::string, std::string, int64_t>;
  std::map<QuotaKey, QuotaRow> quota;
  const int64_t until = std::min(fold.last_time_ms(), options.to_ms);
  auto spread = [&](const std::string& cq, const std::string& flavor, const std::string& resource,
                    int64_t milli, int64_t from, int64_t to, bool nominal) {
    int64_t start = std::max(from, options.from_ms);
    const int64_t end = std::min(to, options.to_ms);
    while (start < end) {
      const int64_t bucket = options.bucket_ms > 0 ? start - start % options.bucket_ms : 0;
      const int64_t piece_end = options.bucket_ms > 0 ? std::min(end, bucket + options.bucket_ms) : end;
      QuotaRow& row = quota[QuotaKey{cq, flavor, resource, bucket}];
      row.cluster_queue = cq;
      row.flavor = flavor;
      row.resource = resource;
      row.bucket_start_ms = bucket;
      (nominal ? row.nominal : row.reserved) += static_cast<__int128>(milli) * (piece_end - start);
      start = piece_end;
    }
  };
  for (const QuotaSpan& q : fold.QuotaUntil(until)) {
    spread(q.cluster_queue, q.flavor, q.resource, q.nominal_milli, q.start_ms, q.end_ms, true);
  }
  auto add_both = [&](const Interval& in) {
    add(in);
    spread(in.to.cluster_queue, in.to.flavor, in.to.resource, in.milli, in.start_ms, in.end_ms,
           false);
  };
  for (const Interval& in : fold.closed()) add_both(in);
  if (!options.closed_only) {
    for (const Interval& in : fold.OpenUntil(until)) add_both(in);
  }
  for (auto& [key, row] : quota) report.quota.push_back(std::move(row));
  for (auto& [key, row] : rows) report.rows.push_back(std::move(row));
  report.unpriced.assign(unpriced.begin(), unpriced.end());
  return report;
}

__int128 CostMicro(const ReportRow& row) {
  // milli-units x ms x micro-units per unit-hour / (1000 milli x 3,600,000 ms per hour).
  return row.cost / (static_cast<__int128>(1000) * 3'600'000);
}

namespace {
// Micro-units as a decimal of the currency ("2.5", "0.000001").
std::string Money(__int128 micro) { return ResourceSeconds(micro); }
}  // namespace

std::vector<BudgetRow> BudgetRows(const UsageFold& fold, const std::vector<BudgetNow>& budgets,
                                  const ReportOptions& options, int64_t ledger_end_ms) {
  std::vector<Interval> held(fold.closed().begin(), fold.closed().end());
  for (Interval& open : fold.OpenUntil(ledger_end_ms)) held.push_back(std::move(open));
  const int64_t end = std::min(options.to_ms, ledger_end_ms + 1);
  std::vector<BudgetRow> out;
  for (const BudgetNow& b : budgets) {
    const projections::BudgetPolicySpec& p = b.policy;
    std::vector<projections::BudgetWindow> periods;
    if (p.period == projections::BudgetPeriod::kRolling) {
      periods.push_back(projections::WindowAt(p, ledger_end_ms));
    } else {
      // From the period of the first usage in scope (not from 1970 for a whole-ledger report).
      int64_t first = ledger_end_ms;
      for (const Interval& in : held) {
        if (in.start_ms < first && projections::InScope(p, projections::UsageKeyOf(in.to))) {
          first = in.start_ms;
        }
      }
      for (auto w = projections::WindowAt(p, std::max(options.from_ms, first));
           w.start_ms < end && w.end_ms > w.start_ms; w = projections::WindowAt(p, w.end_ms)) {
        periods.push_back(w);
      }
    }
    for (const projections::BudgetStanding& now : b.standings) {
      for (const projections::BudgetWindow& w : periods) {
        BudgetRow row;
        row.policy = p.name;
        row.scope = projections::ScopeText(p);
        row.resource = now.resource;
        row.period = w.label;
        row.start_ms = w.start_ms;
        row.end_ms = w.end_ms;
        row.limit = now.limit;
        const int64_t from = std::max(w.start_ms, options.from_ms);
        const int64_t to = w.end_ms == 0 ? end : std::min(w.end_ms, end);
        for (const Interval& in : held) {
          if (in.to.resource != now.resource ||
              !projections::InScope(p, projections::UsageKeyOf(in.to))) {
            continue;
          }
          const int64_t s = std::max(in.start_ms, from), e = std::min(in.end_ms, to);
          if (e > s) row.used += static_cast<__int128>(in.milli) * (e - s);
        }
        row.current = w.start_ms == now.window.start_ms;
        if (row.current) {
          row.budget_used = now.used;
          row.committed = now.committed;
        }
        out.push_back(std::move(row));
      }
    }
  }
  return out;
}

std::string ReportJson(const Report& report) {
  nlohmann::ordered_json out;
  out["from"] = Rfc3339Ms(report.options.from_ms);
  out["to"] = Rfc3339Ms(report.options.to_ms);
  out["sequences"] = {report.first_sequence, report.last_sequence};
  out["ledgerEnd"] = Rfc3339Ms(report.ledger_end_ms);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ReportRow& r : report.rows) {
    nlohmann::ordered_json row;
    for (size_t i = 0; i < report.options.by.size(); ++i) {
      row[JsonName(report.options.by[i])] = r.keys[i];
    }
    if (report.options.bucket_ms > 0) row["bucket"] = Rfc3339Ms(r.bucket_start_ms);
    row["resource"] = r.resource;
    row["used"] = ResourceSeconds(r.used);
    row["idle"] = ResourceSeconds(r.idle);
    if (!report.options.price_micro_per_hour.empty()) row["cost"] = Money(CostMicro(r));
    rows.push_back(row);
  }
  out["rows"] = rows;
  nlohmann::ordered_json quota = nlohmann::ordered_json::array();
  for (const QuotaRow& q : report.quota) {
    nlohmann::ordered_json row;
    row["clusterQueue"] = q.cluster_queue;
    row["flavor"] = q.flavor;
    if (report.options.bucket_ms > 0) row["bucket"] = Rfc3339Ms(q.bucket_start_ms);
    row["resource"] = q.resource;
    row["nominal"] = ResourceSeconds(q.nominal);
    row["reserved"] = ResourceSeconds(q.reserved);
    row["unused"] = ResourceSeconds(q.unused());
    quota.push_back(row);
  }
  out["quota"] = quota;
  nlohmann::ordered_json budgets = nlohmann::ordered_json::array();
  for (const BudgetRow& b : report.budgets) {
    nlohmann::ordered_json row;
    row["policy"] = b.policy;
    row["scope"] = b.scope;
    row["resource"] = b.resource;
    row["period"] = b.period;
    row["start"] = Rfc3339Ms(b.start_ms);
    if (b.end_ms != 0) row["end"] = Rfc3339Ms(b.end_ms);
    row["limit"] = ResourceSeconds(b.limit);
    row["used"] = ResourceSeconds(b.used);
    if (b.current) {
      row["budgetUsed"] = ResourceSeconds(b.budget_used);
      row["committed"] = ResourceSeconds(b.committed);
      row["remaining"] = ResourceSeconds(b.remaining());
    }
    budgets.push_back(row);
  }
  if (!report.budgets.empty()) out["budgets"] = budgets;
  if (!report.options.price_micro_per_hour.empty()) {
    out["currency"] = report.options.currency;
    nlohmann::ordered_json unpriced = nlohmann::ordered_json::array();
    for (const auto& [flavor, resource] : report.unpriced) {
      unpriced.push_back({{"flavor", flavor}, {"resource", resource}});
    }
    out["unpriced"] = unpriced;
  }
  return out.dump() + "\n";
}

namespace {
// The amounts of the table and the CSV: unit-hours, or exact resource-seconds on request.
std::string UnitOf(const Report& report, const std::string& resource) {
  return report.options.exact_seconds ? "resource-seconds" : HourUnit(resource);
}
std::string Amount(const Report& report, const std::string& resource, __int128 milli_ms) {
  return report.options.exact_seconds ? ResourceSeconds(milli_ms) : Hours(resource, milli_ms);
}
// A row's cost cell: "unpriced" when none of it had a price, "+unpriced" appended when part.
std::string CostCell(const ReportRow& r) {
  if (r.unpriced && r.cost == 0) return "unpriced";
  return Money(CostMicro(r)) + (r.unpriced ? " +unpriced" : "");
}
}  // namespace

std::string ReportCsv(const Report& report) {
  std::ostringstream out;
  for (GroupKey k : report.options.by) out << JsonName(k) << ",";
  if (report.options.bucket_ms > 0) out << "bucket,";
  const bool priced = !report.options.price_micro_per_hour.empty();
  out << "resource,unit,used,idle" << (priced ? ",cost" : "") << "\n";
  auto field = [](const std::string& v) {
    if (v.find_first_of(",\"\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const ReportRow& r : report.rows) {
    for (const std::string& k : r.keys) out << field(k) << ",";
    if (report.options.bucket_ms > 0) out << Rfc3339Ms(r.bucket_start_ms) << ",";
    out << field(r.resource) << "," << UnitOf(report, r.resource) << ","
        << Amount(report, r.resource, r.used) << "," << Amount(report, r.resource, r.idle);
    if (priced) out << "," << CostCell(r);
    out << "\n";
  }
  return out.str();
}

std::string ReportTable(const Report& report) {
  std::vector<std::string> header;
  for (GroupKey k : report.options.by) header.push_back(JsonName(k));
  if (report.options.bucket_ms > 0) header.push_back("bucket");
  header.push_back("resource");
  header.push_back("unit");
  header.push_back("used");
  header.push_back("idle");
  const bool priced = !report.options.price_micro_per_hour.empty();
  if (priced) header.push_back("cost (" + report.options.currency + ")");
  __int128 total_cost = 0;
  std::vector<std::vector<std::string>> lines;
  std::map<std::string, std::pair<__int128, __int128>> totals;  // per resource
  for (const ReportRow& r : report.rows) {
    std::vector<std::string> line = r.keys;
    for (std::string& v : line) {
      if (v.empty()) v = "-";
    }
    if (report.options.bucket_ms > 0) line.push_back(Rfc3339Ms(r.bucket_start_ms));
    line.push_back(r.resource);
    line.push_back(UnitOf(report, r.resource));
    line.push_back(Amount(report, r.resource, r.used));
    line.push_back(Amount(report, r.resource, r.idle));
    if (priced) {
      line.push_back(CostCell(r));
      total_cost += CostMicro(r);
    }
    lines.push_back(std::move(line));
    totals[r.resource].first += r.used;
    totals[r.resource].second += r.idle;
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& line : lines) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  std::ostringstream out;
  out << "Usage from "
      << (report.options.from_ms == 0 ? "the ledger's start" : Rfc3339Ms(report.options.from_ms))
      << " to "
      << Rfc3339Ms(report.options.to_ms) << " (ledger sequences " << report.first_sequence
      << "-" << report.last_sequence << ", ledger time up to "
      << Rfc3339Ms(report.ledger_end_ms) << ")\n";
  auto print = [&](const std::vector<std::string>& line) {
    for (size_t i = 0; i < line.size(); ++i) {
      out << (i == 0 ? "" : "  ") << line[i] << std::string(width[i] - line[i].size(), ' ');
    }
    out << "\n";
  };
  print(header);
  for (const auto& line : lines) print(line);
  out << "Totals\n";
  for (const auto& [resource, t] : totals) {
    const std::string unit = " " + UnitOf(report, resource);
    out << "  " << resource << ": used " << Amount(report, resource, t.first) << unit
        << ", idle " << Amount(report, resource, t.second) << unit << "\n";
  }
  if (totals.empty()) out << "  (no usage in this period)\n";
  if (!report.quota.empty()) {
    out << "Nominal quota (" << (report.options.exact_seconds ? "resource-seconds" : "unit-hours")
        << "): ClusterQueue flavor resource"
        << (report.options.bucket_ms > 0 ? " bucket" : "") << ": nominal, reserved, unused\n";
    for (const QuotaRow& q : report.quota) {
      out << "  " << q.cluster_queue << " " << q.flavor << " " << q.resource;
      if (report.options.bucket_ms > 0) out << " " << Rfc3339Ms(q.bucket_start_ms);
      out << ": " << Amount(report, q.resource, q.nominal) << ", "
          << Amount(report, q.resource, q.reserved) << ", " << Amount(report, q.resource, q.unused())
          << " " << UnitOf(report, q.resource) << "\n";
    }
  }
  if (!report.budgets.empty()) {
    out << "Budgets (" << (report.options.exact_seconds ? "resource-seconds" : "unit-hours")
        << "): policy (scope) resource period: limit, used; in the current period also "
           "committed and remaining\n";
    for (const BudgetRow& b : report.budgets) {
      out << "  " << b.policy << " (" << b.scope << ") " << b.resource << " " << b.period << ": "
          << Amount(report, b.resource, b.limit) << ", " << Amount(report, b.resource, b.used)
          << " used";
      if (b.current) {
        if (b.budget_used != b.used) {
          out << " (" << Amount(report, b.resource, b.budget_used) << " as the budget counts it)";
        }
        out << ", " << Amount(report, b.resource, b.committed) << " committed, "
            << Amount(report, b.resource, b.remaining()) << " remaining";
      }
      out << " " << UnitOf(report, b.resource) << "\n";
    }
  }
  if (priced) {
    out << "  cost: " << Money(total_cost) << " " << report.options.currency
        << " (what was held, used and idle, at the price book's hourly prices)\n";
    for (const auto& [flavor, resource] : report.unpriced) {
      out << "  not priced: " << resource << " on " << flavor << "\n";
    }
  }
  return out.str();
}

}  // namespace admission::consumers::billing
