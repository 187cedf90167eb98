// hostile_client: a client of admitd that sends what admitctl never sends, for the tests of
// docs/admitd.md's limits and checks (tests/cli/hostile_test.sh). See --help.
//
// Exit codes: 0 the daemon answered (record, manifest: recorded; flood, handshake-flood,
// slowloris: the report was printed); 1 the daemon refused (printed as `CODE: message`) or could
// not be reached; 2 usage.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>
#include <nlohmann/json.hpp>

#include "ops/args/parse_args.h"
#include "ops/rpc/client.h"
#include "schema/event_codec.h"
#include "schema/time_format.h"

namespace admission::hostile {
namespace {

struct Options {
  std::string connect;
  ops::rpc::TlsFiles tls;
  uint64_t timeout_ms = 60'000;  // each RPC call (record, manifest)
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
  client_options.call_timeout_ms = options.timeout_ms;
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

// ---- Raw connections: many at once on one event loop, as an attacker holds them.

// What one raw connection saw: when it opened, when (and whether) admitd closed it, and the
// reason of an RPC Abort admitd sent before closing, if any.
struct Held {
  bool opened = false;
  bool closed = false;
  std::string failed;   // why it could not be opened
  int64_t closed_after_ms = -1;  // from the moment the connection was set up (or stalled)
  std::string abort_reason;
  kj::Own<kj::AsyncIoStream> stream;
  std::vector<kj::byte> received;
};

class RawClient {
 public:
  explicit RawClient(const Options& options) : options_(options), io_(kj::setupAsyncIo()) {}

  Status Setup() {
    auto endpoint = ops::rpc::ParseEndpoint(options_.connect);
    if (!endpoint.ok()) return endpoint.status();
    endpoint_ = *endpoint;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
      address_ = io_.provider->getNetwork().parseAddress(endpoint_.KjAddress()).wait(io_.waitScope);
      if (endpoint_.kind == ops::rpc::Endpoint::Kind::kTls) {
        kj::TlsContext::Options tls_options;
        tls_options.useSystemTrustStore = false;
        if (!options_.tls.ca.empty()) {
          auto ca = ops::rpc::ReadFileText(options_.tls.ca, "--ca");
          KJ_REQUIRE(ca.ok(), ca.status().ToString());
          ca_ = kj::heap<kj::TlsCertificate>(kj::StringPtr(ca->c_str()));
          tls_options.trustedCertificates = kj::arrayPtr(ca_.get(), 1);
        }
        if (!options_.tls.cert.empty()) {
          auto cert = ops::rpc::ReadFileText(options_.tls.cert, "--cert");
          auto key = ops::rpc::ReadFileText(options_.tls.key, "--key");
          KJ_REQUIRE(cert.ok() && key.ok(), "--cert and --key must be readable");
          keypair_ = kj::heap<kj::TlsKeypair>(kj::TlsKeypair{
              kj::TlsPrivateKey(kj::StringPtr(key->c_str())),
              kj::TlsCertificate(kj::StringPtr(cert->c_str()))});
          tls_options.defaultKeypair = *keypair_;
        }
        tls_ = kj::heap<kj::TlsContext>(kj::mv(tls_options));
      }
    })) {
      return Status(Code::kInvalidArgument, e->getDescription().cStr());
    }
    return Status::Ok();
  }

  bool tls() const { return endpoint_.kind == ops::rpc::Endpoint::Kind::kTls; }
  kj::WaitScope& ws() { return io_.waitScope; }
  kj::Timer& timer() { return io_.provider->getTimer(); }

  // A connection: TCP or Unix, then (handshake, on tls:) the TLS handshake.
  kj::Promise<kj::Own<kj::AsyncIoStream>> Open(bool handshake) {
    auto connected = address_->connect();
    if (!tls() || !handshake) return connected;
    return connected.then([this](kj::Own<kj::AsyncIoStream> stream) {
      return tls_->wrapClient(kj::mv(stream), endpoint_.host);
    });
  }

  // Opens n connections (`handshake` as Open), at most `concurrency` being opened at once,
  // then runs `setup` on each opened one; waits up to hold_ms from then, watching each for
  // admitd closing it.
  std::vector<Held> HoldMany(size_t n, bool handshake, uint64_t hold_ms, size_t concurrency,
                             const std::function<kj::Promise<void>(kj::AsyncIoStream&)>& setup) {
    std::vector<Held> held(n);
    size_t next = 0;
    kj::Vector<kj::Promise<void>> opening;
    for (size_t lane = 0; lane < std::max<size_t>(concurrency, 1) && lane < n; ++lane) {
      opening.add(OpenNext(held, next, handshake, setup));
    }
    kj::joinPromises(opening.releaseAsArray()).wait(io_.waitScope);
    const kj::TimePoint start = timer().now();
    kj::Vector<kj::Promise<void>> watching;
    for (Held& h : held) {
      if (!h.opened || h.stream.get() == nullptr) continue;
      watching.add(Watch(h, start));
    }
    kj::joinPromises(watching.releaseAsArray())
        .exclusiveJoin(timer().afterDelay(hold_ms * kj::MILLISECONDS))
        .wait(io_.waitScope);
    return held;
  }

