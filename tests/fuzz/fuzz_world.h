#pragma once
// What the libFuzzer targets share (docs/faults.md, "Fuzzing and sanitizers"): a small fixed
// world (a MemoryLog with a few definitions applied, through the same Service admitctl uses),
// and the check that a refused call wrote nothing.

#include <capnp/message.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/memory_log.h"
#include "ops/service/clock.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::fuzz {

// A fixed logical time for every call: the same input always makes the same ledger, so a
// crash reproduces from its input alone.
inline constexpr int64_t kWorldTimeNs = 1'795'910'400'000'000'000;  // 2026-11-28T00:00:00Z

class FixedClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return kWorldTimeNs; }
};

// The definitions every input meets: two ClusterQueues in a cohort with a LocalQueue each (the
// names the seed corpora use: namespaces a and b, LocalQueue lq), an AdmissionCheck and a
// priority class. Inputs that name other objects are refused or stay pending, which is as
// interesting to the fuzzer.
inline constexpr std::string_view kWorldDefinitions = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: provisioning}
spec: {controllerName: check-controller}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 10, borrowingLimit: 6}, {name: memory, nominalQuota: 64Gi}]
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {}
  admissionChecks: [provisioning]
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 10, lendingLimit: 8}, {name: memory, nominalQuota: 64Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: b}
spec: {clusterQueue: team-b}
)";

// A fresh MemoryLog with kWorldDefinitions applied (one append), and the Service on it.
// Cheap enough to build for every input (well under a millisecond of the decider), so no
// input sees another's writes and every crash reproduces alone.
struct World {
  ledger::MemoryLog log;
  FixedClock clock;
  std::unique_ptr<ops::Service> service;

  World() {
    static const std::vector<std::string> kDefinitionInputs = [] {
      auto parsed = ops::ParseApplyYaml(kWorldDefinitions);
      ADM_CHECK(parsed.ok(), "world definitions: %s", parsed.status().ToString().c_str());
      std::vector<std::string> inputs;
      for (const ops::ParsedObject& o : *parsed) inputs.push_back(o.event);
      return inputs;
    }();
    auto opened = ops::Service::Open(log, clock);
    ADM_CHECK(opened.ok(), "open: %s", opened.status().ToString().c_str());
    service = std::move(*opened);
    ops::IntakeOptions options;
    options.actor = "operator";
    options.at_ns = kWorldTimeNs;
    auto applied = service->Record(kDefinitionInputs, options);
    ADM_CHECK(applied.ok(), "world definitions: %s", applied.status().ToString().c_str());
  }
};

// Aborts (a crash libFuzzer reports, with the input) when the ledger's head moved: a refused
// call must write nothing.
inline void CheckNothingWritten(const ledger::Head& before, const ledger::Head& after,
                                const Status& refusal) {
  ADM_CHECK(before.sequence == after.sequence && before.hash == after.hash,
            "a refused call wrote to the ledger (head %llu -> %llu): %s",
            static_cast<unsigned long long>(before.sequence),
            static_cast<unsigned long long>(after.sequence), refusal.ToString().c_str());
}

// Every event the ledger holds decodes, in canonical form, and the hash chain holds: what an
// accepted call wrote is readable by every reader of the ledger.
inline void CheckLedgerReadable(ledger::EventLog& log) {
  const ledger::Head head = log.GetHead();
  auto events = log.Read(1, ledger::kReadEventsMax);
  ADM_CHECK(events.ok(), "read: %s", events.status().ToString().c_str());
  ADM_CHECK(events->size() == head.sequence, "read %zu events of %llu", events->size(),
            static_cast<unsigned long long>(head.sequence));
  schema::Hash chain = schema::kGenesisHash;
  for (const ledger::StoredEvent& e : *events) {
    auto decoded = schema::DecodeEvent(e.bytes);
    ADM_CHECK(decoded.ok(), "stored event %llu: %s", static_cast<unsigned long long>(e.sequence),
              decoded.status().ToString().c_str());
    ADM_CHECK(decoded->canonical(), "stored event %llu is not canonical",
              static_cast<unsigned long long>(e.sequence));
    chain = schema::ChainHash(chain, e.bytes);
  }
  ADM_CHECK(chain == head.hash, "the chain of %zu events does not end at the head's hash",
            events->size());
}

}  // namespace admission::fuzz
