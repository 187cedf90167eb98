// admitctl: the admission ledger's command line, in embedded mode (the ledger is a RocksDB
// directory opened by this process).
//
// Exit codes: 0 success; 1 refused or failed (reason on stderr); 2 usage error; 3 admitd did
// not answer within --timeout.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <capnp/message.h>

#include "ops/args/parse_args.h"
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "ops/admitctl/common.h"
#include "ops/admitctl/replay_commands.h"
#include "ops/service/clock.h"
#include "ops/sim/demo.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/views/jsonpath.h"
#include "ops/views/render.h"
#include "ops/rpc/client.h"
#include "ops/service/service.h"
#include "schema/quantity.h"
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

// One event as `log` and `watch` print it: a line, or a JSON object on one line.
void PrintEvent(const ledger::StoredEvent& stored, schema::Event::Reader event,
                const std::string& format) {
  if (format == "json") {
    std::cout << EnvelopeJson(stored, event) << "\n";
    return;
  }
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

struct WatchArgs {
  rpc::WatchRequest request;
  std::string format = "text";
  uint64_t limit = 0;
};

int RunWatch(const GlobalOptions& global, const WatchArgs& args) {
  if (!global.connected()) {
    return Fail(Status(Code::kInvalidArgument,
                       "watch streams events from admitd: give --connect ADDR (or set "
                       "ADMITCTL_CONNECT)"));
  }
  auto client = Connect(global);
  if (!client.ok()) return Fail(client.status());
  uint64_t shown = 0;
  uint64_t resume = 0;
  std::string reason;
  Status bad;
  Status s = (*client)->Watch(
      args.request,
      [&](const std::vector<ledger::StoredEvent>& events) {
        for (const ledger::StoredEvent& e : events) {
          auto decoded = schema::DecodeEvent(e.bytes);
          if (!decoded.ok()) {
            bad = Status(Code::kCorruption, "event " + std::to_string(e.sequence) + ": " +
                                                decoded.status().message());
            return false;
          }
          PrintEvent(e, decoded->root(), args.format);
          if (args.limit != 0 && ++shown >= args.limit) {
            std::cout.flush();
            return false;
          }
        }
        std::cout.flush();
        return true;
      },
      &resume, &reason);
  if (!s.ok()) return Fail(s);
  if (!bad.ok()) return Fail(bad);
  if (!reason.empty()) {
    std::cerr << "admitctl: the watch ended: " << reason << "; resume with --from " << resume
              << "\n";
    return 1;
  }
  return 0;
}

// `admitctl --connect tls:HOST:PORT demo --certs DIR`: the demo through admitd, one TLS
// connection per actor (its certificate's common name is the principal the daemon records),
// reading back through the daemon as an auditor would. Same steps and decisions as embedded.
int RunConnectedDemo(const GlobalOptions& global, const std::string& certs,
                     const std::string& page_dir) {
  auto endpoint = rpc::ParseEndpoint(global.connect);
  if (!endpoint.ok()) return Fail(endpoint.status());
  if (endpoint->kind != rpc::Endpoint::Kind::kTls || certs.empty()) {
    return Fail(Status(Code::kInvalidArgument,
                       "demo --connect needs a tls: address and --certs DIR: its check reports "
                       "must come from each check's controller, and a Unix socket gives every "
                       "step the one principal of this uid"));
  }
  std::map<std::string, std::shared_ptr<rpc::RpcClient>> clients;
  std::map<std::string, std::unique_ptr<rpc::RemoteApi>> apis;
  auto client_of = [&](const std::string& actor) -> Result<std::shared_ptr<rpc::RpcClient>> {
    if (auto it = clients.find(actor); it != clients.end()) return it->second;
    std::string file = actor;
    std::replace(file.begin(), file.end(), '/', '_');
    rpc::ClientOptions options;
    options.endpoint = *endpoint;
    options.tls = {certs + "/" + file + ".pem", certs + "/" + file + ".key", certs + "/ca.pem"};
    options.call_timeout_ms = global.timeout_ms;
    auto client = rpc::RpcClient::Connect(options);
    if (!client.ok()) {
      return Status(client.status().code(),
                    "connecting as the demo's " + actor + ": " + client.status().message());
    }
    auto shared = std::shared_ptr<rpc::RpcClient>(std::move(*client));
    clients[actor] = shared;
    return shared;
  };
  DemoApis demo_apis = [&](const std::string& actor) -> Result<AdmissionApi*> {
    if (auto it = apis.find(actor); it != apis.end()) return it->second.get();
    auto client = client_of(actor);
    if (!client.ok()) return client.status();
    auto& api = apis[actor];
    api = std::make_unique<rpc::RemoteApi>(*client);
    return api.get();
  };
  // Reading back (verify, replay, the explain page) as the platform's operator.
  auto reader = client_of("platform-ops");
  if (!reader.ok()) return Fail(reader.status());
  rpc::RemoteLog log(*reader);
  rpc::RemoteSnapshotStore snapshots(*reader);
  std::error_code ec;
  std::filesystem::create_directories(page_dir, ec);
  DemoTarget target{demo_apis, log, snapshots, false, "of admitd at " + global.connect,
                    page_dir, "--connect " + global.connect + " --cert ... --key ... --ca ..."};
  Status s = RunDemoThrough(target, std::cout);
  return s.ok() ? 0 : Fail(s);
}

int RunLog(const GlobalOptions& global, uint64_t from, uint64_t limit, const std::string& format) {
  auto log = OpenLedgerToRead(global);
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
      PrintEvent(stored, decoded->root(), format);
      next = stored.sequence + 1;
      ++shown;
    }
  }
  return 0;
}

