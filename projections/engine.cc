// Engine: batches (EndBatch), state names, queues and heads (Kueue: pkg/queue), the quota
// tree's upkeep and each ClusterQueue's holders (pkg/cache), decisions, reservation, release and
// eviction. The cycle itself is in cycle.cc (docs/decider.md, "Files").

#include "projections/engine.h"

#include <algorithm>
#include <charconv>

#include <capnp/message.h>

#include "projections/engine_internal.h"
#include "projections/engine_version.h"
#include "schema/enum_names.h"
#include "schema/event_codec.h"

namespace admission::projections {

const char* CheckStateName(CheckState state) {
  switch (state) {
    case CheckState::kPending: return "Pending";
    case CheckState::kReady: return "Ready";
    case CheckState::kRetry: return "Retry";
    case CheckState::kRejected: return "Rejected";
  }
  return "Pending";
}

CheckState ToCheckState(schema::CheckState state) {
  switch (state) {
    case schema::CheckState::PENDING: return CheckState::kPending;
    case schema::CheckState::READY: return CheckState::kReady;
    case schema::CheckState::RETRY: return CheckState::kRetry;
    case schema::CheckState::REJECTED: return CheckState::kRejected;
  }
  return CheckState::kPending;
}

std::optional<CheckState> CheckStateFromName(std::string_view name) {
  return EnumFromName(name, CheckState::kPending, kCheckStateLast, CheckStateName);
}

const char* AfterEvictionName(AfterEviction after) {
  switch (after) {
    case AfterEviction::kRequeue: return "";
    case AfterEviction::kRetry: return "retry";
    case AfterEviction::kPodsReady: return "podsready";
    case AfterEviction::kDeactivate: return "deactivate";
  }
  return "";
}

std::optional<AfterEviction> AfterEvictionFromName(std::string_view name) {
  return EnumFromName(name, AfterEviction::kRequeue, kAfterEvictionLast, AfterEvictionName);
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending: return "Pending";
    case Phase::kReserved: return "QuotaReserved";
    case Phase::kAdmitted: return "Admitted";
    case Phase::kDeactivated: return "Deactivated";
    case Phase::kEvicting: return "Evicting";
    case Phase::kFinished: return "Finished";
    case Phase::kRejected: return "Rejected";
    case Phase::kDeleted: return "Deleted";
  }
  return "Unknown";
}

Engine::Engine() = default;
Engine::Engine(const EngineLimits& limits) : limits_(limits) {}

// ---------------------------------------------------------------------------------------------
// Decisions.

schema::Event::Builder Engine::NewDecision(uint64_t causation) {
  // A batch's first segment holds a few decisions (about 40 words each); the arena grows when a
  // batch makes more. Larger, it would be zeroed for nothing on every batch.
  if (!decision_arena_) {
    decision_arena_ = std::make_unique<capnp::MallocMessageBuilder>(kDecisionArenaFirstWords);
  }
  decisions_.push_back(
      PendingDecision{decision_arena_->getOrphanage().newOrphan<schema::Event>(), causation});
  schema::Event::Builder e = decisions_.back().event.get();
  // A decision forced by an input records who asked; cycle decisions are the engine's own.
  e.setActor(causation != 0 && !current_actor_.empty() ? Txt(current_actor_)
                                                        : capnp::Text::Reader("engine"));
  return e;
}

schema::WorkloadRef::Builder Engine::Ref(schema::WorkloadRef::Builder b,
                                         const WorkloadState& wl) const {
  b.setNamespace(Txt(wl.ns));
  b.setName(Txt(wl.name));
  b.setUid(Txt(wl.uid));
  return b;
}

void Engine::SetCondition(WorkloadState& wl, ConditionType type, bool status,
                          std::string_view reason, std::string_view message, int64_t now) {
  // Views, and assign() into the strings already there: most calls pass literals, and most
  // set a condition the workload already has.
  bool added = false;
  Condition& c = wl.conditions.Upsert(type, &added);
  if (added || c.status != status) c.last_transition_ns = now;
  c.status = status;
  c.reason.assign(reason);
  c.message.assign(message);
}

