// recordManifest: admitd parses a Kubernetes object with the ledger's own parser and records
// exactly the events that admitctl apply (or submit) would record, through record's checks.

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/rpc/client.h"
#include "ops/rpc/server.h"
#include "ops/service/api.h"
#include "schema/event_codec.h"
#include "schema/fencing_token.h"
#include "tests/rpc/in_process_daemon.h"
#include "tests/unit/temp_dir.h"

namespace admission::testing {
namespace {

constexpr char kDefinitions[] = R"({"apiVersion": "v1", "kind": "List",
"items": [
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
  "metadata": {"name": "default-flavor", "uid": "1b7f", "resourceVersion": "42"}},
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
  "metadata": {"name": "cluster-queue"},
  "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"],
    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 9},
      {"name": "memory", "nominalQuota": "36Gi"}]}]}]}},
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
  "metadata": {"name": "user-queue", "namespace": "default"},
  "spec": {"clusterQueue": "cluster-queue"}}
]})";

constexpr char kJob[] = R"(apiVersion: batch/v1
kind: Job
metadata:
  name: sample-job
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
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

// What one recordManifest call answered.
struct Answer {
  Status transport;      // the call itself (kUnavailable: the connection failed)
  uint8_t error_code = 0;  // 0: none
  std::string error_message;
  std::vector<uint64_t> sequences;
  std::vector<bool> unchanged;
  bool retried = false;
};

class RecordManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = ledger::RocksDbLog::Open(dir_.Sub("ledger"));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    served_.log = std::move(*log);
    served_.snapshots = std::make_unique<ledger::FileSnapshotStore>(dir_.Sub("ledger"));
    ops::ServiceOptions options;
    options.snapshot_every_events = 0;
    auto service = ops::Service::Open(*served_.log, served_.clock, nullptr, options);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    served_.service = std::move(*service);
    daemon_ = std::make_unique<InProcessDaemon>(served_, dir_.Sub("admitd.sock"));
    auto client = Connect();
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  // A new connection to the daemon, as admitctl --connect makes one.
  Result<std::unique_ptr<ops::rpc::RpcClient>> Connect() {
    auto endpoint = ops::rpc::ParseEndpoint("unix:" + dir_.Sub("admitd.sock"));
    if (!endpoint.ok()) return endpoint.status();
    ops::rpc::ClientOptions options;
    options.endpoint = *endpoint;
    return ops::rpc::RpcClient::Connect(options);
  }

  Answer Call(const std::string& request_id, const std::string& mode,
              const std::string& manifest) {
    Answer answer;
    answer.transport = client_->Run([&](ops::rpc::Ledger::Client& ledger) {
      auto call = ledger.recordManifestRequest();
      auto request = call.initRequest();
      request.setRequestId(request_id);
      request.setMode(mode);
      request.setManifest(manifest);
      return call.send().then([&](capnp::Response<ops::rpc::Ledger::RecordManifestResults> r) {
        if (r.hasError()) {
          answer.error_code = r.getError().getCode();
          answer.error_message = r.getError().getMessage().cStr();
        }
        auto o = r.getOutcome();
        for (uint64_t s : o.getSequences()) answer.sequences.push_back(s);
        for (bool u : o.getUnchanged()) answer.unchanged.push_back(u);
        answer.retried = o.getRetried();
        return Status::Ok();
      });
    });
    return answer;
  }

  // The stored bytes of the event at `sequence`.
  std::string StoredBytes(uint64_t sequence) {
    auto events = served_.log->Read(sequence, 1);
    EXPECT_TRUE(events.ok() && events->size() == 1);
    return events.ok() && !events->empty() ? (*events)[0].bytes : std::string();
  }

  TempDir dir_;
  ServedLedger served_;
  std::unique_ptr<InProcessDaemon> daemon_;
  std::unique_ptr<ops::rpc::RpcClient> client_;
};

