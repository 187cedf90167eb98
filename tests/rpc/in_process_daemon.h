#pragma once
// admitd in this process, for benchmarks and tests: a ledger with its Service, and a Daemon on
// its own thread and event loop listening on a Unix socket (the peer is this uid: admin).

#include <kj/async-io.h>

#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ops/service/clock.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"

namespace admission::testing {

struct ServedLedger {
  std::string dir;
  std::unique_ptr<ledger::RocksDbLog> log;
  std::unique_ptr<ledger::FileSnapshotStore> snapshots;
  ops::SystemClock clock;
  std::unique_ptr<ops::Service> service;
};


// REQUIRES: `served` outlives it. Stops the daemon (Shutdown) when destroyed.
class InProcessDaemon {
 public:
  // `options`: anything but the listen address (the socket); `policy`: only admin by default.
  InProcessDaemon(ServedLedger& served, const std::string& socket,
                  ops::rpc::DaemonOptions options = {}, ops::rpc::Policy policy = {})
      : served_(served) {
    std::promise<void> ready;
    thread_ = std::thread([this, socket, &ready, options = std::move(options),
                           policy = std::move(policy)]() mutable {
      Run(socket, std::move(options), std::move(policy), &ready);
    });
    ready.get_future().wait();
  }
  ~InProcessDaemon() {
    executor_->executeSync([this] { stop_->fulfill(); });
    thread_.join();
  }
  ops::rpc::DaemonStats Stats() {
    return executor_->executeSync([this] { return daemon_->stats(); });
  }
  bool Accepting() {
    return executor_->executeSync([this] { return daemon_->accepting(); });
  }

 private:
  void Run(const std::string& socket, ops::rpc::DaemonOptions options, ops::rpc::Policy policy,
           std::promise<void>* ready) {
    auto io = kj::setupAsyncIo();
    auto endpoint = ops::rpc::ParseEndpoint("unix:" + socket);
    ADM_CHECK(endpoint.ok(), "%s", endpoint.status().ToString().c_str());
    options.listen.push_back(*endpoint);
    ops::rpc::Daemon daemon(io, *served_.service, *served_.log, *served_.snapshots,
                            std::move(policy), std::move(options));
    auto bound = daemon.Listen(io.waitScope);
    ADM_CHECK(bound.ok(), "%s", bound.status().ToString().c_str());
    daemon_ = &daemon;
    executor_ = &kj::getCurrentThreadExecutor();
    auto stop = kj::newPromiseAndFulfiller<void>();
    stop_ = stop.fulfiller.get();
    ready->set_value();
    stop.promise.wait(io.waitScope);
    daemon.Shutdown()
        .exclusiveJoin(
            io.provider->getTimer().afterDelay(ops::rpc::kShutdownMaxMs * kj::MILLISECONDS))
        .wait(io.waitScope);
    daemon_ = nullptr;
  }

  ServedLedger& served_;
  std::thread thread_;
  const kj::Executor* executor_ = nullptr;
  kj::PromiseFulfiller<void>* stop_ = nullptr;
  ops::rpc::Daemon* daemon_ = nullptr;
};

}  // namespace admission::testing
