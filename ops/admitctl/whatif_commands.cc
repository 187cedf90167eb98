// admitctl whatif: the recorded world run forward through the decider under a change of
// definitions (docs/whatif.md); replay/forward.h is the engine, replay/whatif_report.h the report.

#include <fstream>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "ops/admitctl/common.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include <capnp/message.h>

#include "replay/estimate.h"
#include "schema/event_codec.h"
#include "replay/forward.h"
#include "replay/whatif_report.h"
#include "schema/quantity.h"
#include "schema/time_format.h"

namespace admission::ops {

namespace {

struct WhatIfArgs {
  std::shared_ptr<ConfigArgs> config;  // `whatif ... configure FLAGS`: a changed configuration
  std::vector<std::string> changes;
  std::string from, to, drain = "720h", format = "text", out;
};

// The change files' definitions, as `apply -f` reads them; each named "Kind/name" for the report.
Status ReadChanges(const std::vector<std::string>& files, std::vector<std::string>* events,
                   std::vector<std::string>* names) {
  for (const std::string& file : files) {
    auto text = ReadAll(file);
    if (!text.ok()) return text.status();
    auto parsed = ParseApplyYaml(*text);
    if (!parsed.ok()) return Status(parsed.status().code(), file + ": " + parsed.status().message());
    for (const ParsedObject& o : *parsed) {
      events->push_back(o.event);
      names->push_back(o.kind + "/" + (o.ns.empty() ? "" : o.ns + "/") + o.name);
    }
  }
  return Status::Ok();
}

Result<int64_t> TimeFlag(const std::string& name, const std::string& text) {
  if (text.empty()) return int64_t{0};
  auto ns = ParseRfc3339(text);
  if (!ns.ok()) {
    return Status(Code::kInvalidArgument, "--" + name + " '" + text + "': " + ns.status().message());
  }
  return *ns;
}

int RunWhatIf(const GlobalOptions& global, const WhatIfArgs& args) {
  replay::ForwardOptions options;
  std::vector<std::string> names;
  if (Status read = ReadChanges(args.changes, &options.changes, &names); !read.ok()) {
    return Fail(read);
  }
  if (args.config) {
    capnp::MallocMessageBuilder m;
    if (Status filled = FillEngineConfig(*args.config, m.initRoot<schema::Event>()); !filled.ok()) {
      return Fail(filled);
    }
    options.changes.push_back(schema::EncodeEvent(m));
    names.push_back("EngineConfiguration");
  }
  auto from = TimeFlag("from", args.from);
  auto to = TimeFlag("to", args.to);
  auto drain = schema::ParseDurationNs(args.drain);
  if (!from.ok()) return Fail(from.status());
  if (!to.ok()) return Fail(to.status());
  if (!drain.ok()) {
    return Fail(Status(Code::kInvalidArgument, "--drain '" + args.drain + "': " + drain.status().message()));
  }
  if (*to != 0 && *from >= *to) return Fail(Status(Code::kInvalidArgument, "--from must be before --to"));
  options.from_ns = *from;
  options.to_ns = *to;
  options.drain_ns = *drain;
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  std::cerr << "whatif: reading the record and simulating forward\n";
  auto result = replay::Forward(**log, options);
  if (!result.ok()) return Fail(result.status());
  const replay::WhatIfSummary summary = replay::Summarize(*result);
  const std::string text = args.format == "json"   ? replay::WhatIfJson(summary, names)
                           : args.format == "html" ? replay::WhatIfHtml(summary, *result, names)
                                                   : replay::WhatIfText(summary, names);
  if (args.out.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(args.out, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Fail(Status(Code::kIoError, "cannot write " + args.out));
  std::cerr << "whatif: wrote " << args.out << "\n";
  return 0;
}

struct EstimateArgs {
  std::string workload, at, from, to, format = "text";
  bool backtest = false;
  size_t samples = 100;
};

std::string When(const std::optional<int64_t>& ns, int64_t from_ns) {
  if (!ns) return "not within the horizon";
  return FormatRfc3339Seconds(*ns) + " (in " + replay::Duration((*ns - from_ns) / 1'000'000) + ")";
}

int RunEstimate(const GlobalOptions& global, const EstimateArgs& args) {
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  replay::EstimateOptions options;
  auto at = TimeFlag("at", args.at);
  if (!at.ok()) return Fail(at.status());
  options.at_ns = *at;
  auto est = replay::EstimateAdmission(**log, args.workload, options);
  if (!est.ok()) return Fail(est.status());
  if (args.format == "json") {
    nlohmann::ordered_json j{{"workload", est->key}, {"state", est->state},
                             {"from", FormatRfc3339(est->at_ns)}};
    auto put = [&](const char* name, const std::optional<int64_t>& v) {
      j[name] = v ? nlohmann::ordered_json(FormatRfc3339(*v)) : nlohmann::ordered_json(nullptr);
    };
    put("median", est->median_ns);
    put("earliest", est->low_ns);
    put("latest", est->high_ns);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (est->state != "pending") {
    std::cout << est->key << " is not pending (" << est->state << ")\n";
    return 0;
  }
  std::cout << est->key << ": admission expected " << When(est->median_ns, est->at_ns)
            << "\n  range: " << When(est->low_ns, est->at_ns) << " to "
            << When(est->high_ns, est->at_ns)
            << "\n  (a forward simulation from " << FormatRfc3339Seconds(est->at_ns)
            << ": running and queued workloads run for their expected runtime, else the 10th, "
               "50th and 90th percentile of their class's recorded runs; nothing new arrives)\n";
  return 0;
}

int RunBacktest(const GlobalOptions& global, const EstimateArgs& args) {
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  replay::BacktestOptions options;
  auto from = TimeFlag("from", args.from);
  auto to = TimeFlag("to", args.to);
  if (!from.ok()) return Fail(from.status());
  if (!to.ok()) return Fail(to.status());
  options.from_ns = *from;
  options.to_ns = *to;
  options.samples_max = args.samples;
  std::cerr << "estimate: backtesting up to " << args.samples << " estimates\n";
  auto report = replay::Backtest(**log, options);
  if (!report.ok()) return Fail(report.status());
  if (args.format == "json") {
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const auto& g : report->groups) {
      groups.push_back({{"clusterQueue", g.cluster_queue}, {"samples", g.samples},
                        {"withinRange", g.within_range}, {"noEstimate", g.no_estimate},
                        {"medianAbsoluteErrorMs", g.median_abs_error_ms}});
    }
    std::cout << nlohmann::ordered_json{{"candidates", report->candidates},
                                        {"neverAdmitted", report->never_admitted},
                                        {"groups", groups}}.dump(2) << "\n";
    return 0;
  }
  std::cout << report->candidates << " workloads waited; " << report->never_admitted
            << " never admitted (not compared)\n";
  std::cout << "ClusterQueue                      samples  median |error|  within range  no estimate\n";
  for (const auto& g : report->groups) {
    char line[200];
    std::snprintf(line, sizeof line, "%-33s %-8llu %-15s %-13s %llu\n", g.cluster_queue.c_str(),
                  static_cast<unsigned long long>(g.samples),
                  replay::Duration(g.median_abs_error_ms).c_str(),
                  (g.samples == 0 ? std::string("-")
                                  : std::to_string(g.within_range * 100 / g.samples) + "%").c_str(),
                  static_cast<unsigned long long>(g.no_estimate));
    std::cout << line;
  }
  return 0;
}

}  // namespace

void AddWhatIfCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto args = std::make_shared<WhatIfArgs>();
  auto* whatif = app.add_subcommand(
      "whatif",
      "run the recorded workloads forward through the decider under changed definitions "
      "(quotas, borrowing and lending limits, preemption, fair-sharing weights, priorities, "
      "flavors, budgets) and compare with what happened: admissions, waits, preemptions, "
      "rejections, GPU-hours per ClusterQueue, LocalQueue and priority class. No change: "
      "calibration (how much of the record the simulation reproduces)");
  whatif->add_option("--change", args->changes,
                     "a YAML file of definitions as `apply -f` reads them (repeatable)")
      ->check(CLI::ExistingFile);
  whatif->add_option("--from", args->from, "start from the state at this time, RFC 3339 (default: the ledger's start)");
  whatif->add_option("--to", args->to, "recorded arrivals up to this time (default: the ledger's last event)");
  whatif->add_option("--drain", args->drain,
                     "how long past --to the simulation may run for the queued workloads (default 720h)");
  whatif->add_option("-o,--output", args->format, "text (default), json or html")
      ->check(CLI::IsMember({"text", "json", "html"}));
  whatif->add_option("--out", args->out, "write the report to this file instead of stdout");
  auto config = std::make_shared<ConfigArgs>();
  auto* configure = whatif->add_subcommand(
      "configure",
      "simulate under this engine configuration instead of the recorded one (the flags of "
      "`admitctl configure`, after the whatif options: whatif --change F configure --fair-sharing)");
  AddConfigOptions(configure, *config);
  whatif->callback([&global, args, config, configure, exit_code]() {
    if (configure->parsed()) args->config = config;
    *exit_code = RunWhatIf(global, *args);
  });

  auto est = std::make_shared<EstimateArgs>();
  auto* estimate = app.add_subcommand(
      "estimate",
      "when a pending workload will be admitted: a forward simulation from the ledger's head "
      "(or --at) with the others' run times from their class's recorded runs, as a median and a "
      "range; --backtest asks it at each moment sampled workloads were submitted and compares "
      "with when they were admitted in fact");
  estimate->add_option("workload", est->workload, "NAMESPACE/NAME");
  estimate->add_option("--at", est->at, "estimate from the state at this time, RFC 3339 (default: the head)");
  estimate->add_flag("--backtest", est->backtest, "backtest the estimates over the ledger's history");
  estimate->add_option("--from", est->from, "backtest: submissions from this time");
  estimate->add_option("--to", est->to, "backtest: submissions up to this time");
  estimate->add_option("--samples", est->samples, "backtest: at most this many estimates (default 100)")
      ->check(CLI::Range(1, 100000));
  estimate->add_option("-o,--output", est->format, "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  estimate->callback([&global, est, exit_code]() {
    if (est->backtest == !est->workload.empty()) {
      std::cerr << "admitctl estimate: name a workload NAMESPACE/NAME, or --backtest\n";
      *exit_code = 2;
      return;
    }
    *exit_code = est->backtest ? RunBacktest(global, *est) : RunEstimate(global, *est);
  });
}

}  // namespace admission::ops
