// admitctl: the admission ledger's command line, in embedded mode (the ledger is a RocksDB
// directory opened by this process).
//
// Exit codes: 0 success; 1 refused or failed (reason on stderr); 2 usage error.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "ops/cli/common.h"
#include "ops/cli/replay_commands.h"
#include "ops/clock.h"
#include "ops/demo.h"
#include "ops/intake.h"
#include "ops/kueue_yaml.h"
#include "ops/render.h"
#include "ops/service.h"
#include "schema/time_format.h"
#include "replay/replayer.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

std::string EnvelopeJson(const ledger::StoredEvent& stored, schema::Event::Reader event) {
  // The event as Cap'n Proto's JSON codec renders it, plus fields a reader of the log wants
  // without recomputing them.
  std::string json = schema::EventToJson(event);
  std::ostringstream out;
  out << "{\"sequence\":" << stored.sequence << ",\"recordedAt\":\""
      << FormatRfc3339(event.getRecordedAtNs()) << "\",\"type\":\""
      << schema::BodyName(event) << "\",\"event\":" << json << "}";
  return out.str();
}

int RunLog(const GlobalOptions& global, uint64_t from, uint64_t limit, const std::string& format) {
  auto log = OpenLedger(global, false);
  if (!log.ok()) return Fail(log.status());
  uint64_t next = from;
  uint64_t shown = 0;
  const ledger::Head head = (*log)->GetHead();
  while (next <= head.sequence && (limit == 0 || shown < limit)) {
    size_t want = ledger::kReadEventsMax / 16;
    if (limit != 0) want = std::min<uint64_t>(want, limit - shown);
    auto chunk = (*log)->Read(next, want);
    if (!chunk.ok()) return Fail(chunk.status());
    if (chunk->empty()) break;
    for (const ledger::StoredEvent& stored : *chunk) {
      auto decoded = schema::DecodeEvent(stored.bytes);
      if (!decoded.ok()) {
        return Fail(Status(Code::kCorruption, "event " + std::to_string(stored.sequence) +
                                                  ": " + decoded.status().message()));
      }
      schema::Event::Reader event = decoded->root();
      if (format == "json") {
        std::cout << EnvelopeJson(stored, event) << "\n";
      } else {
        std::cout << stored.sequence << "  " << FormatRfc3339(event.getRecordedAtNs()) << "  "
                  << schema::BodyName(event) << "  actor=" << event.getActor().cStr();
        if (event.getIdempotencyKey().size() > 0) {
          std::cout << "  key=" << event.getIdempotencyKey().cStr();
        }
        if (schema::IsDecision(event.getBody().which())) {
          std::cout << "  cause=" << event.getCausationSequence()
                    << "  engine=v" << event.getEngineVersion();
        }
        std::cout << "\n";
      }
      next = stored.sequence + 1;
      ++shown;
    }
  }
  return 0;
}

