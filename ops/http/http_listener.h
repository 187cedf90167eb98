#pragma once
// admitd's HTTP listener (--metrics-listen HOST:PORT, kj-http; docs/metrics.md,
// docs/dashboard.md): /metrics in the Prometheus text format (the ledger's metrics projection,
// consumers/metrics, then the daemon's own process metrics), /healthz and /readyz, and the
// dashboard: its pages (/, /app.js, /style.css, from the binary) and their JSON (/api/*, for a
// bearer token the policy maps to a principal; a tenant sees only its namespaces), with
// /api/stream pushing the ledger's head as server-sent events. Event loop thread only.

#include <functional>
#include <memory>
#include <string>

#include <kj/async-io.h>

#include "consumers/metrics/ledger_metrics.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"

namespace admission::ops::http {

class HttpListener {
 public:
  // REQUIRES: everything outlives it. `ready` says whether /readyz answers 200.
  HttpListener(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
              ledger::SnapshotStore& snapshots, rpc::Daemon& daemon, std::function<bool()> ready);
  ~HttpListener();

  // Folds the ledger's events up to what the service has folded (from the genesis on the
  // first call: the counters count the whole ledger). Errors: the log's, kCorruption.
  Status CatchUp();
  // Binds HOST:PORT (port 0 picks one) and serves; returns "http://HOST:PORT".
  Result<std::string> Listen(const std::string& host_port, kj::WaitScope& wait_scope);
  // Kueue's kueue_local_queue_* twins on /metrics (admitd --local-queue-metrics).
  void set_render_options(const consumers::metrics::RenderOptions& options);
  // What /metrics answers now (after a catch-up).
  Result<std::string> Render();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace admission::ops::http
