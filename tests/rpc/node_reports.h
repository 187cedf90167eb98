#pragma once
// A long ledger for the RPC tests that read or explain past many events: one ResourceFlavor,
// ClusterQueue and LocalQueue (ml/lq), then node reports, recorded through Service::RecordGroup
// as admitd records them.

#include <capnp/message.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"

namespace admission::testing {

// Node n's capacity report (64 nodes, each report a different capacity).
inline std::string NodeReport(uint64_t n) {
  capnp::MallocMessageBuilder message;
  auto report = message.initRoot<schema::Event>().initBody().initNodeCapacityChanged();
  report.setNode("node-" + std::to_string(n % 64));
  report.setFlavor("f");
  auto capacity = report.initCapacity(1);
  capacity[0].setName("cpu");
  capacity[0].setMilli(static_cast<int64_t>(1000 + n));
  return schema::EncodeEvent(message);
}

inline constexpr char kNodeReportSetup[] = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: f
      resources: [{name: cpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: cq}
)";

// The caller admin, as the tests record.
inline ops::IntakeOptions AdminIntake() {
  ops::IntakeOptions admin;
  admin.actor = "admin";
  return admin;
}

// Records kNodeReportSetup, then `count` node reports, ops::kGroupCallsMax calls per group.
// Errors: the first refusal.
inline Status RecordNodeReports(ops::Service& service, size_t count) {
  auto defs = ops::ParseApplyYaml(kNodeReportSetup);
  if (!defs.ok()) return defs.status();
  std::vector<std::string> setup;
  for (const auto& o : *defs) setup.push_back(o.event);
  auto recorded = service.Record(setup, AdminIntake());
  if (!recorded.ok()) return recorded.status();
  for (size_t done = 0; done < count;) {
    std::vector<ops::RecordCall> calls(std::min<size_t>(ops::kGroupCallsMax, count - done));
    for (auto& call : calls) {
      call.inputs = std::move(*ops::DecodeInputs({NodeReport(done++)}));
      call.options = AdminIntake();
    }
    for (const auto& r : service.RecordGroup(calls)) {
      if (!r.ok()) return r.status();
    }
  }
  return Status::Ok();
}

}  // namespace admission::testing
