#include "ops/demo.h"

#include <filesystem>
#include <vector>

#include <capnp/message.h>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "ops/kueue_yaml.h"
#include "ops/render.h"
#include "ops/service.h"
#include "ops/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {

namespace {

constexpr const char* kPlatform = R"(
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
                        const std::string& preemption) {
  return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: " + name +
         "}\nspec:\n  cohortName: " + cohort + "\n  namespaceSelector: {}\n" + preemption +
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
  Demo(Service& service, ledger::EventLog& log, std::ostream& out)
      : service_(service), log_(log), out_(out) {}

  Status Step(const std::string& at, const std::string& title, const std::string& verb,
              const std::string& text) {
    auto t = ParseRfc3339(at);
    if (!t.ok()) return t.status();
    out_ << "\n== " << at << "  " << title << "\n";
    std::vector<std::string> inputs;
    if (verb == "apply") {
      auto objects = ParseApplyYaml(text);
      if (!objects.ok()) return objects.status();
      for (const auto& o : *objects) inputs.push_back(o.event);
    } else if (verb == "submit") {
      SubmitContext ctx;
      ctx.name_seed = std::to_string(log_.GetHead().sequence);
      auto objects = ParseSubmitYaml(text, ctx);
      if (!objects.ok()) return objects.status();
      for (const auto& o : *objects) {
        auto decoded = schema::DecodeEvent(o.event);
        capnp::MallocMessageBuilder message;
        message.setRoot(decoded->root());
        message.getRoot<schema::Event>().setIdempotencyKey("submit/" + o.ns + "/" + o.name);
        inputs.push_back(schema::EncodeEvent(message));
        out_ << "   submitted " << o.ns << "/" << o.name << "\n";
      }
    } else {  // finish
      const auto& workloads = service_.engine().workloads();
      auto it = workloads.find(text);
      if (it == workloads.end()) return Status(Code::kNotFound, "no workload " + text);
      capnp::MallocMessageBuilder message;
      auto ref = message.initRoot<schema::Event>().initBody().initWorkloadFinished().initWorkload();
      ref.setNamespace(it->second.ns);
      ref.setName(it->second.name);
      ref.setUid(it->second.uid);
      inputs.push_back(schema::EncodeEvent(message));
      out_ << "   " << text << " finished\n";
    }
    IntakeOptions options;
    options.at_ns = *t;
    options.actor = verb == "apply" ? "platform-ops" : verb == "submit" ? "tenant" : "pod-runtime";
    auto outcome = service_.Record(inputs, options);
    if (!outcome.ok()) return outcome.status();
    uint64_t seq = outcome->first_decision_sequence;
    for (const std::string& bytes : outcome->decisions) {
      auto d = schema::DecodeEvent(bytes);
      if (d.ok()) out_ << "   #" << seq << "  " << DescribeDecision(d->root()) << "\n";
      ++seq;
    }
    if (outcome->decisions.empty() && verb == "apply") {
      out_ << "   recorded " << inputs.size() << " definitions (no admission decisions)\n";
    }
    return Status::Ok();
  }

 private:
  Service& service_;
  ledger::EventLog& log_;
  std::ostream& out_;
};

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
  auto service = Service::Open(**log, clock);
  if (!service.ok()) return service.status();
  Demo demo(**service, **log, out);
  out << "Admission ledger demo: a GPU platform with H100 (eu-west) and A100 (us-east) flavors,\n"
         "two cohorts and four tenants. Every input and decision below is an event in the\n"
         "ledger at " << dir << " (sequence numbers after #).\n";

  const std::string research_preemption = "  preemption: {reclaimWithinCohort: Any}\n";
  const std::string production_preemption =
      "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n";
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T08:00:00Z", "platform-ops defines flavors and priorities",
                                "apply", kPlatform));
  ADM_RETURN_IF_ERROR(demo.Step(
      "2026-11-29T08:00:00Z",
      "four tenants' ClusterQueues: research = vision + nlp (H100 heavy), production = "
      "inference + batch (A100 heavy)",
      "apply",
      TenantQueue("vision", "research", 8, 0, research_preemption) +
          TenantQueue("nlp", "research", 8, 0, research_preemption) +
          TenantQueue("inference", "production", 0, 8, production_preemption) +
          TenantQueue("batch", "production", 0, 8, production_preemption)));
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
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T09:30:00Z",
                                "vision needs its own H100s back: reclaiming them preempts the "
                                "borrowing pretraining run",
                                "submit", Job("vision", "detector-train", "training", 1, 8)));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T09:45:00Z",
                                "a serving burst in inference reclaims the A100s batch borrowed; "
                                "the requeued sweep comes back partially admitted (min 2 pods)",
                                "submit", Job("inference", "chat-burst", "serving", 1, 4, "us-east")));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T11:00:00Z",
                                "the detector finishes: the requeued pretraining run gets its "
                                "H100s again",
                                "finish", "vision/job-detector-train"));
  ADM_RETURN_IF_ERROR(demo.Step("2026-11-29T11:05:00Z",
                                "a request no flavor could ever hold is rejected, not queued "
                                "forever",
                                "submit", Job("nlp", "too-big", "training", 1, 64)));

  const projections::Engine& engine = (*service)->engine();
  out << "\n== Workloads now (admitctl get workloads)\n" << WorkloadsTable(engine);
  out << "\n== ClusterQueues now (admitctl get clusterqueues)\n" << ClusterQueuesTable(engine);
  out << "\n== Cohorts now (admitctl get cohorts)\n" << CohortsTable(engine);
  auto report = ledger::VerifyChain(**log, 1, schema::kGenesisHash, true);
  if (!report.ok()) return report.status();
  if (report->fault) {
    return Status(Code::kCorruption, "demo ledger fails verify at " +
                                         std::to_string(report->fault->sequence));
  }
  out << "\n== The ledger verifies: " << report->events_checked << " events, head hash "
      << schema::HashHex(report->head_hash) << "\n"
      << "Inspect it: admitctl --ledger " << dir << " log | get workloads -o yaml | verify\n";
  return Status::Ok();
}

}  // namespace admission::ops
