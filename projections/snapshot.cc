// Snapshots of the decider: the serializer (SnapshotCodec, a friend of Engine) and
// Engine::RestoreDerivedState, the one place that rebuilds what a snapshot does not store.
// When the Engine's members change, these two (and kSnapshotFormatVersion) change with them.
// No test lists the members; what guards them is the round trip of tests/property/snapshot_check.h
// (Snapshot.EveryAppendOfEveryGoldenLedgerRoundTrips, the random-scenario property and every
// scenario test): a decider loaded from a snapshot must decide the rest of the ledger as the
// one that wrote it, so a member a snapshot misses fails it where that member matters.

#include "projections/snapshot.h"

#include <cstring>

#include <algorithm>
#include <optional>
#include <set>

#include <capnp/message.h>
#include <kj/exception.h>

#include "projections/engine_version.h"

namespace admission::projections {

namespace snap = schema::snap;

namespace {

// Cap'n Proto lists hold fewer than 2^29 elements.
constexpr size_t kListElementsMax = (size_t{1} << 29) - 1;
// Every timer the decider may keep fits in a snapshot's list (and a loaded list cannot hold more).
static_assert(kTimersMax <= kListElementsMax);

// Thrown (as a kj exception, caught at the API boundary) when the state cannot be encoded or a
// snapshot breaks an invariant; carries the message for the Status.
struct Refusal {
  Code code;
  std::string message;
};

[[noreturn]] void Refuse(Code code, std::string message) { throw Refusal{code, std::move(message)}; }

unsigned Count(size_t n, const char* what) {
  if (n > kListElementsMax) {
    Refuse(Code::kInvalidArgument, "too many " + std::string(what) + " for one snapshot: " +
                                       std::to_string(n));
  }
  return static_cast<unsigned>(n);
}

void Corrupt(const std::string& message) { Refuse(Code::kCorruption, "snapshot: " + message); }

// A text of the state. No state this build encodes holds an embedded NUL (the decider reads
// event texts up to their first NUL, and a std::string handed to a text setter is written up
// to it), so one is refused: a loaded state must encode to what it was loaded from (found by
// tests/fuzz/snapshot_fuzz.cc: a definition key with a NUL came back as another key).
std::string Str(capnp::Text::Reader t) {
  if (std::memchr(t.begin(), '\0', t.size()) != nullptr) Corrupt("a text holds a NUL byte");
  return std::string(t.begin(), t.size());
}

template <typename Map, typename Key, typename Value>
void InsertUnique(Map& map, Key&& key, Value&& value, const char* what) {
  std::string shown = key;
  if (!map.emplace(std::forward<Key>(key), std::forward<Value>(value)).second) {
    Corrupt(std::string("duplicate ") + what + " '" + shown + "'");
  }
}

template <typename E>
E EnumFrom(uint8_t v, uint8_t max, const char* what) {
  if (v > max) Corrupt(std::string(what) + " " + std::to_string(v) + " is out of range");
  return static_cast<E>(v);
}

// ---------------------------------------------------------------------------------------------
// Building blocks, both directions.

void PutPairs(capnp::List<snap::TextPair>::Builder out, const std::map<std::string, std::string>& m) {
  unsigned i = 0;
  for (const auto& [k, v] : m) {
    out[i].setKey(k);
    out[i].setValue(v);
    ++i;
  }
}
std::map<std::string, std::string> GetPairs(capnp::List<snap::TextPair>::Reader in) {
  std::map<std::string, std::string> out;
  for (auto p : in) InsertUnique(out, Str(p.getKey()), Str(p.getValue()), "label");
  return out;
}

void PutTolerations(capnp::List<snap::Toleration>::Builder out, const std::vector<Toleration>& v) {
  for (unsigned i = 0; i < v.size(); ++i) {
    out[i].setKey(v[i].key);
    out[i].setOp(v[i].op);
    out[i].setValue(v[i].value);
    out[i].setEffect(v[i].effect);
  }
}
void PutTaints(capnp::List<snap::Taint>::Builder out, const std::vector<Taint>& v) {
  for (unsigned i = 0; i < v.size(); ++i) {
    out[i].setKey(v[i].key);
    out[i].setValue(v[i].value);
    out[i].setEffect(v[i].effect);
  }
}
std::vector<Taint> GetTaints(capnp::List<snap::Taint>::Reader in) {
  std::vector<Taint> out;
  for (auto t : in) out.push_back(Taint{Str(t.getKey()), Str(t.getValue()), Str(t.getEffect())});
  return out;
}

void PutTopology(snap::TopologyAssignment::Builder out, const TopologyAssignment& a) {
  auto levels = out.initLevels(Count(a.levels.size(), "levels"));
  for (unsigned i = 0; i < a.levels.size(); ++i) levels.set(i, a.levels[i]);
  auto domains = out.initDomains(Count(a.domains.size(), "domains"));
  for (unsigned i = 0; i < a.domains.size(); ++i) {
    auto values = domains[i].initValues(Count(a.domains[i].values.size(), "values"));
    for (unsigned j = 0; j < a.domains[i].values.size(); ++j) {
      values.set(j, a.domains[i].values[j]);
    }
    domains[i].setCount(a.domains[i].count);
  }
}
TopologyAssignment GetTopology(snap::TopologyAssignment::Reader in) {
  TopologyAssignment a;
  for (auto l : in.getLevels()) a.levels.push_back(Str(l));
  for (auto d : in.getDomains()) {
    TopologyDomain domain;
    for (auto v : d.getValues()) domain.values.push_back(Str(v));
    domain.count = d.getCount();
    a.domains.push_back(std::move(domain));
  }
  return a;
}

std::vector<Toleration> GetTolerations(capnp::List<snap::Toleration>::Reader in) {
  std::vector<Toleration> out;
  for (auto t : in) out.push_back(Toleration{Str(t.getKey()), Str(t.getOp()), Str(t.getValue()), Str(t.getEffect())});
  return out;
}

void PutRequirements(capnp::List<snap::Requirement>::Builder out, const std::vector<Requirement>& v) {
  for (unsigned i = 0; i < v.size(); ++i) {
    out[i].setKey(v[i].key);
    out[i].setOp(v[i].op);
    auto values = out[i].initValues(Count(v[i].values.size(), "requirement values"));
    for (unsigned j = 0; j < v[i].values.size(); ++j) values.set(j, v[i].values[j]);
  }
}
std::vector<Requirement> GetRequirements(capnp::List<snap::Requirement>::Reader in) {
  std::vector<Requirement> out;
  for (auto r : in) {
    Requirement req{Str(r.getKey()), Str(r.getOp()), {}};
    for (auto v : r.getValues()) req.values.push_back(Str(v));
    out.push_back(std::move(req));
  }
  return out;
}

void PutIdAmounts(capnp::List<snap::IdAmount>::Builder out, const std::map<int, int64_t>& m) {
  unsigned i = 0;
  for (const auto& [id, amount] : m) {
    out[i].setId(id);
    out[i].setAmount(amount);
    ++i;
  }
}

void PutFrAmounts(capnp::List<snap::FrAmount>::Builder out, const FrQuantities& m) {
  unsigned i = 0;
  for (const auto& [fr, amount] : m) {
    out[i].setFr(fr);
    out[i].setAmount(amount);
    ++i;
  }
}

void PutGroups(capnp::List<snap::ResourceGroup>::Builder out, const std::vector<ResourceGroup>& groups) {
  for (unsigned g = 0; g < groups.size(); ++g) {
    auto covered = out[g].initCovered(Count(groups[g].covered.size(), "covered resources"));
    for (unsigned i = 0; i < groups[g].covered.size(); ++i) covered.set(i, groups[g].covered[i]);
    auto flavors = out[g].initFlavors(Count(groups[g].flavors.size(), "flavors"));
    for (unsigned f = 0; f < groups[g].flavors.size(); ++f) {
      const FlavorQuotas& fq = groups[g].flavors[f];
      flavors[f].setFlavor(fq.flavor);
      auto resources = flavors[f].initResources(Count(fq.resources.size(), "quotas"));
      unsigned r = 0;
      for (const auto& [resource, q] : fq.resources) {
        resources[r].setResource(resource);
        resources[r].setNominal(q.nominal);
        resources[r].setHasBorrowingLimit(q.borrowing_limit.has_value());
        resources[r].setBorrowingLimit(q.borrowing_limit.value_or(0));
        resources[r].setHasLendingLimit(q.lending_limit.has_value());
        resources[r].setLendingLimit(q.lending_limit.value_or(0));
        ++r;
      }
    }
  }
}

void PutSelector(snap::LabelSelector::Builder out, const LabelSelector& s) {
  out.setPresent(s.present);
  PutPairs(out.initMatchLabels(Count(s.match_labels.size(), "labels")), s.match_labels);
  PutRequirements(out.initMatchExpressions(Count(s.match_expressions.size(), "expressions")),
                  s.match_expressions);
}

void PutNameSet(capnp::List<capnp::Text>::Builder list, const std::set<std::string>& s) {
  unsigned j = 0;
  for (const std::string& v : s) list.set(j++, v);
}
void GetNameSet(capnp::List<capnp::Text>::Reader list, std::set<std::string>* out) {
  for (auto v : list) {
    if (!out->insert(Str(v)).second) Corrupt("duplicate name '" + Str(v) + "'");
  }
}

}  // namespace

// Reads and writes the Engine's members. A friend of Engine (engine.h, the snapshots block).
class SnapshotCodec {
 public:
  static void Save(const Engine& e, snap::EngineState::Builder out);
  static void Load(snap::EngineState::Reader in, Engine* e);

