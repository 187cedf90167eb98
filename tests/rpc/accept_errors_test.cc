// A listener whose accepts fail (file descriptors exhausted: EMFILE) does not stop admitd from
// accepting: each failure is counted and retried with a backoff, the daemon is not ready while
// they fail, and the connections waiting in the backlog are served once accepts work again.
// The failures come from a forwarding wrapper around the real listener.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "ops/rpc/client.h"
#include "tests/rpc/in_process_daemon.h"
#include "tests/unit/temp_dir.h"

namespace admission::testing {
namespace {

// Forwards to the real listener, but fails every accept while `failing` is set, as accept(2)
// does with EMFILE: the connection stays in the backlog.
class FailingReceiver final : public kj::ConnectionReceiver {
 public:
  FailingReceiver(kj::Own<kj::ConnectionReceiver> inner, std::shared_ptr<std::atomic<bool>> failing)
      : inner_(kj::mv(inner)), failing_(std::move(failing)) {}
  kj::Promise<kj::Own<kj::AsyncIoStream>> accept() override {
    if (failing_->load()) return Failure();
    return inner_->accept();
  }
  kj::Promise<kj::AuthenticatedStream> acceptAuthenticated() override {
    if (failing_->load()) return Failure();
    return inner_->acceptAuthenticated();
  }
  kj::uint getPort() override { return inner_->getPort(); }

 private:
  static kj::Exception Failure() {
    return KJ_EXCEPTION(FAILED, "accept(fd, ...): Too many open files");
  }
  kj::Own<kj::ConnectionReceiver> inner_;
  std::shared_ptr<std::atomic<bool>> failing_;
};

TEST(AcceptErrors, AreRetriedCountedAndMakeTheDaemonNotReady) {
  TempDir dir;
  ServedLedger served;
  auto log = ledger::RocksDbLog::Open(dir.Sub("ledger"));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  served.log = std::move(*log);
  served.snapshots = std::make_unique<ledger::FileSnapshotStore>(dir.Sub("ledger"));
  ops::ServiceOptions service_options;
  service_options.snapshot_every_events = 0;
  auto service = ops::Service::Open(*served.log, served.clock, nullptr, service_options);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  served.service = std::move(*service);

  auto failing = std::make_shared<std::atomic<bool>>(true);
  ops::rpc::DaemonOptions options;
  options.wrap_receiver = [failing](kj::Own<kj::ConnectionReceiver> inner) {
    return kj::Own<kj::ConnectionReceiver>(kj::heap<FailingReceiver>(kj::mv(inner), failing));
  };
  const std::string socket = dir.Sub("admitd.sock");
  InProcessDaemon daemon(served, socket, std::move(options));

  // A client connects while accepts fail: it waits in the backlog.
  auto endpoint = ops::rpc::ParseEndpoint("unix:" + socket);
  ASSERT_TRUE(endpoint.ok());
  ops::rpc::ClientOptions client_options;
  client_options.endpoint = *endpoint;
  client_options.call_timeout_ms = 10'000;
  auto connected = std::async(std::launch::async, [&] {
    auto client = ops::rpc::RpcClient::Connect(client_options);
    return client.ok() ? Status::Ok() : client.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ops::rpc::DaemonStats failing_stats = daemon.Stats();
  EXPECT_GE(failing_stats.accept_errors, 3u) << "10, 20, 40, 80 ms backoff in 300 ms";
  EXPECT_LE(failing_stats.accept_errors, 10u) << "retries without a backoff";
  EXPECT_TRUE(failing_stats.accept_failing);
  EXPECT_FALSE(daemon.Accepting());
  EXPECT_EQ(connected.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "connected while every accept fails";

  // Accepts work again: the waiting client is served within the backoff's bound, and the
  // daemon is ready.
  failing->store(false);
  ASSERT_EQ(connected.wait_for(std::chrono::milliseconds(ops::rpc::kAcceptRetryMaxMs + 3000)),
            std::future_status::ready);
  Status s = connected.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(daemon.Accepting());
  EXPECT_FALSE(daemon.Stats().accept_failing);
}

}  // namespace
}  // namespace admission::testing
