#include "ops/sim/demo.h"

#include <filesystem>
#include <functional>
#include <vector>

#include <capnp/message.h>
#include <nlohmann/json.hpp>

#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ledger/verify.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/views/render.h"
#include "ops/service/service.h"
#include "schema/time_format.h"
#include "consumers/billing/report.h"
#include "replay/explain.h"
#include "replay/replayer.h"
#include "replay/snapshots.h"
#include "schema/event_codec.h"

namespace admission::ops {

namespace {

constexpr const char* kPlatform = R"(
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: image-scan
  annotations:
    admission-ledger.io/pending-ttl: 30m
    admission-ledger.io/on-timeout: Reject
spec:
  controllerName: security.example.com/scanner
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: budget
  annotations:
    admission-ledger.io/pending-ttl: 1h
    admission-ledger.io/on-timeout: Retry
    admission-ledger.io/retry-limit: "3"
    admission-ledger.io/backoff-base: 5m
    admission-ledger.io/backoff-max: 1h
spec:
  controllerName: finance.example.com/budget
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-eu}
spec:
  nodeLabels:
    nvidia.com/gpu.product: H100-SXM5-80GB
    nvidia.com/gpu.memory: "81920"
    topology.kubernetes.io/block: eu-b1
    topology.kubernetes.io/region: eu-west
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100-us}
spec:
  nodeLabels:
    nvidia.com/gpu.product: A100-SXM4-40GB
    nvidia.com/gpu.memory: "40960"
    topology.kubernetes.io/block: us-b7
    topology.kubernetes.io/region: us-east
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu-pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: serving}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: training}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: batch}
value: 10
)";

// Four tenants in two cohorts. Research shares H100s; production serves on A100s and lets
// serving preempt batch evaluation inside its own queue.
std::string TenantQueue(const std::string& name, const std::string& cohort, int h100, int a100,
                        const std::string& preemption, const std::string& checks = "") {
  return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " + name +
         "}\nspec:\n  cohortName: " + cohort + "\n  namespaceSelector: {}\n" + preemption +
         (checks.empty() ? "" : "  admissionChecks: [" + checks + "]\n") +
         "  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
         "    - name: h100-eu\n      resources: [{name: nvidia.com/gpu, nominalQuota: " +
         std::to_string(h100) +
         "}]\n    - name: a100-us\n      resources: [{name: nvidia.com/gpu, nominalQuota: " +
         std::to_string(a100) +
         "}]\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: cpu-pool\n"
         "      resources: [{name: cpu, nominalQuota: 256}, {name: memory, nominalQuota: 2Ti}]\n"
         "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: jobs, "
         "namespace: " + name + "}\nspec: {clusterQueue: " + name + "}\n---\n";
}

std::string Job(const std::string& ns, const std::string& name, const std::string& priority,
                int pods, int gpus_per_pod, const std::string& region = "",
                int min_pods = 0) {
  std::string y = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name +
                  "\n  namespace: " + ns +
                  "\n  labels:\n    kueue.x-k8s.io/queue-name: jobs\n"
                  "    kueue.x-k8s.io/priority-class: " + priority + "\n";
  if (min_pods > 0) {
    y += "  annotations:\n    kueue.x-k8s.io/job-min-parallelism: \"" + std::to_string(min_pods) + "\"\n";
  }
  y += "spec:\n  parallelism: " + std::to_string(pods) + "\n  completions: " +
       std::to_string(pods) + "\n  template:\n    spec:\n";
  if (!region.empty()) y += "      nodeSelector: {topology.kubernetes.io/region: " + region + "}\n";
  y += "      containers:\n      - name: main\n        image: registry.example/ml:1\n"
       "        resources:\n          requests: {cpu: \"8\", memory: 64Gi, nvidia.com/gpu: \"" +
       std::to_string(gpus_per_pod) + "\"}\n      restartPolicy: Never\n---\n";
  return y;
}

class Demo {
 public:
  Demo(const DemoApis& apis, std::ostream& out) : apis_(apis), out_(out) {}