 private:
  // Opens held[next++] and, when it is set up, the next one, until all are.
  kj::Promise<void> OpenNext(std::vector<Held>& held, size_t& next, bool handshake,
                             const std::function<kj::Promise<void>(kj::AsyncIoStream&)>& setup) {
    if (next >= held.size()) return kj::READY_NOW;
    Held* h = &held[next++];
    return Open(handshake)
        .then([h, &setup](kj::Own<kj::AsyncIoStream> stream) {
          h->opened = true;
          h->stream = kj::mv(stream);
          return setup(*h->stream);
        })
        .catch_([h](kj::Exception&& e) {
          if (!h->opened) h->failed = e.getDescription().cStr();
        })
        .then([this, &held, &next, handshake, &setup]() {
          return OpenNext(held, next, handshake, setup);
        });
  }

  // Reads whatever admitd sends until it closes the connection.
  kj::Promise<void> Watch(Held& h, kj::TimePoint start) {
    auto buffer = kj::heapArray<kj::byte>(4096);
    // A read that fails at once (a reset) throws here, not in the promise.
    auto read = kj::evalNow([&]() { return h.stream->tryRead(buffer.begin(), 1, buffer.size()); });
    return read
        .then(
            [this, &h, start, buffer = kj::mv(buffer)](size_t n) mutable -> kj::Promise<void> {
              if (n > 0) {
                if (h.received.size() < 65536) {
                  h.received.insert(h.received.end(), buffer.begin(), buffer.begin() + n);
                }
                return Watch(h, start);
              }
              Closed(h, start);
              return kj::READY_NOW;
            },
            [this, &h, start](kj::Exception&&) { Closed(h, start); });
  }
  void Closed(Held& h, kj::TimePoint start) {
    h.closed = true;
    h.closed_after_ms = (timer().now() - start) / kj::MILLISECONDS;
    h.abort_reason = AbortReason(h.received);
  }
  static std::string AbortReason(const std::vector<kj::byte>& bytes) {
    if (bytes.size() < 8 || bytes.size() % 8 != 0) return "";
    std::string reason;
    kj::runCatchingExceptions([&]() {
      kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(bytes.data()),
                                            bytes.size() / 8);
      capnp::FlatArrayMessageReader reader(words);
      auto message = reader.getRoot<capnp::rpc::Message>();
      if (message.isAbort()) reason = message.getAbort().getReason();
    });
    return reason;
  }

  const Options& options_;
  kj::AsyncIoContext io_;
  ops::rpc::Endpoint endpoint_;
  kj::Own<kj::NetworkAddress> address_;
  kj::Own<kj::TlsCertificate> ca_;
  kj::Own<kj::TlsKeypair> keypair_;
  kj::Own<kj::TlsContext> tls_;
};

// One line a test can read: open=N closed=N failed=N first_close_ms=N last_close_ms=N, then
// the first reason admitd gave and the first connect failure.
void Report(const char* what, const std::vector<Held>& held) {
  size_t open = 0, closed = 0, failed = 0;
  int64_t first = -1, last = -1;
  std::string reason, failure;
  for (const Held& h : held) {
    if (!h.failed.empty()) {
      ++failed;
      if (failure.empty()) failure = h.failed;
    } else if (h.closed) {
      ++closed;
      if (first < 0 || h.closed_after_ms < first) first = h.closed_after_ms;
      last = std::max(last, h.closed_after_ms);
      if (reason.empty()) reason = h.abort_reason;
    } else {
      ++open;
    }
  }
  std::cout << what << ": open=" << open << " closed=" << closed << " failed=" << failed
            << " first_close_ms=" << first << " last_close_ms=" << last << "\n";
  if (!reason.empty()) std::cout << "admitd said: " << reason << "\n";
  if (!failure.empty()) std::cout << "a connect failed: " << failure << "\n";
  std::cout.flush();
}