TEST_F(RecordManifestTest, ApplyRecordsTheEventsOfTheLedgersParser) {
  Answer a = Call("bridge/definitions/1", "apply", kDefinitions);
  ASSERT_TRUE(a.transport.ok()) << a.transport.ToString();
  ASSERT_EQ(a.error_code, 0) << a.error_message;
  ASSERT_EQ(a.sequences.size(), 3u);
  EXPECT_FALSE(a.retried);

  auto parsed = ops::ParseApplyYaml(kDefinitions);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto stored = schema::DecodeEvent(StoredBytes(a.sequences[i]));
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    auto expected = schema::DecodeEvent((*parsed)[i].event);
    ASSERT_TRUE(expected.ok());
    auto stored_event = stored->root();
    // The body is the parser's; the actor is the connection's principal.
    EXPECT_EQ(std::string(stored_event.getBody().toString().flatten().cStr()),
              std::string(expected->root().getBody().toString().flatten().cStr()));
    EXPECT_EQ(std::string(stored_event.getActor().cStr()), "admin");
  }
}

TEST_F(RecordManifestTest, ARetryIsAnsweredOnceAndTheSameObjectsAreUnchanged) {
  Answer first = Call("bridge/definitions/1", "apply", kDefinitions);
  ASSERT_EQ(first.error_code, 0) << first.error_message;
  Answer retry = Call("bridge/definitions/1", "apply", kDefinitions);
  ASSERT_EQ(retry.error_code, 0) << retry.error_message;
  EXPECT_TRUE(retry.retried);
  EXPECT_EQ(retry.sequences, first.sequences);
  // A resync (another request id, the same objects) writes nothing new.
  Answer resync = Call("bridge/definitions/2", "apply", kDefinitions);
  ASSERT_EQ(resync.error_code, 0) << resync.error_message;
  EXPECT_EQ(resync.unchanged, std::vector<bool>({true, true, true}));
  EXPECT_EQ(served_.log->GetHead().sequence, first.sequences.back());
}

// The key names the object (its uid) in the principal's namespace of keys (docs/admitd.md).
TEST_F(RecordManifestTest, SubmitKeysTheWorkloadByItsObject) {
  ASSERT_EQ(Call("setup", "apply", kDefinitions).error_code, 0);
  Answer a = Call("bridge/job/uid-1/1", "submit", kJob);
  ASSERT_EQ(a.error_code, 0) << a.error_message;
  ASSERT_FALSE(a.sequences.empty());
  auto stored = schema::DecodeEvent(StoredBytes(a.sequences[0]));
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->root().getBody().isWorkloadSubmitted());
  const std::string uid = stored->root().getBody().getWorkloadSubmitted().getWorkload().getUid().cStr();
  ASSERT_FALSE(uid.empty());
  EXPECT_EQ(std::string(stored->root().getIdempotencyKey().cStr()),
            "by/admin/submit/default/job-sample-job/" + uid);
}

constexpr char kFlavor[] = R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
  "metadata": {"name": "default-flavor", "uid": "1b7f"}, "spec": {"ignored": "by a deletion"}})";
constexpr char kClusterQueue[] = R"({"apiVersion": "kueue.x-k8s.io/v1beta1",
  "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"}})";

