#include "ops/http/http_listener.h"

#include <kj/compat/http.h>

#include <cctype>
#include <chrono>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ledger/verify.h"
#include "ops/views/dashboard.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "schema/time_format.h"

namespace admission::ops::http {

// ops/ui's files, embedded by ops/ui/embed.cmake: (content type, body), or empty.
std::pair<std::string_view, std::string_view> UiAssetByPath(std::string_view path);

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kCatchUpChunk = 4096;
constexpr int kStreamPollMs = 200;        // how often a stream looks at the head
constexpr int kStreamHeartbeatTicks = 75;  // a comment line every 15 s keeps proxies open

std::string QueryParam(const std::string& url, const std::string& name) {
  const size_t q = url.find('?');
  if (q == std::string::npos) return "";
  std::string rest = url.substr(q + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t amp = rest.find('&', start);
    const std::string pair = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (pair.rfind(name + "=", 0) == 0) {
      std::string v = pair.substr(name.size() + 1), out;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '%' && i + 2 < v.size() && std::isxdigit(static_cast<unsigned char>(v[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(v[i + 2]))) {
          out += static_cast<char>(std::stoi(v.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          out += v[i] == '+' ? ' ' : v[i];
        }
      }
      return out;
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return "";
}

// The daemon's own counters, which are not a projection of the ledger (they start at 0 with
// the process).
// The ledger's disk (docs/operations.md, "A full disk"), when the log has local storage.
std::string DiskMetrics(const std::optional<ledger::DiskState>& disk) {
  if (!disk) return "";
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(v) + "\n";
  };
  metric("admitd_ledger_disk_free_bytes", "gauge", "Bytes free on the ledger's disk now",
         disk->free_bytes);
  metric("admitd_ledger_disk_min_free_bytes", "gauge",
         "The free-space floor (--min-free-bytes): writes are refused below it", disk->min_free_bytes);
  metric("admitd_ledger_writes_refused", "gauge",
         "1 while writes are refused for lack of disk space (reads are served), else 0",
         disk->refusing ? 1 : 0);
  metric("admitd_ledger_no_space_refusals_total", "counter",
         "Appends refused for lack of disk space, since the daemon started", disk->appends_refused);
  return out;
}

std::string ProcessMetrics(const rpc::DaemonStats& s) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + std::to_string(v) + "\n";
  };
  metric("admitd_connections", "gauge", "RPC connections open now", s.connections);
  metric("admitd_ledger_appends_total", "counter",
         "Appends to the ledger (group commits), since the daemon started", s.groups);
  metric("admitd_ledger_appended_calls_total", "counter",
         "Record calls written by those appends, since the daemon started", s.group_calls);
  metric("admitd_rpc_overloaded_calls_total", "counter",
         "Calls refused because the daemon was overloaded, since it started", s.overloaded_calls);
  metric("admitd_rpc_record_calls_total", "counter", "Record calls answered, since the daemon started",
         s.record_calls);
  metric("admitd_rpc_refused_calls_total", "counter",
         "Calls refused by the policy (permission denied), since the daemon started",
         s.refused_calls);
  metric("admitd_watchers", "gauge", "Watch streams open now", s.watchers);
  metric("admitd_tls_handshakes", "gauge", "TLS handshakes in progress now", s.tls_handshakes);
  metric("admitd_accept_errors_total", "counter",
         "Accepts of connections that failed (file descriptors exhausted, ...) and were retried, "
         "since the daemon started",
         s.accept_errors);
  metric("admitd_accepting", "gauge",
         "1 while connections are accepted; 0 while accepting fails (/readyz: not ready)",
         s.accept_failing ? 0 : 1);
  metric("admitd_partial_message_bytes", "gauge",
         "Bytes received of RPC messages not yet complete, all connections", s.partial_message_bytes);
  metric("admitd_manifest_parse_bytes", "gauge",
         "Bytes of recordManifest manifests waiting for the parser or being parsed",
         s.manifest_parse_bytes);
  out += "# HELP admitd_connections_closed_total Connections the daemon closed at a limit, by "
         "reason, since it started\n# TYPE admitd_connections_closed_total counter\n";
  for (const auto& [reason, n] : s.connections_closed) {
    out += "admitd_connections_closed_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  metric("admitd_ledger_appended_events_total", "counter",
         "Events (inputs and decisions) those appends wrote, since the daemon started; divided "
         "by admitd_ledger_appends_total: events per durable append (fsync)",
         s.appended_events);
  // One series of a duration histogram; `labels` is "" or `name="value",`.
  auto series = [&](const char* name, const std::string& labels, const rpc::DurationHistogram& h) {
    const size_t bounds = std::size(rpc::DurationHistogram::kBoundsUs);
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds; ++i) {
      cumulative += i < h.buckets.size() ? h.buckets[i] : 0;
      char le[32];
      if (i < bounds) {
        std::snprintf(le, sizeof le, "%g", static_cast<double>(rpc::DurationHistogram::kBoundsUs[i]) / 1e6);
      } else {
        std::snprintf(le, sizeof le, "+Inf");
      }
      out += std::string(name) + "_bucket{" + labels + "le=\"" + le + "\"} " +
             std::to_string(cumulative) + "\n";
    }
    char sum[32];
    std::snprintf(sum, sizeof sum, "%.6f", static_cast<double>(h.sum_us) / 1e6);
    const std::string bare = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
    out += std::string(name) + "_sum" + bare + " " + sum + "\n" + name + "_count" + bare + " " +
           std::to_string(h.count) + "\n";
  };
  out += "# HELP admitd_ledger_append_duration_seconds How long each append (decide, write, "
         "fsync) took\n# TYPE admitd_ledger_append_duration_seconds histogram\n";
  series("admitd_ledger_append_duration_seconds", "", s.append_duration);
  out += "# HELP admitd_rpc_calls_total Calls answered, by method, since the daemon started\n"
         "# TYPE admitd_rpc_calls_total counter\n";
  for (const auto& [method, h] : s.call_duration) {
    out += "admitd_rpc_calls_total{method=\"" + method + "\"} " + std::to_string(h.count) + "\n";
  }
  out += "# HELP admitd_rpc_call_duration_seconds How long calls took to answer, by method (a "
         "record call's includes its group commit)\n"
         "# TYPE admitd_rpc_call_duration_seconds histogram\n";
  for (const auto& [method, h] : s.call_duration) {
    series("admitd_rpc_call_duration_seconds", "method=\"" + method + "\",", h);
  }
  out += "# HELP admitd_rpc_refusals_total Calls refused before any work, by method and reason, "
         "since the daemon started\n# TYPE admitd_rpc_refusals_total counter\n";
  for (const auto& [key, n] : s.refusals) {
    out += "admitd_rpc_refusals_total{method=\"" + key.first + "\",reason=\"" + key.second +
           "\"} " + std::to_string(n) + "\n";
  }
  return out;
}

// The head and the last kDashboardTailEvents events, for the dashboard's overview (an
// unreadable stretch ends the tail early: the overview shows what could be read).
LedgerTail ReadTail(ledger::EventLog& log) {
  const ledger::Head head = log.GetHead();
  LedgerTail tail{
      .head_sequence = head.sequence, .head_hash_hex = schema::HashHex(head.hash), .events = {}};
  const uint64_t from =
      head.sequence > kDashboardTailEvents ? head.sequence - kDashboardTailEvents + 1 : 1;
  for (uint64_t next = from; next <= head.sequence;) {
    auto events =
        log.Read(next, std::min<uint64_t>(ledger::kReadEventsMax, head.sequence - next + 1));
    if (!events.ok() || events->empty()) break;
    for (ledger::StoredEvent& e : *events) {
      next = e.sequence + 1;
      tail.events.emplace_back(e.sequence, std::move(e.bytes));
    }
  }
  return tail;
}

}  // namespace

