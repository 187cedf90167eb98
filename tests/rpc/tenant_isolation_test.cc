// What one tenant can do to another through admitd's checks (issue 31): the daemon's own path
// for a record call (RecordCallOf / ManifestCallOf with the connection's principal, then
// Service::RecordGroup, as Daemon::Flush runs it), fed what admitctl never sends: a uid-only
// reference to another namespace's workload, another namespace's idempotency key, another
// namespace's uid. Each refusal writes nothing.

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "ops/service/clock.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/rpc/policy.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"

namespace admission::ops::rpc {
namespace {

class TickingClock final : public Clock {
 public:
  int64_t NowNs() override { return now_ += 1'000'000'000; }

 private:
  int64_t now_ = 1'795'910'400'000'000'000;
};

constexpr char kPolicy[] = R"(principals:
- {name: platform-ops, roles: [operator]}
- {name: ml-team, roles: [tenant], namespaces: [ml]}
- {name: vision-team, roles: [tenant], namespaces: [vision]}
)";

constexpr char kDefinitions[] = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 100}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: ml}
spec: {clusterQueue: shared}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: vision}
spec: {clusterQueue: shared}
)";

std::string JobYaml(const std::string& ns, const std::string& name) {
  return "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
         "\n  labels: {kueue.x-k8s.io/queue-name: main}\nspec:\n  template:\n    spec:\n"
         "      containers:\n      - name: main\n        image: x\n"
         "        resources: {requests: {cpu: \"1\"}}\n      restartPolicy: Never\n";
}

class TenantIsolation : public ::testing::Test {
 protected:
  void SetUp() override {
    auto policy = Policy::Parse(kPolicy, "test");
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    policy_ = std::move(*policy);
    auto service = Service::Open(log_, clock_);
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(*service);
    auto defs = Manifest("platform-ops", "defs", "apply", kDefinitions);
    ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  }

  // A recordManifest call as the daemon answers it.
  Result<RecordOutcome> Manifest(const std::string& principal, const std::string& request_id,
                                 const std::string& mode, const std::string& text) {
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<::admission::rpc::ManifestRequest>();
    request.setRequestId(request_id);
    request.setMode(mode);
    request.setManifest(text);
    auto call = ManifestCallOf(policy_, principal, request.asReader(), service_->engine(),
                               std::to_string(log_.GetHead().sequence));
    if (!call.ok()) return call.status();
    return Group(std::move(*call));
  }

  // A record call of raw inputs as the daemon answers it.
  Result<RecordOutcome> Record(const std::string& principal, const std::string& request_id,
                               const std::vector<std::string>& inputs) {
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<::admission::rpc::RecordRequest>();
    request.setRequestId(request_id);
    auto list = request.initInputs(static_cast<unsigned>(inputs.size()));
    for (unsigned i = 0; i < inputs.size(); ++i) {
      list.set(i, capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(inputs[i].data()),
                                      inputs[i].size()));
    }
    auto call = RecordCallOf(policy_, principal, request.asReader(), service_->engine());
    if (!call.ok()) return call.status();
    return Group(std::move(*call));
  }

  Result<RecordOutcome> Group(RecordCall call) {
    std::vector<RecordCall> calls;
    calls.push_back(std::move(call));
    return std::move(service_->RecordGroup(calls).front());
  }

  const projections::WorkloadState* Workload(const std::string& key) {
    auto it = service_->engine().workloads().find(key);
    return it == service_->engine().workloads().end() ? nullptr : &it->second;
  }

  static std::string Ref(bool finished, const std::string& ns, const std::string& name,
                         const std::string& uid) {
    capnp::MallocMessageBuilder message;
    auto body = message.initRoot<schema::Event>().initBody();
    auto ref = finished ? body.initWorkloadFinished().initWorkload()
                        : body.initWorkloadDeleted().initWorkload();
    ref.setNamespace(ns);
    ref.setName(name);
    ref.setUid(uid);
    return schema::EncodeEvent(message);
  }

  // A submission event as a client of ours may craft it: any namespace, name, uid and key.
  static std::string Submission(const std::string& ns, const std::string& name,
                                const std::string& uid, const std::string& key) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<schema::Event>();
    if (!key.empty()) event.setIdempotencyKey(key);
    auto w = event.initBody().initWorkloadSubmitted().initWorkload();
    w.setNamespace(ns);
    w.setName(name);
    w.setUid(uid);
    w.setQueueName("main");
    auto ps = w.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(1);
    auto r = ps.initRequests(1);
    r[0].setName("cpu");
    r[0].setMilli(1000);
    return schema::EncodeEvent(message);
  }

  Policy policy_;
  ledger::MemoryLog log_;
  TickingClock clock_;
  std::unique_ptr<Service> service_;
};