 private:
  // Save's and Load's sections, one per part of the format (snapshot.capnp's EngineState).
  static void SaveInternedNames(const Engine& e, snap::EngineState::Builder out);
  static void SaveFlavors(const Engine& e, snap::EngineState::Builder out);
  static void SaveClusterQueueSpecs(const Engine& e, snap::EngineState::Builder out);
  static void SaveCohortSpecs(const Engine& e, snap::EngineState::Builder out);
  static void SaveLocalQueues(const Engine& e, snap::EngineState::Builder out);
  static void SavePriorityClasses(const Engine& e, snap::EngineState::Builder out);
  static void SaveAdmissionChecks(const Engine& e, snap::EngineState::Builder out);
  static void SaveConfig(const Engine& e, snap::EngineState::Builder out);
  static void SaveMaintenanceWindows(const Engine& e, snap::EngineState::Builder out);
  static void SaveNodes(const Engine& e, snap::EngineState::Builder out);
  static void SaveTimers(const Engine& e, snap::EngineState::Builder out);
  static void SaveClusterQueues(const Engine& e, snap::EngineState::Builder out);
  static void SaveWorkloads(const Engine& e, snap::EngineState::Builder out);
  static void SaveIndexesAndCounters(const Engine& e, snap::EngineState::Builder out);
  static void SaveAfsEntries(const Engine& e, snap::EngineState::Builder out);
  static void SaveBudgets(const Engine& e, snap::EngineState::Builder out);
  static void LoadInternedNames(snap::EngineState::Reader in, Engine* e);
  static void LoadFlavors(snap::EngineState::Reader in, Engine* e);
  static void LoadClusterQueueSpecs(snap::EngineState::Reader in, Engine* e);
  static void LoadCohortSpecs(snap::EngineState::Reader in, Engine* e);
  static void LoadLocalQueues(snap::EngineState::Reader in, Engine* e);
  static void LoadPriorityClasses(snap::EngineState::Reader in, Engine* e);
  static void LoadAdmissionChecks(snap::EngineState::Reader in, Engine* e);
  static void LoadConfig(snap::EngineState::Reader in, Engine* e);
  static void LoadMaintenanceWindows(snap::EngineState::Reader in, Engine* e);
  static void LoadNodes(snap::EngineState::Reader in, Engine* e);
  static void LoadTimers(snap::EngineState::Reader in, Engine* e);
  static void LoadWorkloads(snap::EngineState::Reader in, Engine* e);
  static void LoadClusterQueues(snap::EngineState::Reader in, Engine* e);
  static void LoadIndexesAndCounters(snap::EngineState::Reader in, Engine* e);
  static void LoadAfsEntries(snap::EngineState::Reader in, Engine* e);
  static void LoadBudgets(snap::EngineState::Reader in, Engine* e);
  // Ids read from a snapshot must name an interned resource or flavor.
  static int ResourceId(const Engine& e, int32_t id) {
    if (id < 0 || static_cast<size_t>(id) >= e.resources_.size()) {
      Corrupt("resource id " + std::to_string(id) + " is not interned");
    }
    return id;
  }
  static int FlavorId(const Engine& e, int32_t id) {
    if (id < 0 || static_cast<size_t>(id) >= e.flavor_ids_.size()) {
      Corrupt("flavor id " + std::to_string(id) + " is not interned");
    }
    return id;
  }
  static std::map<int, int64_t> GetIdAmounts(const Engine& e, capnp::List<snap::IdAmount>::Reader in) {
    std::map<int, int64_t> out;
    for (auto a : in) {
      if (!out.emplace(ResourceId(e, a.getId()), a.getAmount()).second) Corrupt("duplicate resource id");
    }
    return out;
  }
  static FrQuantities GetFrAmounts(const Engine& e, capnp::List<snap::FrAmount>::Reader in) {
    FrQuantities out;
    for (auto a : in) {
      const Fr fr = a.getFr();
      FlavorId(e, FrFlavor(fr));
      ResourceId(e, FrResource(fr));
      if (!out.emplace(fr, a.getAmount()).second) Corrupt("duplicate flavor-resource");
    }
    return out;
  }
  static std::vector<ResourceGroup> GetGroups(const Engine& e, capnp::List<snap::ResourceGroup>::Reader in) {
    std::vector<ResourceGroup> out;
    for (auto g : in) {
      ResourceGroup group;
      for (int32_t r : g.getCovered()) group.covered.push_back(ResourceId(e, r));
      for (auto f : g.getFlavors()) {
        FlavorQuotas fq;
        fq.flavor = FlavorId(e, f.getFlavor());
        for (auto q : f.getResources()) {
          ResourceQuota quota;
          quota.nominal = q.getNominal();
          if (q.getHasBorrowingLimit()) quota.borrowing_limit = q.getBorrowingLimit();
          if (q.getHasLendingLimit()) quota.lending_limit = q.getLendingLimit();
          // Intake never records a negative quota; the quota tree's arithmetic assumes none
          // (found by tests/fuzz/snapshot_fuzz.cc: a lending limit near -2^63 overflowed).
          if (quota.nominal < 0 || quota.borrowing_limit.value_or(0) < 0 ||
              quota.lending_limit.value_or(0) < 0) {
            Corrupt("a negative quota");
          }
          if (!fq.resources.emplace(ResourceId(e, q.getResource()), quota).second) {
            Corrupt("duplicate quota of one resource");
          }
        }
        group.flavors.push_back(std::move(fq));
      }
      out.push_back(std::move(group));
    }
    return out;
  }
  static LabelSelector GetSelector(snap::LabelSelector::Reader in) {
    LabelSelector s;
    s.present = in.getPresent();
    s.match_labels = GetPairs(in.getMatchLabels());
    s.match_expressions = GetRequirements(in.getMatchExpressions());
    return s;
  }
  static void SaveWorkload(const std::string& key, const WorkloadState& w, snap::WorkloadState::Builder b);
  static WorkloadState LoadWorkload(const Engine& e, snap::WorkloadState::Reader r);
  // SaveWorkload's and LoadWorkload's parts, called in the order of the format's fields (the
  // order of a message's allocations is part of its bytes).
  using WB = snap::WorkloadState::Builder;
  using WR = snap::WorkloadState::Reader;
  static void SavePodSets(const WorkloadState& w, WB b);
  static void SaveAdmission(const WorkloadState& w, WB b);
  static void SaveChecks(const WorkloadState& w, WB b);
  static void SaveConditions(const WorkloadState& w, WB b);
  static void LoadPodSets(const Engine& e, WR r, WorkloadState& w);
  static void LoadAdmission(const Engine& e, WR r, WorkloadState& w);
  static void LoadChecks(WR r, WorkloadState& w);
  static void LoadConditions(WR r, WorkloadState& w);
};

void SnapshotCodec::SavePodSets(const WorkloadState& w, WB b) {
  auto pod_sets = b.initPodSets(Count(w.pod_sets.size(), "pod sets"));
  for (unsigned i = 0; i < w.pod_sets.size(); ++i) {
    const PodSetSpec& ps = w.pod_sets[i];
    auto p = pod_sets[i];
    p.setName(ps.name);
    p.setCount(ps.count);
    p.setMinCount(ps.min_count);
    PutIdAmounts(p.initRequests(Count(ps.requests.size(), "requests")), ps.requests);
    PutPairs(p.initNodeSelector(Count(ps.node_selector.size(), "labels")), ps.node_selector);
    PutTolerations(p.initTolerations(Count(ps.tolerations.size(), "tolerations")), ps.tolerations);
    PutRequirements(p.initAffinity(Count(ps.affinity.size(), "affinity")), ps.affinity);
    if (ps.topology) {
      auto t = p.initTopology();
      t.setRequired(ps.topology->required);
      t.setPreferred(ps.topology->preferred);
      t.setUnconstrained(ps.topology->unconstrained);
      t.setSliceLevel(ps.topology->slice_level);
      t.setSliceSize(ps.topology->slice_size);
      t.setGroup(ps.topology->group);
    }
  }
}

void SnapshotCodec::SaveAdmission(const WorkloadState& w, WB b) {
  auto adm = b.initAdmission();
  auto psas = adm.initPodSets(Count(w.admission.pod_sets.size(), "pod set assignments"));
  for (unsigned i = 0; i < w.admission.pod_sets.size(); ++i) {
    const PodSetAssignment& a = w.admission.pod_sets[i];
    psas[i].setName(a.name);
    psas[i].setCount(a.count);
    auto flavors = psas[i].initFlavors(Count(a.flavors.size(), "flavors"));
    unsigned j = 0;
    for (const auto& [resource, flavor] : a.flavors) {
      flavors[j].setId(resource);
      flavors[j].setValue(flavor);
      ++j;
    }
    PutIdAmounts(psas[i].initUsage(Count(a.usage.size(), "usage")), a.usage);
    if (a.topology) PutTopology(psas[i].initTopology(), *a.topology);
  }
  PutFrAmounts(adm.initUsage(Count(w.admission.usage.size(), "usage")), w.admission.usage);
  adm.setBorrows(w.admission.borrows);
}

void SnapshotCodec::SaveChecks(const WorkloadState& w, WB b) {
  auto checks = b.initChecks(Count(w.checks.size(), "checks"));
  unsigned i = 0;
  for (const auto& [name, c] : w.checks) {
    checks[i].setName(name);
    checks[i].setState(CheckStateName(c.state));
    checks[i].setMessage(c.message);
    checks[i].setLastTransitionNs(c.last_transition_ns);
    checks[i].setReportSequence(c.report_sequence);
    if (!c.pod_set_updates.empty()) {
      auto updates = checks[i].initPodSetUpdates(Count(c.pod_set_updates.size(), "podSetUpdates"));
      for (unsigned j = 0; j < c.pod_set_updates.size(); ++j) {
        const PodSetUpdate& u = c.pod_set_updates[j];
        updates[j].setPodSet(u.pod_set);
        PutPairs(updates[j].initLabels(Count(u.labels.size(), "labels")), u.labels);
        PutPairs(updates[j].initAnnotations(Count(u.annotations.size(), "labels")), u.annotations);
        PutPairs(updates[j].initNodeSelector(Count(u.node_selector.size(), "labels")), u.node_selector);
        PutTolerations(updates[j].initTolerations(Count(u.tolerations.size(), "tolerations")),
                       u.tolerations);
      }
    }
    ++i;
  }
}

void SnapshotCodec::SaveConditions(const WorkloadState& w, WB b) {
  auto conditions = b.initConditions(Count(w.conditions.size(), "conditions"));
  unsigned i = 0;
  for (const Condition& c : w.conditions) {
    // Key and type are the same name: the format is that of a map keyed by the type.
    conditions[i].setKey(std::string(c.type_name()));
    conditions[i].setType(std::string(c.type_name()));
    conditions[i].setStatus(c.status);
    conditions[i].setReason(c.reason);
    conditions[i].setMessage(c.message);
    conditions[i].setLastTransitionNs(c.last_transition_ns);
    ++i;
  }
}

void SnapshotCodec::LoadPodSets(const Engine& e, WR r, WorkloadState& w) {
  for (auto p : r.getPodSets()) {
    PodSetSpec ps;
    ps.name = Str(p.getName());
    ps.count = p.getCount();
    ps.min_count = p.getMinCount();
    ps.requests = GetIdAmounts(e, p.getRequests());
    ps.node_selector = GetPairs(p.getNodeSelector());
    ps.tolerations = GetTolerations(p.getTolerations());
    ps.affinity = GetRequirements(p.getAffinity());
    if (p.hasTopology()) {
      auto t = p.getTopology();
      ps.topology = TopologyRequest{Str(t.getRequired()), Str(t.getPreferred()),
                                    t.getUnconstrained(), Str(t.getSliceLevel()),
                                    t.getSliceSize(), Str(t.getGroup())};
    }
    w.pod_sets.push_back(std::move(ps));
  }
}

void SnapshotCodec::LoadAdmission(const Engine& e, WR r, WorkloadState& w) {
  auto adm = r.getAdmission();
  for (auto p : adm.getPodSets()) {
    PodSetAssignment a;
    a.name = Str(p.getName());
    a.count = p.getCount();
    for (auto f : p.getFlavors()) {
      if (!a.flavors.emplace(ResourceId(e, f.getId()), FlavorId(e, f.getValue())).second) {
        Corrupt("duplicate resource in a pod set assignment");
      }
    }
    a.usage = GetIdAmounts(e, p.getUsage());
    if (p.hasTopology()) a.topology = GetTopology(p.getTopology());
    w.admission.pod_sets.push_back(std::move(a));
  }
  w.admission.usage = GetFrAmounts(e, adm.getUsage());
  w.admission.borrows = adm.getBorrows();
}

void SnapshotCodec::LoadChecks(WR r, WorkloadState& w) {
  for (auto c : r.getChecks()) {
    const std::optional<CheckState> state = CheckStateFromName(Str(c.getState()));
    if (!state) {
      Corrupt("workload " + w.ns + "/" + w.name + ": check " + Str(c.getName()) + " in state '" +
              Str(c.getState()) + "'");
    }
    CheckStatus cs{*state, Str(c.getMessage()), c.getLastTransitionNs(), c.getReportSequence(), {}};
    for (auto u : c.getPodSetUpdates()) {  // format v5 on; none in a v4 snapshot
      cs.pod_set_updates.push_back(PodSetUpdate{Str(u.getPodSet()), GetPairs(u.getLabels()),
                                                GetPairs(u.getAnnotations()),
                                                GetPairs(u.getNodeSelector()),
                                                GetTolerations(u.getTolerations())});
    }
    InsertUnique(w.checks, Str(c.getName()), std::move(cs), "check");
  }
}

void SnapshotCodec::LoadConditions(WR r, WorkloadState& w) {
  for (auto c : r.getConditions()) {
    const std::string key = Str(c.getKey());
    auto type = ParseConditionType(key);
    if (!type || Str(c.getType()) != key) {
      Corrupt("workload " + w.ns + "/" + w.name + ": condition " + key + " of type " +
              Str(c.getType()));
    }
    bool added = false;
    Condition& cond = w.conditions.Upsert(*type, &added);
    if (!added) Corrupt("workload " + w.ns + "/" + w.name + ": condition " + key + " twice");
    cond.status = c.getStatus();
    cond.reason = Str(c.getReason());
    cond.message = Str(c.getMessage());
    cond.last_transition_ns = c.getLastTransitionNs();
  }
}

void SnapshotCodec::SaveWorkload(const std::string& key, const WorkloadState& w,
                                 snap::WorkloadState::Builder b) {
  b.setKey(key);
  b.setNamespace(w.ns);
  b.setName(w.name);
  b.setUid(w.uid);
  b.setQueueName(w.queue_name);
  b.setPriorityClass(w.priority_class);
  b.setPriority(w.priority);
  b.setCreationNs(w.creation_ns);
  b.setQueuedAtNs(w.queued_at_ns);
  SavePodSets(w, b);
  PutPairs(b.initNamespaceLabels(Count(w.namespace_labels.size(), "labels")), w.namespace_labels);
  if (!w.labels.empty()) PutPairs(b.initLabels(Count(w.labels.size(), "labels")), w.labels);
  b.setPhase(static_cast<uint8_t>(w.phase));
  b.setClusterQueue(w.cluster_queue);
  b.setClassKey(w.class_key);
  b.setQueued(w.queued);
  SaveAdmission(w, b);
  b.setGeneration(w.generation);
  b.setQuotaVersion(w.quota_version);
  b.setReservedAtNs(w.reserved_at_ns);
  b.setPodsReleased(w.pods_released);
  b.setImported(w.imported);
  b.setRequeueCount(w.requeue_count);
  SaveChecks(w, b);
  b.setCheckRetries(w.check_retries);
  b.setPodsReadyRequeues(w.pods_ready_requeues);
  b.setFencingToken(w.fencing_token);
  b.setPodsReady(w.pods_ready);
  b.setAdmittedAtNs(w.admitted_at_ns);
  b.setRequeueAtNs(w.requeue_at_ns);
  b.setDrainDeadlineNs(w.drain_deadline_ns);
  b.setPendingSinceNs(w.pending_since_ns);
  b.setStarvationAlerted(w.starvation_alerted);
  b.setExpectedRuntimeNs(w.expected_runtime_ns);
  b.setMaxExecutionNs(w.max_execution_ns);
  b.setAfterEviction(AfterEvictionName(w.after_eviction));
  b.setRetryAfterNs(w.retry_after_ns);
  b.setDeactivateReason(w.deactivate_reason);
  b.setDeactivateMessage(w.deactivate_message);
  b.setPendingReason(w.pending_reason);
  b.setPendingMessage(w.pending_message);
  SaveConditions(w, b);
  b.setSubmittedSequence(w.submitted_sequence);
}

WorkloadState SnapshotCodec::LoadWorkload(const Engine& e, snap::WorkloadState::Reader r) {
  WorkloadState w;
  w.ns = Str(r.getNamespace());
  w.name = Str(r.getName());
  w.uid = Str(r.getUid());
  w.queue_name = Str(r.getQueueName());
  w.priority_class = Str(r.getPriorityClass());
  w.priority = r.getPriority();
  w.creation_ns = r.getCreationNs();
  w.queued_at_ns = r.getQueuedAtNs();
  LoadPodSets(e, r, w);
  w.namespace_labels = GetPairs(r.getNamespaceLabels());
  w.labels = GetPairs(r.getLabels());
  w.phase = EnumFrom<Phase>(r.getPhase(), static_cast<uint8_t>(Phase::kDeleted), "phase");
  w.cluster_queue = Str(r.getClusterQueue());
  w.class_key = Str(r.getClassKey());
  w.queued = r.getQueued();
  LoadAdmission(e, r, w);
  w.generation = r.getGeneration();
  w.quota_version = r.getQuotaVersion();
  w.reserved_at_ns = r.getReservedAtNs();
  w.pods_released = r.getPodsReleased();
  w.imported = r.getImported();
  w.requeue_count = r.getRequeueCount();
  LoadChecks(r, w);
  w.check_retries = r.getCheckRetries();
  w.pods_ready_requeues = r.getPodsReadyRequeues();
  w.fencing_token = Str(r.getFencingToken());
  w.pods_ready = r.getPodsReady();
  w.admitted_at_ns = r.getAdmittedAtNs();
  w.requeue_at_ns = r.getRequeueAtNs();
  w.drain_deadline_ns = r.getDrainDeadlineNs();
  w.pending_since_ns = r.getPendingSinceNs();
  w.starvation_alerted = r.getStarvationAlerted();
  w.expected_runtime_ns = r.getExpectedRuntimeNs();
  w.max_execution_ns = r.getMaxExecutionNs();
  const std::optional<AfterEviction> after = AfterEvictionFromName(Str(r.getAfterEviction()));
  if (!after) {
    Corrupt("workload " + w.ns + "/" + w.name + ": after eviction '" + Str(r.getAfterEviction()) +
            "'");
  }
  w.after_eviction = *after;
  w.retry_after_ns = r.getRetryAfterNs();
  w.deactivate_reason = Str(r.getDeactivateReason());
  w.deactivate_message = Str(r.getDeactivateMessage());
  w.pending_reason = Str(r.getPendingReason());
  w.pending_message = Str(r.getPendingMessage());
  LoadConditions(r, w);
  w.submitted_sequence = r.getSubmittedSequence();
  return w;
}

void SnapshotCodec::Save(const Engine& e, snap::EngineState::Builder out) {
  if (!e.decisions_.empty()) {
    Refuse(Code::kInvalidArgument,
           "the decider holds " + std::to_string(e.decisions_.size()) +
               " decision(s) not yet returned by EndBatch: a snapshot is taken only at the end "
               "of an append");
  }
  // The sections in the format's order (the order the message lays them out in).
  SaveInternedNames(e, out);
  SaveFlavors(e, out);
  SaveClusterQueueSpecs(e, out);
  SaveCohortSpecs(e, out);
  SaveLocalQueues(e, out);
  SavePriorityClasses(e, out);
  SaveAdmissionChecks(e, out);
  SaveConfig(e, out);
  SaveMaintenanceWindows(e, out);
  SaveNodes(e, out);
  SaveTimers(e, out);
  out.setCurrentActor(e.current_actor_);
  SaveClusterQueues(e, out);
  SaveWorkloads(e, out);
  SaveIndexesAndCounters(e, out);
  SaveAfsEntries(e, out);
  SaveBudgets(e, out);
}

void SnapshotCodec::SaveInternedNames(const Engine& e, snap::EngineState::Builder out) {
  auto names = [](capnp::List<capnp::Text>::Builder list, const Interner& interner) {
    for (unsigned i = 0; i < interner.size(); ++i) list.set(i, interner.Name(static_cast<int>(i)));
  };
  names(out.initResourceNames(Count(e.resources_.size(), "resource names")), e.resources_);
  names(out.initFlavorNames(Count(e.flavor_ids_.size(), "flavor names")), e.flavor_ids_);
}

void SnapshotCodec::SaveFlavors(const Engine& e, snap::EngineState::Builder out) {
  auto flavors = out.initFlavors(Count(e.flavors_.size(), "flavors"));
  unsigned i = 0;
  for (const auto& [key, f] : e.flavors_) {
    auto b = flavors[i++];
    b.setKey(key);
    b.setName(f.name);
    PutPairs(b.initNodeLabels(Count(f.node_labels.size(), "labels")), f.node_labels);
    PutTaints(b.initNodeTaints(Count(f.node_taints.size(), "taints")), f.node_taints);
    PutTolerations(b.initTolerations(Count(f.tolerations.size(), "tolerations")), f.tolerations);
    b.setVersion(f.version);
    b.setTopology(f.topology);
  }
}

void SnapshotCodec::SaveClusterQueueSpecs(const Engine& e, snap::EngineState::Builder out) {
  auto cq_specs = out.initClusterQueueSpecs(Count(e.cq_specs_.size(), "ClusterQueues"));
  unsigned i = 0;
  for (const auto& [key, s] : e.cq_specs_) {
    auto b = cq_specs[i++];
    b.setKey(key);
    b.setName(s.name);
    b.setCohort(s.cohort);
    PutGroups(b.initResourceGroups(Count(s.resource_groups.size(), "resource groups")),
              s.resource_groups);
    b.setQueueing(static_cast<uint8_t>(s.queueing));
    PutSelector(b.initNamespaceSelector(), s.namespace_selector);
    b.setStopPolicy(static_cast<uint8_t>(s.stop_policy));
    b.setWithinClusterQueue(static_cast<uint8_t>(s.preemption.within_cluster_queue));
    b.setReclaimWithinCohort(static_cast<uint8_t>(s.preemption.reclaim_within_cohort));
    b.setBorrowWithinCohort(static_cast<uint8_t>(s.preemption.borrow_within_cohort));
    b.setHasMaxPriorityThreshold(s.preemption.max_priority_threshold.has_value());
    b.setMaxPriorityThreshold(s.preemption.max_priority_threshold.value_or(0));
    b.setWhenCanBorrow(static_cast<uint8_t>(s.when_can_borrow));
    b.setWhenCanPreempt(static_cast<uint8_t>(s.when_can_preempt));
    b.setPreference(static_cast<uint8_t>(s.preference));
    auto rules = b.initAdmissionChecks(Count(s.admission_checks.size(), "admission checks"));
    unsigned r = 0;
    for (const auto& [name, on_flavors] : s.admission_checks) {
      rules[r].setName(name);
      auto fl = rules[r].initFlavors(Count(on_flavors.size(), "flavors"));
      for (unsigned j = 0; j < on_flavors.size(); ++j) fl.set(j, on_flavors[j]);
      ++r;
    }
    b.setFairWeightMilli(s.fair_weight_milli);
    b.setMaxWaitNs(s.max_wait_ns);
    b.setVersion(s.version);
    b.setUsageBasedAdmission(s.usage_based_admission);
  }
}

void SnapshotCodec::SaveCohortSpecs(const Engine& e, snap::EngineState::Builder out) {
  auto cohorts = out.initCohortSpecs(Count(e.cohort_specs_.size(), "cohorts"));
  unsigned i = 0;
  for (const auto& [key, c] : e.cohort_specs_) {
    auto b = cohorts[i++];
    b.setKey(key);
    b.setName(c.name);
    b.setParent(c.parent);
    PutGroups(b.initResourceGroups(Count(c.resource_groups.size(), "resource groups")),
              c.resource_groups);
    b.setFairWeightMilli(c.fair_weight_milli);
    b.setVersion(c.version);
  }
}

void SnapshotCodec::SaveLocalQueues(const Engine& e, snap::EngineState::Builder out) {
  auto lqs = out.initLocalQueues(Count(e.lqs_.size(), "LocalQueues"));
  unsigned i = 0;
  for (const auto& [key, lq] : e.lqs_) {
    auto b = lqs[i++];
    b.setKey(key);
    b.setNamespace(lq.ns);
    b.setName(lq.name);
    b.setClusterQueue(lq.cluster_queue);
    b.setStopPolicy(static_cast<uint8_t>(lq.stop_policy));
    b.setWeightMilli(lq.weight_milli);
    b.setHasConsumedSeed(lq.has_consumed_seed);
    PutIdAmounts(b.initConsumedSeed(Count(lq.consumed_seed.size(), "resources")), lq.consumed_seed);
  }
}

void SnapshotCodec::SavePriorityClasses(const Engine& e, snap::EngineState::Builder out) {
  auto pcs = out.initPriorityClasses(Count(e.priority_classes_.size(), "priority classes"));
  unsigned i = 0;
  for (const auto& [name, value] : e.priority_classes_) {
    pcs[i].setName(name);
    pcs[i].setValue(value);
    ++i;
  }
}

void SnapshotCodec::SaveAdmissionChecks(const Engine& e, snap::EngineState::Builder out) {
  auto checks = out.initAdmissionChecks(Count(e.checks_.size(), "admission checks"));
  unsigned i = 0;
  for (const auto& [key, c] : e.checks_) {
    auto b = checks[i++];
    b.setKey(key);
    b.setName(c.name);
    b.setController(c.controller);
    b.setPendingTtlNs(c.pending_ttl_ns);
    b.setRejectOnTimeout(c.reject_on_timeout);
    b.setRetryLimit(c.retry_limit);
    b.setBackoffBaseNs(c.backoff_base_ns);
    b.setBackoffMaxNs(c.backoff_max_ns);
    b.setVersion(c.version);
    b.setParameters(c.parameters);
  }
}

void SnapshotCodec::SaveConfig(const Engine& e, snap::EngineState::Builder out) {
  auto config = out.initConfig();
  config.setWaitForPodsReady(e.config_.wait_for_pods_ready);
  config.setPodsReadyTimeoutNs(e.config_.pods_ready_timeout_ns);
  config.setBackoffBaseSeconds(e.config_.backoff_base_seconds);
  config.setBackoffMaxSeconds(e.config_.backoff_max_seconds);
  config.setBackoffLimitCount(e.config_.backoff_limit_count);
  config.setAgingStepNs(e.config_.aging_step_ns);
  config.setAgingPriorityMax(e.config_.aging_priority_max);
  config.setFairSharing(e.config_.fair_sharing);
  config.setRetainFinishedNs(e.config_.retain_finished_ns);
  config.setRetainDeactivatedNs(e.config_.retain_deactivated_ns);
  config.setAfsHalfLifeNs(e.config_.afs_half_life_ns);
  config.setAfsSamplingIntervalNs(e.config_.afs_sampling_ns);
  PutIdAmounts(config.initAfsResourceWeights(Count(e.config_.afs_weights_milli.size(), "weights")),
               e.config_.afs_weights_milli);
  auto strategies = config.initFairSharingPreemptionStrategies(
      Count(e.config_.fs_strategies.size(), "preemption strategies"));
  for (unsigned i = 0; i < strategies.size(); ++i) strategies.set(i, e.config_.fs_strategies[i]);
}

void SnapshotCodec::SaveMaintenanceWindows(const Engine& e, snap::EngineState::Builder out) {
  auto windows = out.initMaintenanceWindows(Count(e.windows_.size(), "maintenance windows"));
  unsigned i = 0;
  for (const auto& [key, w] : e.windows_) {
    auto b = windows[i++];
    b.setKey(key);
    b.setName(w.name);
    b.setFlavor(w.flavor);
    b.setStartNs(w.start_ns);
    b.setEndNs(w.end_ns);
  }
}

void SnapshotCodec::SaveNodes(const Engine& e, snap::EngineState::Builder out) {
  auto nodes = out.initNodes(Count(e.nodes_.size(), "nodes"));
  unsigned i = 0;
  for (const auto& [name, n] : e.nodes_) {
    auto b = nodes[i++];
    b.setName(name);
    b.setFlavor(n.flavor);
    PutIdAmounts(b.initCapacity(Count(n.capacity.size(), "capacities")), n.capacity);
    b.setFailed(n.failed);
    PutPairs(b.initLabels(Count(n.labels.size(), "labels")), n.labels);
    PutTaints(b.initTaints(Count(n.taints.size(), "taints")), n.taints);
    PutIdAmounts(b.initNonTasUsage(Count(n.non_tas_usage.size(), "usage")), n.non_tas_usage);
  }
}

void SnapshotCodec::SaveTimers(const Engine& e, snap::EngineState::Builder out) {
  auto timers = out.initTimers(Count(e.timers_.size(), "timers"));
  unsigned i = 0;
  for (const Timer& timer : e.timers_) {
    timers[i].setAtNs(timer.at_ns);
    timers[i].setKind(TimerKindName(timer.kind));
    timers[i].setKey(timer.key);
    timers[i].setGeneration(timer.generation);
    timers[i].setDetail(timer.detail);
    ++i;
  }
}

void SnapshotCodec::SaveClusterQueues(const Engine& e, snap::EngineState::Builder out) {
  auto cqs = out.initClusterQueues(Count(e.cqs_.size(), "ClusterQueues"));
  unsigned i = 0;
  for (const auto& [name, cq] : e.cqs_) {
    auto b = cqs[i++];
    b.setName(name);
    auto classes = b.initClasses(Count(cq.classes.size(), "classes"));
    unsigned c = 0;
    for (const auto& [key, cls] : cq.classes) {
      classes[c].setKey(key);
      classes[c].setInadmissible(cls.inadmissible);
      auto members = classes[c].initMembers(Count(cls.members.size(), "queued workloads"));
      unsigned m = 0;
      for (const QueueKey& k : cls.members) {
        members[m].setPriority(k.priority);
        members[m].setTimestamp(k.timestamp);
        members[m].setSequence(k.sequence);
        members[m].setUid(k.wl->uid);
        members[m].setKey(k.wl->key);
        ++m;
      }
      ++c;
    }
    b.setInactiveReason(cq.inactive_reason);
  }
}

void SnapshotCodec::SaveWorkloads(const Engine& e, snap::EngineState::Builder out) {
  auto workloads = out.initWorkloads(Count(e.workloads_.size(), "workloads"));
  unsigned i = 0;
  for (const auto& [key, w] : e.workloads_) SaveWorkload(key, w, workloads[i++]);
}

void SnapshotCodec::SaveIndexesAndCounters(const Engine& e, snap::EngineState::Builder out) {
  const auto& uids = e.UidIndex();
  PutPairs(out.initUidToKey(Count(uids.size(), "uids")), uids);
  PutNameSet(out.initOrphans(Count(e.orphans_.size(), "orphans")), e.orphans_);
  PutNameSet(out.initActive(Count(e.active_.size(), "active ClusterQueues")), e.active_);
  PutNameSet(out.initReactivatePending(Count(e.reactivate_pending_.size(), "ClusterQueues")),
             e.reactivate_pending_);
  out.setTreeDirty(e.tree_dirty_);
  std::set<std::string> tree_cqs;
  for (size_t n = 0; n < e.tree_.size(); ++n) {
    if (e.tree_.node(static_cast<int>(n)).is_cluster_queue) {
      tree_cqs.insert(e.tree_.node(static_cast<int>(n)).name);
    }
  }
  PutNameSet(out.initTreeClusterQueues(Count(tree_cqs.size(), "ClusterQueues")), tree_cqs);
  out.setCurrentSequence(e.current_sequence_);
  out.setDecisionsMade(e.decisions_made_);
  out.setNowNs(e.now_ns_);
  out.setNodeInventoryComplete(e.node_inventory_complete_);
}

void SnapshotCodec::SaveBudgets(const Engine& e, snap::EngineState::Builder out) {
  auto policies = out.initBudgetPolicies(Count(e.budgets_.size(), "budget policies"));
  unsigned i = 0;
  for (const auto& [name, p] : e.budgets_) {
    policies[i].setDefinition(capnp::Data::Reader(
        reinterpret_cast<const uint8_t*>(p.def_bytes.data()), p.def_bytes.size()));
    policies[i++].setVersion(p.version);
  }
  auto topologies = out.initTopologies(Count(e.topologies_.size(), "topologies"));
  i = 0;
  for (const auto& [name, levels] : e.topologies_) {
    topologies[i].setName(name);
    auto l = topologies[i++].initLevels(Count(levels.size(), "levels"));
    for (unsigned j = 0; j < levels.size(); ++j) l.set(j, levels[j]);
  }
  const std::vector<std::pair<std::string, std::string>> entries = e.usage_.Entries();
  auto list = out.initUsageEntries(Count(entries.size(), "usage entries"));
  i = 0;
  for (const auto& [key, value] : entries) {
    list[i].setKey(key);
    list[i++].setValue(value);
  }
  size_t count = 0;
  for (const auto& [key, sums] : e.usage_buckets_.entries()) count += sums.size();
  auto buckets = out.initUsageBuckets(Count(count, "usage buckets"));
  i = 0;
  for (const auto& [key, sums] : e.usage_buckets_.entries()) {
    for (const auto& [start, milli_ms] : sums) {
      auto b = buckets[i++];
      b.setNamespace(key.ns);
      b.setLocalQueue(key.local_queue);
      b.setClusterQueue(key.cluster_queue);
      b.setCohort(key.cohort);
      b.setResource(key.resource);
      b.setStartMs(start);
      b.setMilliMsHigh(static_cast<int64_t>(milli_ms >> 64));
      b.setMilliMsLow(static_cast<uint64_t>(milli_ms));
    }
  }
  out.setUsagePrunedAtMs(e.usage_pruned_at_ms_);
}

void SnapshotCodec::LoadBudgets(snap::EngineState::Reader in, Engine* e) {
  for (auto t : in.getTopologies()) {
    std::vector<std::string> levels;
    for (auto l : t.getLevels()) levels.push_back(Str(l));
    InsertUnique(e->topologies_, Str(t.getName()), std::move(levels), "topology");
  }
  for (auto p : in.getBudgetPolicies()) {
    const std::string bytes(reinterpret_cast<const char*>(p.getDefinition().begin()),
                            p.getDefinition().size());
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(bytes);
    if (!decoded.ok() || !decoded->root().getBody().isBudgetPolicyDefined()) {
      Refuse(Code::kCorruption, "a budget policy's definition does not decode");
    }
    BudgetPolicySpec spec = ToBudgetPolicy(decoded->root().getBody().getBudgetPolicyDefined());
    spec.def_bytes = bytes;
    spec.version = p.getVersion();
    const std::string name = spec.name;
    InsertUnique(e->budgets_, name, std::move(spec), "budget policy");
  }
  for (auto entry : in.getUsageEntries()) {
    Status restored = e->usage_.Restore(Str(entry.getKey()), Str(entry.getValue()));
    if (!restored.ok()) Refuse(restored.code(), restored.message());
  }
  for (auto b : in.getUsageBuckets()) {
    const __int128 milli_ms = (static_cast<__int128>(b.getMilliMsHigh()) << 64) |
                              static_cast<__int128>(b.getMilliMsLow());
    e->usage_buckets_.Put(UsageKey{Str(b.getNamespace()), Str(b.getLocalQueue()),
                                   Str(b.getClusterQueue()), Str(b.getCohort()),
                                   Str(b.getResource())},
                          b.getStartMs(), milli_ms);
  }
  e->usage_pruned_at_ms_ = in.getUsagePrunedAtMs();
}

void SnapshotCodec::SaveAfsEntries(const Engine& e, snap::EngineState::Builder out) {
  auto afs = out.initAfsEntries(Count(e.afs_.size(), "admission fair sharing entries"));
  unsigned i = 0;
  for (const auto& [key, entry] : e.afs_) {
    auto b = afs[i++];
    b.setLocalQueue(key);
    PutIdAmounts(b.initConsumed(Count(entry.consumed.size(), "resources")), entry.consumed);
    b.setLastUpdateNs(entry.last_update_ns);
    auto penalties = b.initPenalties(Count(entry.penalties.size(), "penalties"));
    unsigned j = 0;
    for (const auto& [wl, amounts] : entry.penalties) {
      penalties[j].setWorkload(wl);
      PutIdAmounts(penalties[j++].initAmounts(Count(amounts.size(), "resources")), amounts);
    }
  }
}

void SnapshotCodec::Load(snap::EngineState::Reader in, Engine* e) {
  // The sections in Save's order, but the workloads before the ClusterQueues whose queue
  // entries name them.
  LoadInternedNames(in, e);
  LoadFlavors(in, e);
  LoadClusterQueueSpecs(in, e);
  LoadCohortSpecs(in, e);
  LoadLocalQueues(in, e);
  LoadPriorityClasses(in, e);
  LoadAdmissionChecks(in, e);
  LoadConfig(in, e);
  LoadMaintenanceWindows(in, e);
  LoadNodes(in, e);
  LoadTimers(in, e);
  e->current_actor_ = Str(in.getCurrentActor());
  LoadWorkloads(in, e);
  LoadClusterQueues(in, e);
  LoadIndexesAndCounters(in, e);
  LoadAfsEntries(in, e);
  LoadBudgets(in, e);

  std::set<std::string> tree_cqs;
  GetNameSet(in.getTreeClusterQueues(), &tree_cqs);
  Status derived = e->RestoreDerivedState(tree_cqs);
  if (!derived.ok()) Refuse(derived.code(), derived.message());
}

void SnapshotCodec::LoadInternedNames(snap::EngineState::Reader in, Engine* e) {
  auto intern = [](capnp::List<capnp::Text>::Reader names, Interner* interner, const char* what) {
    for (auto n : names) {
      const size_t before = interner->size();
      if (static_cast<size_t>(interner->Id(Str(n))) != before) {
        Corrupt(std::string("duplicate ") + what + " name '" + Str(n) + "'");
      }
    }
  };
  intern(in.getResourceNames(), &e->resources_, "resource");
  intern(in.getFlavorNames(), &e->flavor_ids_, "flavor");
}

void SnapshotCodec::LoadFlavors(snap::EngineState::Reader in, Engine* e) {
  for (auto f : in.getFlavors()) {
    Flavor flavor;
    flavor.name = Str(f.getName());
    flavor.node_labels = GetPairs(f.getNodeLabels());
    flavor.node_taints = GetTaints(f.getNodeTaints());
    flavor.tolerations = GetTolerations(f.getTolerations());
    flavor.version = f.getVersion();
    flavor.topology = Str(f.getTopology());
    InsertUnique(e->flavors_, Str(f.getKey()), std::move(flavor), "flavor");
  }
}

void SnapshotCodec::LoadClusterQueueSpecs(snap::EngineState::Reader in, Engine* e) {
  for (auto s : in.getClusterQueueSpecs()) {
    ClusterQueueSpec spec;
    spec.name = Str(s.getName());
    spec.cohort = Str(s.getCohort());
    spec.resource_groups = GetGroups(*e, s.getResourceGroups());
    spec.queueing = EnumFrom<QueueingStrategy>(s.getQueueing(), 1, "queueing strategy");
    spec.namespace_selector = GetSelector(s.getNamespaceSelector());
    spec.stop_policy = EnumFrom<StopPolicy>(s.getStopPolicy(), 2, "stop policy");
    spec.preemption.within_cluster_queue =
        EnumFrom<WithinCq>(s.getWithinClusterQueue(), 2, "withinClusterQueue");
    spec.preemption.reclaim_within_cohort =
        EnumFrom<ReclaimPolicy>(s.getReclaimWithinCohort(), 2, "reclaimWithinCohort");
    spec.preemption.borrow_within_cohort =
        EnumFrom<ReclaimPolicy>(s.getBorrowWithinCohort(), 2, "borrowWithinCohort");
    if (s.getHasMaxPriorityThreshold()) {
      spec.preemption.max_priority_threshold = s.getMaxPriorityThreshold();
    }
    spec.when_can_borrow = EnumFrom<FungibilityAction>(s.getWhenCanBorrow(), 2, "whenCanBorrow");
    spec.when_can_preempt = EnumFrom<FungibilityAction>(s.getWhenCanPreempt(), 2, "whenCanPreempt");
    spec.preference = EnumFrom<FungibilityPreference>(s.getPreference(), 1, "preference");
    for (auto rule : s.getAdmissionChecks()) {
      std::vector<std::string> on_flavors;
      for (auto f : rule.getFlavors()) on_flavors.push_back(Str(f));
      InsertUnique(spec.admission_checks, Str(rule.getName()), std::move(on_flavors),
                   "admission check rule");
    }
    spec.fair_weight_milli = s.getFairWeightMilli();
    spec.max_wait_ns = s.getMaxWaitNs();
    spec.version = s.getVersion();
    spec.usage_based_admission = s.getUsageBasedAdmission();
    InsertUnique(e->cq_specs_, Str(s.getKey()), std::move(spec), "ClusterQueue");
  }
}

void SnapshotCodec::LoadCohortSpecs(snap::EngineState::Reader in, Engine* e) {
  for (auto c : in.getCohortSpecs()) {
    CohortSpec spec;
    spec.name = Str(c.getName());
    spec.parent = Str(c.getParent());
    spec.resource_groups = GetGroups(*e, c.getResourceGroups());
    spec.fair_weight_milli = c.getFairWeightMilli();
    spec.version = c.getVersion();
    InsertUnique(e->cohort_specs_, Str(c.getKey()), std::move(spec), "cohort");
  }
}

void SnapshotCodec::LoadLocalQueues(snap::EngineState::Reader in, Engine* e) {
  for (auto lq : in.getLocalQueues()) {
    LocalQueueSpec spec;
    spec.ns = Str(lq.getNamespace());
    spec.name = Str(lq.getName());
    spec.cluster_queue = Str(lq.getClusterQueue());
    spec.stop_policy = EnumFrom<StopPolicy>(lq.getStopPolicy(), 2, "stop policy");
    spec.weight_milli = lq.getWeightMilli();
    spec.has_consumed_seed = lq.getHasConsumedSeed();
    spec.consumed_seed = GetIdAmounts(*e, lq.getConsumedSeed());
    InsertUnique(e->lqs_, Str(lq.getKey()), std::move(spec), "LocalQueue");
  }
}

void SnapshotCodec::LoadPriorityClasses(snap::EngineState::Reader in, Engine* e) {
  for (auto pc : in.getPriorityClasses()) {
    InsertUnique(e->priority_classes_, Str(pc.getName()), pc.getValue(), "priority class");
  }
}

void SnapshotCodec::LoadAdmissionChecks(snap::EngineState::Reader in, Engine* e) {
  for (auto c : in.getAdmissionChecks()) {
    AdmissionCheckSpec spec;
    spec.name = Str(c.getName());
    spec.controller = Str(c.getController());
    spec.pending_ttl_ns = c.getPendingTtlNs();
    spec.reject_on_timeout = c.getRejectOnTimeout();
    spec.retry_limit = c.getRetryLimit();
    spec.backoff_base_ns = c.getBackoffBaseNs();
    spec.backoff_max_ns = c.getBackoffMaxNs();
    spec.version = c.getVersion();
    spec.parameters = Str(c.getParameters());
    InsertUnique(e->checks_, Str(c.getKey()), std::move(spec), "admission check");
  }
}

void SnapshotCodec::LoadConfig(snap::EngineState::Reader in, Engine* e) {
  auto config = in.getConfig();
  e->config_.wait_for_pods_ready = config.getWaitForPodsReady();
  e->config_.pods_ready_timeout_ns = config.getPodsReadyTimeoutNs();
  e->config_.backoff_base_seconds = config.getBackoffBaseSeconds();
  e->config_.backoff_max_seconds = config.getBackoffMaxSeconds();
  e->config_.backoff_limit_count = config.getBackoffLimitCount();
  e->config_.aging_step_ns = config.getAgingStepNs();
  e->config_.aging_priority_max = config.getAgingPriorityMax();
  e->config_.fair_sharing = config.getFairSharing();
  e->config_.retain_finished_ns = config.getRetainFinishedNs();
  e->config_.retain_deactivated_ns = config.getRetainDeactivatedNs();
  e->config_.afs_half_life_ns = config.getAfsHalfLifeNs();
  e->config_.afs_sampling_ns = config.getAfsSamplingIntervalNs();
  e->config_.afs_weights_milli = GetIdAmounts(*e, config.getAfsResourceWeights());
  e->config_.fs_strategies.clear();
  for (uint8_t s : config.getFairSharingPreemptionStrategies()) e->config_.fs_strategies.push_back(s);
}

void SnapshotCodec::LoadMaintenanceWindows(snap::EngineState::Reader in, Engine* e) {
  for (auto w : in.getMaintenanceWindows()) {
    MaintenanceWindowSpec spec{Str(w.getName()), Str(w.getFlavor()), w.getStartNs(), w.getEndNs()};
    InsertUnique(e->windows_, Str(w.getKey()), std::move(spec), "maintenance window");
  }
}

void SnapshotCodec::LoadNodes(snap::EngineState::Reader in, Engine* e) {
  for (auto n : in.getNodes()) {
    Engine::NodeState node;
    node.flavor = Str(n.getFlavor());
    node.capacity = GetIdAmounts(*e, n.getCapacity());
    node.failed = n.getFailed();
    node.labels = GetPairs(n.getLabels());
    node.taints = GetTaints(n.getTaints());
    node.non_tas_usage = GetIdAmounts(*e, n.getNonTasUsage());
    InsertUnique(e->nodes_, Str(n.getName()), std::move(node), "node");
  }
}

void SnapshotCodec::LoadTimers(snap::EngineState::Reader in, Engine* e) {
  for (auto t : in.getTimers()) {
    const std::string kind_name = Str(t.getKind());
    const std::optional<TimerKind> kind = TimerKindFromName(kind_name);
    if (!kind) Corrupt("timer of unknown kind '" + kind_name + "'");
    Timer timer{t.getAtNs(), *kind, Str(t.getKey()), t.getGeneration(), Str(t.getDetail())};
    const std::string what = kind_name + " timer of '" + timer.key + "'";
    if (!e->timers_.insert(std::move(timer)).second) Corrupt("duplicate " + what);
  }
}

void SnapshotCodec::LoadWorkloads(snap::EngineState::Reader in, Engine* e) {
  for (auto w : in.getWorkloads()) {
    WorkloadState state = LoadWorkload(*e, w);
    const std::string key = Str(w.getKey());
    if (key != state.ns + "/" + state.name) {
      Corrupt("workload stored under '" + key + "' is " + state.ns + "/" + state.name);
    }
    state.key = key;  // derived, but queue entries (below) order on it
    InsertUnique(e->workloads_, key, std::move(state), "workload");
  }
}

void SnapshotCodec::LoadClusterQueues(snap::EngineState::Reader in, Engine* e) {
  for (auto cq : in.getClusterQueues()) {
    ClusterQueueState state;
    for (auto cls : cq.getClasses()) {
      EquivalenceClass ec;
      ec.inadmissible = cls.getInadmissible();
      for (auto m : cls.getMembers()) {
        // An entry names its workload (loaded above), whose uid and key end the order.
        auto wl = e->workloads_.find(Str(m.getKey()));
        if (wl == e->workloads_.end()) Corrupt("queued " + Str(m.getKey()) + " is not a workload");
        if (wl->second.uid != Str(m.getUid())) {
          Corrupt("queued " + wl->first + " has uid '" + wl->second.uid + "', its entry '" +
                  Str(m.getUid()) + "'");
        }
        QueueKey k{m.getPriority(), m.getTimestamp(), m.getSequence(), &wl->second};
        if (!ec.members.insert(k).second) Corrupt("duplicate queue entry");
      }
      InsertUnique(state.classes, Str(cls.getKey()), std::move(ec), "equivalence class");
    }
    state.inactive_reason = Str(cq.getInactiveReason());
    InsertUnique(e->cqs_, Str(cq.getName()), std::move(state), "ClusterQueue state");
  }
}

void SnapshotCodec::LoadIndexesAndCounters(snap::EngineState::Reader in, Engine* e) {
  e->uid_to_key_ = GetPairs(in.getUidToKey());
  e->uid_pending_.clear();
  GetNameSet(in.getOrphans(), &e->orphans_);
  GetNameSet(in.getActive(), &e->active_);
  GetNameSet(in.getReactivatePending(), &e->reactivate_pending_);
  for (const std::string& key : e->orphans_) {
    if (e->workloads_.count(key) == 0) Corrupt("orphan " + key + " is not a workload");
  }
  for (const std::string& name : e->active_) {
    if (e->cqs_.count(name) == 0) Corrupt("active ClusterQueue " + name + " has no state");
  }
  e->tree_dirty_ = in.getTreeDirty();
  e->current_sequence_ = in.getCurrentSequence();
  e->decisions_made_ = in.getDecisionsMade();
  e->now_ns_ = in.getNowNs();
  e->node_inventory_complete_ = in.getNodeInventoryComplete();
}

void SnapshotCodec::LoadAfsEntries(snap::EngineState::Reader in, Engine* e) {
  for (auto a : in.getAfsEntries()) {
    AfsEntry entry;
    entry.consumed = GetIdAmounts(*e, a.getConsumed());
    entry.last_update_ns = a.getLastUpdateNs();
    for (auto p : a.getPenalties()) {
      std::map<int, int64_t> amounts = GetIdAmounts(*e, p.getAmounts());
      for (const auto& [r, v] : amounts) entry.penalty_total[r] += v;  // derived
      InsertUnique(entry.penalties, Str(p.getWorkload()), std::move(amounts), "penalty");
    }
    InsertUnique(e->afs_, Str(a.getLocalQueue()), std::move(entry), "admission fair sharing entry");
  }
}

// ---------------------------------------------------------------------------------------------
// The derived state.

// Rebuilds every member a snapshot does not store, from those it does:
//  - ClusterQueueState.spec: the ClusterQueue's entry in cq_specs_ (both are set and reset
//    together when a ClusterQueue is defined or deleted).
//  - ClusterQueueState.holders and .usage: the workloads holding quota (reserved, admitted,
//    evicting) in that ClusterQueue, and the sum of their admission usage (zero entries
//    dropped, as AddUsage drops them).
//  - ClusterQueueState.pending: the members of its equivalence classes. (Each member's
//    QueueKey.wl, the workload it names, is set as the classes are loaded, after the
//    workloads: the order reads the workload's uid and key.)
//  - WorkloadState.key and .local_queue_key: namespace/name and namespace/queue_name.
//  - lq_counts_: counted from the workloads' phases.
//  - stopped_local_queues_: counted from the LocalQueue specs.
//  - strict_fifo_cqs_: collected from the ClusterQueue specs.
//  - WorkloadState::queued_class: a queued workload's class (checked below); cq_state is
//    looked up again on first use.
//  - The quota tree: rebuilt from the specs and the usage. A clean tree (tree_dirty_ false) is
//    rebuilt from the ClusterQueues it held when last built (`tree_cluster_queues`: a deleted
//    ClusterQueue stays in it while it held usage then), so node ids and the nodes present are
//    those of the encoded decider; usage added and removed since adds up to the same integers.
//    A dirty tree is rebuilt by the decider before its next use anyway; it is built here only
//    so that read models see a tree (RebuildTreeIfNeeded's placeholders), and stays dirty.
//    Either way the tree's caches follow it (TreeRebuilt: cq_by_node_, the epoch that
//    invalidates ClusterQueueState::node).
// Everything else is stored (docs/replay.md, "Snapshots", says why for the doubtful ones).
// Also checks the invariants the decider relies on (each queued workload is its class's
// member and each member a queued workload, quota holders name a ClusterQueue with state):
// a snapshot that breaks one is refused (kCorruption) rather than aborting later.
Status Engine::RestoreDerivedState(const std::set<std::string>& tree_cluster_queues) {
  auto corrupt = [](const std::string& message) {
    return Status(Code::kCorruption, "snapshot: " + message);
  };
  CountStoppedLocalQueues();
  for (const auto& [name, spec] : cq_specs_) {
    if (cqs_.count(name) == 0) return corrupt("ClusterQueue " + name + " has a spec but no state");
  }
  std::map<std::string, size_t> queued_in;
  for (auto& [name, cq] : cqs_) {
    auto spec = cq_specs_.find(name);
    cq.spec = spec == cq_specs_.end() ? std::nullopt : std::optional<ClusterQueueSpec>(spec->second);
    cq.holders.clear();
    cq.usage.clear();
    cq.pending = 0;
    for (auto& [key, cls] : cq.classes) {
      if (cls.members.empty()) return corrupt("empty class in ClusterQueue " + name);
      cq.pending += cls.members.size();
    }
  }
  CollectStrictFifoQueues();
  lq_counts_.clear();
  for (auto& [key, wl] : workloads_) {
    wl.key = key;
    wl.local_queue_key = wl.ns + "/" + wl.queue_name;
    CountPhase(wl, +1);
    if (HoldsQuota(wl.phase)) {
      auto cq = cqs_.find(wl.cluster_queue);
      if (cq == cqs_.end()) {
        return corrupt(key + " holds quota in ClusterQueue '" + wl.cluster_queue +
                       "', which has no state");
      }
      AddHolder(cq->second, wl);
      for (const auto& [fr, amount] : wl.admission.usage) {
        if (amount < 0) return corrupt(key + " uses a negative amount");
        cq->second.usage[fr] += amount;
      }
    }
    if (wl.queued) {
      auto cq = cqs_.find(wl.cluster_queue);
      if (wl.phase != Phase::kPending || cq == cqs_.end()) {
        return corrupt(key + " is queued but not pending in a ClusterQueue with state");
      }
      auto cls = cq->second.classes.find(wl.class_key);
      if (cls == cq->second.classes.end() ||
          cls->second.members.count(
              QueueKey{wl.priority, wl.queued_at_ns, wl.submitted_sequence, &wl}) == 0) {
        return corrupt(key + " is queued but not in its class of ClusterQueue " +
                       wl.cluster_queue);
      }
      wl.queued_class = &cls->second;
      ++queued_in[wl.cluster_queue];
    }
  }
  for (auto& [name, cq] : cqs_) {
    if (cq.pending != queued_in[name]) {
      return corrupt("ClusterQueue " + name + " queues " + std::to_string(cq.pending) +
                     " entries for " + std::to_string(queued_in[name]) + " queued workloads");
    }
    for (auto it = cq.usage.begin(); it != cq.usage.end();) {
      it = it->second == 0 ? cq.usage.erase(it) : std::next(it);
    }
  }

  std::map<std::string, FrQuantities> usage;
  for (const auto& [name, cq] : cqs_) {
    if (!cq.usage.empty()) usage[name] = cq.usage;
  }
  std::map<std::string, ClusterQueueSpec> specs = cq_specs_;
  auto placeholder = [&](const std::string& name) {
    ClusterQueueSpec spec;
    spec.name = name;
    specs[name] = spec;
  };
  if (tree_dirty_) {
    for (const auto& [name, cq] : cqs_) {
      if (!cq.spec && !cq.usage.empty()) placeholder(name);
    }
  } else {
    for (const std::string& name : tree_cluster_queues) {
      if (specs.count(name) != 0) continue;
      if (cqs_.count(name) == 0) return corrupt("the quota tree holds unknown ClusterQueue " + name);
      placeholder(name);
    }
    for (const auto& [name, spec] : cq_specs_) {
      if (tree_cluster_queues.count(name) == 0) {
        return corrupt("ClusterQueue " + name + " is missing from a clean quota tree");
      }
    }
  }
  tree_.Rebuild(specs, cohort_specs_, usage);
  TreeRebuilt();  // the node caches (cq_by_node_, ClusterQueueState::node)
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// The API.

namespace {

Status FromException(const kj::Exception& e, const char* what) {
  return Status(Code::kCorruption, std::string(what) + ": " + e.getDescription().cStr());
}

}  // namespace

Result<std::string> EncodeSnapshot(const Engine& engine, uint64_t after,
                                   const schema::Hash& chain_hash,
                                   const DefinitionBodies& definitions) {
  std::string bytes;
  std::optional<Refusal> refusal;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    try {
      kj::Array<capnp::word> words;
      {
        capnp::MallocMessageBuilder message(1 << 16);
        snap::Snapshot::Builder root = message.initRoot<snap::Snapshot>();
        root.setFormatVersion(kSnapshotFormatVersion);
        root.setEngineVersion(kEngineVersion);
        root.setAfterSequence(after);
        root.setChainHash(capnp::Data::Reader(chain_hash.data(), chain_hash.size()));
        SnapshotCodec::Save(engine, root.initState());
        auto defs = root.initDefinitions(Count(definitions.size(), "definitions"));
        unsigned i = 0;
        for (const auto& [key, body] : definitions) {
          defs[i].setKey(key);
          defs[i].setBody(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(body.data()),
                                              body.size()));
          ++i;
        }
        words = capnp::canonicalize(root.asReader());
      }
      kj::ArrayPtr<const char> chars = words.asChars();
      if (chars.size() > schema::kSnapshotBytesMax) {
        Refuse(Code::kInvalidArgument, "the snapshot would take " + std::to_string(chars.size()) +
                                           " bytes, more than the limit of " +
                                           std::to_string(schema::kSnapshotBytesMax));
      }
      bytes.assign(chars.begin(), chars.size());
    } catch (Refusal& r) {
      refusal = std::move(r);
    }
  });
  if (refusal) return Status(refusal->code, refusal->message);
  KJ_IF_MAYBE(e, error) { return FromException(*e, "encoding the snapshot"); }
  return bytes;
}