class HttpListener::Impl final : public kj::HttpService, public kj::TaskSet::ErrorHandler {
 public:
  Impl(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
       ledger::SnapshotStore& snapshots, rpc::Daemon& daemon, std::function<bool()> ready)
      : io_(io),
        service_(service),
        log_(log),
        snapshots_(snapshots),
        daemon_(daemon),
        ready_(std::move(ready)) {
    kj::HttpHeaderTable::Builder builder;
    authorization_ = builder.add("Authorization");
    cache_control_ = builder.add("Cache-Control");
    table_ = builder.build();
  }

  Status CatchUp() {
    const uint64_t to = service_.position();
    Status failure;
    while (fold_.last_sequence() < to && failure.ok()) {
      auto seen = log_.Scan(fold_.last_sequence() + 1,
                            std::min<uint64_t>(kCatchUpChunk, to - fold_.last_sequence()),
                            [&](ledger::Sequence sequence, std::string_view bytes) {
                              auto decoded = schema::DecodeEvent(bytes);
                              if (!decoded.ok()) {
                                failure = Status(Code::kCorruption,
                                                 "event " + std::to_string(sequence) + ": " +
                                                     decoded.status().message());
                                return false;
                              }
                              fold_.Apply(sequence, decoded->root());
                              return true;
                            });
      if (!seen.ok()) return seen.status();
      if (*seen == 0) break;
    }
    return failure;
  }