int RunVerify(const GlobalOptions& global, const std::string& format) {
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  Progress progress("verify");
  // Through admitd the chain is checked here, over the daemon's bytes; its idempotency index
  // is the daemon's own storage (one lookup per keyed event would be a round trip each).
  auto report = ledger::VerifyChain(**log, 1, schema::kGenesisHash, !global.connected(),
                                    [&](uint64_t done, uint64_t total) {
                                      progress.Update(done, total);
                                    });
  if (!report.ok()) return Fail(report.status());
  // Every snapshot beside the ledger: its stored hash, and that it is this ledger's.
  auto store = OpenSnapshots(global);
  if (!store.ok()) return Fail(store.status());
  auto snapshots = replay::VerifySnapshots(**log, **store);
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
  auto log = OpenLocalLedger(global, true);
  if (!log.ok()) return Fail(log.status());
  SystemClock clock;
  IntakeOptions intake_options;
  if (!global.at.empty()) {
    auto at = ParseRfc3339(global.at);
    if (!at.ok()) return Fail(at.status());
    intake_options.at_ns = *at;
  }
  intake_options.actor = global.actor.empty() ? "dev" : global.actor;
  // Stamped as the intake stamps a call (StampTime), but appended as given: no keys, no
  // validation, no decisions (a developer's tool for the ledger alone).
  const ledger::Head head = (*log)->GetHead();
  Result<int64_t> at = StampTime(intake_options, head.recorded_at_ns, head.sequence, clock);
  if (!at.ok()) return Fail(at.status());
  for (size_t i = 0; i < events.size(); ++i) {
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(events[i]);
    if (!decoded.ok()) {
      return Fail(Status(Code::kInvalidArgument,
                         "event " + std::to_string(i) + ": " + decoded.status().message()));
    }
    capnp::MallocMessageBuilder message;
    message.setRoot(decoded->root());
    schema::Event::Builder root = message.getRoot<schema::Event>();
    root.setRecordedAtNs(*at);
    if (root.getActor().size() == 0) root.setActor(intake_options.actor);
    events[i] = schema::EncodeEvent(message);
  }
  auto ack = (*log)->Append(events);
  if (!ack.ok()) return Fail(ack.status());
  for (size_t i = 0; i < ack->sequences.size(); ++i) {
    std::cout << ack->sequences[i] << (ack->duplicate[i] ? " duplicate (already recorded)" : "")
              << "\n";
  }
  return 0;
}

enum class FileKind { kApply, kSubmit, kImport, kDelete };

