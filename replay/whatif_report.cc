// The what-if report: figures per group on both sides, the largest changes, in text, JSON and
// HTML (docs/whatif.md). Integer arithmetic only, maps in key order: the same bytes each run.

#include "replay/whatif_report.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "projections/budget.h"
#include "schema/time_format.h"

namespace admission::replay {

namespace {

constexpr char kGpu[] = "nvidia.com/gpu";

int64_t Ms(int64_t ns) { return ns / 1'000'000; }

std::string Percent(__int128 part, __int128 whole) {  // one decimal, rounded down
  if (whole <= 0) return "-";
  return projections::ExactDecimal(part * 1000 / whole, 1) + "%";
}

__int128 Clipped(const projections::Interval& in, int64_t from_ms, int64_t to_ms) {
  const int64_t s = std::max(in.start_ms, from_ms), e = std::min(in.end_ms, to_ms);
  return e > s ? static_cast<__int128>(in.milli) * (e - s) : 0;
}

struct Groups {
  std::map<std::pair<std::string, std::string>, SideStats> recorded, simulated;
};

// The figures of one side, per group.
void Fold(const RunOutcome& side, int64_t from_ns, int64_t to_ns,
          std::map<std::pair<std::string, std::string>, SideStats>* out) {
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> waits;
  for (const auto& [key, w] : side.workloads) {
    if (w.submitted_ns < from_ns || w.submitted_ns > to_ns) continue;
    const std::vector<std::pair<std::string, std::string>> groups = {
        {"ClusterQueue", w.cluster_queue.empty() ? "(none)" : w.cluster_queue},
        {"LocalQueue", w.local_queue},
        {"priority class", w.priority_class.empty() ? "(none)" : w.priority_class}};
    for (const auto& g : groups) {
      SideStats& s = (*out)[g];
      ++s.workloads;
      s.preemptions += static_cast<uint64_t>(w.preemptions);
      s.rejections += w.rejected;
      if (w.admitted_ns) {
        ++s.admitted;
        const int64_t wait = Ms(*w.admitted_ns - w.submitted_ns);
        waits[g].push_back(wait);
        s.wait_max_ms = std::max(s.wait_max_ms, wait);
      } else if (!w.rejected && !w.finished_ns) {
        ++s.pending_at_end;
        s.wait_max_ms = std::max(s.wait_max_ms, Ms(side.end_ns - w.submitted_ns));
      }
    }
  }
  for (auto& [g, v] : waits) {
    (*out)[g].wait_p50_ms = NearestRank(v, 50).value_or(0);
    (*out)[g].wait_p90_ms = NearestRank(v, 90).value_or(0);
  }
  const int64_t from_ms = Ms(from_ns), to_ms = Ms(to_ns);
  for (const projections::Interval& in : side.usage) {
    if (in.to.resource != kGpu) continue;
    const __int128 amount = Clipped(in, from_ms, to_ms);
    for (const auto& g : std::vector<std::pair<std::string, std::string>>{
             {"ClusterQueue", in.to.cluster_queue},
             {"LocalQueue", in.to.ns + "/" + in.to.local_queue},
             {"priority class", in.to.priority_class.empty() ? "(none)" : in.to.priority_class}}) {
      SideStats& s = (*out)[g];
      (in.kind == projections::UsageKind::kUsed ? s.gpu_used : s.gpu_idle) += amount;
    }
  }
  for (const projections::QuotaSpan& q : side.quota) {
    if (q.resource != kGpu) continue;
    const int64_t s = std::max(q.start_ms, from_ms), e = std::min(q.end_ms, to_ms);
    if (e > s) (*out)[{"ClusterQueue", q.cluster_queue}].gpu_nominal +=
        static_cast<__int128>(q.nominal_milli) * (e - s);
  }
}

std::string OutcomeText(const WorkloadOutcome* w) {
  if (w == nullptr) return "absent";
  const std::string preempted =
      w->preemptions == 0 ? "" : ", preempted " + std::to_string(w->preemptions) + "x";
  if (w->admitted_ns) return "admitted (" + w->admission + ")" + preempted;
  if (w->rejected) return "rejected";
  return w->finished_ns ? "finished unadmitted" : "pending";
}

int64_t WaitOf(const WorkloadOutcome* w, int64_t end_ns) {
  if (w == nullptr) return 0;
  return Ms((w->admitted_ns ? *w->admitted_ns : end_ns) - w->submitted_ns);
}

}  // namespace

std::string Duration(int64_t ms) {
  if (ms < 0) return "-" + Duration(-ms);
  const int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s >= 60 && s % 3600 / 60 != 0) out += std::to_string(s % 3600 / 60) + "m";
  if (s % 60 != 0 || out.empty()) out += std::to_string(s % 60) + "s";
  return out;
}