TEST_F(RecordManifestTest, DeleteRecordsTheDeletionOnceAndKeepsWhatIsInUse) {
  ASSERT_EQ(Call("setup", "apply", kDefinitions).error_code, 0);
  const uint64_t head = served_.log->GetHead().sequence;
  // The flavor is named by cluster-queue (Kueue's finalizer keeps it): refused, nothing written.
  Answer in_use = Call("bridge/deleted/flavor", "delete", kFlavor);
  EXPECT_EQ(in_use.error_code, static_cast<uint8_t>(Code::kFailedPrecondition));
  EXPECT_NE(in_use.error_message.find("cannot delete ResourceFlavor 'default-flavor': in use by "
                                      "ClusterQueue cluster-queue"),
            std::string::npos)
      << in_use.error_message;
  EXPECT_EQ(served_.log->GetHead().sequence, head);

  Answer cq = Call("bridge/deleted/cq", "delete", kClusterQueue);
  ASSERT_EQ(cq.error_code, 0) << cq.error_message;
  ASSERT_EQ(cq.sequences.size(), 1u);
  auto stored = schema::DecodeEvent(StoredBytes(cq.sequences[0]));
  ASSERT_TRUE(stored.ok());
  ASSERT_TRUE(stored->root().getBody().isObjectDeleted());
  auto del = stored->root().getBody().getObjectDeleted();
  EXPECT_EQ(std::string(del.getKind().cStr()), "ClusterQueue");
  EXPECT_EQ(std::string(del.getName().cStr()), "cluster-queue");
  EXPECT_EQ(std::string(stored->root().getActor().cStr()), "admin");
  // A retry is answered from the first call; the same deletion under a new id is refused.
  Answer retry = Call("bridge/deleted/cq", "delete", kClusterQueue);
  EXPECT_TRUE(retry.retried);
  EXPECT_EQ(retry.sequences, cq.sequences);
  Answer again = Call("bridge/deleted/cq-2", "delete", kClusterQueue);
  EXPECT_EQ(again.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(again.error_message.find("the ledger does not define it"), std::string::npos)
      << again.error_message;

  // No ClusterQueue names the flavor any more.
  Answer flavor = Call("bridge/deleted/flavor-2", "delete", kFlavor);
  ASSERT_EQ(flavor.error_code, 0) << flavor.error_message;
  EXPECT_EQ(served_.log->GetHead().sequence, head + 2);
}

constexpr char kCheckedQueue[] = R"({"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "scan"},
  "spec": {"controllerName": "security.example.com/scanner"}},
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
  "metadata": {"name": "cluster-queue"},
  "spec": {"namespaceSelector": {},
    "admissionChecksStrategy": {"admissionChecks": [{"name": "scan"}]},
    "resourceGroups": [{"coveredResources": ["cpu", "memory"],
    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 9},
      {"name": "memory", "nominalQuota": "36Gi"}]}]}]}}
]})";
constexpr char kCheck[] = R"({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
  "metadata": {"name": "scan"}})";

// admitctl delete -f through admitd goes through the C++ client (RemoteApi, FromError): the
// refusal of a definition still in use arrives with its own code, FailedPrecondition (what the
// Kubernetes bridge retries on), its message unchanged; any other refusal is InvalidArgument.
TEST_F(RecordManifestTest, AnInUseRefusalReachesTheClientAsFailedPrecondition) {
  ASSERT_EQ(Call("setup", "apply", kDefinitions).error_code, 0);
  ASSERT_EQ(Call("setup/check", "apply", kCheckedQueue).error_code, 0);
  ASSERT_EQ(Call("bridge/job/uid-1/1", "submit", kJob).error_code, 0);
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ops::rpc::RemoteApi api(std::shared_ptr<ops::rpc::RpcClient>(std::move(*client)));
  const uint64_t head = served_.log->GetHead().sequence;
  auto remove = [&](const std::string& request_id, const char* manifest) {
    auto objects = ops::ParseDeleteYaml(manifest);
    EXPECT_TRUE(objects.ok() && objects->size() == 1);
    if (!objects.ok() || objects->empty()) return Status(Code::kNotFound, "not parsed");
    return api.Record({(*objects)[0].event}, ops::IntakeOptions{}, request_id).status();
  };

  const Status flavor = remove("cli/delete/flavor", kFlavor);
  EXPECT_EQ(flavor.code(), Code::kFailedPrecondition) << flavor.ToString();
  EXPECT_NE(flavor.message().find("cannot delete ResourceFlavor 'default-flavor': in use by "
                                  "ClusterQueue cluster-queue"),
            std::string::npos)
      << flavor.message();
  const Status check = remove("cli/delete/check", kCheck);
  EXPECT_EQ(check.code(), Code::kFailedPrecondition) << check.ToString();
  EXPECT_NE(check.message().find("in use by ClusterQueue cluster-queue"), std::string::npos)
      << check.message();
  // No ClusterQueue names the check any more, but the job's reservation waits on it.
  ASSERT_EQ(Call("setup/uncheck", "apply", kDefinitions).error_code, 0);
  const uint64_t unchecked = served_.log->GetHead().sequence;
  ASSERT_GT(unchecked, head);
  const Status waited_on = remove("cli/delete/check-2", kCheck);
  EXPECT_EQ(waited_on.code(), Code::kFailedPrecondition) << waited_on.ToString();
  EXPECT_NE(waited_on.message().find("the reservations of default/job-sample-job"),
            std::string::npos)
      << waited_on.message();
  EXPECT_NE(waited_on.message().find(" wait on it"), std::string::npos) << waited_on.message();
  const Status undefined = remove("cli/delete/cq", R"({"apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue", "metadata": {"name": "nosuch"}})");
  EXPECT_EQ(undefined.code(), Code::kInvalidArgument) << undefined.ToString();
  EXPECT_EQ(served_.log->GetHead().sequence, unchecked);
}

