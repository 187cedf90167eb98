// admitctl replay --verify and admitctl explain: the audit side of the ledger.

#include "ops/admitctl/replay_commands.h"

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>
#include <string>

#include "ops/views/render.h"
#include "projections/engine_version.h"
#include "replay/explain.h"
#include "replay/replayer.h"
#include "replay/snapshots.h"
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
  bool from_snapshot = false;
  uint64_t from = 1;
  uint64_t to = 0;
  std::string format = "text";
};

// Where a replay starts: the genesis, or with --from-snapshot the newest usable snapshot before
// the first compared sequence (and before `to`: something must be left to fold).
struct ReplayBegin {
  replay::ReplayStart start = replay::Genesis();
  projections::DefinitionBodies definitions;
  std::optional<uint64_t> started_from;  // the snapshot's sequence
};

Result<ReplayBegin> ChooseReplayStart(ledger::EventLog& log, ledger::SnapshotStore& store,
                                      const ReplayArgs& args, uint64_t to) {
  ReplayBegin begin;
  if (!args.from_snapshot) return begin;
  const uint64_t before_to = to > 0 ? to - 1 : 0;
  const uint64_t limit =
      args.from > 1 ? std::min<uint64_t>(args.from - 1, before_to) : before_to;
  if (limit == 0) return begin;
  auto chosen = replay::StartFromNewestSnapshot(log, store, limit);
  if (!chosen.ok()) return chosen.status();
  for (const std::string& why : chosen->skipped) {
    std::cerr << "admitctl: skipping " << why << "\n";
  }
  begin.start = std::move(chosen->start);
  begin.definitions = std::move(chosen->definitions);
  begin.started_from = chosen->loaded;
  return begin;
}

// The first snapshot whose state differs from the fold's, or nullptr.
const replay::SnapshotComparison* FirstBadSnapshot(const replay::ComparedReplay& compared) {
  for (const replay::SnapshotComparison& c : compared.snapshots) {
    if (c.mismatch) return &c;
  }
  return nullptr;
}