WhatIfSummary Summarize(const ForwardResult& result) {
  WhatIfSummary sum;
  sum.from_ns = result.from_ns;
  sum.to_ns = result.to_ns;
  sum.runtime_sources = result.runtime_sources;
  sum.recorded_decisions = result.recorded.decisions;
  sum.simulated_decisions = result.simulated.decisions;
  std::map<std::pair<std::string, std::string>, SideStats> rec, sim;
  Fold(result.recorded, result.from_ns, result.to_ns, &rec);
  Fold(result.simulated, result.from_ns, result.to_ns, &sim);
  for (const auto& [g, s] : rec) sum.groups.push_back({g.first, g.second, s, sim[g]});
  for (const auto& [g, s] : sim) {
    if (rec.count(g) == 0) sum.groups.push_back({g.first, g.second, SideStats{}, s});
  }
  std::stable_sort(sum.groups.begin(), sum.groups.end(), [](const GroupStats& a, const GroupStats& b) {
    return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
  });
  std::vector<ChangedWorkload> changed;
  for (const auto& [key, r] : result.recorded.workloads) {
    if (r.submitted_ns < result.from_ns || r.submitted_ns > result.to_ns) continue;
    auto s_it = result.simulated.workloads.find(key);
    const WorkloadOutcome* s = s_it == result.simulated.workloads.end() ? nullptr : &s_it->second;
    ++sum.workloads;
    if (s != nullptr && r.admitted_ns == s->admitted_ns && r.admission == s->admission &&
        r.preemptions == s->preemptions && r.rejected == s->rejected) {
      ++sum.exact_matches;
      continue;
    }
    changed.push_back({key, r.cluster_queue, WaitOf(&r, result.recorded.end_ns),
                       WaitOf(s, result.simulated.end_ns), OutcomeText(&r), OutcomeText(s)});
  }
  std::stable_sort(changed.begin(), changed.end(), [](const ChangedWorkload& a, const ChangedWorkload& b) {
    const int64_t da = std::abs(a.simulated_wait_ms - a.recorded_wait_ms);
    const int64_t db = std::abs(b.simulated_wait_ms - b.recorded_wait_ms);
    return da != db ? da > db : a.key < b.key;
  });
  if (changed.size() > 20) changed.resize(20);
  sum.changed = std::move(changed);
  return sum;
}

namespace {

nlohmann::ordered_json SideJson(const SideStats& s) {
  return {{"workloads", s.workloads},
          {"admitted", s.admitted},
          {"pendingAtEnd", s.pending_at_end},
          {"waitP50", Duration(s.wait_p50_ms)},
          {"waitP90", Duration(s.wait_p90_ms)},
          {"waitMax", Duration(s.wait_max_ms)},
          {"waitP50Ms", s.wait_p50_ms},
          {"waitP90Ms", s.wait_p90_ms},
          {"waitMaxMs", s.wait_max_ms},
          {"preemptions", s.preemptions},
          {"rejections", s.rejections},
          {"gpuHoursUsed", projections::UnitHours(s.gpu_used)},
          {"gpuHoursIdle", projections::UnitHours(s.gpu_idle)},
          {"gpuQuotaUtilization", Percent(s.gpu_used + s.gpu_idle, s.gpu_nominal)}};
}

std::string RuntimeLine(const WhatIfSummary& sum) {
  std::string out;
  size_t modelled = 0;
  for (const auto& [source, n] : sum.runtime_sources) {
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + RuntimeSourceName(source);
    if (source != RuntimeSource::kRecorded && source != RuntimeSource::kStillRunning) modelled += n;
  }
  return std::to_string(modelled) + " workload(s) needed a modelled runtime" +
         (out.empty() ? "" : " (run times: " + out + ")");
}

}  // namespace