TEST_F(TenantIsolation, AUidOnlyReferenceCannotReachAnotherNamespace) {
  ASSERT_TRUE(Manifest("vision-team", "v1", "submit", JobYaml("vision", "detect-1")).ok());
  const projections::WorkloadState* victim = Workload("vision/job-detect-1");
  ASSERT_NE(victim, nullptr);
  const std::string uid = victim->uid;
  const auto phase = victim->phase;
  for (bool finished : {true, false}) {
    const uint64_t head = log_.GetHead().sequence;
    auto r = Record("ml-team", finished ? "f" : "d", {Ref(finished, "ml", "", uid)});
    ASSERT_FALSE(r.ok()) << (finished ? "workloadFinished" : "workloadDeleted")
                         << " of vision's workload by uid, as ml-team, was recorded";
    // The refusal names the reference as sent, never the workload the uid is in.
    EXPECT_EQ(r.status().message().find("vision"), std::string::npos) << r.status().message();
    EXPECT_EQ(log_.GetHead().sequence, head);
    EXPECT_EQ(Workload("vision/job-detect-1")->phase, phase);
  }
  // Its own namespace's workload by uid alone still works.
  ASSERT_TRUE(Manifest("ml-team", "m1", "submit", JobYaml("ml", "train")).ok());
  auto own = Record("ml-team", "own", {Ref(true, "ml", "", Workload("ml/job-train")->uid)});
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(Workload("ml/job-train")->phase, projections::Phase::kFinished);
}

TEST_F(TenantIsolation, AFinishOrDeleteOfNoWorkloadIsRefused) {
  const uint64_t head = log_.GetHead().sequence;
  auto finished = Record("ml-team", "f", {Ref(true, "ml", "ghost", "")});
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.status().code(), Code::kNotFound);
  auto deleted = Record("ml-team", "d", {Ref(false, "ml", "ghost", "u")});
  ASSERT_FALSE(deleted.ok());
  EXPECT_EQ(log_.GetHead().sequence, head);
  // Submitted and finished in one call: the finish names the submission before it.
  auto both = Record("ml-team", "both", {Submission("ml", "quick", "uid-quick", ""),
                                          Ref(true, "ml", "quick", "uid-quick")});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(Workload("ml/quick")->phase, projections::Phase::kFinished);
}