Result<LoadedSnapshot> LoadSnapshot(std::string_view bytes) {
  auto decoded = schema::DecodeSnapshot(bytes);
  if (!decoded.ok()) return decoded.status();
  LoadedSnapshot loaded;
  std::optional<Refusal> refusal;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    try {
      snap::Snapshot::Reader root = decoded->root();
      loaded.header.format_version = root.getFormatVersion();
      loaded.header.engine_version = root.getEngineVersion();
      loaded.header.after = root.getAfterSequence();
      if (root.getFormatVersion() > kSnapshotFormatVersion ||
          root.getFormatVersion() < kSnapshotFormatVersionOldestRead) {
        Refuse(Code::kInvalidArgument,
               "snapshot format v" + std::to_string(root.getFormatVersion()) +
                   "; this build reads formats v" +
                   std::to_string(kSnapshotFormatVersionOldestRead) + " to v" +
                   std::to_string(kSnapshotFormatVersion));
      }
      // v6 and v7 changed no stored state (v6 only what one batch remembers while it is
      // decided, v7 only which requests a nomination counts), so a v5 or v6 snapshot is a v7
      // state.
      if (root.getEngineVersion() < 5 || root.getEngineVersion() > kEngineVersion) {
        Refuse(Code::kInvalidArgument,
               "snapshot of engine v" + std::to_string(root.getEngineVersion()) +
                   "; this build runs engine v" + std::to_string(kEngineVersion) +
                   " and reads the state of v5 to v" + std::to_string(kEngineVersion) + " only");
      }
      if (root.getChainHash().size() != loaded.header.chain_hash.size()) {
        Corrupt("chainHash has " + std::to_string(root.getChainHash().size()) + " bytes, not 32");
      }
      loaded.header.chain_hash = schema::HashFromData(root.getChainHash());
      loaded.engine = std::make_unique<Engine>();
      SnapshotCodec::Load(root.getState(), loaded.engine.get());
      for (auto d : root.getDefinitions()) {
        auto body = d.getBody();
        InsertUnique(loaded.definitions, Str(d.getKey()),
                     std::string(reinterpret_cast<const char*>(body.begin()), body.size()),
                     "definition");
      }
    } catch (Refusal& r) {
      refusal = std::move(r);
    }
  });
  if (refusal) return Status(refusal->code, refusal->message);
  KJ_IF_MAYBE(e, error) { return FromException(*e, "snapshot does not decode"); }
  return loaded;
}

}  // namespace admission::projections