int RunVerify(const GlobalOptions& global, const std::string& format) {
  auto log = OpenLedger(global, false);
  if (!log.ok()) return Fail(log.status());
  Progress progress("verify");
  auto report = ledger::VerifyChain(**log, 1, schema::kGenesisHash, true,
                                    [&](uint64_t done, uint64_t total) {
                                      progress.Update(done, total);
                                    });
  if (!report.ok()) return Fail(report.status());
  // Every snapshot beside the ledger: its stored hash, and that it is this ledger's.
  ledger::FileSnapshotStore store(global.ledger_dir);
  auto snapshots = replay::VerifySnapshots(**log, store);
  if (!snapshots.ok()) return Fail(snapshots.status());
  const replay::SnapshotCheck* bad_snapshot = nullptr;
  for (const replay::SnapshotCheck& c : *snapshots) {
    if (c.fault && bad_snapshot == nullptr) bad_snapshot = &c;
  }
  const bool ok = !report->fault && bad_snapshot == nullptr;
  if (format == "json") {
    Json out;
    out["ok"] = ok;
    out["eventsChecked"] = report->events_checked;
    out["head"] = report->head;
    out["headHash"] = schema::HashHex(report->head_hash);
    if (report->fault) {
      out["badSequence"] = report->fault->sequence;
      out["reason"] = report->fault->reason;
    }
    Json list = Json::array();
    for (const replay::SnapshotCheck& c : *snapshots) {
      Json item = {{"sequence", c.after}, {"ok", !c.fault.has_value()}, {"bytes", c.bytes},
                   {"sha256", schema::HashHex(c.hash)}, {"engineVersion", c.engine_version}};
      if (c.fault) item["reason"] = *c.fault;
      list.push_back(item);
    }
    out["snapshots"] = list;
    if (bad_snapshot != nullptr) {
      out["badSnapshot"] = bad_snapshot->after;
      out["snapshotReason"] = *bad_snapshot->fault;
    }
    std::cout << out.dump() << "\n";
    return ok ? 0 : 1;
  }
  if (report->fault) {
    std::cout << "FAILED at sequence " << report->fault->sequence << ": "
              << report->fault->reason << "\n";
  } else {
    std::cout << "verified " << report->events_checked << " events; head " << report->head
              << " hash " << schema::HashHex(report->head_hash) << "\n";
  }
  for (const replay::SnapshotCheck& c : *snapshots) {
    if (c.fault) {
      std::cout << "FAILED: snapshot at sequence " << c.after << ": " << *c.fault << "\n";
    } else {
      std::cout << "snapshot at sequence " << c.after << ": ok (" << c.bytes << " bytes, sha256 "
                << schema::HashHex(c.hash) << ", engine v" << c.engine_version << ")\n";
    }
  }
  return ok ? 0 : 1;
}

int RunDevAppend(const GlobalOptions& global, const std::vector<std::string>& json_args,
                 const std::string& file) {
  // Each event is one JSON object (schema::Event as Cap'n Proto's JSON codec reads it); in a
  // file, one per line. All of them form one atomic append.
  std::vector<std::string> lines = json_args;
  if (!file.empty()) {
    auto text = ReadAll(file);
    if (!text.ok()) return Fail(text.status());
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
    }
  }
  if (lines.empty()) {
    return Fail(Status(Code::kInvalidArgument, "no events given (use --json or -f FILE)"));
  }
  std::vector<std::string> events;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto encoded = schema::EventFromJson(lines[i]);
    if (!encoded.ok()) {
      return Fail(Status(Code::kInvalidArgument,
                         "event " + std::to_string(i) + ": " + encoded.status().message()));
    }
    events.push_back(std::move(*encoded));
  }
  auto log = OpenLedger(global, true);
  if (!log.ok()) return Fail(log.status());
  SystemClock clock;
  IntakeOptions intake_options;
  if (!global.at.empty()) {
    auto at = ParseRfc3339(global.at);
    if (!at.ok()) return Fail(at.status());
    intake_options.at_ns = *at;
  }
  intake_options.actor = global.actor.empty() ? "dev" : global.actor;
  Intake intake(**log, clock, intake_options);
  auto ack = intake.Submit(events);
  if (!ack.ok()) return Fail(ack.status());
  for (size_t i = 0; i < ack->sequences.size(); ++i) {
    std::cout << ack->sequences[i] << (ack->duplicate[i] ? " duplicate (already recorded)" : "")
              << "\n";
  }
  return 0;
}

enum class FileKind { kApply, kSubmit, kImport };

