// Connected reads on a long ledger with large events: every EventLog reader (replay --verify,
// state at a sequence, verify, log) works over RemoteLog, through admitd's `read`, exactly as on
// the ledger itself, and a watch streams large events. The ledger is longer than one replay
// chunk (kReplayReadChunk) and holds a run of events whose count-bounded page (4,096 of them)
// would exceed the RPC message limit (kRequestWordsMax).

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ledger/verify.h"
#include "ops/service/api.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/rpc/client.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "schema/workload_refs.h"
#include "tests/rpc/in_process_daemon.h"
#include "tests/rpc/node_reports.h"
#include "tests/unit/temp_dir.h"

namespace admission::testing {
namespace {

// Past the first replay chunk, so a short page shows as a gap in the fold.
constexpr size_t kNodeReports = replay::kReplayReadChunk + 600;
// 240 workloads with 150 KB annotations (under Kubernetes' 256 KB): 36 MB of events in a row,
// more than one RPC message may hold.
constexpr size_t kLargeWorkloads = 240;
constexpr size_t kAnnotationBytes = 150 * 1024;



std::string LargeJob(size_t n) {
  return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: big-" + std::to_string(n) +
         "\n  namespace: ml\n  labels: {kueue.x-k8s.io/queue-name: lq}\n"
         "  annotations: {note: \"" +
         std::string(kAnnotationBytes, static_cast<char>('a' + n % 26)) +
         "\"}\nspec:\n  parallelism: 1\n  completions: 1\n  template:\n    spec:\n"
         "      containers:\n      - name: main\n        image: x\n"
         "        resources: {requests: {cpu: \"1\"}}\n      restartPolicy: Never\n";
}

std::shared_ptr<ops::rpc::RpcClient> Connect(const std::string& socket) {
  ops::rpc::ClientOptions options;
  auto endpoint = ops::rpc::ParseEndpoint("unix:" + socket);
  ADM_CHECK(endpoint.ok(), "%s", endpoint.status().ToString().c_str());
  options.endpoint = *endpoint;
  auto client = ops::rpc::RpcClient::Connect(options);
  ADM_CHECK(client.ok(), "%s", client.status().ToString().c_str());
  return std::shared_ptr<ops::rpc::RpcClient>(std::move(*client));
}

// One ledger and one daemon for every test here (filling it is most of the time).
class RemoteReads : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    served_ = new ServedLedger();
    ledger::RocksDbLogOptions fast;
    fast.sync = false;  // filling the ledger
    auto log = ledger::RocksDbLog::Open(dir_->Sub("ledger"), fast);
    ADM_CHECK(log.ok(), "%s", log.status().ToString().c_str());
    served_->log = std::move(*log);
    served_->snapshots = std::make_unique<ledger::FileSnapshotStore>(dir_->Sub("ledger"));
    ops::ServiceOptions options;
    options.snapshot_every_events = 0;
    auto service = ops::Service::Open(*served_->log, served_->clock, nullptr, options);
    ADM_CHECK(service.ok(), "%s", service.status().ToString().c_str());
    served_->service = std::move(*service);
    Fill(*served_->service);
    daemon_ = new InProcessDaemon(*served_, dir_->Sub("admitd.sock"));
  }
  static void TearDownTestSuite() {
    delete daemon_;
    delete served_;
    delete dir_;
  }

  static void Fill(ops::Service& service) {
    Status filled = RecordNodeReports(service, kNodeReports);
    ADM_CHECK(filled.ok(), "%s", filled.ToString().c_str());
    for (size_t n = 0; n < kLargeWorkloads; ++n) {
      ops::SubmitContext ctx;
      auto job = ops::ParseSubmitYaml(LargeJob(n), ctx);
      ADM_CHECK(job.ok(), "%s", job.status().ToString().c_str());
      auto recorded = service.Record({job->front().event}, AdminIntake());
      ADM_CHECK(recorded.ok(), "%s", recorded.status().ToString().c_str());
    }
  }

  static ledger::EventLog& Local() { return *served_->log; }
  static std::string Socket() { return dir_->Sub("admitd.sock"); }
  // The first event of the large workloads' run.
  static ledger::Sequence FirstLarge() {
    auto history = served_->log->History(schema::HistoryNameKey("ml/job-big-0"), 0);
    ADM_CHECK(history.ok() && *history && !(*history)->empty(), "no history of big-0");
    return (*history)->front();
  }