  Result<std::string> Render() {
    ADM_RETURN_IF_ERROR(CatchUp());
    return fold_.Render(service_.engine(), render_options_) + ProcessMetrics(daemon_.stats()) +
           DiskMetrics(log_.Disk());
  }

  Result<std::string> Listen(const std::string& host_port, kj::WaitScope& ws) {
    kj::Own<kj::NetworkAddress> address;
    KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
      address = io_.provider->getNetwork().parseAddress(host_port).wait(ws);
      listener_ = address->listen();
    })) {
      return Status(Code::kIoError, "--metrics-listen " + host_port + ": " +
                                        std::string(e->getDescription().cStr()));
    }
    server_ = kj::heap<kj::HttpServer>(io_.provider->getTimer(), *table_, *this);
    connections_ = kj::heap<kj::TaskSet>(*this);
    serving_ = AcceptLoop(0).eagerlyEvaluate([](kj::Exception&& e) {
      spdlog::error("the metrics listener stopped: {}", e.getDescription().cStr());
    });
    std::string host = host_port.substr(0, host_port.rfind(':'));
    return "http://" + host + ":" + std::to_string(listener_->getPort());
  }

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders& headers,
                            kj::AsyncInputStream&, Response& response) override {
    std::string path(url.cStr());
    if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    // Everything is read with GET, but the audit's actions (a whole-ledger verify or replay).
    const bool action = path.rfind("/api/audit/", 0) == 0;
    if (action ? method != kj::HttpMethod::POST
               : method != kj::HttpMethod::GET && method != kj::HttpMethod::HEAD) {
      return Send(response, 405, "Method Not Allowed", "text/plain",
                  action ? "POST only\n" : "GET only\n");
    }
    if (path == "/healthz") return Send(response, 200, "OK", "text/plain", "ok\n");
    if (path == "/readyz") {
      return ready_() ? Send(response, 200, "OK", "text/plain", "ready\n")
                      : Send(response, 503, "Service Unavailable", "text/plain", "not ready\n");
    }
    if (path == "/" || path == "/index.html" || path == "/app.js" || path == "/style.css") {
      auto [type, body] = UiAssetByPath(path == "/" ? "/index.html" : path);
      if (body.empty()) return Send(response, 404, "Not Found", "text/plain", "no such file\n");
      return Send(response, 200, "OK", kj::StringPtr(type.data(), type.size()), std::string(body));
    }
    if (path.rfind("/api/", 0) == 0) return Api(path, std::string(url.cStr()), headers, response);
    if (path == "/metrics") {
      auto text = Render();
      if (!text.ok()) {
        return Send(response, 500, "Internal Server Error", "text/plain",
                    text.status().ToString() + "\n");
      }
      return Send(response, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", *text);
    }
    return Send(response, 404, "Not Found", "text/plain",
                "not found: " + path + " (try /metrics, /healthz, /readyz)\n");
  }

 private:
  kj::Promise<void> Send(Response& response, unsigned code, kj::StringPtr status,
                         kj::StringPtr type, std::string body) {
    kj::HttpHeaders headers(*table_);
    headers.set(kj::HttpHeaderId::CONTENT_TYPE, type);
    auto stream = response.send(code, status, headers, static_cast<uint64_t>(body.size()));
    auto owned = kj::heap<std::string>(std::move(body));
    auto promise = stream->write(owned->data(), owned->size());
    return promise.attach(kj::mv(stream), kj::mv(owned));
  }

  // The dashboard's JSON, for the principal the bearer token names.
  kj::Promise<void> Api(const std::string& path, const std::string& url,
                        const kj::HttpHeaders& headers, Response& response) {
    std::string token;
    KJ_IF_MAYBE(auth, headers.get(authorization_)) {
      const std::string value(auth->cStr());
      if (value.rfind("Bearer ", 0) == 0) token = value.substr(7);
    }
    const rpc::Policy& policy = daemon_.policy();
    const rpc::PrincipalPolicy* who = policy.FindByToken(token);
    if (who == nullptr) {
      return Send(response, 401, "Unauthorized", "text/plain",
                  token.empty() ? "a bearer token is needed (Authorization: Bearer TOKEN)\n"
                                : "that token is not in the daemon's policy (tokenSha256)\n");
    }
    Status may = policy.MaySee(who->name, "use the dashboard", "");
    if (!may.ok()) return Send(response, 403, "Forbidden", "text/plain", may.message() + "\n");
    const std::vector<std::string> scope = policy.ScopeOf(who->name);
    NamespaceFilter allow;
    if (!scope.empty()) {
      allow = [scope](const std::string& ns) {
        return std::find(scope.begin(), scope.end(), ns) != scope.end();
      };
    }
    const projections::Engine& engine = service_.engine();
    if (path == "/api/whoami") {
      Json roles = Json::array();
      for (const std::string& r : policy.RolesOf(who->name)) roles.push_back(r);
      return SendJson(response, Json{{"principal", who->name}, {"roles", roles}, {"namespaces", scope}});
    }
    if (path == "/api/overview" || path == "/api/checks") {
      Status caught = CatchUp();
      if (!caught.ok()) return Send(response, 500, "Internal Server Error", "text/plain", caught.ToString());
      const CheckRejections rejected = fold_.CheckReports("Rejected");
      if (path == "/api/checks") return SendJson(response, DashboardChecks(engine, allow, rejected));
      return SendJson(response, DashboardOverview(engine, ReadTail(log_), allow, rejected));
    }
    if (path == "/api/workloads") return SendJson(response, DashboardWorkloads(engine, allow));
    if (path == "/api/cohorts") return SendJson(response, DashboardCohorts(engine));
    if (path == "/api/audit/verify" || path == "/api/audit/replay") {
      return ApiAuditRun(path == "/api/audit/verify", who->name, response);
    }
    if (path == "/api/audit") return ApiAuditState(who->name, response);
    if (path == "/api/explain") return ApiExplain(url, who->name, response);
    if (path == "/api/stream") {
      kj::HttpHeaders h(*table_);
      h.set(kj::HttpHeaderId::CONTENT_TYPE, "text/event-stream");
      h.set(cache_control_, "no-cache");
      auto stream = response.send(200, "OK", h);
      return Pump(kj::mv(stream), 0, 0);
    }
    return Send(response, 404, "Not Found", "text/plain", "no such API: " + path + "\n");
  }

  // /api/audit/verify and /api/audit/replay: the whole ledger's check, on a read worker; its
  // outcome is kept for /api/audit.
  kj::Promise<void> ApiAuditRun(bool verify, const std::string& who, Response& response) {
    Status may = daemon_.policy().MayRead(who, verify ? "verify the ledger" : "replay the ledger");
    if (!may.ok()) return Send(response, 403, "Forbidden", "text/plain", may.message() + "\n");
    ledger::EventLog& log = log_;
    const uint64_t head = log_.GetHead().sequence;
    auto job = verify ? std::function<Result<std::string>()>([&log]() -> Result<std::string> {
      auto report = ledger::VerifyChain(log, 1, schema::kGenesisHash, true);
      if (!report.ok()) return report.status();
      if (report->fault) {
        return "FAILED at sequence " + std::to_string(report->fault->sequence) + ": " +
               report->fault->reason;
      }
      return "ok: " + std::to_string(report->events_checked) + " events, head " +
             std::to_string(report->head) + " " + schema::HashHex(report->head_hash);
    })
                      : std::function<Result<std::string>()>([&log, head]() -> Result<std::string> {
      if (head == 0) return std::string("ok: the ledger is empty");
      replay::Replayer replayer(log, replay::Genesis());
      replay::ReplayOptions options;
      options.to = head;
      auto report = replayer.Run(options);
      if (!report.ok()) return report.status();
      if (report->divergence) {
        return "DIVERGED at sequence " + std::to_string(report->divergence->sequence) + ": " +
               report->divergence->first_differing_field;
      }
      return "ok: " + std::to_string(report->events) + " events, " +
             std::to_string(report->decisions_compared) + " decisions reproduced, decision "
             "stream " + schema::HashHex(report->decision_stream_hash);
    });
    return daemon_.OnReadWorker(std::move(job))
        .then([this, verify, &response](kj::Own<Result<std::string>> result) {
          const std::string text =
              (result->ok() ? **result : "error: " + result->status().ToString()) + " (" +
              FormatRfc3339(NowNs()) + ")";
          (verify ? last_verify_ : last_replay_) = text;
          return SendJson(response, Json{{verify ? "lastVerify" : "lastReplay", text}});
        });
  }

  // /api/audit: the head, the snapshots, and the last verify and replay.
  kj::Promise<void> ApiAuditState(const std::string& who, Response& response) {
    const ledger::Head head = log_.GetHead();
    Json snaps = Json::array();
    auto listed = snapshots_.List();
    if (listed.ok()) {
      for (uint64_t s : *listed) snaps.push_back("after " + std::to_string(s));
    }
    const Json head_json{{"sequence", head.sequence}, {"hash", schema::HashHex(head.hash)}};
    return SendJson(response, Json{{"head", head_json},
                                   {"snapshots", snaps},
                                   {"lastVerify", last_verify_},
                                   {"lastReplay", last_replay_},
                                   // Whether this principal may run them (the page's buttons).
                                   {"mayRun", daemon_.policy().MayRead(who, "verify").ok()}});
  }

  // /api/explain?workload=NAMESPACE/NAME[&format=html], for a principal that may see that
  // namespace: admitctl explain's text, or its HTML page.
  kj::Promise<void> ApiExplain(const std::string& url, const std::string& who,
                               Response& response) {
    const std::string name = QueryParam(url, "workload");
    const bool html = QueryParam(url, "format") == "html";
    const std::string ns = name.substr(0, name.find('/'));
    Status see = daemon_.policy().MaySee(who, "explain", ns);
    if (name.find('/') == std::string::npos) {
      see = Status(Code::kInvalidArgument, "workload=NAMESPACE/NAME");
    }
    if (!see.ok()) return Send(response, see.code() == Code::kPermissionDenied ? 403 : 400,
                               "Refused", "text/plain", see.message() + "\n");
    return daemon_.Explain(name, 0, html ? "html" : "text").then(
        [this, &response, html](kj::Own<Result<std::string>> text) {
          if (!text->ok()) {
            return Send(response, text->status().code() == Code::kNotFound ? 404 : 500,
                        "Refused", "text/plain", text->status().ToString() + "\n");
          }
          return Send(response, 200, "OK",
                      html ? "text/html; charset=utf-8" : "text/plain; charset=utf-8", **text);
        });
  }

  // One server-sent event per change of the head (and a comment line now and then), until the
  // client goes away.
  kj::Promise<void> Pump(kj::Own<kj::AsyncOutputStream> stream, uint64_t sent, int ticks) {
    const uint64_t head = service_.position();
    std::string message;
    if (head != sent) {
      message = "id: " + std::to_string(head) + "\nevent: head\ndata: {\"sequence\": " +
                std::to_string(head) + "}\n\n";
      ticks = 0;
    } else if (++ticks >= kStreamHeartbeatTicks) {
      message = ": still here\n\n";
      ticks = 0;
    }
    auto next = [this, head, ticks](kj::Own<kj::AsyncOutputStream> s) {
      return io_.provider->getTimer()
          .afterDelay(kStreamPollMs * kj::MILLISECONDS)
          .then([this, s = kj::mv(s), head, ticks]() mutable { return Pump(kj::mv(s), head, ticks); });
    };
    if (message.empty()) return next(kj::mv(stream));
    auto owned = kj::heap<std::string>(std::move(message));
    auto& out = *stream;
    return out.write(owned->data(), owned->size())
        .attach(kj::mv(owned))
        .then([next, s = kj::mv(stream)]() mutable { return next(kj::mv(s)); },
              [](kj::Exception&&) {});  // the client went away
  }

  // Accepts as HttpServer::listenHttp would, but an accept that fails (file descriptors
  // exhausted) is retried after a backoff instead of ending the listener: /readyz must answer
  // again once the daemon can accept (docs/admitd.md, "Limits").
  kj::Promise<void> AcceptLoop(uint64_t retry_ms) {
    // (kj's accept throws at once when accept(2) fails at once: inside the promise.)
    return kj::evalNow([this]() { return listener_->accept(); }).then(
        [this](kj::Own<kj::AsyncIoStream> connection) {
          connections_->add(server_->listenHttp(kj::mv(connection)));
          return AcceptLoop(0);
        },
        [this, retry_ms](kj::Exception&& e) {
          const uint64_t wait_ms =
              retry_ms == 0 ? rpc::kAcceptRetryFirstMs : std::min(retry_ms * 2, rpc::kAcceptRetryMaxMs);
          uint64_t held_back = 0;
          if (accept_log_.Allow(&held_back)) {
            spdlog::warn("accepting an HTTP connection failed ({} failures not logged before); "
                         "retrying in {} ms: {}",
                         held_back, wait_ms, e.getDescription().cStr());
          }
          return io_.provider->getTimer().afterDelay(wait_ms * kj::MILLISECONDS).then(
              [this, wait_ms]() { return AcceptLoop(wait_ms); });
        });
  }
  void taskFailed(kj::Exception&& e) override {
    spdlog::debug("an HTTP connection ended: {}", e.getDescription().cStr());
  }

  kj::Promise<void> SendJson(Response& response, const Json& doc) {
    return Send(response, 200, "OK", "application/json", doc.dump());
  }

  kj::AsyncIoContext& io_;
  Service& service_;
  ledger::EventLog& log_;
  ledger::SnapshotStore& snapshots_;
  rpc::Daemon& daemon_;
  kj::HttpHeaderId authorization_ = kj::HttpHeaderId::HOST;
  kj::HttpHeaderId cache_control_ = kj::HttpHeaderId::HOST;
  std::function<bool()> ready_;
  kj::Own<kj::HttpHeaderTable> table_;
  consumers::metrics::MetricsFold fold_;
  // The dashboard's last verify and replay of the whole ledger (what, and when: wall clock).
  std::string last_verify_, last_replay_;

 public:
  consumers::metrics::RenderOptions render_options_;

 private:
  kj::Own<kj::ConnectionReceiver> listener_;
  kj::Own<kj::HttpServer> server_;
  rpc::LogThrottle accept_log_{1000};
  // After the server: connections end before it goes.
  kj::Own<kj::TaskSet> connections_;
  kj::Promise<void> serving_ = nullptr;
};

HttpListener::HttpListener(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
                         ledger::SnapshotStore& snapshots, rpc::Daemon& daemon,
                         std::function<bool()> ready)
    : impl_(std::make_unique<Impl>(io, service, log, snapshots, daemon, std::move(ready))) {}
HttpListener::~HttpListener() = default;
Status HttpListener::CatchUp() { return impl_->CatchUp(); }
Result<std::string> HttpListener::Listen(const std::string& host_port, kj::WaitScope& ws) {
  return impl_->Listen(host_port, ws);
}
Result<std::string> HttpListener::Render() { return impl_->Render(); }
void HttpListener::set_render_options(const consumers::metrics::RenderOptions& options) {
  impl_->render_options_ = options;
}

}  // namespace admission::ops::http