TEST_F(TenantIsolation, AnotherPrincipalsKeyNeitherBlocksNorTells) {
  // ml-team records an input of its own under the key vision's submission of job-detect-5
  // would have had before keys named their principal and object.
  auto squat = Record("ml-team", "s", {Submission("ml", "squat", "uid-squat",
                                                   "submit/vision/job-detect-5")});
  ASSERT_TRUE(squat.ok()) << squat.status().ToString();
  auto own = Manifest("vision-team", "v5", "submit", JobYaml("vision", "detect-5"));
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ASSERT_FALSE(own->unchanged[0]) << "vision's submission was taken for a retry of ml-team's";
  ASSERT_NE(Workload("vision/job-detect-5"), nullptr);
  // The stored key is in vision-team's namespace of keys.
  auto stored = log_.Read(own->sequences[0], 1);
  ASSERT_TRUE(stored.ok());
  auto decoded = schema::DecodeEvent(stored->front().bytes);
  const std::string key = decoded->root().getIdempotencyKey().cStr();
  EXPECT_EQ(key.rfind("by/vision-team/submit/vision/job-detect-5/", 0), 0u) << key;
  // Probing vision's key as ml-team tells nothing: neither "unchanged" nor a conflict naming
  // vision's record; it is ml-team's own (new) key.
  const std::string unscoped = key.substr(std::string("by/vision-team/").size());
  auto probe = Record("ml-team", "p", {Submission("ml", "probe", "uid-probe", unscoped)});
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_FALSE(probe->unchanged[0]);
  EXPECT_FALSE(probe->retried);
}

TEST_F(TenantIsolation, ANameCanBeUsedAgainAfterItsWorkloadEnds) {
  auto first = Manifest("vision-team", "sweep-1", "submit", JobYaml("vision", "sweep-01"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const std::string old_uid = Workload("vision/job-sweep-01")->uid;
  // A retry of the same request is answered from the record.
  auto retry = Manifest("vision-team", "sweep-1", "submit", JobYaml("vision", "sweep-01"));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->retried);
  // Another submission of the same file while it lives: Kubernetes' AlreadyExists.
  auto again = Manifest("vision-team", "sweep-2", "submit", JobYaml("vision", "sweep-01"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kConflict);
  ASSERT_TRUE(Record("vision-team", "del", {Ref(false, "vision", "job-sweep-01", old_uid)}).ok());
  EXPECT_EQ(Workload("vision/job-sweep-01")->phase, projections::Phase::kDeleted);
  auto reused = Manifest("vision-team", "sweep-3", "submit", JobYaml("vision", "sweep-01"));
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  EXPECT_FALSE(reused->unchanged[0]) << "the new submission was taken for the old one";
  EXPECT_FALSE(reused->retried);
  const projections::WorkloadState* wl = Workload("vision/job-sweep-01");
  ASSERT_NE(wl, nullptr);
  EXPECT_NE(wl->uid, old_uid);
  EXPECT_EQ(wl->phase, projections::Phase::kAdmitted);
}

TEST_F(TenantIsolation, AUidIsOneWorkloadsInTheWholeLedger) {
  ASSERT_TRUE(Manifest("vision-team", "v1", "submit", JobYaml("vision", "detect-1")).ok());
  const std::string uid = Workload("vision/job-detect-1")->uid;
  const uint64_t head = log_.GetHead().sequence;
  auto stolen = Record("ml-team", "steal", {Submission("ml", "mine", uid, "")});
  ASSERT_FALSE(stolen.ok()) << "a second workload holds uid " << uid;
  EXPECT_EQ(stolen.status().code(), Code::kConflict);
  EXPECT_NE(stolen.status().message().find("ml/mine"), std::string::npos);
  EXPECT_NE(stolen.status().message().find("vision/job-detect-1"), std::string::npos);
  EXPECT_EQ(log_.GetHead().sequence, head);
  EXPECT_EQ(Workload("ml/mine"), nullptr);
  // Twice in one call.
  auto twice = Record("ml-team", "twice", {Submission("ml", "a", "uid-same", ""),
                                            Submission("ml", "b", "uid-same", "")});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(log_.GetHead().sequence, head);
}

TEST_F(TenantIsolation, DefinitionsWithEmptyNamesAreRefused) {
  capnp::MallocMessageBuilder message;
  message.initRoot<schema::Event>().initBody().initFlavorDefined().setName("");
  const uint64_t head = log_.GetHead().sequence;
  auto r = Record("platform-ops", "empty", {schema::EncodeEvent(message)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ResourceFlavor metadata.name: empty"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(log_.GetHead().sequence, head);
}

}  // namespace
}  // namespace admission::ops::rpc