  Status Step(const std::string& at, const std::string& title, const std::string& verb,
              const std::string& text) {
    auto t = ParseRfc3339(at);
    if (!t.ok()) return t.status();
    out_ << "\n== " << at << "  " << title << "\n";
    const std::string actor =
        verb == "apply" ? "platform-ops" : "tenant";  // submit and finish: the tenant
    auto api = apis_(actor);
    if (!api.ok()) return api.status();
    std::vector<std::string> inputs;
    if (verb == "apply") {
      auto objects = ParseApplyYaml(text);
      if (!objects.ok()) return objects.status();
      for (const auto& o : *objects) inputs.push_back(o.event);
    } else if (verb == "submit") {
      auto head = (*api)->GetHead();
      if (!head.ok()) return head.status();
      SubmitContext ctx;
      ctx.name_seed = std::to_string(head->sequence);
      auto objects = ParseSubmitYaml(text, ctx);
      if (!objects.ok()) return objects.status();
      inputs = KeyedWorkloadEvents("submit", *objects);
      for (const auto& o : *objects) out_ << "   submitted " << o.ns << "/" << o.name << "\n";
    } else {  // finish
      auto wl = (*api)->Workload(text);
      if (!wl.ok()) return wl.status();
      capnp::MallocMessageBuilder message;
      auto ref = message.initRoot<schema::Event>().initBody().initWorkloadFinished().initWorkload();
      ref.setNamespace(wl->ns);
      ref.setName(wl->name);
      ref.setUid(wl->uid);
      inputs.push_back(schema::EncodeEvent(message));
      out_ << "   " << text << " finished\n";
    }
    auto outcome = Record(**api, std::move(inputs), *t, actor);
    if (!outcome.ok()) return outcome.status();
    Narrate(*outcome);
    if (outcome->decisions.empty() && verb == "apply") {
      out_ << "   recorded " << outcome->sequences.size()
           << " definitions (no admission decisions)\n";
    }
    return Status::Ok();
  }

  // One input built by `fill` from a workload's current state, recorded as `actor`.
  Status Input(const std::string& at, const std::string& title, const std::string& actor,
               const std::string& workload,
               const std::function<void(schema::Event::Builder, const WorkloadInfo&)>& fill) {
    auto t = ParseRfc3339(at);
    if (!t.ok()) return t.status();
    out_ << "\n== " << at << "  " << title << "\n";
    auto api = apis_(actor);
    if (!api.ok()) return api.status();
    auto wl = (*api)->Workload(workload);
    if (!wl.ok()) return wl.status();
    capnp::MallocMessageBuilder message;
    fill(message.initRoot<schema::Event>(), *wl);
    auto outcome = Record(**api, {schema::EncodeEvent(message)}, *t, actor);
    if (!outcome.ok()) return outcome.status();
    Narrate(*outcome);
    if (outcome->decisions.empty()) out_ << "   recorded (no decision yet)\n";
    return Status::Ok();
  }