TEST_F(RecordManifestTest, ARefusedManifestWritesNothingAndSaysWhere) {
  const uint64_t head = served_.log->GetHead().sequence;
  Answer a = Call("bad/1", "apply", R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec: {queueingStrategy: Random}
)");
  ASSERT_TRUE(a.transport.ok());
  EXPECT_EQ(a.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(a.error_message.find("spec.queueingStrategy"), std::string::npos) << a.error_message;
  EXPECT_EQ(served_.log->GetHead().sequence, head);

  Answer mode = Call("bad/2", "replace", kDefinitions);
  EXPECT_EQ(mode.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(mode.error_message.find("is not 'apply', 'submit', 'import' or 'delete'"),
            std::string::npos)
      << mode.error_message;
  // Definitions are not imported: the import parser refuses them, naming the document.
  Answer definitions = Call("bad/4", "import", kDefinitions);
  EXPECT_EQ(definitions.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(definitions.error_message.find("cannot be imported"), std::string::npos)
      << definitions.error_message;

  Answer jobs_are_submitted = Call("bad/3", "apply", kJob);
  EXPECT_EQ(jobs_are_submitted.error_code, static_cast<uint8_t>(Code::kInvalidArgument));

  Answer no_id = Call("", "apply", kDefinitions);
  EXPECT_EQ(no_id.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(no_id.error_message.find("requestId is empty"), std::string::npos);
  EXPECT_EQ(served_.log->GetHead().sequence, head);
}


// The documented most inputs of one record call (docs/admitd.md, Limits) are read: the daemon
// read the inputs' list once per input, which charged the traversal limit quadratically and
// refused a call of about 1,500 inputs ("Exceeded message traversal limit").
TEST_F(RecordManifestTest, ARecordCallOfTheMostInputsIsRead) {
  constexpr unsigned kInputs = ledger::kAppendBatchEventsMax / 2;
  std::vector<std::string> events;
  for (unsigned i = 0; i < kInputs; ++i) {
    capnp::MallocMessageBuilder m;
    auto report = m.initRoot<schema::Event>().initBody().initNodeCapacityChanged();
    report.setNode("node-" + std::to_string(i));
    report.setFlavor("f");
    auto capacity = report.initCapacity(1);
    capacity[0].setName("cpu");
    capacity[0].setMilli(1000);
    events.push_back(schema::EncodeEvent(m));
  }
  uint8_t code = 0;
  std::string message;
  size_t recorded = 0;
  Status transport = client_->Run([&](ops::rpc::Ledger::Client& ledger) {
    auto call = ledger.recordRequest();
    auto request = call.initRequest();
    request.setRequestId("many");
    auto inputs = request.initInputs(kInputs);
    for (unsigned i = 0; i < kInputs; ++i) {
      inputs.set(i, capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(events[i].data()),
                                        events[i].size()));
    }
    return call.send().then([&](capnp::Response<ops::rpc::Ledger::RecordResults> r) {
      if (r.hasError()) {
        code = r.getError().getCode();
        message = r.getError().getMessage().cStr();
      }
      recorded = r.getOutcome().getSequences().size();
      return Status::Ok();
    });
  });
  ASSERT_TRUE(transport.ok()) << transport.ToString();
  ASSERT_EQ(code, 0) << message;
  EXPECT_EQ(recorded, kInputs);
  EXPECT_EQ(served_.log->GetHead().sequence, kInputs);
}

// What one workloadStates call answered.
struct States {
  Status transport;
  uint8_t error_code = 0;
  std::string error_message;
  std::vector<std::string> missing;
  uint64_t head = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> copy =
      std::make_unique<capnp::MallocMessageBuilder>();
  capnp::List<::admission::rpc::WorkloadState>::Reader states() {
    return copy->getRoot<ops::rpc::Ledger::WorkloadStatesResults>().getStates();
  }
};

States CallStates(ops::rpc::RpcClient& client, const std::vector<std::string>& names) {
  States out;
  out.transport = client.Run([&](ops::rpc::Ledger::Client& ledger) {
    auto call = ledger.workloadStatesRequest();
    auto list = call.initNames(static_cast<unsigned>(names.size()));
    for (unsigned i = 0; i < names.size(); ++i) list.set(i, names[i]);
    return call.send().then([&](capnp::Response<ops::rpc::Ledger::WorkloadStatesResults> r) {
      if (r.hasError()) {
        out.error_code = r.getError().getCode();
        out.error_message = r.getError().getMessage().cStr();
      }
      for (auto m : r.getMissing()) out.missing.emplace_back(m.cStr());
      out.head = r.getHead();
      out.copy->setRoot(ops::rpc::Ledger::WorkloadStatesResults::Reader(r));
      return Status::Ok();
    });
  });
  return out;
}

// Two Workloads as Kueue leaves them (`kubectl get workloads -o yaml`), named as Kueue names a
// Job's: one admitted, one pending after a Retry of its check (which an import drops).
constexpr char kKueueWorkloads[] = R"({"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
  "metadata": {"name": "job-a-1b2c3", "namespace": "default", "uid": "job-uid-a",
   "creationTimestamp": "2026-12-06T11:00:00Z"},
  "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1,
    "template": {"spec": {"containers": [{"name": "c",
      "resources": {"requests": {"cpu": "1"}}}]}}}]},
  "status": {"conditions": [
    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "x",
     "lastTransitionTime": "2026-12-06T11:50:01Z"},
    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "x",
     "lastTransitionTime": "2026-12-06T11:50:02Z"}],
   "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [{"name": "main",
     "count": 1, "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "1"}}]}}},
 {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
  "metadata": {"name": "job-b-4d5e6", "namespace": "default", "uid": "job-uid-b",
   "creationTimestamp": "2026-12-06T11:01:00Z"},
  "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 1,
    "template": {"spec": {"containers": [{"name": "c",
      "resources": {"requests": {"cpu": "1"}}}]}}}]},
  "status": {"admissionChecks": [{"name": "scan", "state": "Retry", "message": "later",
    "lastTransitionTime": "2026-12-06T11:02:00Z"}]}}
]})";