int RunFlood(const Options& options, size_t n, uint64_t hold_ms, size_t concurrency) {
  RawClient raw(options);
  Status s = raw.Setup();
  if (!s.ok()) return Refused(s);
  auto held = raw.HoldMany(n, true, hold_ms, concurrency,
                           [](kj::AsyncIoStream&) { return kj::READY_NOW; });
  Report("flood", held);
  return 0;
}

int RunHandshakeFlood(const Options& options, size_t n, uint64_t hold_ms, size_t bytes) {
  RawClient raw(options);
  Status s = raw.Setup();
  if (!s.ok()) return Refused(s);
  if (!raw.tls()) return Refused(Status(Code::kInvalidArgument, "handshake-flood needs a tls: address"));
  // The start of a TLS record of a ClientHello that never comes whole.
  auto hello = std::make_shared<std::vector<kj::byte>>(bytes, kj::byte{0});
  const kj::byte head[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  for (size_t i = 0; i < hello->size() && i < sizeof head; ++i) (*hello)[i] = head[i];
  auto held = raw.HoldMany(n, false, hold_ms, n, [hello](kj::AsyncIoStream& stream) -> kj::Promise<void> {
    if (hello->empty()) return kj::READY_NOW;
    return stream.write(hello->data(), hello->size());
  });
  Report("handshake-flood", held);
  return 0;
}

int RunSlowloris(const Options& options, size_t n, uint64_t bytes, uint64_t hold_ms,
                 size_t concurrency) {
  RawClient raw(options);
  Status s = raw.Setup();
  if (!s.ok()) return Refused(s);
  // One segment claimed 8 KiB longer than what is sent: the message stays incomplete.
  const uint64_t words = bytes / 8 + 1024;
  if (words > ops::rpc::kRequestWordsMax) {
    return Refused(Status(Code::kInvalidArgument,
                          "slowloris: at most " + std::to_string(ops::rpc::kRequestWordsMax * 8 - 8192) +
                              " bytes (admitd refuses a claim over its message limit at once)"));
  }
  auto frame = std::make_shared<std::vector<kj::byte>>(8 + bytes, kj::byte{0});
  const uint32_t header[2] = {0, static_cast<uint32_t>(words)};
  std::memcpy(frame->data(), header, sizeof header);
  auto held = raw.HoldMany(n, true, hold_ms, concurrency, [frame](kj::AsyncIoStream& stream) {
    return stream.write(frame->data(), frame->size());
  });
  Report("slowloris", held);
  return 0;
}

// A manifest of about `bytes` bytes: "jobs", Job documents (what the parser is for), or
// "dense", one flow sequence of tiny scalars (the most parser nodes per byte).
std::string MakeManifest(uint64_t bytes, const std::string& shape) {
  std::string out;
  out.reserve(bytes + 1024);
  if (shape == "dense") {
    out = "apiVersion: v1\nkind: List\nitems: [";
    while (out.size() + 2 < bytes) out += "0,";
    out += "0]\n";
    return out;
  }
  for (uint64_t i = 0; out.size() < bytes; ++i) {
    out += "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: hostile-" + std::to_string(i) +
           "\n  namespace: ml\n  labels: {kueue.x-k8s.io/queue-name: main}\nspec:\n"
           "  parallelism: 1\n  template:\n    spec:\n      containers:\n      - name: main\n"
           "        image: x\n        resources: {requests: {cpu: \"1\"}}\n"
           "      restartPolicy: Never\n---\n";
  }
  return out;
}

// `manifest BYTES`: `parallel` recordManifest calls at once, each on its own connection.
int RunManifest(const Options& options, uint64_t bytes, const std::string& mode,
                const std::string& shape, size_t parallel) {
  const std::string manifest = MakeManifest(bytes, shape);
  std::vector<std::shared_ptr<ops::rpc::RpcClient>> clients;
  for (size_t i = 0; i < parallel; ++i) {
    auto client = ConnectRpc(options);
    if (!client.ok()) return Refused(client.status());
    clients.push_back(*client);
  }
  std::vector<Status> answers(parallel);
  std::vector<int64_t> took_ms(parallel);
  std::vector<size_t> inputs(parallel);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < parallel; ++i) {
    threads.emplace_back([&, i] {
      const auto started = std::chrono::steady_clock::now();
      answers[i] = clients[i]->Run([&](ops::rpc::Ledger::Client& ledger) {
        auto call = ledger.recordManifestRequest();
        auto request = call.initRequest();
        request.setRequestId(RandomRequestId());
        request.setMode(mode);
        request.setManifest(manifest);
        return call.send().then([&inputs, i](capnp::Response<ops::rpc::Ledger::RecordManifestResults> r) {
          Status s = ops::rpc::FromError(r.getError());
          if (s.ok()) inputs[i] = r.getOutcome().getSequences().size();
          return s;
        });
      });
      took_ms[i] = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - started)
                       .count();
    });
  }
  for (auto& t : threads) t.join();
  int rc = 0;
  for (size_t i = 0; i < parallel; ++i) {
    std::cout << "manifest of " << manifest.size() << " bytes answered in " << took_ms[i]
              << " ms: ";
    if (answers[i].ok()) {
      std::cout << "recorded " << inputs[i] << " inputs\n";
    } else {
      std::cout << answers[i].ToString() << "\n";
      rc = 1;
    }
  }
  return rc;
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

  app.add_option("--timeout-ms", options.timeout_ms,
                 "record, manifest: how long connecting and the call may take (default 60000)");

  size_t count = 0;
  uint64_t hold_ms = 5000;
  const char* report_note =
      " Prints `NAME: open=N closed=N failed=N first_close_ms=N last_close_ms=N` (closed: by "
      "admitd, timed from the moment all were set up; failed: could not be opened), then the "
      "first reason admitd gave in an RPC Abort, if any.";
  auto* flood_cmd = app.add_subcommand(
      "flood", std::string("open N connections (TLS: with the handshake, as --cert) and hold "
                           "them idle for --hold-ms, watching which admitd closes.") +
                   report_note);
  flood_cmd->add_option("n", count, "connections")->required();
  flood_cmd->add_option("--hold-ms", hold_ms, "how long to hold them (default 5000)");
  size_t concurrency = 32;
  flood_cmd->add_option("--concurrency", concurrency,
                        "connections being opened at once (default 32: a burst past admitd's "
                        "kTlsHandshakesMax would evict its own handshakes)");

  size_t hello_bytes = 0;
  auto* handshake_cmd = app.add_subcommand(
      "handshake-flood",
      std::string("open N TCP connections to a tls: address that never finish the TLS "
                  "handshake (send --bytes of a ClientHello's start, then nothing) and hold them.") +
          report_note);
  handshake_cmd->add_option("n", count, "connections")->required();
  handshake_cmd->add_option("--hold-ms", hold_ms, "how long to hold them (default 5000)");
  handshake_cmd->add_option("--bytes", hello_bytes, "bytes sent before stalling (default 0)");

  uint64_t frame_bytes = 0;
  auto* slowloris_cmd = app.add_subcommand(
      "slowloris",
      std::string("open N connections (TLS: with the handshake, as --cert), send each BYTES of "
                  "an RPC message whose segment table claims 8 KiB more, then stall.") +
          report_note);
  slowloris_cmd->add_option("n", count, "connections")->required();
  slowloris_cmd->add_option("bytes", frame_bytes, "bytes of the message sent")->required();
  slowloris_cmd->add_option("--hold-ms", hold_ms, "how long to hold them (default 5000)");
  slowloris_cmd->add_option("--concurrency", concurrency,
                            "connections being opened and sent at once (default 32)");

  uint64_t manifest_bytes = 0;
  std::string mode = "submit", shape = "jobs";
  size_t parallel = 1;
  auto* manifest_cmd = app.add_subcommand(
      "manifest",
      "recordManifest calls of a manifest of about BYTES bytes: `jobs`, batch/v1 Jobs in "
      "namespace ml (queue main), or `dense`, one flow sequence of tiny scalars (the most "
      "parser nodes per byte). Prints, per call, `manifest of N bytes answered in MS ms: ` and "
      "`recorded N inputs` or `CODE: message`; exit 1 when any was refused.");
  manifest_cmd->add_option("bytes", manifest_bytes, "the manifest's size")->required();
  manifest_cmd->add_option("--mode", mode, "apply, submit (default) or delete");
  manifest_cmd->add_option("--shape", shape, "jobs (default) or dense")
      ->check(CLI::IsMember({"jobs", "dense"}));
  manifest_cmd->add_option("--parallel", parallel,
                           "calls at once, each on its own connection (default 1)");

  if (auto stop = admission::ops::ParseArgs(app, argc, argv)) return *stop;
  if (*record_cmd) return RunRecord(options, record_file, request_id, at);
  if (*flood_cmd) return RunFlood(options, count, hold_ms, concurrency);
  if (*handshake_cmd) return RunHandshakeFlood(options, count, hold_ms, hello_bytes);
  if (*slowloris_cmd) return RunSlowloris(options, count, frame_bytes, hold_ms, concurrency);
  if (*manifest_cmd) return RunManifest(options, manifest_bytes, mode, shape, std::max<size_t>(parallel, 1));
  std::cerr << app.help();
  return 2;
}