  Status Config(const std::string& at) {
    auto t = ParseRfc3339(at);
    if (!t.ok()) return t.status();
    auto api = apis_("platform-ops");
    if (!api.ok()) return api.status();
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<schema::Event>().initBody().initEngineConfigDefined();
    c.setAgingStepNs(int64_t{60} * 1'000'000'000);  // one priority point per minute waited
    c.setAgingPriorityMax(500);
    auto outcome = Record(**api, {schema::EncodeEvent(message)}, *t, "platform-ops");
    return outcome.ok() ? Status::Ok() : outcome.status();
  }

 private:
  // Every step carries a request id (as admitctl's calls do), the same in both modes, so the
  // embedded and the daemon's ledgers hold the same events.
  Result<RecordOutcome> Record(AdmissionApi& api, std::vector<std::string> inputs, int64_t at,
                               const std::string& actor) {
    IntakeOptions options;
    options.at_ns = at;
    options.actor = actor;
    return api.Record(std::move(inputs), options, "demo-" + std::to_string(++steps_));
  }

  void Narrate(const RecordOutcome& outcome) {
    uint64_t seq = outcome.first_decision_sequence;
    for (const std::string& bytes : outcome.decisions) {
      auto d = schema::DecodeEvent(bytes);
      if (d.ok()) out_ << "   #" << seq << "  " << DescribeDecision(d->root()) << "\n";
      ++seq;
    }
  }

  const DemoApis& apis_;
  std::ostream& out_;
  uint64_t steps_ = 0;
};

void Ref(schema::WorkloadRef::Builder ref, const WorkloadInfo& wl) {
  ref.setNamespace(wl.ns);
  ref.setName(wl.name);
  ref.setUid(wl.uid);
}

auto CheckReport(const std::string& check, schema::CheckState state, const std::string& message) {
  return [=](schema::Event::Builder e, const WorkloadInfo& wl) {
    auto r = e.initBody().initCheckStateReported();
    Ref(r.initWorkload(), wl);
    r.setCheck(check);
    r.setGeneration(wl.generation);
    r.setState(state);
    r.setMessage(message);
  };
}

auto PodsReport(schema::PodsReport report) {
  return [=](schema::Event::Builder e, const WorkloadInfo& wl) {
    auto r = e.initBody().initPodsReported();
    Ref(r.initWorkload(), wl);
    r.setReport(report);
    r.setFencingToken(wl.fencing_token.empty() ? wl.uid + "/" + std::to_string(wl.generation)
                                               : wl.fencing_token);
  };
}

// The story's first hour: definitions, a run borrowing idle quota, a budget check passed.
Status DemoBorrowing(Demo& demo) {
  const std::string research_preemption = "  preemption: {reclaimWithinCohort: Any}\n";
  const std::string production_preemption =
      "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n";
  ADM_RETURN_IF_ERROR(demo.Config("2026-11-29T08:00:00Z"));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T08:00:00Z",
                                "platform-ops defines admission checks, flavors and priorities",
                                "apply", kPlatform));
  ADM_RETURN_IF_ERROR(demo.Step(
      "2026-11-29T08:00:00Z",
      "four tenants' ClusterQueues: research = vision + nlp (H100 heavy), production = "
      "inference + batch (A100 heavy)",
      "apply",
      TenantQueue("vision", "research", 8, 0, research_preemption, "image-scan") +
          TenantQueue("nlp", "research", 8, 0, research_preemption) +
          TenantQueue("inference", "production", 0, 8, production_preemption) +
          TenantQueue("batch", "production", 0, 8, production_preemption, "budget")));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T09:00:00Z",
                                "nlp starts a 16-GPU pretraining run: 8 of its own H100s plus 8 "
                                "borrowed from vision's idle quota",
                                "submit", Job("nlp", "llm-pretrain", "training", 2, 8)));
  ADM_RETURN_IF_ERROR(demo.Step(
      "2026-11-29T09:05:00Z",
      "inference starts serving pinned to us-east; batch queues evaluation jobs on A100s and "
      "borrows inference's idle quota",
      "submit",
      Job("batch", "eval-sweep", "batch", 6, 2, "", 2) + Job("batch", "eval-small", "batch", 1, 4) +
          Job("inference", "chat-serving", "serving", 1, 4, "us-east")));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:10:00Z", "finance's budget controller approves the sweep: now it is admitted",
      "finance.example.com/budget", "batch/job-eval-sweep",
      CheckReport("budget", schema::CheckState::READY, "within the November eval budget")));
  return Status::Ok();
}

// Reclaims: vision takes its H100s back, an image scan, a serving burst, a budget rejection.
Status DemoReclaiming(Demo& demo) {
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T09:30:00Z",
                                "vision needs its own H100s back: reclaiming them preempts the "
                                "borrowing pretraining run; the detector then waits for its "
                                "image scan",
                                "submit", Job("vision", "detector-train", "training", 1, 8)));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:32:00Z", "the image scan is still running (Pending, visibly)",
      "security.example.com/scanner", "vision/job-detector-train",
      CheckReport("image-scan", schema::CheckState::PENDING, "scanning 14 layers")));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:35:00Z", "the scan passes: admitted with a fencing token",
      "security.example.com/scanner", "vision/job-detector-train",
      CheckReport("image-scan", schema::CheckState::READY, "no known CVEs")));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:36:00Z", "the pod runtime presents the token and starts the pods",
      "pod-runtime", "vision/job-detector-train", PodsReport(schema::PodsReport::RELEASED)));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T09:45:00Z",
                                "a serving burst in inference reclaims the A100s batch borrowed; "
                                "the preempted sweep waits for the next cycle (a victim is not "
                                "admitted again at the instant it was preempted), so the small "
                                "evaluation job takes the room",
                                "submit", Job("inference", "chat-burst", "serving", 1, 4, "us-east")));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:50:00Z",
      "finance approves the small evaluation job; the next cycle brings the sweep back "
      "partially admitted (min 2 pods), needing its budget check again (generation 2)",
      "finance.example.com/budget", "batch/job-eval-small",
      CheckReport("budget", schema::CheckState::READY, "small enough for the remaining budget")));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T09:55:00Z", "finance rejects the second attempt: the sweep is deactivated",
      "finance.example.com/budget", "batch/job-eval-sweep",
      CheckReport("budget", schema::CheckState::REJECTED, "November eval budget exhausted")));
  return Status::Ok();
}

