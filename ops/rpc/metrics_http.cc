#include "ops/rpc/metrics_http.h"

#include <kj/compat/http.h>

#include "schema/event_codec.h"

namespace admission::ops::rpc {

namespace {

constexpr size_t kCatchUpChunk = 4096;

// The daemon's own counters, which are not a projection of the ledger (they start at 0 with
// the process).
std::string ProcessMetrics(const DaemonStats& s) {
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
  return out;
}

}  // namespace

class MetricsHttp::Impl final : public kj::HttpService {
 public:
  Impl(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log, Daemon& daemon,
       std::function<bool()> ready)
      : io_(io),
        service_(service),
        log_(log),
        daemon_(daemon),
        ready_(std::move(ready)),
        table_(kj::HttpHeaderTable::Builder().build()) {}

  Status CatchUp() {
    const uint64_t to = service_.position();
    Status failure;
    while (fold_.last_sequence() < to && failure.ok()) {
      auto seen = log_.Scan(fold_.last_sequence() + 1,
                            std::min<uint64_t>(kCatchUpChunk, to - fold_.last_sequence()),
                            [&](ledger::Sequence sequence, std::string_view bytes) {
                              if (!failure.ok()) return;
                              auto decoded = schema::DecodeEvent(bytes);
                              if (!decoded.ok()) {
                                failure = Status(Code::kCorruption,
                                                 "event " + std::to_string(sequence) + ": " +
                                                     decoded.status().message());
                                return;
                              }
                              fold_.Apply(sequence, decoded->root());
                            });
      if (!seen.ok()) return seen.status();
      if (*seen == 0) break;
    }
    return failure;
  }

  Result<std::string> Render() {
    ADM_RETURN_IF_ERROR(CatchUp());
    return fold_.Render(service_.engine()) + ProcessMetrics(daemon_.stats());
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
    serving_ = server_->listenHttp(*listener_).eagerlyEvaluate([](kj::Exception&& e) {
      KJ_LOG(ERROR, "the metrics listener stopped", e);
    });
    std::string host = host_port.substr(0, host_port.rfind(':'));
    return "http://" + host + ":" + std::to_string(listener_->getPort());
  }

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders&,
                            kj::AsyncInputStream&, Response& response) override {
    std::string path(url.cStr());
    if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    if (method != kj::HttpMethod::GET && method != kj::HttpMethod::HEAD) {
      return Send(response, 405, "Method Not Allowed", "text/plain", "GET only\n");
    }
    if (path == "/healthz") return Send(response, 200, "OK", "text/plain", "ok\n");
    if (path == "/readyz") {
      return ready_() ? Send(response, 200, "OK", "text/plain", "ready\n")
                      : Send(response, 503, "Service Unavailable", "text/plain", "not ready\n");
    }
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

  kj::AsyncIoContext& io_;
  Service& service_;
  ledger::EventLog& log_;
  Daemon& daemon_;
  std::function<bool()> ready_;
  kj::Own<kj::HttpHeaderTable> table_;
  consumers::metrics::MetricsFold fold_;
  kj::Own<kj::ConnectionReceiver> listener_;
  kj::Own<kj::HttpServer> server_;
  kj::Promise<void> serving_ = nullptr;
};

MetricsHttp::MetricsHttp(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
                         Daemon& daemon, std::function<bool()> ready)
    : impl_(std::make_unique<Impl>(io, service, log, daemon, std::move(ready))) {}
MetricsHttp::~MetricsHttp() = default;
Status MetricsHttp::CatchUp() { return impl_->CatchUp(); }
Result<std::string> MetricsHttp::Listen(const std::string& host_port, kj::WaitScope& ws) {
  return impl_->Listen(host_port, ws);
}
Result<std::string> MetricsHttp::Render() { return impl_->Render(); }

}  // namespace admission::ops::rpc