std::string WhatIfJson(const WhatIfSummary& sum, const std::vector<std::string>& changes) {
  nlohmann::ordered_json doc;
  // null: from the ledger's start.
  doc["from"] = sum.from_ns == 0 ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json(FormatRfc3339(sum.from_ns));
  doc["to"] = FormatRfc3339(sum.to_ns);
  doc["changes"] = changes;
  doc["workloads"] = sum.workloads;
  doc["exactMatches"] = sum.exact_matches;
  nlohmann::ordered_json sources = nlohmann::ordered_json::object();
  for (const auto& [source, n] : sum.runtime_sources) sources[RuntimeSourceName(source)] = n;
  doc["runtimeSources"] = sources;
  doc["recordedDecisions"] = sum.recorded_decisions;
  doc["simulatedDecisions"] = sum.simulated_decisions;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const GroupStats& g : sum.groups) {
    groups.push_back({{"kind", g.kind}, {"name", g.name}, {"recorded", SideJson(g.recorded)},
                      {"simulated", SideJson(g.simulated)}});
  }
  doc["groups"] = groups;
  nlohmann::ordered_json changed = nlohmann::ordered_json::array();
  for (const ChangedWorkload& c : sum.changed) {
    changed.push_back({{"workload", c.key}, {"clusterQueue", c.cluster_queue},
                       {"recordedWait", Duration(c.recorded_wait_ms)},
                       {"simulatedWait", Duration(c.simulated_wait_ms)},
                       {"recorded", c.recorded_outcome}, {"simulated", c.simulated_outcome}});
  }
  doc["changed"] = changed;
  return doc.dump(2) + "\n";
}

std::string WhatIfText(const WhatIfSummary& sum, const std::vector<std::string>& changes) {
  std::ostringstream out;
  out << "What-if from " << (sum.from_ns == 0 ? "the ledger's start" : FormatRfc3339(sum.from_ns))
      << " to " << FormatRfc3339(sum.to_ns) << ", changes:";
  for (const std::string& c : changes) out << " " << c;
  if (changes.empty()) out << " none (calibration)";
  out << "\n" << sum.workloads << " workloads; " << sum.exact_matches
      << " with the recorded outcome exactly (admitted at the same instant with the same "
         "flavors, preemptions and rejection)\n"
      << RuntimeLine(sum) << "\n\n";
  out << "group                                  side       admitted  pending  p50      p90      "
         "max      preempt  reject  GPU-h used  GPU-h idle  quota used\n";
  for (const GroupStats& g : sum.groups) {
    for (int side = 0; side < 2; ++side) {
      const SideStats& s = side == 0 ? g.recorded : g.simulated;
      std::string name = side == 0 ? g.kind + " " + g.name : "";
      name.resize(std::max<size_t>(name.size(), 38), ' ');
      char line[256];
      std::snprintf(line, sizeof line, "%s %-10s %-9llu %-8llu %-8s %-8s %-8s %-8llu %-7llu %-11s %-11s %s\n",
                    name.c_str(), side == 0 ? "recorded" : "simulated",
                    static_cast<unsigned long long>(s.admitted),
                    static_cast<unsigned long long>(s.pending_at_end),
                    Duration(s.wait_p50_ms).c_str(), Duration(s.wait_p90_ms).c_str(),
                    Duration(s.wait_max_ms).c_str(), static_cast<unsigned long long>(s.preemptions),
                    static_cast<unsigned long long>(s.rejections),
                    projections::UnitHours(s.gpu_used).c_str(),
                    projections::UnitHours(s.gpu_idle).c_str(),
                    Percent(s.gpu_used + s.gpu_idle, s.gpu_nominal).c_str());
      out << line;
    }
  }
  if (!sum.changed.empty()) {
    out << "\nChanged most (wait recorded -> simulated):\n";
    for (const ChangedWorkload& c : sum.changed) {
      out << "  " << c.key << " in " << (c.cluster_queue.empty() ? "-" : c.cluster_queue) << ": "
          << Duration(c.recorded_wait_ms) << " -> " << Duration(c.simulated_wait_ms) << "; "
          << c.recorded_outcome << " -> " << c.simulated_outcome << "\n";
    }
  }
  return out.str();
}

}  // namespace admission::replay