// The bridge's adoption of a Kueue cluster (docs/k8s.md): mode "import" records
// workloadImported keyed by each object, so a restarted bridge importing again writes nothing;
// the admitted one is held as an imported admission, the pending one queued (and admitted).
TEST_F(RecordManifestTest, ImportKeysEachWorkloadAndAnotherImportWritesNothing) {
  ASSERT_EQ(Call("setup", "apply", kDefinitions).error_code, 0);
  Answer a = Call("admit-k8s/adopt/1", "import", kKueueWorkloads);
  ASSERT_EQ(a.error_code, 0) << a.error_message;
  ASSERT_EQ(a.sequences.size(), 2u);
  EXPECT_EQ(a.unchanged, std::vector<bool>({false, false}));
  for (size_t i = 0; i < 2; ++i) {
    auto stored = schema::DecodeEvent(StoredBytes(a.sequences[i]));
    ASSERT_TRUE(stored.ok());
    EXPECT_TRUE(stored->root().getBody().isWorkloadImported());
  }
  auto first = schema::DecodeEvent(StoredBytes(a.sequences[0]));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(std::string(first->root().getIdempotencyKey().cStr()),
            "by/admin/import/default/job-a-1b2c3/job-uid-a");
  const uint64_t head = served_.log->GetHead().sequence;
  // A second start of the bridge: another request id, the same objects.
  Answer again = Call("admit-k8s/adopt/2", "import", kKueueWorkloads);
  ASSERT_EQ(again.error_code, 0) << again.error_message;
  EXPECT_EQ(again.sequences, a.sequences);
  EXPECT_EQ(served_.log->GetHead().sequence, head);

  States st = CallStates(*client_, {"default/job-a-1b2c3", "default/job-b-4d5e6"});
  ASSERT_EQ(st.error_code, 0) << st.error_message;
  ASSERT_EQ(st.states().size(), 2u);
  auto admitted = st.states()[0];
  EXPECT_EQ(admitted.getPhase(), ::admission::rpc::WorkloadState::Phase::ADMITTED);
  EXPECT_TRUE(admitted.getImportedAdmission());
  EXPECT_EQ(std::string(admitted.getFencingToken().cStr()),
            schema::FencingToken("job-uid-a", 1));
  // Imported pending, then admitted by the ledger (the queue has room): generation 1 too, but
  // the ledger's own admission, whose pods the bridge releases.
  auto pending = st.states()[1];
  EXPECT_EQ(pending.getPhase(), ::admission::rpc::WorkloadState::Phase::ADMITTED);
  EXPECT_EQ(pending.getGeneration(), 1u);
  EXPECT_FALSE(pending.getImportedAdmission());
}