// A revocation and its drain, an impossible request, and aging letting low priority run.
Status DemoRevocationAndAging(Demo& demo) {
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T10:30:00Z",
      "security revokes the detector's admission (image signature revoked): its pods are told "
      "to drain, its token is void, and its quota stays held until the pods are gone",
      "security.example.com/revoker", "vision/job-detector-train",
      [](schema::Event::Builder e, const WorkloadInfo& wl) {
        auto r = e.initBody().initRevocationRequested();
        Ref(r.getTarget().initWorkload(), wl);
        r.setReason("image signature revoked by the supplier");
        r.setPodSetAction(schema::PodSetAction::DRAIN);
        r.setDrainDeadlineNs(1795951800000000000);  // 2026-11-29T11:30:00Z
      }));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T10:40:00Z",
      "the runtime confirms the detector's pods are gone: only now is the quota released; the "
      "detector is requeued and, as generation 2, must pass its image scan again",
      "pod-runtime", "vision/job-detector-train", PodsReport(schema::PodsReport::TERMINATED)));
  ADM_RETURN_IF_ERROR(demo.Input(
      "2026-11-29T10:45:00Z",
      "the scanner rejects generation 2 (the signature is revoked): the detector is deactivated "
      "and the pretraining run gets its H100s again",
      "security.example.com/scanner", "vision/job-detector-train",
      CheckReport("image-scan", schema::CheckState::REJECTED, "image signature revoked")));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T11:05:00Z",
                                "a request no flavor could ever hold is rejected, not queued "
                                "forever",
                                "submit", Job("nlp", "too-big", "training", 1, 64)));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T11:10:00Z",
                                "a low-priority nightly index job queues behind the pretraining "
                                "run (aging: +1 priority per minute waited)",
                                "submit", Job("nlp", "nightly-index", "batch", 2, 8)));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T13:29:00Z",
                                "a fresh high-priority fine-tune arrives just before the "
                                "pretraining run ends",
                                "submit", Job("nlp", "finetune", "training", 2, 8)));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T13:30:00Z",
                                "the pretraining run finishes: the nightly job (10 + 140 aged) "
                                "goes before the fine-tune (100 + 1): low priority still runs",
                                "finish", "nlp/job-llm-pretrain"));

  return Status::Ok();
}

Status PrintDemoTables(AdmissionApi& api, std::ostream& out) {
  for (const auto& [kind, title] :
       std::vector<std::pair<std::string, std::string>>{{"workloads", "Workloads"},
                                                        {"clusterqueues", "ClusterQueues"},
                                                        {"cohorts", "Cohorts"}}) {
    auto table = api.Get(kind, "table", {});
    if (!table.ok()) return table.status();
    out << "\n== " << title << " now (admitctl get " << kind << ")\n" << *table;
  }
  return Status::Ok();
}

Status VerifyDemoLedger(const DemoTarget& target, std::ostream& out) {
  // A connected client cannot look the index up; admitd's own verify does (docs/admitd.md).
  auto report = ledger::VerifyChain(target.log, 1, schema::kGenesisHash, target.index_readable);
  if (!report.ok()) return report.status();
  if (report->fault) {
    return Status(Code::kCorruption, "demo ledger fails verify at " +
                                         std::to_string(report->fault->sequence));
  }
  out << "\n== The ledger verifies: " << report->events_checked << " events, head hash "
      << schema::HashHex(report->head_hash) << "\n";
  return Status::Ok();
}

// Returns the sequence of the snapshot taken.
Result<uint64_t> SnapshotDemoState(AdmissionApi& api, std::ostream& out) {
  // A snapshot of the state now: the next start loads it instead of folding the ledger.
  auto taken = api.Snapshot("json");
  if (!taken.ok()) return taken.status();
  const nlohmann::json snapshot = nlohmann::json::parse(*taken, nullptr, false);
  if (snapshot.is_discarded() || !snapshot.contains("sequence")) {
    return Status(Code::kCorruption, "the snapshot's answer is not its JSON: " + *taken);
  }
  const uint64_t snapshot_at = snapshot["sequence"].get<uint64_t>();
  out << "== Snapshot at sequence " << snapshot_at << ": "
      << snapshot["bytes"].get<uint64_t>() << " bytes, SHA-256 "
      << snapshot["sha256"].get<std::string>() << " (" << snapshot["path"].get<std::string>()
      << ")\n";
  return snapshot_at;
}