  static TempDir* dir_;
  static ServedLedger* served_;
  static InProcessDaemon* daemon_;
};
TempDir* RemoteReads::dir_ = nullptr;
ServedLedger* RemoteReads::served_ = nullptr;
InProcessDaemon* RemoteReads::daemon_ = nullptr;

TEST_F(RemoteReads, AReadGivesEveryEventAskedForBelowTheHead) {
  ops::rpc::RemoteLog remote(Connect(Socket()));
  const ledger::Head head = remote.GetHead();
  ASSERT_GT(head.sequence, replay::kReplayReadChunk + kLargeWorkloads);
  // EventLog's contract: fewer than max_count only at the head.
  auto events = remote.Read(1, replay::kReplayReadChunk);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), replay::kReplayReadChunk);
  for (size_t i = 0; i < events->size(); ++i) ASSERT_EQ((*events)[i].sequence, i + 1);
  // The large events, all in one read, byte for byte as stored.
  const ledger::Sequence from = FirstLarge();
  auto large = remote.Read(from, ledger::kReadEventsMax);
  ASSERT_TRUE(large.ok()) << large.status().ToString();
  ASSERT_EQ(large->size(), head.sequence - from + 1);
  auto stored = Local().Read(from, ledger::kReadEventsMax);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), large->size());
  for (size_t i = 0; i < large->size(); ++i) {
    ASSERT_EQ((*large)[i].sequence, (*stored)[i].sequence);
    ASSERT_EQ((*large)[i].bytes, (*stored)[i].bytes) << "event " << (*large)[i].sequence;
  }
  // At the head: nothing, no error.
  auto beyond = remote.Read(head.sequence + 1, 16);
  ASSERT_TRUE(beyond.ok()) << beyond.status().ToString();
  EXPECT_TRUE(beyond->empty());
}

TEST_F(RemoteReads, ReplayVerifiesTheWholeLedger) {
  ops::rpc::RemoteLog remote(Connect(Socket()));
  auto report = replay::ReplayAndVerify(remote);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->divergence.has_value());
  EXPECT_EQ(report->last, remote.GetHead().sequence);
  auto local = replay::ReplayAndVerify(Local());
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(report->decision_stream_hash, local->decision_stream_hash);
  EXPECT_EQ(report->decisions_compared, local->decisions_compared);
}

TEST_F(RemoteReads, StateAtASequenceIsTheLedgersOwn) {
  ops::rpc::RemoteLog remote(Connect(Socket()));
  for (ledger::Sequence at : {ledger::Sequence{replay::kReplayReadChunk + 100}, ledger::Sequence{0}}) {
    auto there = replay::FoldToSequence(remote, at);
    ASSERT_TRUE(there.ok()) << "at " << at << ": " << there.status().ToString();
    auto here = replay::FoldToSequence(Local(), at);
    ASSERT_TRUE(here.ok());
    EXPECT_EQ(there->at, here->at);
    auto remote_text = ops::RenderGet(*there->engine, "workloads", "json");
    auto local_text = ops::RenderGet(*here->engine, "workloads", "json");
    ASSERT_TRUE(remote_text.ok() && local_text.ok());
    EXPECT_EQ(*remote_text, *local_text) << "at " << at;
  }
}

TEST_F(RemoteReads, VerifyChecksEveryEvent) {
  ops::rpc::RemoteLog remote(Connect(Socket()));
  auto report = ledger::VerifyChain(remote, 1, schema::kGenesisHash, false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->fault.has_value()) << report->fault->reason;
  EXPECT_EQ(report->events_checked, remote.GetHead().sequence);
}

TEST_F(RemoteReads, AWatchStreamsLargeEvents) {
  auto client = Connect(Socket());
  const ledger::Sequence from = FirstLarge();
  const ledger::Sequence head = Local().GetHead().sequence;
  ops::rpc::WatchRequest request;
  request.from = from;
  ledger::Sequence next = from;
  bool dense = true;
  auto on_events = [&](const std::vector<ledger::StoredEvent>& events) {
    for (const auto& e : events) {
      dense = dense && e.sequence == next;
      next = e.sequence + 1;
    }
    return next <= head;
  };
  // Bounded: a watch whose pushes cannot be sent streams nothing and never ends by itself.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint64_t resume = 0;
  std::string reason;
  Status s = client->Watch(request, on_events, &resume, &reason,
                           [&] { return std::chrono::steady_clock::now() > deadline; });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(dense);
  EXPECT_EQ(next, head + 1) << "the watch ended (" << reason << ") before the head";
}

}  // namespace
}  // namespace admission::testing
