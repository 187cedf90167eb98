// The what-if report as one self-contained page: the summary table, the changed workloads, and
// per ClusterQueue two plots drawn as inline SVG (no script, no outside file): the waits as
// cumulative distributions and the GPUs held over time, recorded and simulated.

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>

#include "replay/whatif_report.h"
#include "projections/budget.h"
#include "schema/time_format.h"

namespace admission::replay {

namespace {

constexpr char kGpu[] = "nvidia.com/gpu";
constexpr int kW = 420, kH = 160, kPad = 36;
constexpr const char* kColor[2] = {"#2f6fb3", "#e07b24"};  // recorded, simulated

std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A point's coordinate in whole pixels (integer arithmetic: the same bytes every run).
int64_t Scale(__int128 v, __int128 max, int64_t span) {
  return max <= 0 ? 0 : static_cast<int64_t>(v * span / max);
}

std::string Axes(const std::string& x_label, const std::string& x_max, const std::string& y_max) {
  std::ostringstream o;
  o << "<line x1='" << kPad << "' y1='" << kH - kPad << "' x2='" << kW - 8 << "' y2='"
    << kH - kPad << "' stroke='#888'/><line x1='" << kPad << "' y1='8' x2='" << kPad << "' y2='"
    << kH - kPad << "' stroke='#888'/>"
    << "<text x='" << kW - 8 << "' y='" << kH - 8 << "' text-anchor='end'>" << Esc(x_label) << " "
    << Esc(x_max) << "</text><text x='2' y='16'>" << Esc(y_max) << "</text>";
  return o.str();
}

// Waits of one ClusterQueue's admitted workloads as a cumulative distribution per side.
std::string WaitPlot(const std::string& cq, const ForwardResult& r) {
  std::vector<int64_t> waits[2];
  const RunOutcome* sides[2] = {&r.recorded, &r.simulated};
  int64_t max = 1;
  for (int s = 0; s < 2; ++s) {
    for (const auto& [key, w] : sides[s]->workloads) {
      if (w.cluster_queue != cq || !w.admitted_ns || w.submitted_ns < r.from_ns ||
          w.submitted_ns > r.to_ns) {
        continue;
      }
      waits[s].push_back((*w.admitted_ns - w.submitted_ns) / 1'000'000);
      max = std::max(max, waits[s].back());
    }
    std::sort(waits[s].begin(), waits[s].end());
  }
  std::ostringstream o;
  o << "<svg class='plot wait' data-cq='" << Esc(cq) << "' width='" << kW << "' height='" << kH
    << "'>" << Axes("wait", Duration(max), "100%");
  for (int s = 0; s < 2; ++s) {
    if (waits[s].empty()) continue;
    o << "<polyline fill='none' stroke='" << kColor[s] << "' stroke-width='2' points='";
    const size_t n = waits[s].size();
    int64_t y_prev = kH - kPad;
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = kPad + Scale(waits[s][i], max, kW - 8 - kPad);
      const int64_t y = kH - kPad - Scale(static_cast<__int128>(i + 1), n, kH - kPad - 8);
      o << x << "," << y_prev << " " << x << "," << y << " ";
      y_prev = y;
    }
    o << "'/>";
  }
  o << "</svg>";
  return o.str();
}

// Where the usage plots' time axis starts: --from; from the ledger's start (from_ns 0), the
// first instant a ClusterQueue had quota or held any, not the epoch.
int64_t PlotStartMs(const ForwardResult& r) {
  if (r.from_ns != 0) return r.from_ns / 1'000'000;
  std::optional<int64_t> first;
  for (const RunOutcome* side : {&r.recorded, &r.simulated}) {
    for (const projections::Interval& in : side->usage) {
      first = std::min(first.value_or(in.start_ms), in.start_ms);
    }
    for (const projections::QuotaSpan& q : side->quota) {
      first = std::min(first.value_or(q.start_ms), q.start_ms);
    }
  }
  return first.value_or(0);
}

// GPUs held (reserved: used and idle) by one ClusterQueue over [from, to], per side.
std::string UsagePlot(const std::string& cq, const ForwardResult& r, int64_t from) {
  const int64_t to = std::max(r.to_ns / 1'000'000, from + 1);
  std::map<int64_t, __int128> deltas[2];
  const RunOutcome* sides[2] = {&r.recorded, &r.simulated};
  __int128 max = 1000;
  std::vector<std::vector<std::pair<int64_t, __int128>>> steps(2);
  for (int s = 0; s < 2; ++s) {
    for (const projections::Interval& in : sides[s]->usage) {
      if (in.to.cluster_queue != cq || in.to.resource != kGpu) continue;
      const int64_t a = std::max(in.start_ms, from), b = std::min(in.end_ms, to);
      if (b <= a) continue;
      deltas[s][a] += in.milli;
      deltas[s][b] -= in.milli;
    }
    __int128 level = 0;
    for (const auto& [t, d] : deltas[s]) {
      level += d;
      steps[s].emplace_back(t, level);
      max = std::max(max, level);
    }
  }
  std::ostringstream o;
  o << "<svg class='plot usage' data-cq='" << Esc(cq) << "' width='" << kW << "' height='" << kH
    << "'>" << Axes("time", Duration(to - from), projections::ExactDecimal(max, 3) + " GPUs");
  for (int s = 0; s < 2; ++s) {
    o << "<polyline fill='none' stroke='" << kColor[s] << "' stroke-width='2' points='" << kPad
      << "," << kH - kPad << " ";
    int64_t y_prev = kH - kPad;
    for (const auto& [t, level] : steps[s]) {
      const int64_t x = kPad + Scale(t - from, to - from, kW - 8 - kPad);
      const int64_t y = kH - kPad - Scale(level, max, kH - kPad - 8);
      o << x << "," << y_prev << " " << x << "," << y << " ";
      y_prev = y;
    }
    o << kW - 8 << "," << y_prev << "'/>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

std::string WhatIfHtml(const WhatIfSummary& sum, const ForwardResult& result,
                       const std::vector<std::string>& changes) {
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>What-if report</title><style>"
       "body{font:14px system-ui,sans-serif;margin:24px;color:#1c2430}table{border-collapse:"
       "collapse;margin:8px 0 20px}td,th{padding:3px 8px;border-bottom:1px solid #dde;text-align:"
       "left}th{background:#eef1f6}.sim{color:#e07b24}.rec{color:#2f6fb3}svg.plot{background:"
       "#fafbfd;border:1px solid #dde;margin:4px 12px 4px 0}svg text{font-size:11px;fill:#555}"
       ".cq{display:flex;flex-wrap:wrap;align-items:center}</style></head><body>\n";
  o << "<h1>What-if report</h1><p>From "
    << Esc(sum.from_ns == 0 ? "the ledger's start" : FormatRfc3339(sum.from_ns)) << " to "
    << Esc(FormatRfc3339(sum.to_ns)) << ". Changes: "
    << Esc(changes.empty() ? std::string("none (calibration)") : "") ;
  for (const std::string& c : changes) o << "<code>" << Esc(c) << "</code> ";
  o << "</p><p id='calibration'>" << sum.workloads << " workloads; " << sum.exact_matches
    << " with the recorded outcome exactly. ";
  size_t modelled = 0;
  for (const auto& [source, n] : sum.runtime_sources) {
    if (source != RuntimeSource::kRecorded && source != RuntimeSource::kStillRunning) modelled += n;
  }
  o << modelled << " needed a modelled runtime.</p>\n<p><span class='rec'>&#9632; recorded</span> "
       "<span class='sim'>&#9632; simulated</span></p>\n";
  o << "<table id='groups'><tr><th>group</th><th>side</th><th>admitted</th><th>pending</th>"
       "<th>wait p50</th><th>p90</th><th>max</th><th>preemptions</th><th>rejections</th>"
       "<th>GPU-hours used</th><th>idle</th></tr>\n";
  for (const GroupStats& g : sum.groups) {
    for (int s = 0; s < 2; ++s) {
      const SideStats& st = s == 0 ? g.recorded : g.simulated;
      o << "<tr class='" << (s == 0 ? "rec" : "sim") << "'><td>"
        << (s == 0 ? Esc(g.kind + " " + g.name) : "") << "</td><td>"
        << (s == 0 ? "recorded" : "simulated") << "</td><td>" << st.admitted << "</td><td>"
        << st.pending_at_end << "</td><td>" << Duration(st.wait_p50_ms) << "</td><td>"
        << Duration(st.wait_p90_ms) << "</td><td>" << Duration(st.wait_max_ms) << "</td><td>"
        << st.preemptions << "</td><td>" << st.rejections << "</td><td>"
        << projections::UnitHours(st.gpu_used) << "</td><td>"
        << projections::UnitHours(st.gpu_idle) << "</td></tr>\n";
    }
  }
  o << "</table>\n<h2>Per ClusterQueue: waits (cumulative) and GPUs held over time</h2>\n";
  const int64_t plot_start_ms = PlotStartMs(result);
  for (const GroupStats& g : sum.groups) {
    if (g.kind != "ClusterQueue" || g.name == "(none)") continue;
    o << "<div class='cq'><b>" << Esc(g.name) << "</b>" << WaitPlot(g.name, result)
      << UsagePlot(g.name, result, plot_start_ms) << "</div>\n";
  }
  if (!sum.changed.empty()) {
    o << "<h2>Changed most</h2><table id='changed'><tr><th>workload</th><th>ClusterQueue</th>"
         "<th>recorded wait</th><th>simulated wait</th><th>recorded</th><th>simulated</th></tr>\n";
    for (const ChangedWorkload& c : sum.changed) {
      o << "<tr><td>" << Esc(c.key) << "</td><td>" << Esc(c.cluster_queue) << "</td><td>"
        << Duration(c.recorded_wait_ms) << "</td><td>" << Duration(c.simulated_wait_ms)
        << "</td><td>" << Esc(c.recorded_outcome) << "</td><td>" << Esc(c.simulated_outcome)
        << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace admission::replay