int RunFile(const GlobalOptions& global, FileKind kind, const std::string& path,
            const std::string& format) {
  auto text = ReadAll(path);
  if (!text.ok()) return Fail(text.status());
  auto session = OpenSession(global, true);
  if (!session.ok()) return Fail(session.status());
  SubmitContext ctx;
  ctx.name_seed = std::to_string((*session)->log->GetHead().sequence);
  Result<std::vector<ParsedObject>> objects =
      kind == FileKind::kApply    ? ParseApplyYaml(*text)
      : kind == FileKind::kSubmit ? ParseSubmitYaml(*text, ctx)
                                  : ParseImportYaml(*text, ctx);
  if (!objects.ok()) return Fail(objects.status());
  if (objects->empty()) return Fail(Status(Code::kInvalidArgument, path + " holds no objects"));
  std::vector<std::string> inputs;
  std::vector<std::string> labels;
  for (const ParsedObject& o : *objects) {
    labels.push_back(o.kind + " " + (o.ns.empty() ? "" : o.ns + "/") + o.name);
    if (kind == FileKind::kApply) {
      inputs.push_back(o.event);
      continue;
    }
    // A workload is submitted (or imported) once: its name is its idempotency key.
    auto decoded = schema::DecodeEvent(o.event);
    if (!decoded.ok()) return Fail(decoded.status());
    capnp::MallocMessageBuilder message;
    message.setRoot(decoded->root());
    message.getRoot<schema::Event>().setIdempotencyKey(
        std::string(kind == FileKind::kSubmit ? "submit/" : "import/") + o.ns + "/" + o.name);
    inputs.push_back(schema::EncodeEvent(message));
  }
  auto options = IntakeFrom(global, kind == FileKind::kApply ? "operator" : "submitter");
  if (!options.ok()) return Fail(options.status());
  auto outcome = (*session)->service->Record(inputs, *options);
  if (!outcome.ok()) return Fail(outcome.status());
  PrintOutcome(labels, *outcome, format);
  return 0;
}

int RunWorkloadInput(const GlobalOptions& global, const std::string& ns_name, bool finish,
                     const std::string& message_text, const std::string& format) {
  auto name = SplitName(ns_name);
  if (!name.ok()) return Fail(name.status());
  auto session = OpenSession(global, false);
  if (!session.ok()) return Fail(session.status());
  const auto& workloads = (*session)->service->engine().workloads();
  auto it = workloads.find(ns_name);
  if (it == workloads.end()) {
    return Fail(Status(Code::kNotFound, "no workload " + ns_name + " in the ledger"));
  }
  capnp::MallocMessageBuilder message;
  auto event = message.initRoot<schema::Event>();
  auto make_ref = [&]() {
    if (finish) {
      auto f = event.initBody().initWorkloadFinished();
      f.setMessage(message_text);
      return f.initWorkload();
    }
    return event.initBody().initWorkloadDeleted().initWorkload();
  };
  schema::WorkloadRef::Builder ref = make_ref();
  ref.setNamespace(name->first);
  ref.setName(name->second);
  ref.setUid(it->second.uid);
  // Once per workload incarnation: a retried command is a no-op.
  event.setIdempotencyKey(std::string(finish ? "finish/" : "delete/") + it->second.uid);
  auto options = IntakeFrom(global, "runtime");
  if (!options.ok()) return Fail(options.status());
  auto outcome = (*session)->service->Record({schema::EncodeEvent(message)}, *options);
  if (!outcome.ok()) return Fail(outcome.status());
  PrintOutcome({std::string(finish ? "finish " : "delete ") + ns_name}, *outcome, format);
  return 0;
}

int RunGet(const GlobalOptions& global, const std::string& what, const std::string& format,
           uint64_t at_sequence) {
  // With --at N: the read models as they were after sequence N (the end of its append).
  std::unique_ptr<Session> session;
  std::unique_ptr<ledger::RocksDbLog> at_log;
  replay::StateAt at_state;
  if (at_sequence != 0) {
    auto log = OpenLedger(global, false);
    if (!log.ok()) return Fail(log.status());
    at_log = std::move(*log);
    Progress progress("loading the ledger");
    ledger::FileSnapshotStore snapshots(global.ledger_dir);
    std::vector<std::string> skipped;
    auto state = replay::FoldToSequenceFromSnapshot(
        *at_log, snapshots, at_sequence,
        [&](uint64_t done, uint64_t total) {
          if (total > 100000) progress.Update(done, total);
        },
        &skipped);
    if (!state.ok()) return Fail(state.status());
    for (const std::string& why : skipped) spdlog::warn("skipping {}", why);
    at_state = std::move(*state);
    if (at_state.at != at_sequence) {
      std::cerr << "as of sequence " << at_state.at << ", the end of the append holding sequence "
                << at_sequence << "\n";
    }
  } else {
    auto opened = OpenSession(global, false);
    if (!opened.ok()) return Fail(opened.status());
    session = std::move(*opened);
  }
  const projections::Engine& engine =
      at_state.engine ? *at_state.engine : session->service->engine();
  Json items;
  std::string table;
  if (what == "workloads" || what == "workload" || what == "wl") {
    items = WorkloadsJson(engine);
    if (format == "table") table = WorkloadsTable(engine);
  } else if (what == "clusterqueues" || what == "clusterqueue" || what == "cq") {
    items = ClusterQueuesJson(engine);
    if (format == "table") table = ClusterQueuesTable(engine);
  } else if (what == "localqueues" || what == "localqueue" || what == "lq") {
    items = LocalQueuesJson(engine);
    if (format == "table") table = LocalQueuesTable(engine);
  } else {
    items = CohortsJson(engine);
    if (format == "table") table = CohortsTable(engine);
  }
  if (format == "json") {
    std::cout << ListOf(items).dump(2) << "\n";
  } else if (format == "yaml") {
    std::cout << ToYaml(ListOf(items));
  } else {
    std::cout << table;
  }
  return 0;
}

}  // namespace
}  // namespace admission::ops

