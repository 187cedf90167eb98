// admitctl replay --verify and admitctl explain: the audit side of the ledger.

#include "ops/cli/replay_commands.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "ops/render.h"
#include "projections/engine_version.h"
#include "replay/explain.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"

namespace admission::ops {

namespace {

// A Cap'n Proto JSON rendering as a JSON value (kept as a string if it does not parse).
Json Embedded(const std::string& json) {
  if (json.empty()) return nullptr;
  Json parsed = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? Json(json) : parsed;
}

std::string Rate(double events_per_second) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", events_per_second);
  return buf;
}

struct ReplayArgs {
  bool verify = false;
  uint64_t from = 1;
  uint64_t to = 0;
  std::string format = "text";
};

int RunReplay(const GlobalOptions& global, const ReplayArgs& args) {
  auto log = OpenLedger(global, false);
  if (!log.ok()) return Fail(log.status());
  const uint64_t head = (*log)->GetHead().sequence;
  if (head == 0) return Fail(Status(Code::kInvalidArgument, "the ledger is empty"));
  replay::Replayer replayer(**log, replay::Genesis());
  replay::ReplayOptions options;
  options.verify = args.verify;
  options.compare_from = args.from;
  options.to = args.to;
  Progress progress(args.verify ? "replay --verify" : "replay");
  options.progress = [&](uint64_t done, uint64_t total) { progress.Update(done, total); };
  auto report = replayer.Run(options);
  if (!report.ok()) return Fail(report.status());
  const replay::ReplayReport& r = *report;
  const uint64_t compared_from = std::max<uint64_t>(args.from, 1);
  const std::string hash = schema::HashHex(r.decision_stream_hash);
  if (args.format == "json") {
    Json out;
    out["ok"] = !r.divergence.has_value();
    out["verify"] = args.verify;
    out["engineVersion"] = projections::kEngineVersion;
    out["first"] = r.first;
    out["last"] = r.last;
    out["events"] = r.events;
    out["inputs"] = r.inputs;
    out["seconds"] = r.seconds;
    out["eventsPerSecond"] = static_cast<uint64_t>(r.events_per_second);
    if (args.verify) {
      out["compareFrom"] = compared_from;
      out["decisionsCompared"] = r.decisions_compared;
      out["decisionStreamSha256"] = hash;
    }
    if (r.divergence) {
      const replay::Divergence& d = *r.divergence;
      out["divergence"] = {{"sequence", d.sequence},
                           {"firstDifferingField", d.first_differing_field},
                           {"recordedType", d.recorded_type},
                           {"replayedType", d.replayed_type},
                           {"recorded", Embedded(d.recorded_json)},
                           {"replayed", Embedded(d.replayed_json)}};
    }
    std::cout << out.dump(2) << "\n";
    return r.divergence ? 1 : 0;
  }
  std::cout << "replayed " << r.events << " events (sequences " << r.first << ".." << r.last << ", "
            << r.inputs << " inputs) in " << r.seconds << " s: " << Rate(r.events_per_second)
            << " events/s\n";
  if (!args.verify) {
    std::cout << "decisions not compared (add --verify)\n";
    return 0;
  }
  std::cout << "decisions compared: " << r.decisions_compared << " (sequences " << compared_from
            << ".." << r.last << ")\n"
            << "decision-stream sha256: " << hash << (r.divergence ? " (up to the divergence)" : "")
            << "\n";
  if (!r.divergence) {
    std::cout << "OK: every recorded decision was reproduced byte for byte by engine v"
              << projections::kEngineVersion << "\n";
    return 0;
  }
  const replay::Divergence& d = *r.divergence;
  std::cout << "MISMATCH at sequence " << d.sequence << "\n"
            << "first differing field: " << d.first_differing_field << "\n"
            << "--- recorded (the ledger, sequence " << d.sequence << ")"
            << (d.recorded_type.empty() ? "" : ": " + d.recorded_type) << "\n"
            << (d.recorded_json.empty() ? "(nothing: the ledger holds no event here)"
                                        : Embedded(d.recorded_json).dump(2))
            << "\n--- replayed (engine v" << projections::kEngineVersion << ")"
            << (d.replayed_type.empty() ? "" : ": " + d.replayed_type) << "\n"
            << (d.replayed_json.empty() ? "(nothing: the replayed decider made no decision here)"
                                        : Embedded(d.replayed_json).dump(2))
            << "\n";
  return 1;
}

struct ExplainArgs {
  std::string workload;
  uint64_t at = 0;
  std::string format = "text";
  std::string out;
};

int RunExplain(const GlobalOptions& global, const ExplainArgs& args) {
  auto name = SplitName(args.workload);
  if (!name.ok()) return Fail(name.status());
  auto log = OpenLedger(global, false);
  if (!log.ok()) return Fail(log.status());
  Progress progress("explain");
  auto x = replay::Explain(**log, name->first, name->second, args.at,
                           [&](uint64_t done, uint64_t total) {
                             if (total > 100000) progress.Update(done, total);
                           });
  if (!x.ok()) return Fail(x.status());
  std::string text = args.format == "json"   ? replay::ExplainJson(*x) + "\n"
                     : args.format == "html" ? replay::ExplainHtml(*x)
                                             : replay::ExplainText(*x);
  std::string path = args.out;
  if (path.empty() && args.format == "html") {
    path = "explain-" + name->first + "-" + name->second + ".html";
  }
  if (path.empty() || path == "-") {
    std::cout << text;
    return 0;
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return Fail(Status(Code::kIoError, "cannot write " + path));
  std::cout << path << "\n";
  return 0;
}

}  // namespace

void AddReplayCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto replay_args = std::make_shared<ReplayArgs>();
  auto* replay_cmd = app.add_subcommand(
      "replay",
      "fold the ledger's recorded inputs through this build's decider and, with --verify, "
      "compare every decision it makes with the recorded one byte for byte (canonical form). "
      "Prints events/s, the number of decisions compared and the decision-stream SHA-256 "
      "(a SHA-256 chain over the stored bytes of every compared decision, in order); on a "
      "mismatch exits 1 showing the first diverging sequence, both decisions and the first "
      "differing field. A decision made by another engine version stops the replay with an "
      "error naming both versions.");
  replay_cmd->add_flag("--verify", replay_args->verify,
                       "compare every replayed decision with the recorded one");
  replay_cmd->add_option(
      "--from", replay_args->from,
      "first sequence whose decisions are compared (default 1). Replaying from N needs the "
      "decider's state at N-1: without snapshots, events 1..N-1 are folded first without "
      "comparing (about as long as a replay of them), then N..--to are compared");
  replay_cmd->add_option("--to", replay_args->to, "last sequence folded (default: the head)");
  replay_cmd->add_option("-o,--output", replay_args->format, "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  replay_cmd->callback(
      [&global, exit_code, replay_args]() { *exit_code = RunReplay(global, *replay_args); });

  auto explain_args = std::make_shared<ExplainArgs>();
  auto* explain_cmd = app.add_subcommand(
      "explain",
      "a workload's whole history from the ledger (every input that touched it, every decision "
      "about it, with time, actor, reason, flavors, quota and check versions) and what blocks "
      "it now: its pending reason with the short resource, flavor and amount, its place in the "
      "queue, or the admission checks it waits for and since when");
  explain_cmd->add_option("workload", explain_args->workload, "NAMESPACE/NAME")->required();
  explain_cmd->add_option(
      "--at", explain_args->at,
      "explain the state after this sequence (default: the head). A sequence inside an append "
      "is rounded up to the end of that append: the decider's cycles run once per append, so "
      "the state in between never existed");
  explain_cmd
      ->add_option("-o,--output", explain_args->format,
                   "text (default), json, or html (a self-contained page, written to "
                   "explain-NS-NAME.html unless --out says otherwise; the path is printed)")
      ->check(CLI::IsMember({"text", "json", "html"}));
  explain_cmd->add_option("--out", explain_args->out, "write to this file ('-': stdout)");
  explain_cmd->callback(
      [&global, exit_code, explain_args]() { *exit_code = RunExplain(global, *explain_args); });
}

}  // namespace admission::ops