// replay -o json; returns the exit code.
int PrintReplayJson(const ReplayArgs& args, const replay::ComparedReplay& compared,
                    uint64_t compared_from, std::optional<uint64_t> started_from) {
  const replay::ReplayReport& r = compared.report;
  const std::string hash = schema::HashHex(r.decision_stream_hash);
  const bool ok = !r.divergence.has_value() && FirstBadSnapshot(compared) == nullptr;
  Json out;
  out["ok"] = ok;
  out["verify"] = args.verify;
  out["engineVersion"] = projections::kEngineVersion;
  out["startedFromSnapshot"] = started_from ? Json(*started_from) : Json(nullptr);
  out["first"] = r.first;
  out["last"] = r.last;
  out["events"] = r.events;
  out["inputs"] = r.inputs;
  out["seconds"] = r.seconds;
  out["eventsPerSecond"] = static_cast<uint64_t>(r.events_per_second);
  out["cpuSeconds"] = {{"fold", r.fold_cpu_seconds},
                       {"read", r.read_cpu_seconds},
                       {"compare", r.compare_cpu_seconds}};
  if (args.verify) {
    out["compareFrom"] = compared_from;
    out["decisionsCompared"] = r.decisions_compared;
    out["decisionStreamSha256"] = hash;
    Json snapshots = Json::array();
    for (const replay::SnapshotComparison& c : compared.snapshots) {
      Json item = {{"sequence", c.after}, {"ok", !c.mismatch.has_value()}};
      if (c.mismatch) item["mismatch"] = *c.mismatch;
      snapshots.push_back(item);
    }
    out["snapshots"] = snapshots;
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
  return ok ? 0 : 1;
}

// replay's text; returns the exit code.
int PrintReplayText(const ReplayArgs& args, const replay::ComparedReplay& compared,
                    uint64_t compared_from, std::optional<uint64_t> started_from) {
  const replay::ReplayReport& r = compared.report;
  const std::string hash = schema::HashHex(r.decision_stream_hash);
  const replay::SnapshotComparison* bad_snapshot = FirstBadSnapshot(compared);
  const bool ok = !r.divergence.has_value() && bad_snapshot == nullptr;
  if (started_from) std::cout << "started from the snapshot at sequence " << *started_from << "\n";
  std::cout << "replayed " << r.events << " events (sequences " << r.first << ".." << r.last << ", "
            << r.inputs << " inputs) in " << r.seconds << " s: " << Rate(r.events_per_second)
            << " events/s\n"
            << "cpu: fold " << r.fold_cpu_seconds << " s, read " << r.read_cpu_seconds
            << " s, compare " << r.compare_cpu_seconds << " s\n";
  if (!args.verify) {
    std::cout << "decisions not compared (add --verify)\n";
    return 0;
  }
  std::cout << "decisions compared: " << r.decisions_compared << " (sequences " << compared_from
            << ".." << r.last << ")\n"
            << "decision-stream sha256: " << hash << (r.divergence ? " (up to the divergence)" : "")
            << "\n";
  if (!compared.snapshots.empty()) {
    std::cout << "snapshots compared with the fold: " << compared.snapshots.size() << "\n";
  }
  for (const replay::SnapshotComparison& c : compared.snapshots) {
    if (c.mismatch) {
      std::cout << "SNAPSHOT MISMATCH at sequence " << c.after << ": " << *c.mismatch << "\n";
    }
  }
  if (!r.divergence) {
    if (bad_snapshot == nullptr) {
      std::cout << "OK: every recorded decision was reproduced byte for byte by engine v"
                << projections::kEngineVersion << "\n";
    }
    return ok ? 0 : 1;
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

int RunReplay(const GlobalOptions& global, const ReplayArgs& args) {
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  const uint64_t head = (*log)->GetHead().sequence;
  if (head == 0) return Fail(Status(Code::kInvalidArgument, "the ledger is empty"));
  const uint64_t to = args.to == 0 ? head : args.to;
  auto opened_store = OpenSnapshots(global);
  if (!opened_store.ok()) return Fail(opened_store.status());
  ledger::SnapshotStore& store = **opened_store;
  auto begin = ChooseReplayStart(**log, store, args, to);
  if (!begin.ok()) return Fail(begin.status());
  replay::Replayer replayer(**log, std::move(begin->start));
  replay::ReplayOptions options;
  options.verify = args.verify;
  options.compare_from = std::max<uint64_t>(args.from, replayer.position() + 1);
  options.to = args.to;
  Progress progress(args.verify ? "replay --verify" : "replay");
  options.progress = [&](uint64_t done, uint64_t total) { progress.Update(done, total); };
  replay::ComparedReplay compared;
  if (args.verify) {
    auto run = replay::RunComparingSnapshots(replayer, options, **log, store, begin->definitions);
    if (!run.ok()) return Fail(run.status());
    compared = std::move(*run);
  } else {
    auto report = replayer.Run(options);
    if (!report.ok()) return Fail(report.status());
    compared.report = std::move(*report);
  }
  if (args.format == "json") {
    return PrintReplayJson(args, compared, options.compare_from, begin->started_from);
  }
  return PrintReplayText(args, compared, options.compare_from, begin->started_from);
}

struct SnapshotArgs {
  std::string format = "text";
};

int RunSnapshot(const GlobalOptions& global, const SnapshotArgs& args) {
  auto session = OpenSession(global, false);
  if (!session.ok()) return Fail(session.status());
  if (isatty(2) == 1 && (*session)->log) {
    std::fprintf(stderr, "snapshot: encoding and writing the state at sequence %llu\n",
                 static_cast<unsigned long long>((*session)->log->GetHead().sequence));
  }
  auto text = (*session)->api->Snapshot(args.format);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text;
  return 0;
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
  Result<std::string> rendered = std::string();
  if (global.connected()) {
    // admitd renders it from its own ledger, within the caller's namespaces.
    auto session = OpenSession(global, false);
    if (!session.ok()) return Fail(session.status());
    rendered = (*session)->api->Explain(args.workload, args.at, args.format);
  } else {
    auto log = OpenLedgerToRead(global);
    if (!log.ok()) return Fail(log.status());
    auto snapshots = OpenSnapshots(global);
    if (!snapshots.ok()) return Fail(snapshots.status());
    Progress progress("explain");
    rendered = RenderExplain(**log, args.workload, args.at, args.format,
                             [&](uint64_t done, uint64_t total) {
                               if (total > 100000) progress.Update(done, total);
                             },
                             snapshots->get());
  }
  if (!rendered.ok()) return Fail(rendered.status());
  const std::string& text = *rendered;
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
      "decider's state at N-1: events 1..N-1 are folded first without comparing (about as "
      "long as a replay of them), or, with --from-snapshot, only those after the newest "
      "snapshot before N; then N..--to are compared. With --verify, every snapshot in the "
      "folded range is also compared with the state re-encoded at its sequence (a mismatch "
      "exits 1)");
  replay_cmd->add_option("--to", replay_args->to, "last sequence folded (default: the head)");
  replay_cmd->add_flag(
      "--from-snapshot", replay_args->from_snapshot,
      "start from the newest valid snapshot before --from (or before --to) instead of the "
      "genesis; without --from, decisions after the snapshot are compared. Invalid snapshots "
      "are skipped with a message");
  replay_cmd->add_option("-o,--output", replay_args->format, "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  replay_cmd->callback(
      [&global, exit_code, replay_args]() { *exit_code = RunReplay(global, *replay_args); });

  auto snapshot_args = std::make_shared<SnapshotArgs>();
  auto* snapshot_cmd = app.add_subcommand(
      "snapshot",
      "take a snapshot of the projection state at the head now (Cap'n Proto, canonical form), "
      "stored in LEDGER/snapshots/ with its SHA-256; prints the sequence, size and hash. "
      "Startup loads the newest valid snapshot and folds only the events after it; snapshots "
      "are also taken every --snapshot-every events");
  snapshot_cmd->add_option("-o,--output", snapshot_args->format, "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  snapshot_cmd->callback(
      [&global, exit_code, snapshot_args]() { *exit_code = RunSnapshot(global, *snapshot_args); });

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
