// hostile_client: a client of admitd that sends what admitctl never sends, for the tests of
// docs/admitd.md's limits and checks (tests/cli/hostile_test.sh). See --help.
//
// Exit codes: 0 the daemon answered (record: recorded); 1 the daemon refused (printed as
// `CODE: message`) or could not be reached; 2 usage.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ops/parse_args.h"
#include "ops/rpc/client.h"
#include "schema/event_codec.h"
#include "schema/time_format.h"

namespace admission::hostile {
namespace {

struct Options {
  std::string connect;
  ops::rpc::TlsFiles tls;
};

Result<std::string> ReadWhole(const std::string& path) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  return ops::rpc::ReadFileText(path, "file");
}

// The events of FILE: a JSON array of events, or one event per line, each in Cap'n Proto's
// JSON form of schema/events.capnp's Event (as `admitctl log -o json` prints `event`).
Result<std::vector<std::string>> EventsOf(const std::string& text) {
  std::vector<std::string> json;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    nlohmann::json array = nlohmann::json::parse(text, nullptr, false);
    if (array.is_discarded() || !array.is_array()) {
      return Status(Code::kInvalidArgument, "the file starts with '[' but is not a JSON array");
    }
    for (const auto& item : array) json.push_back(item.dump());
  } else {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) json.push_back(line);
    }
  }
  if (json.empty()) return Status(Code::kInvalidArgument, "the file holds no events");
  std::vector<std::string> events;
  for (size_t i = 0; i < json.size(); ++i) {
    auto encoded = schema::EventFromJson(json[i]);
    if (!encoded.ok()) {
      return Status(Code::kInvalidArgument,
                    "event " + std::to_string(i) + ": " + encoded.status().message());
    }
    events.push_back(std::move(*encoded));
  }
  return events;
}

Result<std::shared_ptr<ops::rpc::RpcClient>> ConnectRpc(const Options& options) {
  auto endpoint = ops::rpc::ParseEndpoint(options.connect);
  if (!endpoint.ok()) return endpoint.status();
  ops::rpc::ClientOptions client_options;
  client_options.endpoint = *endpoint;
  client_options.tls = options.tls;
  auto client = ops::rpc::RpcClient::Connect(client_options);
  if (!client.ok()) return client.status();
  return std::shared_ptr<ops::rpc::RpcClient>(std::move(*client));
}

int Refused(const Status& s) {
  std::cout << s.ToString() << "\n";
  return 1;
}

std::string RandomRequestId() {
  std::random_device random;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", static_cast<unsigned>(random()),
                static_cast<unsigned>(random()));
  return std::string("hostile-") + buf;
}

// `record FILE`: one record call with these inputs, exactly as given (keys, uids, empty names
// and all); the daemon forces only the actor.
int RunRecord(const Options& options, const std::string& file, std::string request_id,
              const std::string& at) {
  auto text = ReadWhole(file);
  if (!text.ok()) return Refused(text.status());
  auto events = EventsOf(*text);
  if (!events.ok()) return Refused(events.status());
  ops::IntakeOptions intake;
  if (!at.empty()) {
    auto ns = ParseRfc3339(at);
    if (!ns.ok()) return Refused(ns.status());
    intake.at_ns = *ns;
  }
  if (request_id.empty()) request_id = RandomRequestId();
  auto client = ConnectRpc(options);
  if (!client.ok()) return Refused(client.status());
  ops::rpc::RemoteApi api(*client);
  const size_t count = events->size();
  auto outcome = api.Record(std::move(*events), intake, request_id);
  if (!outcome.ok()) return Refused(outcome.status());
  for (size_t i = 0; i < count && i < outcome->sequences.size(); ++i) {
    const bool unchanged = i < outcome->unchanged.size() && outcome->unchanged[i];
    std::cout << "input " << i << ": " << (unchanged ? "unchanged" : "recorded")
              << " at sequence " << outcome->sequences[i] << "\n";
  }
  for (const std::string& note : outcome->notes) std::cout << "note: " << note << "\n";
  for (size_t i = 0; i < outcome->decisions.size(); ++i) {
    auto decoded = schema::DecodeEvent(outcome->decisions[i]);
    std::cout << "decision " << outcome->first_decision_sequence + i << ": "
              << (decoded.ok() ? schema::BodyName(decoded->root()) : "(undecodable)") << "\n";
  }
  if (outcome->retried) std::cout << "retried: the first outcome of request " << request_id << "\n";
  return 0;
}

}  // namespace
}  // namespace admission::hostile

int main(int argc, char** argv) {
  using namespace admission::hostile;
  CLI::App app{
      "hostile_client: sends admitd what admitctl never sends, for the tests of its limits and "
      "checks (tests/cli/hostile_test.sh).\n"
      "Exit codes: 0 answered; 1 refused (stdout: `CODE: message`) or unreachable; 2 usage."};
  app.require_subcommand(1);
  app.fallthrough();
  Options options;
  app.add_option("--connect", options.connect, "unix:PATH or tls:HOST:PORT")->required();
  app.add_option("--cert", options.tls.cert, "TLS: the client certificate (its CN is the principal)");
  app.add_option("--key", options.tls.key, "TLS: its private key");
  app.add_option("--ca", options.tls.ca, "TLS: the CA of admitd's certificate");

  std::string record_file, request_id, at;
  auto* record_cmd = app.add_subcommand(
      "record",
      "one `record` call whose inputs are the events of FILE, sent as they are: a JSON array of "
      "events or one event per line, in Cap'n Proto's JSON form of schema/events.capnp's Event "
      "(what `admitctl log -o json` prints as \"event\"), e.g.\n"
      "  {\"idempotencyKey\": \"submit/vision/job-a\", \"body\": {\"workloadFinished\": "
      "{\"workload\": {\"namespace\": \"ml\", \"name\": \"\", \"uid\": \"...\"}}}}\n"
      "Prints each input's sequence (recorded or unchanged) and the decisions, or `CODE: "
      "message` and exits 1 when the daemon refuses the call.");
  record_cmd->add_option("file", record_file, "the events ('-': stdin)")->required();
  record_cmd->add_option("--request-id", request_id,
                         "the call's request id (default: a fresh random one)");
  record_cmd->add_option("--at", at, "the call's logical time (RFC 3339; default: the daemon's clock)");

  if (auto stop = admission::ops::ParseArgs(app, argc, argv)) return *stop;
  if (*record_cmd) return RunRecord(options, record_file, request_id, at);
  std::cerr << app.help();
  return 2;
}