int RunFile(const GlobalOptions& global, FileKind kind, const std::string& path,
            const std::string& format, const std::string& validate = "strict",
            bool lenient = false) {
  auto text = ReadAll(path);
  if (!text.ok()) return Fail(text.status());
  auto session = OpenSession(global, true);
  if (!session.ok()) return Fail(session.status());
  SubmitContext ctx;
  auto head = (*session)->api->GetHead();
  if (!head.ok()) return Fail(head.status());
  ctx.name_seed = std::to_string(head->sequence);
  // A retry (the same --request-id) is the same workload; another submission of the file a new
  // one. Embedded without a request id, the head stands in for it.
  ctx.uid_seed = global.request_id.empty() ? "at/" + ctx.name_seed : global.request_id;
  std::vector<std::string> warnings;
  ParseOptions parse;
  parse.field_validation = validate == "warn"                          ? FieldValidation::kWarn
                           : validate == "ignore" || validate == "false" ? FieldValidation::kIgnore
                                                                         : FieldValidation::kStrict;
  parse.warnings = &warnings;
  parse.lenient = lenient;
  Result<std::vector<ParsedObject>> objects =
      kind == FileKind::kApply    ? ParseApplyYaml(*text, parse)
      : kind == FileKind::kDelete ? ParseDeleteYaml(*text)
      : kind == FileKind::kSubmit ? ParseSubmitYaml(*text, ctx, parse)
                                  : ParseImportYaml(*text, ctx, parse);
  for (const std::string& w : warnings) std::cerr << "Warning: " << w << "\n";
  if (!objects.ok()) return Fail(objects.status());
  if (objects->empty()) return Fail(Status(Code::kInvalidArgument, path + " holds no objects"));
  // kubectl's names: clusterqueue.kueue.x-k8s.io/gpu, job.batch/train, jobset.jobset.x-k8s.io/x.
  std::vector<std::string> labels;
  for (const ParsedObject& o : *objects) {
    std::string kind_name = o.source_kind.empty() ? o.kind : o.source_kind;
    std::string name = o.name;  // a Job's or JobSet's own name, not its Workload's
    const std::string prefix = kind_name == "Job" ? "job-" : kind_name == "JobSet" ? "jobset-" : "";
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
    const std::string group = kind_name == "Job"            ? "batch"
                              : kind_name == "JobSet"       ? "jobset.x-k8s.io"
                              : kind_name == "BudgetPolicy" ? "admission-ledger.io"
                                                            : "kueue.x-k8s.io";
    std::transform(kind_name.begin(), kind_name.end(), kind_name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    labels.push_back(kind_name + "." + group + "/" + name);
  }
  const bool definitions = kind == FileKind::kApply || kind == FileKind::kDelete;
  // A workload is submitted (or imported) once: WorkloadKey names the object (its uid).
  std::vector<std::string> inputs;
  if (definitions) {
    for (const ParsedObject& o : *objects) inputs.push_back(o.event);
  } else {
    inputs = KeyedWorkloadEvents(kind == FileKind::kSubmit ? "submit" : "import", *objects);
  }
  auto options = IntakeFrom(global, definitions ? "operator" : "submitter");
  if (!options.ok()) return Fail(options.status());
  auto outcome = (*session)->api->Record(inputs, *options, global.request_id);
  if (!outcome.ok()) return Fail(outcome.status());
  PrintOutcome(labels, *outcome, format, kind == FileKind::kDelete ? "deleted" : "created");
  return 0;
}

int RunWorkloadInput(const GlobalOptions& global, const std::string& ns_name, bool finish,
                     const std::string& message_text, const std::string& format) {
  auto name = SplitName(ns_name);
  if (!name.ok()) return Fail(name.status());
  auto session = OpenSession(global, false);
  if (!session.ok()) return Fail(session.status());
  auto wl = (*session)->api->Workload(ns_name);
  if (!wl.ok()) return Fail(wl.status());
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
  ref.setUid(wl->uid);
  // Once per workload incarnation: a retried command is a no-op.
  event.setIdempotencyKey(std::string(finish ? "finish/" : "delete/") + wl->uid);
  auto options = IntakeFrom(global, "runtime");
  if (!options.ok()) return Fail(options.status());
  auto outcome =
      (*session)->api->Record({schema::EncodeEvent(message)}, *options, global.request_id);
  if (!outcome.ok()) return Fail(outcome.status());
  PrintOutcome({std::string(finish ? "finish " : "delete ") + ns_name}, *outcome, format);
  return 0;
}

struct GetArgs {
  std::string what, format = "table", ns;
  std::string name, cluster_queue, local_queue;
  uint64_t limit = 1000, offset = 0;
  bool all_namespaces = false, watch = false;
  std::string selector;
  uint64_t at = 0;
};

// -o jsonpath=TEMPLATE is rendered here from the JSON; everything else by RenderGet.
Result<std::string> RenderGetOnce(AdmissionApi& api, const GetArgs& args, const GetQuery& query) {
  const bool jsonpath = args.format.rfind("jsonpath=", 0) == 0;
  auto text = api.Get(args.what, jsonpath ? "json" : args.format, query);
  if (!text.ok() || !jsonpath) return text;
  return JsonPath(args.format.substr(9), Json::parse(*text));
}

// -w: the table, then each row again whenever it changes (a new row, a new state), as the
// ledger's head moves; until interrupted.
int WatchGet(AdmissionApi& api, const GetArgs& args, const GetQuery& query) {
  std::map<std::string, std::string> shown;  // the row's first two columns -> its text
  uint64_t head = UINT64_MAX;
  for (bool first = true;; first = false) {
    auto now = api.GetHead();
    if (!now.ok()) return Fail(now.status());
    if (now->sequence != head) {
      head = now->sequence;
      auto text = RenderGetOnce(api, args, query);
      if (!text.ok() && text.status().code() != Code::kNotFound) return Fail(text.status());
      std::istringstream lines(text.ok() ? *text : "");
      std::string line;
      for (bool header = true; std::getline(lines, line); header = false) {
        std::istringstream words(line);
        std::string a, b;
        words >> a >> b;
        const std::string key = header ? "" : a + " " + b;
        if ((header && first) || (!header && shown[key] != line)) std::cout << line << "\n";
        if (!header) shown[key] = line;
      }
      std::cout.flush();
    }
    usleep(500 * 1000);
  }
}

int RunGet(const GlobalOptions& global, const GetArgs& args) {
  GetQuery query;
  query.name = args.name;
  query.ns = args.all_namespaces ? "" : args.ns;
  query.selector = args.selector;
  query.cluster_queue = args.cluster_queue;
  query.local_queue = args.local_queue;
  query.limit = args.limit;
  query.offset = args.offset;
  if (args.format != "table" && args.format != "wide" && args.format != "json" &&
      args.format != "yaml" && args.format != "name" && args.format.rfind("jsonpath=", 0) != 0) {
    return Fail(Status(Code::kInvalidArgument,
                       "-o " + args.format + ": expected table, wide, json, yaml, name or "
                       "jsonpath=TEMPLATE"));
  }
  if (args.watch && (!global.connected() || args.at != 0)) {
    return Fail(Status(Code::kInvalidArgument,
                       "-w follows a ledger that changes: through admitd (--connect ADDR), "
                       "without --at; an embedded ledger is read once per command"));
  }
  // With --at N: the read models as they were after sequence N (the end of its append).
  if (args.at == 0) {
    auto session = OpenSession(global, false, /*read_only=*/true);
    if (!session.ok()) return Fail(session.status());
    if (args.watch) return WatchGet(*(*session)->api, args, query);
    auto text = RenderGetOnce(*(*session)->api, args, query);
    if (!text.ok()) return Fail(text.status());
    std::cout << *text;
    return 0;
  }
  const uint64_t at_sequence = args.at;
  std::unique_ptr<ledger::EventLog> at_log;
  replay::StateAt at_state;
  {
    auto log = OpenLedgerToRead(global);
    if (!log.ok()) return Fail(log.status());
    at_log = std::move(*log);
    Progress progress("loading the ledger");
    auto snapshots = OpenSnapshots(global);
    if (!snapshots.ok()) return Fail(snapshots.status());
    std::vector<std::string> skipped;
    auto state = replay::FoldToSequenceFromSnapshot(
        *at_log, **snapshots, at_sequence,
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
  }
  const bool jsonpath = args.format.rfind("jsonpath=", 0) == 0;
  auto text = RenderGet(*at_state.engine, args.what, jsonpath ? "json" : args.format, {}, query);
  if (text.ok() && jsonpath) text = JsonPath(args.format.substr(9), Json::parse(*text));
  if (!text.ok()) return Fail(text.status());
  std::cout << *text;
  return 0;
}
// The options of every subcommand (`global` aside): the subcommands that main runs after the
// parse (the groups run from their own callbacks), and the options they fill.
struct CoreCommands {
  CLI::Option* ledger_option = nullptr;
  CLI::App* log = nullptr;
  uint64_t from = 1, limit = 0;
  std::string log_format = "text";
  CLI::App* verify = nullptr;
  std::string verify_format = "text";
  CLI::App* dev_append = nullptr;
  std::vector<std::string> json_args;
  std::string json_file;
  CLI::App *apply = nullptr, *submit = nullptr, *import = nullptr, *finish = nullptr,
           *delete_ = nullptr;
  std::string file_path, out_format = "text", workload_name, finish_message, delete_file;
  std::string validate = "strict";
  bool lenient = false;  // import: drop what cannot be honoured, listed
  CLI::Option* delete_file_option = nullptr;
  CLI::App* get = nullptr;
  GetArgs get_args;
  CLI::App* watch = nullptr;
  WatchArgs watch_args;
  CLI::App* demo = nullptr;
  std::string demo_dir = "admission-demo-ledger", demo_certs;
  CLI::Option* demo_dir_option = nullptr;
};

// The options every subcommand takes; returns --ledger's (the demo asks whether it was given).
CLI::Option* AddGlobalOptions(CLI::App& app, GlobalOptions& global) {
  if (const char* env = std::getenv("ADMITCTL_LEDGER")) global.ledger_dir = env;
  if (const char* env = std::getenv("ADMITCTL_CONNECT")) global.connect = env;
  CLI::Option* ledger_option = app.add_option("--ledger", global.ledger_dir,
                 "ledger directory (default: $ADMITCTL_LEDGER or ./admission-ledger), or "
                 "kafka://HOST:PORT/TOPIC: the Kafka ledger, read directly (log, verify, "
                 "replay, explain, get) and written only by admitd");
  app.add_option("--state", global.state_dir,
                 "Kafka ledger: the folder of its local copy, kept between runs so that only "
                 "new records are read (default: a temporary folder, removed at exit)");
  app.add_option("--kafka-timeout-ms", global.kafka_timeout_ms,
                 "Kafka ledger: how long to wait for the broker (default 30000)")
      ->check(CLI::Range(100, 600'000));
  app.add_option("--at", global.at,
                 "logical time of the input recorded (RFC 3339); default: the wall clock. "
                 "Never earlier than the ledger's last event.");
  app.add_option("--log-level", global.log_level, "trace, debug, info, warn (default), error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--as", global.actor,
                 "identity of the caller recorded on input events (embedded mode only: admitd "
                 "records the principal its connection proved)");
  app.add_option("--connect", global.connect,
                 "run the command through admitd at unix:PATH or tls:HOST:PORT (default "
                 "$ADMITCTL_CONNECT) instead of opening --ledger");
  app.add_option("--cert", global.cert, "TLS: this client's certificate (its common name is the principal)");
  app.add_option("--key", global.key, "TLS: this client's private key");
  app.add_option("--ca", global.ca, "TLS: the CA that signed admitd's certificate");
  app.add_option("--timeout", global.timeout,
                 "with --connect: how long connecting, and then each call, may wait for admitd "
                 "(a duration: 30s, 500ms, 2m; default 30s; 0: no limit). Past it admitctl exits "
                 "3, DeadlineExceeded. log, verify and replay read in pages, each a call; a "
                 "watch's stream is not bounded");
  app.add_option("--request-id", global.request_id,
                 "this call's request id: a retry with the same id returns the first outcome "
                 "and writes nothing (connected mode makes a fresh one per invocation)");
  app.add_option("--min-free-bytes", global.min_free_bytes,
                 "refuse appends to the embedded ledger while its disk has less than this many "
                 "bytes free (default: 64 MiB, or an eighth of a disk smaller than 512 MiB; "
                 "0: only a full disk refuses them)");
  app.add_option("--snapshot-every", global.snapshot_every,
                 "take a snapshot of the state after an append that crosses a multiple of this "
                 "many events (default 100000; 0: never). Startup loads the newest valid "
                 "snapshot and folds only the events after it");
  return ledger_option;
}

// log, verify and dev append: the ledger itself.
void AddLedgerCommands(CLI::App& app, CoreCommands& c) {
  c.log = app.add_subcommand("log", "print the ledger's events in order");
  c.log->add_option("--from", c.from, "first sequence to print (default 1)");
  c.log->add_option("--limit", c.limit, "print at most this many events (default: all)");
  c.log->add_option("-o,--output", c.log_format,
                    "text (one line per event) or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}));

  c.verify =
      app.add_subcommand("verify", "walk the hash chain from the first event to the head and "
                                   "check every snapshot (its stored SHA-256, and that its chain "
                                   "hash is the ledger's at its sequence); exit 1 naming the "
                                   "first bad sequence or snapshot");
  c.verify->add_option("-o,--output", c.verify_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));

  auto* dev_cmd = app.add_subcommand(
      "dev", "developer commands: write raw events (for tests and debugging, not operations)");
  dev_cmd->require_subcommand(1);
  c.dev_append = dev_cmd->add_subcommand(
      "append",
      "append raw events given as JSON (schema/events.capnp through Cap'n Proto's JSON codec) "
      "as one atomic batch; prints each event's sequence");
  c.dev_append->add_option("--json", c.json_args, "one event as JSON (repeatable)");
  c.dev_append->add_option("-f,--file", c.json_file,
                           "file of JSON events, one per line ('-': stdin)");
}

// apply, submit, import, finish and delete: Kueue definitions and workloads in.
void AddInputCommands(CLI::App& app, CoreCommands& c) {
  c.apply = app.add_subcommand(
      "apply", "record Kueue definitions (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, "
               "AdmissionCheck, WorkloadPriorityClass; v1beta1 or v1beta2 YAML). Identical "
               "objects are no-ops; a changed ClusterQueue is a new quota version");
  c.submit = app.add_subcommand(
      "submit", "submit Workloads and batch/v1 Jobs (label kueue.x-k8s.io/queue-name) as one "
                "atomic batch; prints the decisions they caused");
  c.import = app.add_subcommand(
      "import", "adopt Kueue's Workloads (kubectl get workloads -o yaml) with Kueue's record: "
                "those with status.admission as admitted, the others pending in Kueue's order");
  for (auto* cmd : {c.apply, c.submit, c.import}) {
    cmd->add_option("-f,--filename", c.file_path, "YAML file ('-': stdin)")->required();
    cmd->add_option("-o,--output", c.out_format, "text or json")
        ->check(CLI::IsMember({"text", "json"}));
    cmd->add_option("--validate", c.validate,
                    "unknown fields, as kubectl's --validate: strict or true (default: refuse "
                    "the file, naming the field), warn (record, print a warning), ignore or "
                    "false (record silently)")
        ->check(CLI::IsMember({"strict", "true", "warn", "ignore", "false"}));
  }
  c.import->add_flag("--lenient", c.lenient,
                     "import what the ledger cannot honour of Kueue's status (checks not Ready, "
                     "a reservation not admitted) without it, each dropped field listed "
                     "(default: refuse the file, naming it)");
  c.finish = app.add_subcommand("finish", "record that a workload finished; frees its quota");
  c.finish->add_option("workload", c.workload_name, "NAMESPACE/NAME")->required();
  c.finish->add_option("--message", c.finish_message, "why or how it finished");
  c.finish->add_option("-o,--output", c.out_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  c.delete_ = app.add_subcommand(
      "delete", "record that a workload was deleted (frees its quota), or with -f that Kueue "
                "definitions were deleted (read as kubectl delete -f reads them; refused while "
                "the ledger does not define them or a ClusterQueue uses them)");
  auto* delete_workload_opt = c.delete_->add_option("workload", c.workload_name, "NAMESPACE/NAME");
  c.delete_file_option = c.delete_->add_option(
      "-f,--filename", c.delete_file, "YAML file of definitions to delete ('-': stdin)");
  delete_workload_opt->excludes(c.delete_file_option);
  c.delete_->add_option("-o,--output", c.out_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
}

// get and watch: the state and the stream of events out.
void AddReadCommands(CLI::App& app, CoreCommands& c) {
  c.get = app.add_subcommand(
      "get", "show the current state as Kueue-shaped objects: workloads, clusterqueues, "
             "localqueues or cohorts; or the nodes reported (admitctl node, the bridge)");
  c.get->add_option("kind", c.get_args.what,
                    "workloads|clusterqueues|localqueues|cohorts|nodes|pendingworkloads")
      ->required()
      ->check(CLI::IsMember({"workloads", "workload", "wl", "clusterqueues", "clusterqueue", "cq",
                             "localqueues", "localqueue", "lq", "cohorts", "cohort", "nodes",
                             "node", "pendingworkloads", "pendingworkload"}));
  c.get->add_option("--cluster-queue", c.get_args.cluster_queue,
                    "pendingworkloads of this ClusterQueue (Kueue's visibility API)");
  c.get->add_option("--local-queue", c.get_args.local_queue,
                    "pendingworkloads of this LocalQueue, NAMESPACE/NAME");
  c.get->add_option("--limit", c.get_args.limit, "pendingworkloads: at most this many (1000)")
      ->check(CLI::PositiveNumber);
  c.get->add_option("--offset", c.get_args.offset, "pendingworkloads: from this position on (0)");
  c.get->add_option("name", c.get_args.name, "only the object of this name (kubectl get KIND NAME)");
  c.get->add_option("-n,--namespace", c.get_args.ns,
                    "only this namespace (default: every namespace you may see, as -A)");
  c.get->add_flag("-A,--all-namespaces", c.get_args.all_namespaces, "every namespace (the default)");
  c.get->add_option("-l,--selector", c.get_args.selector,
                    "label selector, as kubectl's: k=v, k!=v, k, !k, 'k in (a,b)', "
                    "comma-separated");
  c.get->add_option("-o,--output", c.get_args.format,
                    "table (default), wide, json, yaml, name or jsonpath=TEMPLATE (kubectl's)");
  c.get->add_flag("-w,--watch", c.get_args.watch,
                  "after the table, print each row again when it changes, until interrupted");
  c.get->add_option("--at", c.get_args.at,
                    "the state after this ledger sequence (rounded up to the end of its "
                    "append); default: the head");

  c.watch = app.add_subcommand(
      "watch", "stream the ledger's events from admitd as they are appended (like kubectl get "
               "-w): one line or one JSON object per event, from --from on; reconnecting with "
               "the last sequence seen + 1 misses nothing and repeats nothing");
  WatchArgs& watch = c.watch_args;
  c.watch->add_option("--from", watch.request.from, "first sequence (default 1)");
  c.watch->add_option("--kind", watch.request.kinds,
                      "only events of this kind, as log prints it (repeatable)");
  c.watch->add_option("--namespace", watch.request.namespaces,
                      "only events about workloads of this namespace (repeatable)");
  c.watch->add_option("--cluster-queue", watch.request.cluster_queues,
                      "only events of this ClusterQueue (repeatable)");
  c.watch->add_option("--check", watch.request.checks,
                      "only reports for this AdmissionCheck and reservations that need it "
                      "(repeatable)");
  c.watch->add_option("--limit", watch.limit, "stop after this many events");
  c.watch->add_option("-o,--output", watch.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
}

void AddDemoCommand(CLI::App& app, CoreCommands& c) {
  c.demo = app.add_subcommand(
      "demo", "run the GPU platform demo on a fresh ledger (embedded, or through admitd with "
              "--connect and --certs) and narrate its decisions");
  c.demo_dir_option = c.demo->add_option(
      "--dir", c.demo_dir,
      "fresh ledger directory (must not exist or be empty; default: --ledger when given, else "
      "./admission-demo-ledger). With --connect: where the explain page goes (default .)");
  c.demo->add_option(
      "--certs", c.demo_certs,
      "with --connect tls:HOST:PORT: a folder of one client certificate per actor (ACTOR.pem "
      "and ACTOR.key, '/' in a name written '_') and the daemon's CA (ca.pem), as "
      "ops/scripts/test_pki.sh makes them; the daemon's ledger must be empty");
}

// Logs go to stderr at --log-level; set up once the options are parsed and before any
// command runs (command groups run from their subcommand's callback, during the parse).
void SetUpOnceParsed(CLI::App& app, GlobalOptions& global) {
  app.parse_complete_callback([&global]() {
    auto logger = spdlog::stderr_color_mt("admitctl");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(global.log_level));
    // One request id per invocation: a retry of this call (same id) is answered, not redone.
    if (global.connected() && global.request_id.empty()) global.request_id = NewRequestId();
    auto ns = admission::schema::ParseDurationNs(global.timeout);
    if (!ns.ok() || *ns < 0) {
      throw CLI::ValidationError("--timeout", "'" + global.timeout +
                                                  "' is not a duration (e.g. 30s, 500ms, 2m, 0)");
    }
    global.timeout_ms = static_cast<uint64_t>(*ns / 1'000'000);
    if (*ns > 0 && global.timeout_ms == 0) global.timeout_ms = 1;
  });
}

// Runs the demo: through admitd when connected, else on a fresh embedded ledger.
int RunDemoCommand(const GlobalOptions& global, CoreCommands& c) {
  if (global.connected()) {
    return RunConnectedDemo(global, c.demo_certs,
                            c.demo_dir_option->count() > 0 ? c.demo_dir : ".");
  }
  if (!c.demo_certs.empty()) {
    return Fail(Status(Code::kInvalidArgument,
                       "demo --certs is for --connect (the demo through admitd)"));
  }
  if (c.demo_dir_option->count() == 0 && c.ledger_option->count() > 0) {
    c.demo_dir = global.ledger_dir;
  }
  Status s = RunDemo(c.demo_dir, std::cout);
  return s.ok() ? 0 : Fail(s);
}

// Runs the one subcommand of `c` that was given; -1 when none was.
int RunCoreCommand(const GlobalOptions& global, CoreCommands& c) {
  if (*c.log) return RunLog(global, c.from, c.limit, c.log_format);
  if (*c.watch) return RunWatch(global, c.watch_args);
  if (*c.verify) return RunVerify(global, c.verify_format);
  if (*c.dev_append) return RunDevAppend(global, c.json_args, c.json_file);
  if (*c.apply) return RunFile(global, FileKind::kApply, c.file_path, c.out_format, c.validate);
  if (*c.submit) return RunFile(global, FileKind::kSubmit, c.file_path, c.out_format, c.validate);
  if (*c.import) {
    return RunFile(global, FileKind::kImport, c.file_path, c.out_format, c.validate, c.lenient);
  }
  if (*c.finish) {
    return RunWorkloadInput(global, c.workload_name, true, c.finish_message, c.out_format);
  }
  if (*c.delete_ && c.delete_file_option->count() > 0) {
    return RunFile(global, FileKind::kDelete, c.delete_file, c.out_format);
  }
  if (*c.delete_ && c.workload_name.empty()) {
    return Fail(Status(Code::kInvalidArgument,
                       "delete: name a workload (NAMESPACE/NAME) or a file of definitions (-f)"));
  }
  if (*c.delete_) return RunWorkloadInput(global, c.workload_name, false, "", c.out_format);
  if (*c.get) return RunGet(global, c.get_args);
  if (*c.demo) return RunDemoCommand(global, c);
  return -1;
}

}  // namespace
}  // namespace admission::ops

int main(int argc, char** argv) {
  using namespace admission::ops;
  CLI::App app{
      "admitctl: the admission ledger's command line (embedded RocksDB ledger, a Kafka ledger "
      "read directly, or admitd through --connect).\n"
      "Every input and decision is an immutable event in the ledger at --ledger.\n"
      "Exit codes: 0 done; 1 refused or failed (admitctl: CODE: message on stderr); 2 usage; "
      "3 timed out: admitd did not answer within --timeout (the call may or may not have been "
      "done: retry it with the same --request-id)."};
  app.require_subcommand(1);
  // Global options are accepted anywhere on the line, also after the subcommand
  // (`report-check ... --as OWNER`, as the README shows).
  app.fallthrough();
  GlobalOptions global;
  CoreCommands core;
  core.ledger_option = AddGlobalOptions(app, global);
  AddLedgerCommands(app, core);
  AddInputCommands(app, core);
  AddReadCommands(app, core);
  AddDemoCommand(app, core);

  int group_exit_code = -1;
  AddLifecycleCommands(app, global, &group_exit_code);
  AddKafkaCommands(app, global, &group_exit_code);
  AddBillingCommands(app, global, &group_exit_code);
  AddMetricsCommands(app, global, &group_exit_code);
  AddWhatIfCommands(app, global, &group_exit_code);
  AddSimulationCommands(app, &group_exit_code);

  int replay_exit = -1;
  AddReplayCommands(app, global, &replay_exit);
  SetUpOnceParsed(app, global);
  if (auto stop = ParseArgs(app, argc, argv)) return *stop;
  if (replay_exit >= 0) return replay_exit;
  if (group_exit_code >= 0) return group_exit_code;
  if (const int code = RunCoreCommand(global, core); code >= 0) return code;
  std::cerr << app.help();
  return 2;
}