std::string Engine::BatchDecisions::Encode(size_t i) const {
  return schema::CanonicalBytes(events[i].getReader());
}

std::vector<std::string> Engine::EndBatch(uint64_t batch_last_sequence, int64_t now_ns,
                                          uint32_t version) {
  BatchDecisions batch = EndBatchDecisions(batch_last_sequence, now_ns, version);
  std::vector<std::string> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) out.push_back(batch.Encode(i));
  return out;
}

Engine::BatchDecisions Engine::EndBatchDecisions(uint64_t batch_last_sequence, int64_t now_ns,
                                                 uint32_t version) {
  ADM_CHECK(EngineVersionDecidable(version), "engine v%u cannot decide as v%u", kEngineVersion,
            version);
  batch_version_ = version;
  now_ns_ = std::max(now_ns_, now_ns);
  current_sequence_ = 0;  // decisions made by cycles cite the batch's last input
  AfsSync(now_ns_);
  int cycles = 0;
  // Timers due now, then cycles to a fixpoint; a cycle may start timers that are due at once
  // (a zero TTL), so repeat until neither changes anything.
  bool more = true;
  for (int rounds = 0; more; ++rounds) {
    ADM_CHECK(rounds < kTimerRoundsPerBatchMax, "timers due at once do not run out");
    more = FireTimers(now_ns_);
    while (RunCycle(now_ns_)) {
      ++cycles;
      ADM_CHECK(cycles < kCyclesPerBatchMax, "admission cycles do not converge");
      more = true;
    }
    more = more && !timers_.empty() && timers_.begin()->at_ns <= now_ns_;
  }
  // The heads held back for having been preempted in this batch are nominated again in the
  // next one, as any other queued workload.
  for (const auto& [cq_name, class_key] : held_until_next_batch_) {
    auto cq = cqs_.find(cq_name);
    if (cq == cqs_.end()) continue;
    auto cls = cq->second.classes.find(class_key);
    if (cls == cq->second.classes.end() || !cls->second.inadmissible) continue;
    cls->second.inadmissible = false;
    active_.insert(cq_name);
  }
  held_until_next_batch_.clear();
  preempted_in_batch_.clear();
  revoked_in_batch_.clear();
  // Engine v12: a resumed flavor search lives within its batch (the cycles above ran until no
  // workload had flavors left to try, or its resumes ran out).
  for (const std::string& key : resuming_) {
    auto w = workloads_.find(key);
    if (w != workloads_.end()) w->second.flavor_resume.reset();
  }
  resuming_.clear();
  BatchDecisions out;
  out.events.reserve(decisions_.size());
  for (PendingDecision& d : decisions_) {
    schema::Event::Builder e = d.event.get();
    e.setRecordedAtNs(now_ns_);
    e.setCausationSequence(d.causation != 0 ? d.causation : batch_last_sequence);
    e.setEngineVersion(version);
    FeedUsage(e.asReader());
    out.events.emplace_back(std::move(d.event));
  }
  decisions_made_ += out.events.size();
  decisions_.clear();
  out.arena = std::move(decision_arena_);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Queues.

std::string Engine::ClassKey(const WorkloadState& wl) {
  // Everything that decides whether a workload fits, and nothing else: two workloads with
  // the same key fit or fail together (Kueue's scheduling equivalence hash). Appended in
  // place (one workload's key is built at every submission).
  std::string key;
  key.reserve(64);
  auto number = [&key](int64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    key.append(buf, end);
  };
  number(wl.priority);
  key.append("|").append(wl.queue_name).append("|").append(wl.ns);
  for (const PodSetSpec& ps : wl.pod_sets) {
    key.append("|").append(ps.name).append(":");
    number(ps.count);
    key.append(":");
    number(ps.min_count);
    for (const auto& [r, v] : ps.requests) {
      key.append(":");
      number(r);
      key.append("=");
      number(v);
    }
    for (const auto& [k, v] : ps.node_selector) key.append(";s").append(k).append("=").append(v);
    for (const Toleration& t : ps.tolerations) {
      key.append(";t").append(t.key).append(t.op).append(t.value).append(t.effect);
    }
    for (const Requirement& r : ps.affinity) {
      key.append(";a").append(r.key).append(r.op);
      for (const std::string& v : r.values) key.append(",").append(v);
    }
    if (const std::optional<TopologyRequest>& t = ps.topology) {  // engine v26
      key.append(";T").append(t->required).append(",").append(t->preferred);
      key.append(t->unconstrained ? ",u," : ",,").append(t->slice_level).append(",");
      number(t->slice_size);
      key.append(",").append(t->group);
    }
  }
  return key;
}

std::string Engine::ResolveClusterQueue(const WorkloadState& wl, std::string* reason,
                                        std::string* message) const {
  auto lq = lqs_.find(wl.local_queue_key);
  if (lq == lqs_.end()) {
    *reason = "LocalQueueDoesNotExist";
    *message = "LocalQueue " + wl.queue_name + " doesn't exist";
    return "";
  }
  auto cq = cq_specs_.find(lq->second.cluster_queue);
  if (cq == cq_specs_.end()) {
    *reason = "ClusterQueueDoesNotExist";
    *message = "ClusterQueue " + lq->second.cluster_queue + " doesn't exist";
    return "";
  }
  if (!SelectorMatches(cq->second.namespace_selector, wl.namespace_labels)) {
    *reason = "NamespaceNotSelected";
    *message = "Workload namespace doesn't match ClusterQueue selector";
    return "";
  }
  return cq->first;
}

void Engine::Enqueue(WorkloadState& wl, int64_t now) {
  ADM_CHECK(!wl.queued, "%s/%s queued twice", wl.ns.c_str(), wl.name.c_str());
  std::string reason, message;
  const std::string cq_name = ResolveClusterQueue(wl, &reason, &message);
  if (cq_name.empty()) {
    orphans_.insert(wl.key);
    SetPending(wl, "Inadmissible", message, "", "", 0, now, /*emit=*/true);
    return;
  }
  if (!orphans_.empty()) orphans_.erase(wl.key);
  if (wl.cluster_queue != cq_name) {
    wl.cluster_queue = cq_name;
    wl.cq_state = nullptr;
  }
  ClusterQueueState& cq = CqState(wl);
  EquivalenceClass& cls = cq.classes[wl.class_key];
  cls.members.insert(QueueKey{wl.priority, wl.queued_at_ns, wl.submitted_sequence, &wl});
  wl.queued_class = &cls;
  // A new member does not change whether its class fits; a new class deserves a look.
  if (cls.members.size() == 1) cls.inadmissible = false;
  ++cq.pending;
  wl.queued = true;
  if (wl.pending_since_ns == 0) {
    wl.pending_since_ns = now;
    wl.starvation_alerted = false;
    if (cq.spec && cq.spec->max_wait_ns > 0) {
      AddTimer(now + cq.spec->max_wait_ns, TimerKind::kMaxWait, wl.key, wl.generation,
               std::to_string(now));
    }
  }
  if (!cls.inadmissible) active_.insert(cq_name);
}

void Engine::Dequeue(WorkloadState& wl) {
  ADM_CHECK(wl.queued, "%s/%s not queued", wl.ns.c_str(), wl.name.c_str());
  ClusterQueueState& cq = CqState(wl);
  ADM_CHECK(wl.queued_class != nullptr, "class of %s missing", wl.name.c_str());
  size_t erased = wl.queued_class->members.erase(
      QueueKey{wl.priority, wl.queued_at_ns, wl.submitted_sequence, &wl});
  ADM_CHECK(erased == 1, "%s/%s not in its class", wl.ns.c_str(), wl.name.c_str());
  if (wl.queued_class->members.empty()) cq.classes.erase(wl.class_key);
  wl.queued_class = nullptr;
  --cq.pending;
  wl.queued = false;
}

void Engine::RequeueOrphans(int64_t now) {
  std::vector<std::string> keys(orphans_.begin(), orphans_.end());
  for (const std::string& key : keys) {
    WorkloadState& wl = workloads_.at(key);
    if (wl.phase != Phase::kPending || wl.queued) {
      orphans_.erase(key);
      continue;
    }
    std::string reason, message;
    if (!ResolveClusterQueue(wl, &reason, &message).empty()) Enqueue(wl, now);
  }
}

void Engine::FlushReactivations() {
  if (reactivate_pending_.empty()) return;
  RebuildTreeIfNeeded();
  std::set<int> roots;
  std::vector<std::string> one_per_root;
  for (const std::string& cq : reactivate_pending_) {
    const int node = tree_.FindClusterQueue(cq);
    if (node >= 0 && roots.insert(tree_.Root(node)).second) one_per_root.push_back(cq);
  }
  reactivate_pending_.clear();
  for (const std::string& cq : one_per_root) ReactivateTree(cq);
}

void Engine::ReactivateTree(const std::string& cq_name) {
  RebuildTreeIfNeeded();
  int node = tree_.FindClusterQueue(cq_name);
  if (node < 0) return;
  for (int id : tree_.ClusterQueuesUnder(tree_.Root(node))) {
    ClusterQueueState* cq = cq_by_node_[static_cast<size_t>(id)];
    if (cq == nullptr || cq->pending == 0) continue;
    for (auto& [key, cls] : cq->classes) cls.inadmissible = false;
    active_.insert(tree_.node(id).name);
  }
}

void Engine::RebuildTreeIfNeeded() {
  if (!tree_dirty_) return;
  std::map<std::string, FrQuantities> usage;
  for (const auto& [name, cq] : cqs_) {
    if (!cq.usage.empty()) usage[name] = cq.usage;
  }
  // A ClusterQueue whose spec was deleted keeps holding its admitted usage in the tree until
  // those workloads release it, so the tree includes it with no quota. The specs are copied
  // only then: a rebuild follows every definition, and a thousand queues' specs copied each
  // time were a twentieth of admitd's CPU in Kueue's large-scale run.
  const bool placeholders = std::any_of(cqs_.begin(), cqs_.end(), [](const auto& entry) {
    return !entry.second.spec && !entry.second.usage.empty();
  });
  if (!placeholders) {
    tree_.Rebuild(cq_specs_, cohort_specs_, usage);
  } else {
    std::map<std::string, ClusterQueueSpec> specs = cq_specs_;
    for (const auto& [name, cq] : cqs_) {
      if (!cq.spec && !cq.usage.empty()) {
        ClusterQueueSpec placeholder;
        placeholder.name = name;
        specs[name] = placeholder;
      }
    }
    tree_.Rebuild(specs, cohort_specs_, usage);
  }
  TreeRebuilt();
  // Activity: a ClusterQueue is inactive while it names a flavor that is not defined.
  for (auto& [name, cq] : cqs_) {
    cq.inactive_reason.clear();
    if (!cq.spec) {
      cq.inactive_reason = "ClusterQueue " + name + " is deleted";
      continue;
    }
    for (const ResourceGroup& g : cq.spec->resource_groups) {
      for (const FlavorQuotas& f : g.flavors) {
        if (flavors_.count(flavor_ids_.Name(f.flavor)) == 0) {
          cq.inactive_reason = "Can't admit new workloads; ClusterQueue " + name +
                               " references a missing ResourceFlavor " + flavor_ids_.Name(f.flavor);
          break;
        }
      }
      if (!cq.inactive_reason.empty()) break;
    }
  }
  tree_dirty_ = false;
}

void Engine::AddUsage(ClusterQueueState& cq, const std::string& cq_name, const FrQuantities& usage,
                      int sign) {
  for (const auto& [fr, amount] : usage) {
    int64_t& u = cq.usage[fr];
    u += sign * amount;
    ADM_CHECK(u >= 0, "usage of %s below zero", cq_name.c_str());
    if (u == 0) cq.usage.erase(fr);
  }
  if (tree_dirty_) return;  // the rebuild reads cq.usage
  int node = NodeOf(cq, cq_name);
  if (node < 0) {
    tree_dirty_ = true;
    return;
  }
  tree_.AddUsage(node, usage, sign);
}

void Engine::TreeRebuilt() {
  ++tree_epoch_;
  cq_by_node_.assign(tree_.size(), nullptr);
  for (auto& [name, cq] : cqs_) {
    const int node = tree_.FindClusterQueue(name);
    if (node >= 0) cq_by_node_[static_cast<size_t>(node)] = &cq;
  }
}

std::vector<WorkloadState*> ClusterQueueState::AdmittedInKeyOrder() const {
  std::vector<WorkloadState*> out;
  out.reserve(holders.size());
  for (const Holder& h : holders) out.push_back(h.wl);
  std::sort(out.begin(), out.end(),
            [](const WorkloadState* a, const WorkloadState* b) { return a->key < b->key; });
  return out;
}

void Engine::AddHolder(ClusterQueueState& cq, WorkloadState& wl) {
  Holder h;
  h.wl = &wl;
  h.priority = wl.priority;
  h.evictable = Evictable(wl.phase);
  h.reserved_at_ns = wl.reserved_at_ns;
  h.single = wl.admission.usage.size() == 1;
  if (h.single) {
    h.fr = wl.admission.usage.begin()->first;
    h.amount = wl.admission.usage.begin()->second;
  }
  wl.holder_index = static_cast<int32_t>(cq.holders.size());
  cq.holders.push_back(h);
}

void Engine::RemoveHolder(ClusterQueueState& cq, WorkloadState& wl) {
  const size_t i = static_cast<size_t>(wl.holder_index);
  ADM_CHECK(i < cq.holders.size() && cq.holders[i].wl == &wl, "%s is not a holder",
            wl.key.c_str());
  cq.holders[i] = cq.holders.back();
  cq.holders[i].wl->holder_index = static_cast<int32_t>(i);
  cq.holders.pop_back();
  wl.holder_index = -1;
}

int Engine::NodeOf(const ClusterQueueState& cq, const std::string& name) const {
  if (cq.node_epoch != tree_epoch_) {
    cq.node = tree_.FindClusterQueue(name);
    cq.node_epoch = tree_epoch_;
  }
  return cq.node;
}

std::vector<std::string> Engine::PendingInOrder(const std::string& cq_name) const {
  std::vector<std::pair<QueueKey, std::string>> all;
  auto it = cqs_.find(cq_name);
  if (it == cqs_.end()) return {};
  for (const auto& [key, cls] : it->second.classes) {
    for (const QueueKey& k : cls.members) all.emplace_back(k, k.wl->key);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& [k, key] : all) out.push_back(key);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reservations, evictions, releases.

void Engine::CountPhase(const WorkloadState& wl, int delta) {
  const bool holds = HoldsQuota(wl.phase);
  if (wl.phase != Phase::kPending && !holds) return;
  LocalQueueCounts& c = lq_counts_[wl.local_queue_key];
  const auto add = [delta](size_t& n) {
    ADM_CHECK(delta > 0 || n > 0, "a LocalQueue's count would go below zero");
    n = delta > 0 ? n + 1 : n - 1;
  };
  if (wl.phase == Phase::kPending) add(c.pending);
  if (holds) add(c.reserving);
  if (wl.phase == Phase::kAdmitted) add(c.admitted);
  if (c.pending == 0 && c.reserving == 0) lq_counts_.erase(wl.local_queue_key);
}

void Engine::SetPhase(WorkloadState& wl, Phase phase) {
  CountPhase(wl, -1);
  wl.phase = phase;
  CountPhase(wl, +1);
}

void Engine::SetPending(WorkloadState& wl, const std::string& reason, const std::string& message,
                        const std::string& resource, const std::string& flavor,
                        int64_t shortfall, int64_t now, bool emit) {
  const char* condition_reason = reason == "Inadmissible" ? "Inadmissible" : "Pending";
  if (wl.pending_reason == reason && wl.pending_message == message) {
    // Nothing changes (the common case of a head nominated again): skip the condition update.
    const Condition* c = wl.conditions.Find(ConditionType::kQuotaReserved);
    if (c != nullptr && !c->status && c->reason == condition_reason && c->message == message) {
      return;
    }
  }
  SetCondition(wl, ConditionType::kQuotaReserved, false, condition_reason, message, now);
  // Engine v27: a reason not emitted does not replace the one last emitted, so a workload
  // passed over in one cycle and waiting for the same reason in the next emits nothing new.
  if (!emit && batch_version_ >= 27 && !wl.pending_reason.empty()) return;
  if (wl.pending_reason == reason && wl.pending_message == message) return;
  wl.pending_reason = reason;
  wl.pending_message = message;
  if (!emit) return;
  auto d = NewDecision(current_sequence_).initBody().initPendingReasonChanged();
  Ref(d.initWorkload(), wl);
  d.setReason(Txt(reason));
  d.setMessage(Txt(message));
  d.setResource(Txt(resource));
  d.setFlavor(Txt(flavor));
  d.setShortfallMilli(shortfall);
}

void Engine::Reserve(WorkloadState& wl, Nomination& n, int64_t now) {
  ClusterQueueState& cq = CqState(wl);
  Dequeue(wl);
  SetPhase(wl, Phase::kReserved);
  wl.pending_since_ns = 0;
  wl.admission = std::move(n.assignment);
  ++wl.generation;
  wl.quota_version = cq.spec->version;
  wl.reserved_at_ns = now;
  wl.pending_reason.clear();
  wl.pending_message.clear();
  AddHolder(cq, wl);
  TasHolderChanged(wl, +1);  // engine v26
  AddUsage(cq, wl.cluster_queue, wl.admission.usage, +1);
  if (AfsOrders(*cq.spec)) AfsPushPenalty(wl, now);

  const std::string message = "Quota reserved in ClusterQueue " + wl.cluster_queue;
  SetCondition(wl, ConditionType::kQuotaReserved, true, "QuotaReserved", message, now);
  SetCondition(wl, ConditionType::kEvicted, false, "", "", now);
  SetCondition(wl, ConditionType::kPreempted, false, "", "", now);
  auto r = NewDecision(current_sequence_).initBody().initQuotaReserved();
  Ref(r.initWorkload(), wl);
  r.setGeneration(wl.generation);
  r.setQuotaVersion(wl.quota_version);
  r.setBorrowing(wl.admission.borrows);
  r.setMessage(Txt(message + (n.partial ? " (partial admission)" : "")));
  auto adm = r.initAdmission();
  adm.setClusterQueue(Txt(wl.cluster_queue));
  auto psas = adm.initPodSetAssignments(static_cast<unsigned>(wl.admission.pod_sets.size()));
  for (size_t i = 0; i < wl.admission.pod_sets.size(); ++i) {
    const PodSetAssignment& a = wl.admission.pod_sets[i];
    auto b = psas[static_cast<unsigned>(i)];
    b.setName(Txt(a.name));
    b.setCount(a.count);
    auto flavors = b.initFlavors(static_cast<unsigned>(a.flavors.size()));
    unsigned j = 0;
    for (const auto& [res, flv] : a.flavors) {
      flavors[j].setResource(Txt(resources_.Name(res)));
      flavors[j].setFlavor(Txt(flavor_ids_.Name(flv)));
      ++j;
    }
    auto usage = b.initResourceUsage(static_cast<unsigned>(a.usage.size()));
    j = 0;
    for (const auto& [res, amount] : a.usage) {
      usage[j].setName(Txt(resources_.Name(res)));
      usage[j].setMilli(amount);
      ++j;
    }
    if (a.topology) SetTopologyAssignment(*a.topology, b.initTopologyAssignment());
  }
  // Admitted at once when the ClusterQueue requires no checks for these flavors.
  StartChecks(wl, now);
}

void Engine::ReleaseQuota(WorkloadState& wl, const std::string& reason, int64_t now) {
  ClusterQueueState& cq = CqState(wl);
  RemoveHolder(cq, wl);  // checks that it held quota here
  TasHolderChanged(wl, -1);  // engine v26
  wl.fencing_token.clear();
  AddUsage(cq, wl.cluster_queue, wl.admission.usage, -1);
  ++cq.allocatable_generation;  // engine v12: resumed flavor searches here start over
  const std::string message = "Quota released: " + reason;
  SetCondition(wl, ConditionType::kQuotaReserved, false, reason, message, now);
  SetCondition(wl, ConditionType::kAdmitted, false, reason, message, now);
  auto d = NewDecision(current_sequence_).initBody().initQuotaReleased();
  Ref(d.initWorkload(), wl);
  d.setGeneration(wl.generation);
  d.setReason(Txt(reason));
  reactivate_pending_.insert(wl.cluster_queue);
  // Engine v19: node capacity is shared by every ClusterQueue using the flavor, whatever its
  // cohort: what it freed may admit workloads of other cohort trees too.
  if (batch_version_ >= 19 && std::any_of(wl.admission.usage.begin(), wl.admission.usage.end(),
                                          [this](const auto& u) {
                                            return u.second > 0 && NodeCapacity(u.first) != INT64_MAX;
                                          })) {
    for (const auto& [name, other] : cqs_) {
      if (other.pending > 0) reactivate_pending_.insert(name);
    }
  }
}

void Engine::RequeueAfterEviction(WorkloadState& wl, int64_t now) {
  SetPhase(wl, Phase::kPending);
  wl.admission = Assignment{};
  wl.checks.clear();
  wl.fencing_token.clear();
  // A preempted workload queues by its creation time (Kueue's GetQueueOrderTimestamp only moves
  // it for PodsReadyTimeout and AdmissionCheck evictions); since engine v24 also when an
  // earlier such eviction had moved it.
  if (batch_version_ >= 24) wl.queued_at_ns = wl.creation_ns;
  ++wl.requeue_count;
  const Condition* evicted = wl.conditions.Find(ConditionType::kEvicted);
  const std::string reason = evicted != nullptr ? evicted->reason : "Evicted";
  SetCondition(wl, ConditionType::kRequeued, true, reason, "Requeued after eviction", now);
  auto d = NewDecision(current_sequence_).initBody().initRequeued();
  Ref(d.initWorkload(), wl);
  d.setRequeueAtNs(now);
  d.setAttempt(wl.requeue_count);
  d.setReason(Txt(reason));
  Enqueue(wl, now);
}

void Engine::Evict(WorkloadState& victim, const std::string& reason, const std::string& message,
                   const std::string& preempt_reason, const WorkloadState* preemptor,
                   int64_t now) {
  ADM_CHECK(Evictable(victim.phase), "evicting %s in phase %s", victim.name.c_str(),
            PhaseName(victim.phase));
  if (preemptor != nullptr) {
    SetCondition(victim, ConditionType::kPreempted, true, preempt_reason, message, now);
    auto p = NewDecision(current_sequence_).initBody().initPreempted();
    Ref(p.initWorkload(), victim);
    Ref(p.initPreemptor(), *preemptor);
    p.setReason(Txt(preempt_reason));
    p.setMessage(Txt(message));
  }
  // Pods exist only after the runtime reported them released. None released: nothing to
  // wait for, the quota is free at once. Otherwise it stays held until they are gone.
  EvictForReason(victim, reason, message, 0, 0, now);
}

}  // namespace admission::projections
