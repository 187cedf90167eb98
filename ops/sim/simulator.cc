#include "ops/sim/simulator.h"

#include <capnp/message.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "ledger/memory_log.h"
#include "ops/service/api.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/service/service.h"
#include "replay/replayer.h"
#include "schema/enum_names.h"
#include "schema/event_codec.h"
#include "projections/state_checks.h"

namespace admission::sim {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;
constexpr int64_t kMinuteNs = 60 * kSecondNs;
constexpr int64_t kStartNs = 1'800'000'000'000'000'000;
// Logical time between steps: kStepSecondsMin..kStepSecondsMax.
constexpr int kStepSecondsMin = 5;
constexpr int kStepSecondsMax = 120;
constexpr int kStepsMax = 1'000'000;
// Bounds on what one step may do, so a step's work stays small whatever the state.
constexpr size_t kBurstMax = 3;
constexpr size_t kReportsPerTickMax = 12;
constexpr size_t kHeldReportsMax = 64;

const char* const kNamespaces[] = {"team-a", "team-b", "serving"};
const char* const kFlavors[] = {"h100", "a100", "spot"};
const char* const kNodes[] = {"h100-0", "h100-1", "h100-2", "a100-0", "a100-1"};
// The flavor of kNodes[i]: its name's first four letters.
const char* const kScanner = "scanner";
const char* const kBudget = "budget-ctl";
const char* const kRuntime = "pod-runtime";

// SplitMix64: every choice of a run comes from here, in one order.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // lo..hi inclusive.
  int Uniform(int lo, int hi) {
    return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Uniform(1, 100) <= percent; }

 private:
  uint64_t state_;
};

class NoClock final : public ops::Clock {
 public:
  // Every input is stamped by the simulator (IntakeOptions::at_ns); this is never asked.
  int64_t NowNs() override { return 0; }
};

std::string Encode(capnp::MallocMessageBuilder& m) { return schema::EncodeEvent(m); }

// A check report the controller decided on and may deliver late (reordered: by then it may be
// stale) or twice.
struct HeldReport {
  int64_t deliver_at_ns = 0;
  std::string actor;
  std::string input;
};

// What an actor knows of a workload: copied out of the decider before it records anything
// (recording changes the decider's state, and a restart replaces it).
struct WorkloadView {
  std::string key, ns, name, uid;
  uint64_t generation = 0;
  projections::Phase phase = projections::Phase::kPending;
  bool pods_released = false;
  bool pods_ready = false;
  std::vector<std::string> pending_checks;
};

void SetRef(schema::WorkloadRef::Builder ref, const WorkloadView& wl) {
  ref.setNamespace(wl.ns);
  ref.setName(wl.name);
  ref.setUid(wl.uid);
}

// What an Admitted decision made valid, for the ledger-level token check.
struct TokenState {
  std::string token;
  bool valid = false;
};

class World {
 public:
  explicit World(const SimOptions& options)
      : options_(options), rng_(options.seed),
        log_(options.log != nullptr ? *options.log : memory_log_) {}

  SimReport Run();
  // Run's steps: one step of the world, the replay at the end, the debugging dumps, the report.
  void Step();
  void ReplayAtEnd();
  void DumpForDebugging();
  SimReport Report();

 private:
  // --- The platform ---
  // The platform's definitions; `reclaimed`: team-b's H100 quota cut down (a quota reclaim).
  std::string DefinitionsYaml(bool reclaimed) const;
  void Setup();

  // --- The actors, one step each ---
  void TenantBurst();
  void TenantEnds();
  void CheckControllers();
  void DeliverHeldReports();
  void PodRuntime();
  void NodeEvent();
  void QuotaReclaim();
  void MaintenanceWindow();
  void Revoke();
  void Restart();
  void Forge();
  // The drill's fault, at its fixed steps (nothing for the simulation).
  void DrillFault();
  // A decision that shows the drill's fault taking effect, or the platform recovering from it.
  void NoteEvidence(uint64_t sequence, const schema::Event::Reader& event);
  // Whether the drill's fault took effect and the platform recovered; the failure otherwise.
  std::optional<std::string> DrillHadItsEffect() const;
  bool drilling() const { return options_.drill != Drill::kNone; }

  // Records `inputs` as one batch from `actor` at now_. Returns whether it was accepted; a
  // refusal must write nothing. Checks every invariant after an accepted append.
  bool Record(const std::vector<std::string>& inputs, const std::string& actor);
  void CheckAfterAppend();
  void ScanNewEvents();
  // ScanNewEvents' steps, each false once an invariant failed.
  bool ScanEvent(uint64_t sequence, schema::Event::Reader event);
  bool ScanAdmitted(schema::Admitted::Reader a, const std::string& at);
  bool ScanPodsReported(schema::PodsReported::Reader p, const std::string& at);
  void Fail(const std::string& invariant, const std::string& object, const std::string& detail);
  const projections::Engine& engine() const { return service_->engine(); }
  std::vector<WorkloadView> Workloads(
      const std::function<bool(const projections::WorkloadState&)>& pick) const;

  const SimOptions options_;
  Rng rng_;
  NoClock clock_;
  ledger::MemoryLog memory_log_;
  ledger::EventLog& log_;
  std::unique_ptr<ops::Service> service_;
  int64_t now_ns_ = kStartNs;
  int step_ = 0;
  uint64_t next_workload_ = 0;
  uint64_t scanned_ = 0;  // the last sequence ScanNewEvents looked at
  // Drills: what the fault did, per workload uid, and what came after.
  std::vector<std::string> evidence_;
  std::set<std::string> hit_by_fault_;   // uids the fault evicted, released or deactivated
  std::set<std::string> recovered_;      // of those, admitted again after the fault
  std::set<std::string> released_after_hit_;  // of those, whose quota was then released
  uint64_t duplicates_absorbed_ = 0;      // repeated reports recorded as no-ops or refused
  int64_t fault_over_ns_ = INT64_MAX;     // when the fault ended (controllers back, nodes up)
  std::optional<std::string> failure_;
  std::map<std::string, uint64_t> counts_;
  // The simulated world's own state (not the decider's).
  int64_t scanner_outage_until_ns_ = 0;
  int64_t budget_outage_until_ns_ = 0;
  std::set<std::string> failed_nodes_;
  bool reclaimed_ = false;
  std::vector<HeldReport> held_;
  std::set<std::string> lost_reports_;  // uid/generation whose pods report never comes
  // The ledger-level view: every token issued, and per uid the token now valid.
  std::set<std::string> tokens_issued_;
  std::map<std::string, TokenState> token_of_uid_;
  // The workloads (NS/NAME) a QuotaReserved of the last append reserved quota for.
  std::set<std::string> reserved_in_append_;
};