int main(int argc, char** argv) {
  using namespace admission::ops;
  CLI::App app{
      "admitctl: the admission ledger's command line (embedded RocksDB ledger).\n"
      "Every input and decision is an immutable event in the ledger at --ledger."};
  app.require_subcommand(1);
  GlobalOptions global;
  if (const char* env = std::getenv("ADMITCTL_LEDGER")) global.ledger_dir = env;
  CLI::Option* ledger_option = app.add_option("--ledger", global.ledger_dir,
                 "ledger directory (default: $ADMITCTL_LEDGER or ./admission-ledger)");
  app.add_option("--at", global.at,
                 "logical time of the input recorded (RFC 3339); default: the wall clock. "
                 "Never earlier than the ledger's last event.");
  app.add_option("--log-level", global.log_level, "trace, debug, info, warn (default), error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--as", global.actor, "identity of the caller recorded on input events");
  app.add_option("--snapshot-every", global.snapshot_every,
                 "take a snapshot of the state after an append that crosses a multiple of this "
                 "many events (default 100000; 0: never). Startup loads the newest valid "
                 "snapshot and folds only the events after it");

  auto* log_cmd = app.add_subcommand("log", "print the ledger's events in order");
  uint64_t from = 1, limit = 0;
  std::string log_format = "text";
  log_cmd->add_option("--from", from, "first sequence to print (default 1)");
  log_cmd->add_option("--limit", limit, "print at most this many events (default: all)");
  log_cmd->add_option("-o,--output", log_format,
                      "text (one line per event) or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}));

  auto* verify_cmd =
      app.add_subcommand("verify", "walk the hash chain from the first event to the head and "
                                   "check every snapshot (its stored SHA-256, and that its chain "
                                   "hash is the ledger's at its sequence); exit 1 naming the "
                                   "first bad sequence or snapshot");
  std::string verify_format = "text";
  verify_cmd->add_option("-o,--output", verify_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));

  auto* dev_cmd = app.add_subcommand(
      "dev", "developer commands: write raw events (for tests and debugging, not operations)");
  dev_cmd->require_subcommand(1);
  auto* dev_append = dev_cmd->add_subcommand(
      "append",
      "append raw events given as JSON (schema/events.capnp through Cap'n Proto's JSON codec) "
      "as one atomic batch; prints each event's sequence");
  std::vector<std::string> json_args;
  std::string json_file;
  dev_append->add_option("--json", json_args, "one event as JSON (repeatable)");
  dev_append->add_option("-f,--file", json_file, "file of JSON events, one per line ('-': stdin)");

  std::string file_path, out_format = "text";
  auto* apply_cmd = app.add_subcommand(
      "apply", "record Kueue definitions (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, "
               "AdmissionCheck, WorkloadPriorityClass; v1beta1 or v1beta2 YAML). Identical "
               "objects are no-ops; a changed ClusterQueue is a new quota version");
  auto* submit_cmd = app.add_subcommand(
      "submit", "submit Workloads and batch/v1 Jobs (label kueue.x-k8s.io/queue-name) as one "
                "atomic batch; prints the decisions they caused");
  auto* import_cmd = app.add_subcommand(
      "import", "adopt Workloads that carry status.admission (kubectl get workloads -o yaml) as "
                "admitted");
  for (auto* cmd : {apply_cmd, submit_cmd, import_cmd}) {
    cmd->add_option("-f,--filename", file_path, "YAML file ('-': stdin)")->required();
    cmd->add_option("-o,--output", out_format, "text or json")->check(CLI::IsMember({"text", "json"}));
  }
  std::string workload_name, finish_message;
  auto* finish_cmd = app.add_subcommand("finish", "record that a workload finished; frees its quota");
  finish_cmd->add_option("workload", workload_name, "NAMESPACE/NAME")->required();
  finish_cmd->add_option("--message", finish_message, "why or how it finished");
  finish_cmd->add_option("-o,--output", out_format, "text or json")->check(CLI::IsMember({"text", "json"}));
  auto* delete_cmd = app.add_subcommand("delete", "record that a workload was deleted; frees its quota");
  delete_cmd->add_option("workload", workload_name, "NAMESPACE/NAME")->required();
  delete_cmd->add_option("-o,--output", out_format, "text or json")->check(CLI::IsMember({"text", "json"}));
  std::string get_what, get_format = "table";
  auto* get_cmd = app.add_subcommand(
      "get", "show the current state as Kueue-shaped objects: workloads, clusterqueues, "
             "localqueues or cohorts");
  get_cmd->add_option("kind", get_what, "workloads|clusterqueues|localqueues|cohorts")
      ->required()
      ->check(CLI::IsMember({"workloads", "workload", "wl", "clusterqueues", "clusterqueue", "cq",
                             "localqueues", "localqueue", "lq", "cohorts", "cohort"}));
  get_cmd->add_option("-o,--output", get_format, "table (default), json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  uint64_t get_at = 0;
  get_cmd->add_option("--at", get_at,
                      "the state after this ledger sequence (rounded up to the end of its "
                      "append); default: the head");

  std::string demo_dir = "admission-demo-ledger";
  auto* demo_cmd = app.add_subcommand(
      "demo", "run the GPU platform demo on a fresh embedded ledger and narrate its decisions");
  CLI::Option* demo_dir_option = demo_cmd->add_option(
      "--dir", demo_dir,
      "fresh ledger directory (must not exist or be empty; default: --ledger when given, else "
      "./admission-demo-ledger)");

  int group_exit_code = -1;
  AddLifecycleCommands(app, global, &group_exit_code);

  int replay_exit = -1;
  AddReplayCommands(app, global, &replay_exit);
  // Logs go to stderr at --log-level; set up once the options are parsed and before any
  // command runs (command groups run from their subcommand's callback, during the parse).
  app.parse_complete_callback([&global]() {
    auto logger = spdlog::stderr_color_mt("admitctl");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(global.log_level));
  });
  CLI11_PARSE(app, argc, argv);
  if (replay_exit >= 0) return replay_exit;
  if (group_exit_code >= 0) return group_exit_code;

  if (*log_cmd) return RunLog(global, from, limit, log_format);
  if (*verify_cmd) return RunVerify(global, verify_format);
  if (*dev_append) return RunDevAppend(global, json_args, json_file);
  if (*apply_cmd) return RunFile(global, FileKind::kApply, file_path, out_format);
  if (*submit_cmd) return RunFile(global, FileKind::kSubmit, file_path, out_format);
  if (*import_cmd) return RunFile(global, FileKind::kImport, file_path, out_format);
  if (*finish_cmd) return RunWorkloadInput(global, workload_name, true, finish_message, out_format);
  if (*delete_cmd) return RunWorkloadInput(global, workload_name, false, "", out_format);
  if (*get_cmd) return RunGet(global, get_what, get_format, get_at);
  if (*demo_cmd) {
    if (demo_dir_option->count() == 0 && ledger_option->count() > 0) demo_dir = global.ledger_dir;
    admission::Status s = RunDemo(demo_dir, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  std::cerr << app.help();
  return 2;
}