// The bridge's read (docs/k8s.md): one workload's state, typed, without the read model of all.
TEST_F(RecordManifestTest, WorkloadStatesAreTypedAndAgreeWithTheReadModel) {
  ASSERT_EQ(Call("setup", "apply", kDefinitions).error_code, 0);
  ASSERT_EQ(Call("bridge/job/uid-1/1", "submit", kJob).error_code, 0);
  States st = CallStates(*client_, {"default/nope", "default/job-sample-job"});
  ASSERT_TRUE(st.transport.ok()) << st.transport.ToString();
  ASSERT_EQ(st.error_code, 0) << st.error_message;
  EXPECT_EQ(st.missing, std::vector<std::string>({"default/nope"}));
  EXPECT_EQ(st.head, served_.log->GetHead().sequence);
  ASSERT_EQ(st.states().size(), 1u);
  auto w = st.states()[0];
  EXPECT_EQ(std::string(w.getName().cStr()), "job-sample-job");
  EXPECT_EQ(w.getPhase(), ::admission::rpc::WorkloadState::Phase::ADMITTED);
  EXPECT_EQ(w.getGeneration(), 1u);
  EXPECT_EQ(std::string(w.getFencingToken().cStr()), schema::FencingToken(w.getUid().cStr(), 1));
  EXPECT_EQ(std::string(w.getClusterQueue().cStr()), "cluster-queue");
  ASSERT_EQ(w.getPodSets().size(), 1u);
  EXPECT_EQ(std::string(w.getPodSets()[0].getName().cStr()), "main");
  EXPECT_EQ(w.getPodSets()[0].getCount(), 1);
  ASSERT_EQ(w.getPodSets()[0].getFlavors().size(), 1u);
  EXPECT_EQ(std::string(w.getPodSets()[0].getFlavors()[0].getResource().cStr()), "cpu");
  EXPECT_EQ(std::string(w.getPodSets()[0].getFlavors()[0].getFlavor().cStr()), "default-flavor");
  // The status to mirror is the read model's, byte for byte.
  auto listed = ops::RenderGet(served_.service->engine(), "workloads", "json");
  ASSERT_TRUE(listed.ok());
  auto items = nlohmann::ordered_json::parse(*listed)["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(nlohmann::ordered_json::parse(w.getStatus().cStr()), items[0]["status"]);
}

TEST_F(RecordManifestTest, WorkloadStatesRefusesMoreNamesThanItsLimit) {
  std::vector<std::string> names(ops::rpc::kWorkloadStatesNamesMax + 1, "default/x");
  States st = CallStates(*client_, names);
  ASSERT_TRUE(st.transport.ok()) << st.transport.ToString();
  EXPECT_EQ(st.error_code, static_cast<uint8_t>(Code::kInvalidArgument));
  EXPECT_NE(st.error_message.find("at most 1024"), std::string::npos) << st.error_message;
  EXPECT_EQ(CallStates(*client_, {}).error_code, 0);
}

// recordManifest authorizes before it parses (docs/admitd.md, "Limits"): a principal whose
// roles may record nothing of the mode is refused without the parser running. A manifest the
// parser refuses shows it: the answer is PermissionDenied, not the parser's InvalidArgument,
// and so is the answer to one over kManifestBytesMax.
TEST(ManifestCallOf, RefusesByRoleBeforeParsing) {
  auto policy = ops::rpc::Policy::Parse(
      "principals:\n- {name: audit, roles: [auditor]}\n- {name: ten, roles: [tenant], "
      "namespaces: [default]}\n- {name: ops, roles: [operator]}\n- {name: runtime, roles: "
      "[runtime]}\n",
      "test");
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  projections::Engine engine;
  const std::string unparsable = "{{{ not: yaml";
  const std::string oversized(ops::rpc::kManifestBytesMax + 1, '#');
  auto call = [&](const std::string& principal, const std::string& mode,
                  const std::string& manifest) {
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<::admission::rpc::ManifestRequest>();
    request.setRequestId("r/1");
    request.setMode(mode);
    request.setManifest(manifest);
    return ops::rpc::ManifestCallOf(*policy, principal, request.asReader(), engine, "1");
  };
  struct Case {
    const char* principal;
    const char* mode;
  };
  for (const Case& c : {Case{"stranger", "submit"}, Case{"audit", "submit"},
                        Case{"audit", "apply"}, Case{"runtime", "submit"}, Case{"ten", "apply"},
                        Case{"ten", "delete"}, Case{"ops", "submit"}, Case{"audit", "import"},
                        Case{"runtime", "import"}, Case{"ops", "import"}}) {
    for (const std::string* manifest : {&unparsable, &oversized}) {
      auto refused = call(c.principal, c.mode, *manifest);
      ASSERT_FALSE(refused.ok()) << c.principal << " " << c.mode;
      EXPECT_EQ(refused.status().code(), Code::kPermissionDenied)
          << c.principal << " " << c.mode << ": " << refused.status().ToString();
    }
  }
  // Those the roles allow reach the parser (and the size limit).
  EXPECT_EQ(call("ten", "submit", unparsable).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(call("ten", "import", unparsable).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(call("admin", "adopt", kJob).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(call("ops", "apply", unparsable).status().code(), Code::kInvalidArgument);
  auto too_big = call("admin", "submit", oversized);
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("at most"), std::string::npos)
      << too_big.status().message();
  EXPECT_TRUE(call("ten", "submit", kJob).ok());
}

// The two steps the daemon takes apart (the parse on a worker thread, the checks on the loop)
// give what ManifestCallOf gives.
TEST(ManifestCallOf, IsParseManifestThenManifestRecordCall) {
  projections::Engine engine;
  ops::rpc::Policy policy;
  auto parsed = ops::rpc::ParseManifest("submit", kJob, "r/2", "7");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto stepwise = ops::rpc::ManifestRecordCall(policy, "admin", *parsed, engine);
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<::admission::rpc::ManifestRequest>();
  request.setRequestId("r/2");
  request.setMode("submit");
  request.setManifest(kJob);
  auto whole = ops::rpc::ManifestCallOf(policy, "admin", request.asReader(), engine, "7");
  ASSERT_TRUE(stepwise.ok() && whole.ok());
  auto bytes = [](const ops::RecordCall& call) {
    std::vector<std::string> out;
    for (const schema::DecodedEvent& e : call.inputs) out.push_back(schema::CanonicalBytes(e.root()));
    return out;
  };
  EXPECT_EQ(bytes(*stepwise), bytes(*whole));
  EXPECT_EQ(stepwise->options.request_id, "r/2");
  EXPECT_EQ(stepwise->options.actor, "admin");
}

}  // namespace
}  // namespace admission::testing
