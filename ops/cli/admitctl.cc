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
#include "ops/clock.h"
#include "ops/intake.h"
#include "ops/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

struct GlobalOptions {
  std::string ledger_dir = "admission-ledger";
  std::string at;
  std::string log_level = "warn";
  std::string actor;
};

int Fail(const Status& status) {
  std::cerr << "admitctl: " << status.ToString() << "\n";
  return 1;
}

Result<std::unique_ptr<ledger::RocksDbLog>> OpenLedger(const GlobalOptions& global,
                                                        bool create) {
  ledger::RocksDbLogOptions options;
  options.create_if_missing = create;
  spdlog::debug("opening ledger at {}", global.ledger_dir);
  return ledger::RocksDbLog::Open(global.ledger_dir, options);
}

// Progress on a terminal only; pipes and files stay quiet.
class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), enabled_(isatty(2) == 1) {}
  void Update(uint64_t done, uint64_t total) {
    if (!enabled_) return;
    std::fprintf(stderr, "\r%s: %llu / %llu events", what_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total));
    std::fflush(stderr);
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fputc('\n', stderr);
  }

 private:
  std::string what_;
  bool enabled_;
  bool shown_ = false;
};

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
  if (format == "json") {
    std::cout << "{\"ok\":" << (report->fault ? "false" : "true")
              << ",\"eventsChecked\":" << report->events_checked << ",\"head\":" << report->head
              << ",\"headHash\":\"" << schema::HashHex(report->head_hash) << "\"";
    if (report->fault) {
      std::cout << ",\"badSequence\":" << report->fault->sequence << ",\"reason\":\""
                << report->fault->reason << "\"";
    }
    std::cout << "}\n";
  } else if (report->fault) {
    std::cout << "FAILED at sequence " << report->fault->sequence << ": "
              << report->fault->reason << "\n";
  } else {
    std::cout << "verified " << report->events_checked << " events; head " << report->head
              << " hash " << schema::HashHex(report->head_hash) << "\n";
  }
  return report->fault ? 1 : 0;
}

Result<std::string> ReadAll(const std::string& path) {
  std::ostringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return Status(Code::kInvalidArgument, "cannot read " + path);
    buffer << in.rdbuf();
  }
  return buffer.str();
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
  app.add_option("--ledger", global.ledger_dir,
                 "ledger directory (default: $ADMITCTL_LEDGER or ./admission-ledger)");
  app.add_option("--at", global.at,
                 "logical time of the input recorded (RFC 3339); default: the wall clock. "
                 "Never earlier than the ledger's last event.");
  app.add_option("--log-level", global.log_level, "trace, debug, info, warn (default), error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--as", global.actor, "identity of the caller recorded on input events");

  auto* log_cmd = app.add_subcommand("log", "print the ledger's events in order");
  uint64_t from = 1, limit = 0;
  std::string log_format = "text";
  log_cmd->add_option("--from", from, "first sequence to print (default 1)");
  log_cmd->add_option("--limit", limit, "print at most this many events (default: all)");
  log_cmd->add_option("-o,--output", log_format,
                      "text (one line per event) or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}));

  auto* verify_cmd =
      app.add_subcommand("verify", "walk the hash chain from the first event to the head; "
                                   "exit 1 naming the first bad sequence");
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

  CLI11_PARSE(app, argc, argv);

  auto logger = spdlog::stderr_color_mt("admitctl");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(global.log_level));

  if (*log_cmd) return RunLog(global, from, limit, log_format);
  if (*verify_cmd) return RunVerify(global, verify_format);
  if (*dev_append) return RunDevAppend(global, json_args, json_file);
  std::cerr << app.help();
  return 2;
}