// The simulation's definitions that no reclaim changes: the admission checks, the flavors, the
// cohort and team-a's ClusterQueue.
constexpr char kFixedDefinitionsYaml[] = R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: image-scan
  annotations:
    admission-ledger.io/pending-ttl: 10m
    admission-ledger.io/on-timeout: Retry
    admission-ledger.io/retry-limit: "3"
    admission-ledger.io/backoff-base: 1m
    admission-ledger.io/backoff-max: 10m
spec: {controllerName: scanner}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: budget
  annotations:
    admission-ledger.io/pending-ttl: 30m
    admission-ledger.io/on-timeout: Reject
spec: {controllerName: budget-ctl}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec: {nodeLabels: {gpu.product: h100, region: eu-west}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
spec: {nodeLabels: {gpu.product: a100, region: us-east}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
spec:
  nodeLabels: {gpu.product: a100, capacity: spot}
  nodeTaints: [{key: spot, value: "true", effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: gpu-pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
  annotations: {admission-ledger.io/max-wait: 45m}
spec:
  cohortName: gpu-pool
  namespaceSelector: {}
  admissionChecks: [image-scan]
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: cpu, nominalQuota: 96}, {name: nvidia.com/gpu, nominalQuota: 16}]
    - name: a100
      resources: [{name: cpu, nominalQuota: 48}, {name: nvidia.com/gpu, nominalQuota: 8}]
)";

std::string World::DefinitionsYaml(bool reclaimed) const {
  // A reclaim halves team-b's H100 quota (the quota version changes) until it is restored; the
  // quota-reclaim drill takes it all but one GPU and forbids borrowing, so admitted work must go.
  const bool drill = options_.drill == Drill::kQuotaReclaim;
  const int team_b_h100 = !reclaimed ? 8 : drill ? 1 : 4;  // GPUs
  const int team_b_borrowing = reclaimed && drill ? 0 : 4;
  std::string y = kFixedDefinitionsYaml;
  y += R"(---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
  annotations: {admission-ledger.io/max-wait: 45m}
spec:
  cohortName: gpu-pool
  namespaceSelector: {}
  admissionChecks: [image-scan, budget]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, reclaimWithinCohort: LowerPriority,
               borrowWithinCohort: {policy: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: )" +
                  std::to_string(team_b_h100) + ", borrowingLimit: " +
                  std::to_string(team_b_borrowing) + ", lendingLimit: " +
                  std::to_string(std::min(team_b_h100, 2)) + R"(}
    - name: spot
      resources: [{name: cpu, nominalQuota: 48}, {name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: serving
  annotations: {admission-ledger.io/max-wait: 20m}
spec:
  cohortName: gpu-pool
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources: [{name: cpu, nominalQuota: 32}, {name: nvidia.com/gpu, nominalQuota: 8}]
)";
  for (const char* ns : kNamespaces) {
    y += std::string("---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: "
                     "main, namespace: ") +
         ns + "}\nspec: {clusterQueue: " + ns + "}\n";
  }
  return y;
}

void World::Setup() {
  {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<schema::Event>().initBody().initEngineConfigDefined();
    c.setWaitForPodsReadyEnabled(true);
    c.setPodsReadyTimeoutNs(15 * kMinuteNs);
    c.setBackoffBaseSeconds(60);
    c.setBackoffMaxSeconds(600);
    c.setBackoffLimitCount(3);
    c.setAgingStepNs(10 * kMinuteNs);
    c.setAgingPriorityMax(100);
    c.setRetainFinishedNs(2 * 60 * kMinuteNs);
    c.setRetainDeactivatedNs(2 * 60 * kMinuteNs);
    Record({Encode(m)}, "platform-ops");
  }
  Result<std::vector<ops::ParsedObject>> parsed = ops::ParseApplyYaml(DefinitionsYaml(false));
  if (!parsed.ok()) {
    Fail("setup", "", "the simulator's definitions do not parse: " + parsed.status().ToString());
    return;
  }
  std::vector<std::string> inputs;
  for (const ops::ParsedObject& o : *parsed) inputs.push_back(o.event);
  if (!Record(inputs, "platform-ops")) Fail("setup", "", "the definitions were refused");
  // Nodes: three of 8 H100s, two of 8 A100s, 96 cores each (spot's nodes report nothing).
  std::vector<std::string> nodes;
  for (const char* node : kNodes) {
    capnp::MallocMessageBuilder m;
    auto n = m.initRoot<schema::Event>().initBody().initNodeCapacityChanged();
    n.setNode(node);
    n.setFlavor(std::string(node).substr(0, 4));
    auto capacity = n.initCapacity(2);
    capacity[0].setName("cpu");
    capacity[0].setMilli(96'000);
    capacity[1].setName("nvidia.com/gpu");
    capacity[1].setMilli(8000);
    // The node agent's inventory is complete with the last node (engine v19: from then on
    // node capacity bounds admissions).
    if (nodes.size() + 1 == std::size(kNodes)) n.setInventoryComplete(true);
    nodes.push_back(Encode(m));
  }
  if (!Record(nodes, "node-agent")) Fail("setup", "", "the node capacities were refused");
}

std::vector<WorkloadView> World::Workloads(
    const std::function<bool(const projections::WorkloadState&)>& pick) const {
  std::vector<WorkloadView> out;
  for (const auto& [key, wl] : engine().workloads()) {
    if (!pick(wl)) continue;
    WorkloadView view{wl.key, wl.ns, wl.name, wl.uid, wl.generation, wl.phase,
                      wl.pods_released, wl.pods_ready, {}};
    for (const auto& [check, status] : wl.checks) {
      if (status.state == projections::CheckState::kPending) view.pending_checks.push_back(check);
    }
    out.push_back(std::move(view));
  }
  return out;
}

void World::TenantBurst() {
  const size_t burst = static_cast<size_t>(rng_.Uniform(1, static_cast<int>(kBurstMax)));
  const int ns = rng_.Uniform(0, 2);
  std::vector<std::string> inputs;
  for (size_t i = 0; i < burst; ++i) {
    capnp::MallocMessageBuilder m;
    auto wl = m.initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
    const std::string name = "job-" + std::to_string(next_workload_++);
    wl.setNamespace(kNamespaces[ns]);
    wl.setName(name);
    wl.setUid("uid-" + name);
    wl.setQueueName("main");
    const bool inference = ns == 2 || rng_.Chance(25);
    static const int kPriorities[] = {10, 50, 100};
    wl.setHasPriority(true);
    wl.setPriority(inference ? 100 : kPriorities[rng_.Uniform(0, 2)]);
    wl.setExpectedRuntimeNs((inference ? 20 : rng_.Uniform(30, 180)) * kMinuteNs);
    auto ps = wl.initPodSets(1)[0];
    ps.setName(inference ? "server" : "trainer");
    const int count = inference ? 1 : rng_.Uniform(1, 4);
    ps.setCount(count);
    if (!inference && count > 1 && rng_.Chance(30)) ps.setMinCount(1);
    auto requests = ps.initRequests(2);
    requests[0].setName("cpu");
    requests[0].setMilli(rng_.Uniform(1, 8) * 1000);
    requests[1].setName("nvidia.com/gpu");
    requests[1].setMilli((inference ? 1 : rng_.Uniform(1, 4)) * 1000);
    if (ns == 1 && rng_.Chance(40)) {
      auto tolerations = ps.initTolerations(1);
      tolerations[0].setKey("spot");
      tolerations[0].setOperator("Exists");
    }
    if (!inference && rng_.Chance(15)) {
      auto selector = ps.initNodeSelector(1);
      selector[0].setKey("region");
      selector[0].setValue("eu-west");
    }
    inputs.push_back(Encode(m));
  }
  if (Record(inputs, std::string("tenant-") + kNamespaces[ns])) counts_["submitted"] += burst;
}

bool IsAnchor(const std::string& name) { return name.rfind("anchor-", 0) == 0; }

void World::TenantEnds() {
  auto live = Workloads([](const projections::WorkloadState& wl) {
    return !projections::Terminal(wl.phase) && !IsAnchor(wl.name);
  });
  if (live.empty()) return;
  const WorkloadView& wl = live[rng_.Next() % live.size()];
  capnp::MallocMessageBuilder m;
  auto body = m.initRoot<schema::Event>().initBody();
  const bool remove = rng_.Chance(30);
  if (remove) {
    SetRef(body.initWorkloadDeleted().initWorkload(), wl);
  } else {
    auto f = body.initWorkloadFinished();
    SetRef(f.initWorkload(), wl);
    f.setMessage("the tenant stopped it");
  }
  if (Record({Encode(m)}, "tenant-" + wl.ns)) ++counts_[remove ? "deleted" : "finished"];
}

void World::CheckControllers() {
  size_t reports = 0;
  for (const WorkloadView& view : Workloads([](const projections::WorkloadState& w) {
         return projections::Evictable(w.phase);
       })) {
    const WorkloadView* wl = &view;
    for (const std::string& check : wl->pending_checks) {
      if (reports >= kReportsPerTickMax) continue;
      const bool scanner = check == "image-scan";
      const int64_t outage_until = scanner ? scanner_outage_until_ns_ : budget_outage_until_ns_;
      if (now_ns_ < outage_until || !rng_.Chance(45)) continue;  // down, or still working
      const int roll = rng_.Uniform(1, 100);
      // A drill's anchor is never refused by a controller: its drill is about another fault.
      const schema::CheckState state = roll <= 88 || IsAnchor(wl->name)
                                           ? schema::CheckState::READY
                                       : roll <= 95 ? schema::CheckState::RETRY
                                       : roll <= 98 ? schema::CheckState::REJECTED
                                                    : schema::CheckState::PENDING;
      capnp::MallocMessageBuilder m;
      auto r = m.initRoot<schema::Event>().initBody().initCheckStateReported();
      SetRef(r.initWorkload(), *wl);
      r.setCheck(check);
      r.setGeneration(wl->generation);
      r.setState(state);
      r.setMessage(state == schema::CheckState::READY ? "ok" : "not yet");
      if (state == schema::CheckState::RETRY) r.setRequeueAfterNs(2 * kMinuteNs);
      HeldReport report{now_ns_, scanner ? kScanner : kBudget, Encode(m)};
      ++reports;
      const bool duplicating = options_.drill == Drill::kDuplicateCallbacks;
      if (rng_.Chance(duplicating ? 30 : 15) && held_.size() < kHeldReportsMax) {
        // Delayed past other events: delivered late, perhaps for a generation that is gone.
        report.deliver_at_ns = now_ns_ + rng_.Uniform(1, 20) * kMinuteNs;
        held_.push_back(std::move(report));
        continue;
      }
      if (Record({report.input}, report.actor)) ++counts_["check-reports"];
      if (rng_.Chance(duplicating ? 100 : 10)) {
        // A duplicate delivery: an identical repeat changes nothing (or is refused as stale).
        const uint64_t head = log_.GetHead().sequence;
        const bool accepted = Record({report.input}, report.actor);
        if (!accepted || log_.GetHead().sequence == head) ++duplicates_absorbed_;
        if (duplicating && held_.size() < kHeldReportsMax) {
          // And once more, late: by then often for a generation that is gone.
          held_.push_back(HeldReport{now_ns_ + rng_.Uniform(1, 30) * kMinuteNs, report.actor,
                                     report.input});
        }
        ++counts_["duplicate-reports"];
      }
      if (rng_.Chance(duplicating ? 20 : 3)) {
        // Someone who does not own the check: must be refused.
        if (Record({report.input}, "intruder")) {
          Fail("reports-only-from-the-check-owner", wl->key,
               "a report on check " + check + " from 'intruder' was accepted");
        }
        ++counts_["foreign-reports"];
      }
      if (failure_) return;
    }
  }
}

void World::DeliverHeldReports() {
  std::vector<HeldReport> due;
  std::vector<HeldReport> later;
  for (HeldReport& r : held_) (r.deliver_at_ns <= now_ns_ ? due : later).push_back(std::move(r));
  held_ = std::move(later);
  for (const HeldReport& r : due) {
    if (Record({r.input}, r.actor)) {
      ++counts_["late-reports-accepted"];
    } else {
      ++counts_["late-reports-refused"];
    }
  }
}

void World::PodRuntime() {
  size_t reports = 0;
  for (const WorkloadView& view : Workloads([](const projections::WorkloadState& w) {
         return w.phase == projections::Phase::kAdmitted ||
                w.phase == projections::Phase::kEvicting;
       })) {
    const WorkloadView* wl = &view;
    if (reports >= kReportsPerTickMax || failure_) return;
    const std::string token = wl->uid + "/" + std::to_string(wl->generation);
    if (lost_reports_.count(token) > 0) continue;  // this runtime lost the workload's reports
    std::optional<schema::PodsReport> report;
    std::string presented = token;
    if (wl->phase == projections::Phase::kEvicting) {
      // Lost reports are a fault of their own: the simulation's, not a drill's.
      if (!drilling() && rng_.Chance(10)) {
        lost_reports_.insert(token);  // never confirmed: the drain deadline must end it
        ++counts_["lost-pod-reports"];
        continue;
      }
      if (rng_.Chance(50)) report = schema::PodsReport::TERMINATED;
    } else if (!wl->pods_released) {
      if (rng_.Chance(50)) report = schema::PodsReport::RELEASED;  // else a slow start
    } else if (!wl->pods_ready) {
      if (rng_.Chance(35)) report = schema::PodsReport::READY;
    } else if (rng_.Chance(4)) {
      report = schema::PodsReport::TERMINATED;  // the pods crashed
      ++counts_["pod-crashes"];
    } else if (rng_.Chance(6) && !IsAnchor(wl->name)) {
      report = schema::PodsReport::FINISHED;
    }
    if (!report) continue;
    const bool stale = wl->generation > 1 && rng_.Chance(5);
    if (stale) presented = wl->uid + "/" + std::to_string(wl->generation - 1);
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<schema::Event>().initBody().initPodsReported();
    SetRef(r.initWorkload(), *wl);
    r.setReport(*report);
    r.setFencingToken(presented);
    ++reports;
    const std::string key = wl->key;
    const std::string input = Encode(m);
    const bool accepted = Record({input}, kRuntime);
    if (accepted && options_.drill == Drill::kDuplicateCallbacks) {
      // The runtime's report delivered again: it must not release anything twice.
      const uint64_t head = log_.GetHead().sequence;
      if (!Record({input}, kRuntime) || log_.GetHead().sequence == head) ++duplicates_absorbed_;
      ++counts_["duplicate-pod-reports"];
    }
    if (stale && accepted) {
      Fail("pods-only-with-a-valid-token", key,
           "a report with the stale token '" + presented + "' was accepted");
    }
    ++counts_[accepted ? "pod-reports" : "pod-reports-refused"];
  }
}

void World::NodeEvent() {
  // A failed node mostly comes back before another fails.
  const bool recover = !failed_nodes_.empty() && rng_.Chance(70);
  const std::string node =
      recover ? *std::next(failed_nodes_.begin(),
                           static_cast<long>(rng_.Next() % failed_nodes_.size()))
              : kNodes[rng_.Uniform(0, 4)];
  const bool failed = failed_nodes_.count(node) > 0;
  capnp::MallocMessageBuilder m;
  auto body = m.initRoot<schema::Event>().initBody();
  auto n = failed ? body.initNodeRecovered() : body.initNodeFailed();
  n.setNode(node);
  if (!Record({Encode(m)}, "node-agent")) return;
  if (failed) {
    failed_nodes_.erase(node);
    ++counts_["node-recoveries"];
  } else {
    failed_nodes_.insert(node);
    ++counts_["node-failures"];
  }
}

void World::QuotaReclaim() {
  reclaimed_ = !reclaimed_;
  Result<std::vector<ops::ParsedObject>> parsed =
      ops::ParseApplyYaml(DefinitionsYaml(reclaimed_));
  if (!parsed.ok()) {
    Fail("setup", "", parsed.status().ToString());
    return;
  }
  std::vector<std::string> inputs;
  for (const ops::ParsedObject& o : *parsed) {
    if (o.kind == "ClusterQueue" && o.name == "team-b") inputs.push_back(o.event);
  }
  if (Record(inputs, "platform-ops")) ++counts_[reclaimed_ ? "quota-reclaims" : "quota-restores"];
}

void World::MaintenanceWindow() {
  capnp::MallocMessageBuilder m;
  auto w = m.initRoot<schema::Event>().initBody().initMaintenanceWindowDefined();
  w.setName("window-" + std::to_string(step_));
  w.setFlavor(kFlavors[rng_.Uniform(0, 1)]);
  w.setStartNs(now_ns_ + rng_.Uniform(5, 60) * kMinuteNs);
  w.setEndNs(w.getStartNs() + rng_.Uniform(10, 60) * kMinuteNs);
  if (Record({Encode(m)}, "platform-ops")) ++counts_["maintenance-windows"];
}

void World::Revoke() {
  auto admitted = Workloads([](const projections::WorkloadState& wl) {
    return projections::Evictable(wl.phase);
  });
  capnp::MallocMessageBuilder m;
  auto r = m.initRoot<schema::Event>().initBody().initRevocationRequested();
  if (!admitted.empty() && rng_.Chance(85)) {
    SetRef(r.getTarget().initWorkload(), admitted[rng_.Next() % admitted.size()]);
  } else {
    r.getTarget().setFlavor(kFlavors[rng_.Uniform(0, 2)]);
  }
  r.setReason(rng_.Chance(50) ? "policy" : "quota reclaim");
  const bool drain = rng_.Chance(60);
  r.setPodSetAction(drain ? schema::PodSetAction::DRAIN : schema::PodSetAction::TERMINATE);
  if (drain) r.setDrainDeadlineNs(now_ns_ + rng_.Uniform(2, 15) * kMinuteNs);
  if (Record({Encode(m)}, "security")) ++counts_["revocations"];
}

void World::Restart() {
  Result<std::string> before = ops::RenderGet(engine(), "workloads", "json");
  Result<std::string> queues_before = ops::RenderGet(engine(), "clusterqueues", "json");
  service_.reset();  // the crash: everything in memory is gone, the ledger stays
  Result<std::unique_ptr<ops::Service>> reopened = ops::Service::Open(log_, clock_);
  if (!reopened.ok()) {
    Fail("restart", "", "the service did not reopen: " + reopened.status().ToString());
    return;
  }
  service_ = std::move(*reopened);
  ++counts_["restarts"];
  Result<std::string> after = ops::RenderGet(engine(), "workloads", "json");
  Result<std::string> queues_after = ops::RenderGet(engine(), "clusterqueues", "json");
  if (!before.ok() || !after.ok() || *before != *after || !queues_before.ok() ||
      !queues_after.ok() || *queues_before != *queues_after) {
    Fail("restart-keeps-the-state", "",
         "the read models after the restart differ from those before it");
  }
}

void World::Forge() {
  auto admitted = Workloads([](const projections::WorkloadState&) { return true; });
  capnp::MallocMessageBuilder m;
  auto event = m.initRoot<schema::Event>();
  event.setRecordedAtNs(now_ns_);
  event.setActor(kRuntime);
  event.setEndsBatch(true);
  auto r = event.initBody().initPodsReported();
  if (!admitted.empty()) {
    SetRef(r.initWorkload(), admitted.front());
  } else {
    auto ref = r.initWorkload();
    ref.setNamespace("team-a");
    ref.setName("nobody");
    ref.setUid("uid-nobody");
  }
  r.setReport(schema::PodsReport::RELEASED);
  r.setFencingToken("forged/1");
  std::vector<std::string> batch = {Encode(m)};
  Result<ledger::AppendAck> ack = log_.Append(batch);
  if (!ack.ok()) Fail("forge", "", ack.status().ToString());
  ScanNewEvents();
}

// The steps at which a drill's fault starts and ends; the run goes on long after, so the
// platform has to recover within it.
constexpr int kDrillAnchorStep = 20;
constexpr int kDrillFaultStep = 60;
constexpr int kDrillSecondFaultStep = 110;
constexpr int kDrillRecoveryStep = 160;

void World::DrillFault() {
  const bool anchors_now =
      options_.drill == Drill::kControllerOutage
          ? step_ == kDrillFaultStep
          : step_ == kDrillAnchorStep && options_.drill != Drill::kDuplicateCallbacks;
  if (anchors_now) {
    // Work the fault will hit, which the tenants and the runtime never end: an H100 job of each
    // team, high priority, well before the fault (or, for an outage, as it starts, so its checks
    // wait on the controllers that are down).
    for (const char* ns : {"team-a", "team-b"}) {
      capnp::MallocMessageBuilder m;
      auto wl = m.initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
      const std::string name = std::string("anchor-") + ns;
      wl.setNamespace(ns);
      wl.setName(name);
      wl.setUid("uid-" + name);
      wl.setQueueName("main");
      wl.setHasPriority(true);
      wl.setPriority(1000);
      auto ps = wl.initPodSets(1)[0];
      ps.setName("trainer");
      ps.setCount(2);
      auto requests = ps.initRequests(2);
      requests[0].setName("cpu");
      requests[0].setMilli(4000);
      requests[1].setName("nvidia.com/gpu");
      requests[1].setMilli(2000);
      auto selector = ps.initNodeSelector(1);
      selector[0].setKey("gpu.product");
      selector[0].setValue("h100");
      Record({Encode(m)}, std::string("tenant-") + ns);
    }
  }
  switch (options_.drill) {
    case Drill::kControllerOutage:
      if (step_ == kDrillFaultStep) {
        // Both controllers go down for 25 minutes: image-scan's 10 minute TTL (Retry with
        // backoff) runs out, twice for work that waits all along, within its retry limit.
        scanner_outage_until_ns_ = budget_outage_until_ns_ = now_ns_ + 25 * kMinuteNs;
        fault_over_ns_ = scanner_outage_until_ns_;
        evidence_.push_back("step " + std::to_string(step_) + ": image-scan and budget "
                            "controllers down for 25 minutes");
      }
      break;
    case Drill::kQuotaReclaim:
      if (step_ == kDrillFaultStep || step_ == kDrillSecondFaultStep) {
        evidence_.push_back("step " + std::to_string(step_) +
                            ": team-b's H100 quota cut to 1 GPU, no borrowing");
        if (!reclaimed_) QuotaReclaim();
      } else if (step_ == kDrillFaultStep + 30 || step_ == kDrillRecoveryStep) {
        if (reclaimed_) QuotaReclaim();
        fault_over_ns_ = std::min(fault_over_ns_, now_ns_);
      }
      break;
    case Drill::kNodeFailure:
      if ((step_ >= kDrillFaultStep && step_ <= kDrillFaultStep + 2) ||
          step_ == kDrillSecondFaultStep) {
        // Every H100 node, one step apart, then an A100 node.
        const char* node = step_ == kDrillSecondFaultStep ? "a100-0"
                                                          : kNodes[step_ - kDrillFaultStep];
        evidence_.push_back("step " + std::to_string(step_) + ": node " + node + " failed");
        capnp::MallocMessageBuilder m;
        m.initRoot<schema::Event>().initBody().initNodeFailed().setNode(node);
        if (Record({Encode(m)}, "node-agent")) failed_nodes_.insert(node);
      } else if (step_ == kDrillRecoveryStep) {
        evidence_.push_back("step " + std::to_string(step_) + ": the nodes recovered");
        for (const std::string& node : std::set<std::string>(failed_nodes_)) {
          capnp::MallocMessageBuilder m;
          m.initRoot<schema::Event>().initBody().initNodeRecovered().setNode(node);
          if (Record({Encode(m)}, "node-agent")) failed_nodes_.erase(node);
        }
        fault_over_ns_ = now_ns_;
      }
      break;
    case Drill::kDuplicateCallbacks:
    case Drill::kNone:
      break;
  }
}

void World::NoteEvidence(uint64_t sequence, const schema::Event::Reader& event) {
  const auto body = event.getBody();
  auto line = [&](const std::string& what, schema::WorkloadRef::Reader ref) {
    return "#" + std::to_string(sequence) + " " + what + " " + ref.getNamespace().cStr() + "/" +
           ref.getName().cStr();
  };
  auto hit = [&](const std::string& what, schema::WorkloadRef::Reader ref) {
    if (hit_by_fault_.insert(ref.getUid().cStr()).second && evidence_.size() < 24) {
      evidence_.push_back(line(what, ref));
    }
  };
  const bool outage = options_.drill == Drill::kControllerOutage;
  switch (body.which()) {
    case schema::Event::Body::EVICTION_STARTED: {
      auto e = body.getEvictionStarted();
      const std::string reason = e.getReason().cStr();
      if ((options_.drill == Drill::kQuotaReclaim && reason == "QuotaReclaimed") ||
          (options_.drill == Drill::kNodeFailure && reason == "NodeFailure") ||
          (outage && std::string(e.getMessage().cStr()).find("after its TTL") !=
                         std::string::npos)) {
        hit("evicted (" + reason + ": " + e.getMessage().cStr() + "):", e.getWorkload());
      }
      break;
    }
    case schema::Event::Body::REQUEUED: {
      auto r = body.getRequeued();
      const std::string reason = r.getReason().cStr();
      if (outage && reason.rfind("AdmissionCheckTimeout", 0) == 0) {
        hit("released and requeued with backoff (" + reason + "):", r.getWorkload());
      }
      break;
    }
    case schema::Event::Body::QUOTA_RELEASED: {
      auto r = body.getQuotaReleased();
      const std::string uid = r.getWorkload().getUid().cStr();
      if (hit_by_fault_.count(uid) > 0 && released_after_hit_.insert(uid).second &&
          evidence_.size() < 32) {
        evidence_.push_back(line(std::string("quota released (") + r.getReason().cStr() + "):",
                                 r.getWorkload()));
      }
      break;
    }
    case schema::Event::Body::ADMITTED: {
      auto a = body.getAdmitted();
      const std::string uid = a.getWorkload().getUid().cStr();
      if (hit_by_fault_.count(uid) > 0 && event.getRecordedAtNs() >= fault_over_ns_ &&
          recovered_.insert(uid).second && evidence_.size() < 40) {
        evidence_.push_back(line("admitted again after the fault, token " +
                                     std::string(a.getFencingToken().cStr()) + ":",
                                 a.getWorkload()));
      }
      break;
    }
    default:
      break;
  }
}

std::optional<std::string> World::DrillHadItsEffect() const {
  switch (options_.drill) {
    case Drill::kDuplicateCallbacks:
      if (duplicates_absorbed_ == 0) return "no repeated report was delivered";
      return std::nullopt;
    case Drill::kQuotaReclaim:
    case Drill::kNodeFailure:
      if (hit_by_fault_.empty()) return "nothing was evicted";
      if (released_after_hit_.empty()) return "no evicted workload's quota was released";
      return std::nullopt;
    case Drill::kControllerOutage:
      if (hit_by_fault_.empty()) return "no check ran past its TTL";
      if (recovered_.empty()) return "no workload was admitted after the controllers came back";
      return std::nullopt;
    case Drill::kNone:
      break;
  }
  return std::nullopt;
}

bool World::Record(const std::vector<std::string>& inputs, const std::string& actor) {
  if (failure_ || inputs.empty()) return false;
  const uint64_t head = log_.GetHead().sequence;
  ops::IntakeOptions intake;
  intake.at_ns = now_ns_;
  intake.actor = actor;
  Result<ops::RecordOutcome> outcome = service_->Record(inputs, intake);
  if (!outcome.ok()) {
    ++counts_["refused"];
    if (std::getenv("SIM_TRACE_REFUSALS") != nullptr) {
      std::fprintf(stderr, "step %d %s refused: %s\n", step_, actor.c_str(),
                   outcome.status().ToString().c_str());
    }
    if (log_.GetHead().sequence != head) {
      Fail("refused-input-writes-nothing", "",
           "step " + std::to_string(step_) + ": a refused batch of " + actor + " moved the head "
               "from " + std::to_string(head) + " to " + std::to_string(log_.GetHead().sequence) +
               " (" + outcome.status().ToString() + ")");
    }
    return false;
  }
  CheckAfterAppend();
  return true;
}

void World::CheckAfterAppend() {
  ScanNewEvents();
  if (failure_) return;
  std::optional<projections::Violation> v =
      projections::CheckQuotaAfterDecreases(engine(), reserved_in_append_);
  reserved_in_append_.clear();
  if (!v) v = projections::CheckWorkloads(engine());
  if (!v) v = projections::CheckFlavors(engine());
  if (v) Fail(v->invariant, v->object, v->detail);
}

// The new events against an independent view kept from the ledger alone: tokens and the
// check reports an admission names.
void World::ScanNewEvents() {
  const uint64_t head = log_.GetHead().sequence;
  while (scanned_ < head && !failure_) {
    Result<std::vector<ledger::StoredEvent>> events =
        log_.Read(scanned_ + 1, std::min<uint64_t>(head - scanned_, ledger::kReadEventsMax));
    if (!events.ok() || events->empty()) {
      Fail("ledger-readable", "", events.ok() ? "no events" : events.status().ToString());
      return;
    }
    for (const ledger::StoredEvent& stored : *events) {
      scanned_ = stored.sequence;
      Result<schema::DecodedEvent> decoded = schema::DecodeEvent(stored.bytes);
      if (!decoded.ok()) {
        Fail("ledger-decodes", "sequence " + std::to_string(stored.sequence),
             decoded.status().ToString());
        return;
      }
      if (!ScanEvent(stored.sequence, decoded->root())) return;
    }
  }
}

bool World::ScanEvent(uint64_t sequence, schema::Event::Reader event) {
  const auto body = event.getBody();
  const std::string at = "sequence " + std::to_string(sequence);
  if (drilling()) NoteEvidence(sequence, event);
  switch (body.which()) {
    case schema::Event::Body::ADMITTED:
      return ScanAdmitted(body.getAdmitted(), at);
    case schema::Event::Body::QUOTA_RESERVED:
      reserved_in_append_.insert(
          std::string(body.getQuotaReserved().getWorkload().getNamespace().cStr()) + "/" +
          body.getQuotaReserved().getWorkload().getName().cStr());
      break;
    case schema::Event::Body::EVICTION_STARTED:
      ++counts_["evicted"];
      token_of_uid_[body.getEvictionStarted().getWorkload().getUid().cStr()].valid = false;
      break;
    case schema::Event::Body::QUOTA_RELEASED:
      token_of_uid_[body.getQuotaReleased().getWorkload().getUid().cStr()].valid = false;
      break;
    case schema::Event::Body::DEACTIVATED:
      ++counts_["deactivated"];
      token_of_uid_[body.getDeactivated().getWorkload().getUid().cStr()].valid = false;
      break;
    case schema::Event::Body::WORKLOAD_FINISHED:
      token_of_uid_[body.getWorkloadFinished().getWorkload().getUid().cStr()].valid = false;
      break;
    case schema::Event::Body::WORKLOAD_DELETED:
      token_of_uid_[body.getWorkloadDeleted().getWorkload().getUid().cStr()].valid = false;
      break;
    case schema::Event::Body::PREEMPTED:
      ++counts_["preempted"];
      break;
    case schema::Event::Body::STARVATION_ALERT:
      ++counts_["starvation-alerts"];
      break;
    case schema::Event::Body::DRAIN_DEADLINE_PASSED:
      ++counts_["drain-deadlines-passed"];
      break;
    case schema::Event::Body::REJECTED:
      ++counts_["rejected"];
      break;
    case schema::Event::Body::PODS_REPORTED:
      return ScanPodsReported(body.getPodsReported(), at);
    default:
      break;
  }
  return true;
}

// An admission issues a token never issued before, and names a Ready report of the admitted
// generation for each of its checks.
bool World::ScanAdmitted(schema::Admitted::Reader a, const std::string& at) {
  const std::string uid = a.getWorkload().getUid().cStr();
  const std::string token = a.getFencingToken().cStr();
  ++counts_["admitted"];
  if (!tokens_issued_.insert(token).second) {
    Fail("no-token-issued-twice", uid, at + " issues token " + token + " again");
    return false;
  }
  token_of_uid_[uid] = TokenState{token, true};
  std::set<std::string> ready_checks;
  for (uint64_t report : a.getCheckVersions()) {
    Result<std::vector<ledger::StoredEvent>> r = log_.Read(report, 1);
    std::optional<schema::DecodedEvent> d;
    if (r.ok() && r->size() == 1) {
      Result<schema::DecodedEvent> rd = schema::DecodeEvent(r->front().bytes);
      if (rd.ok()) d = std::move(*rd);
    }
    const bool is_report =
        d && d->root().getBody().which() == schema::Event::Body::CHECK_STATE_REPORTED;
    auto c = is_report ? d->root().getBody().getCheckStateReported()
                       : schema::CheckStateReported::Reader();
    if (!is_report || c.getState() != schema::CheckState::READY ||
        std::string(c.getWorkload().getUid().cStr()) != uid ||
        c.getGeneration() != a.getGeneration()) {
      Fail("admitted-only-with-every-check-ready", uid,
           at + " names sequence " + std::to_string(report) +
               ", which is not a Ready report for generation " +
               std::to_string(a.getGeneration()));
      return false;
    }
    ready_checks.insert(c.getCheck().cStr());
  }
  if (ready_checks.size() != a.getCheckVersions().size()) {
    Fail("admitted-only-with-every-check-ready", uid, at + " names one check twice");
    return false;
  }
  return true;
}

// Pods are released only with the workload's valid token.
bool World::ScanPodsReported(schema::PodsReported::Reader p, const std::string& at) {
  const std::string uid = p.getWorkload().getUid().cStr();
  const std::string presented = p.getFencingToken().cStr();
  const TokenState& state = token_of_uid_[uid];
  if (p.getReport() == schema::PodsReport::RELEASED &&
      (!state.valid || state.token != presented)) {
    Fail("pods-only-with-a-valid-token", uid,
         at + " releases pods with token '" + presented + "', but " +
             (state.valid ? "the valid token is '" + state.token + "'"
                          : std::string("no token is valid")));
    return false;
  }
  if (p.getReport() == schema::PodsReport::FINISHED) token_of_uid_[uid].valid = false;
  return true;
}

void World::Fail(const std::string& invariant, const std::string& object,
                 const std::string& detail) {
  if (failure_) return;
  failure_ = "invariant " + invariant + (object.empty() ? "" : " (" + object + ")") +
             " violated at step " + std::to_string(step_) + ", ledger head " +
             std::to_string(log_.GetHead().sequence) + ": " + detail;
}

SimReport World::Run() {
  Result<std::unique_ptr<ops::Service>> service = ops::Service::Open(log_, clock_);
  if (!service.ok()) {
    SimReport report;
    report.failure = "the service did not open: " + service.status().ToString();
    return report;
  }
  service_ = std::move(*service);
  Setup();
  for (step_ = 0; step_ < options_.steps && !failure_; ++step_) Step();
  if (!failure_) ReplayAtEnd();
  DumpForDebugging();
  return Report();
}

// Time passes, faults and outages come, tenants and operators act, and the controllers and the
// pod runtime answer.
void World::Step() {
  now_ns_ += rng_.Uniform(kStepSecondsMin, kStepSecondsMax) * kSecondNs;
  {
    // Time passes: the timers due fire (TTLs, backoffs, drain deadlines, max waits).
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initClockAdvanced().setToNs(now_ns_);
    Record({Encode(m)}, "clock");
    if (auto v = projections::CheckStarvationAlerts(engine(), now_ns_)) {
      Fail(v->invariant, v->object, v->detail);
    }
  }
  if (options_.forge_release_at_step && *options_.forge_release_at_step == step_) Forge();
  if (drilling()) DrillFault();
  if (!drilling() && rng_.Chance(scanner_outage_until_ns_ > now_ns_ ? 0 : 2)) {
    scanner_outage_until_ns_ = now_ns_ + rng_.Uniform(5, 40) * kMinuteNs;
    ++counts_["controller-outages"];
  }
  if (!drilling() && rng_.Chance(budget_outage_until_ns_ > now_ns_ ? 0 : 1)) {
    budget_outage_until_ns_ = now_ns_ + rng_.Uniform(10, 60) * kMinuteNs;
    ++counts_["controller-outages"];
  }
  DeliverHeldReports();
  const int roll = rng_.Uniform(1, 100);
  if (drilling()) {
    // Only the background: tenants come and go; the fault is DrillFault's.
    if (roll <= 18) {
      TenantBurst();
    } else if (roll <= 26) {
      TenantEnds();
    }
  } else if (roll <= 18) {
    TenantBurst();
  } else if (roll <= 26) {
    TenantEnds();
  } else if (roll <= 29) {
    NodeEvent();
  } else if (roll <= 31) {
    QuotaReclaim();
  } else if (roll <= 32) {
    MaintenanceWindow();
  } else if (roll <= 35) {
    Revoke();
  } else if (roll <= 38) {
    Restart();
  }
  CheckControllers();
  PodRuntime();
}

// Every decision of the run comes out again, byte for byte, from a replay of its ledger.
void World::ReplayAtEnd() {
  Result<replay::ReplayReport> replayed = replay::ReplayAndVerify(log_);
  if (!replayed.ok()) {
    Fail("replay-reproduces-every-decision", "", replayed.status().ToString());
  } else if (replayed->divergence) {
    Fail("replay-reproduces-every-decision",
         "sequence " + std::to_string(replayed->divergence->sequence),
         "first differing field: " + replayed->divergence->first_differing_field);
  } else {
    counts_["decisions-replayed"] = replayed->decisions_compared;
  }
}

// SIM_DUMP_TAIL=N prints the ledger's last N events, SIM_TRACE_END every workload at the end.
void World::DumpForDebugging() {
  if (const char* tail = std::getenv("SIM_DUMP_TAIL"); tail != nullptr) {
    const uint64_t head = log_.GetHead().sequence;
    const uint64_t n = std::min<uint64_t>(head, std::strtoull(tail, nullptr, 10));
    Result<std::vector<ledger::StoredEvent>> events = log_.Read(head - n + 1, n);
    if (events.ok()) {
      for (const ledger::StoredEvent& e : *events) {
        Result<schema::DecodedEvent> decoded = schema::DecodeEvent(e.bytes);
        std::fprintf(stderr, "%s\n",
                     decoded.ok() ? schema::EventToJson(decoded->root()).c_str() : "?");
      }
    }
  }
  if (std::getenv("SIM_TRACE_END") != nullptr) {
    for (const auto& [key, wl] : engine().workloads()) {
      std::string usage;
      for (const auto& [fr, v] : wl.admission.usage) {
        usage += " " + engine().flavor_names().Name(projections::FrFlavor(fr)) + "/" +
                 engine().resource_names().Name(projections::FrResource(fr)) + "=" +
                 std::to_string(v);
      }
      std::fprintf(stderr, "%s %s %s [%s] %s\n", projections::PhaseName(wl.phase), key.c_str(),
                   wl.cluster_queue.c_str(), usage.c_str(),
                   wl.pending_message.substr(0, 100).c_str());
    }
  }
}

SimReport World::Report() {
  SimReport report;
  report.passed = !failure_;
  report.failure = failure_.value_or("");
  report.trace_hash = schema::HashHex(log_.GetHead().hash);
  report.events = log_.GetHead().sequence;
  report.counts = counts_;
  report.evidence = evidence_;
  if (options_.drill == Drill::kDuplicateCallbacks) {
    report.evidence.push_back(
        std::to_string(duplicates_absorbed_) + " repeated reports recorded as no-ops or refused; " +
        std::to_string(counts_["foreign-reports"]) + " reports by a non-owner refused; " +
        std::to_string(counts_["late-reports-refused"]) + " late (stale) reports refused; " +
        std::to_string(tokens_issued_.size()) + " admissions, each token issued once");
  }
  if (report.passed && drilling()) {
    if (std::optional<std::string> missing = DrillHadItsEffect()) {
      report.passed = false;
      report.failure = "the drill's fault had no effect: " + *missing;
    }
  }
  return report;
}

}  // namespace

SimReport Simulate(const SimOptions& options) {
  if (options.steps < 0 || options.steps > kStepsMax) {
    SimReport report;
    report.failure = "steps must be 0.." + std::to_string(kStepsMax);
    return report;
  }
  World world(options);
  return world.Run();
}

std::string ReplayCommand(const SimOptions& options) {
  if (options.drill != Drill::kNone) {
    return std::string("admitctl drill ") + DrillName(options.drill) + " --seed " +
           std::to_string(options.seed);
  }
  return "admitctl simulate --seed " + std::to_string(options.seed) + " --steps " +
         std::to_string(options.steps);
}

std::optional<Drill> DrillNamed(const std::string& name) {
  // Drill::kNone (the simulation) is no drill's name.
  return EnumFromName(name, Drill::kControllerOutage, kDrillLast, DrillName);
}

const char* DrillName(Drill drill) {
  switch (drill) {
    case Drill::kControllerOutage: return "controller-outage";
    case Drill::kDuplicateCallbacks: return "duplicate-callbacks";
    case Drill::kQuotaReclaim: return "quota-reclaim";
    case Drill::kNodeFailure: return "node-failure";
    case Drill::kNone: break;
  }
  return "simulation";
}

}  // namespace admission::sim