Status ReplayDemoLedger(const DemoTarget& target, uint64_t snapshot_at, std::ostream& out) {
  // Replay the inputs through a fresh decider: every recorded decision must come out again,
  // byte for byte, and the snapshot must equal the state the fold reaches there.
  replay::Replayer replayer(target.log, replay::Genesis());
  auto replayed = replay::RunComparingSnapshots(replayer, replay::ReplayOptions{}, target.log,
                                                target.snapshots, {});
  if (!replayed.ok()) return replayed.status();
  if (replayed->report.divergence) {
    return Status(Code::kCorruption, "demo replay diverged at sequence " +
                                         std::to_string(replayed->report.divergence->sequence));
  }
  for (const replay::SnapshotComparison& c : replayed->snapshots) {
    if (c.mismatch) {
      return Status(Code::kCorruption, "demo snapshot at sequence " + std::to_string(c.after) +
                                           " " + *c.mismatch);
    }
  }
  out << "== Replay --verify: " << replayed->report.decisions_compared
      << " decisions reproduced byte for byte; decision-stream SHA-256 "
      << schema::HashHex(replayed->report.decision_stream_hash) << "; the snapshot equals the "
      << "state re-encoded at sequence " << snapshot_at << "\n";
  return Status::Ok();
}

// The explain page of the pretraining run, and finance's billing report.
Status ShowDemoAudit(const DemoTarget& target, std::ostream& out) {
  const std::string page = target.page_dir + "/explain-nlp-job-llm-pretrain.html";
  Status written = replay::WriteExplainPage(target.log, "nlp", "job-llm-pretrain", page);
  if (!written.ok()) return written;
  out << "== The pretraining run's whole history, for a person: " << page << "\n";
  // Finance's view of the same ledger: the usage fold (consumers/billing), per tenant and flavor.
  auto usage = consumers::billing::FoldLedger(target.log);
  if (!usage.ok()) return usage.status();
  consumers::billing::ReportOptions billing;
  billing.from_ms = 0;
  billing.to_ms = usage->last_time_ms() + 1;
  billing.by = {consumers::billing::GroupKey::kNamespace, consumers::billing::GroupKey::kFlavor};
  out << "\n== Billing (admitctl billing report --by namespace --by flavor): used from each pod "
         "release, idle while quota waited for pods\n"
      << consumers::billing::ReportTable(consumers::billing::BuildReport(*usage, billing));
  out << "Inspect it: admitctl " << target.inspect
      << " log | get workloads -o yaml | explain nlp/job-llm-pretrain | replay --verify | "
         "billing report\n";
  return Status::Ok();
}

}  // namespace

Status RunDemo(const std::string& dir, std::ostream& out) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    return Status(Code::kInvalidArgument,
                  "demo ledger directory " + dir + " is not empty; the demo only writes a fresh "
                  "ledger (remove it or pass another --dir)");
  }
  auto log = ledger::RocksDbLog::Open(dir);
  if (!log.ok()) return log.status();
  SystemClock clock;
  ledger::FileSnapshotStore snapshots(dir);
  ServiceOptions options;
  options.snapshots = &snapshots;
  auto service = Service::Open(**log, clock, nullptr, options);
  if (!service.ok()) return service.status();
  LocalApi local(**service, **log, [&snapshots](uint64_t after) { return snapshots.PathOf(after); });
  DemoTarget target{[&local](const std::string&) -> Result<AdmissionApi*> { return &local; },
                    **log,
                    snapshots,
                    true,
                    "at " + dir,
                    dir,
                    "--ledger " + dir};
  return RunDemoThrough(target, out);
}

Status RunDemoThrough(const DemoTarget& target, std::ostream& out) {
  const DemoApis& apis = target.apis;
  auto head = apis("platform-ops");
  if (!head.ok()) return head.status();
  auto at = (*head)->GetHead();
  if (!at.ok()) return at.status();
  if (at->sequence != 0) {
    return Status(Code::kInvalidArgument,
                  "the demo only writes a fresh ledger, and this one holds " +
                      std::to_string(at->sequence) + " events");
  }
  Demo demo(apis, out);
  out << "Admission ledger demo: a GPU platform with H100 (eu-west) and A100 (us-east) flavors,\n"
         "two cohorts and four tenants. Every input and decision below is an event in the\n"
         "ledger " << target.where << " (sequence numbers after #).\n";

  ADM_RETURN_IF_ERROR(DemoBorrowing(demo));
  ADM_RETURN_IF_ERROR(DemoReclaiming(demo));
  ADM_RETURN_IF_ERROR(DemoRevocationAndAging(demo));
  ADM_RETURN_IF_ERROR(PrintDemoTables(**head, out));
  ADM_RETURN_IF_ERROR(VerifyDemoLedger(target, out));
  auto snapshot_at = SnapshotDemoState(**head, out);
  if (!snapshot_at.ok()) return snapshot_at.status();
  ADM_RETURN_IF_ERROR(ReplayDemoLedger(target, *snapshot_at, out));
  return ShowDemoAudit(target, out);
}

}  // namespace admission::ops
