// admitd answers a write while an explain that folds a long ledger is still running: explain
// runs on the daemon's read worker, not on the event loop that serves record calls.

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/rpc/client.h"
#include "schema/event_codec.h"
#include "tests/rpc/in_process_daemon.h"
#include "tests/rpc/node_reports.h"
#include "tests/unit/temp_dir.h"

namespace admission::testing {
namespace {

using Clock = std::chrono::steady_clock;



constexpr char kJob[] = R"(apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      containers:
      - name: main
        image: x
        resources: {requests: {cpu: "1"}}
      restartPolicy: Never
)";

// A ledger whose explain must fold `events` node reports before it reaches the workload.
void Fill(ops::Service& service, size_t events) {
  Status filled = RecordNodeReports(service, events);
  ASSERT_TRUE(filled.ok()) << filled.ToString();
  ops::SubmitContext ctx;
  auto job = ops::ParseSubmitYaml(kJob, ctx);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(service.Record({job->front().event}, AdminIntake()).ok());
}

std::unique_ptr<ops::rpc::RemoteApi> Connect(const std::string& socket) {
  ops::rpc::ClientOptions options;
  auto endpoint = ops::rpc::ParseEndpoint("unix:" + socket);
  ADM_CHECK(endpoint.ok(), "%s", endpoint.status().ToString().c_str());
  options.endpoint = *endpoint;
  auto client = ops::rpc::RpcClient::Connect(options);
  ADM_CHECK(client.ok(), "%s", client.status().ToString().c_str());
  return std::make_unique<ops::rpc::RemoteApi>(
      std::shared_ptr<ops::rpc::RpcClient>(std::move(*client)));
}

TEST(AdmitdReads, ARecordIsAnsweredWhileAnExplainFoldsTheLedger) {
  TempDir dir;
  ServedLedger served;
  {
    ledger::RocksDbLogOptions fast;
    fast.sync = false;  // filling the ledger; the daemon's appends below are the same log
    auto log = ledger::RocksDbLog::Open(dir.Sub("ledger"), fast);
    ASSERT_TRUE(log.ok());
    served.log = std::move(*log);
  }
  served.snapshots = std::make_unique<ledger::FileSnapshotStore>(dir.Sub("ledger"));
  ops::ServiceOptions options;
  options.snapshot_every_events = 0;
  auto service = ops::Service::Open(*served.log, served.clock, nullptr, options);
  ASSERT_TRUE(service.ok());
  served.service = std::move(*service);
  Fill(*served.service, 300'000);

  InProcessDaemon daemon(served, dir.Sub("admitd.sock"));
  auto auditor = Connect(dir.Sub("admitd.sock"));
  auto writer = Connect(dir.Sub("admitd.sock"));

  std::atomic<bool> explained{false};
  Clock::time_point explain_done;
  Result<std::string> text = Status(Code::kIoError, "not run");
  const Clock::time_point start = Clock::now();
  std::thread reader([&] {
    text = auditor->Explain("ml/job-train", 0, "text");
    explain_done = Clock::now();
    explained = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the explain is folding now
  ops::IntakeOptions intake;
  intake.actor = "admin";
  auto recorded = writer->Record({NodeReport(1'000'000)}, intake, "during-explain");
  const Clock::time_point record_done = Clock::now();
  const bool explain_was_running = !explained.load();
  reader.join();

  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_NE(text->find("job-train"), std::string::npos);
  const double explain_s = std::chrono::duration<double>(explain_done - start).count();
  const double record_s = std::chrono::duration<double>(record_done - start).count();
  std::printf("explain took %.3f s; the record was answered after %.3f s\n", explain_s, record_s);
  // The fold must take long enough for the comparison to mean something.
  ASSERT_GT(explain_s, 0.15) << "the ledger is too small to tell";
  EXPECT_TRUE(explain_was_running) << "the record was answered only after the explain";
  EXPECT_LT(record_s, explain_s);
}

}  // namespace
}  // namespace admission::testing
