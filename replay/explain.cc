#include "replay/explain.h"

#include "replay/estimate.h"

#include "projections/tas.h"
#include "schema/quantity.h"

#include "schema/time_format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "projections/engine_version.h"
#include "schema/event_codec.h"
#include "schema/workload_refs.h"
#include "replay/snapshots.h"

namespace admission::replay {

namespace {

using Json = nlohmann::ordered_json;
using W = schema::Event::Body::Which;

// How a check report forwarded by a bridge from a cluster is told apart: its owner did not
// prove itself to the ledger; a bridge saw the state written by a field manager of that name.
std::string ViaFieldManagerNote(const std::string& field_manager) {
  if (field_manager.empty()) return "";
  return ", forwarded from the cluster, written by field manager " + field_manager +
         " (the weaker proof)";
}

// ---------------------------------------------------------------------------------------------
// Small formatting helpers.

// "3m20s", "2h", "450ms".
std::string Duration(int64_t ns) {
  if (ns < 0) return "-" + Duration(-ns);
  if (ns < 1'000'000'000) return std::to_string(ns / 1'000'000) + "ms";
  int64_t s = ns / 1'000'000'000;
  std::string out;
  if (s >= 86400) out += std::to_string(s / 86400) + "d", s %= 86400;
  if (s >= 3600) out += std::to_string(s / 3600) + "h", s %= 3600;
  if (s >= 60) out += std::to_string(s / 60) + "m", s %= 60;
  if (s > 0 || out.empty()) out += std::to_string(s) + "s";
  return out;
}

std::string Key(schema::WorkloadRef::Reader ref) {
  return std::string(ref.getNamespace().cStr()) + "/" + ref.getName().cStr();
}

// A TAS placement (engine v26): " placed at LEVELS: domain x count, ...".
std::string TopologyText(const projections::TopologyAssignment& a) {
  std::string out = " placed at ";
  for (size_t i = 0; i < a.levels.size(); ++i) out += (i ? "/" : "") + a.levels[i];
  out += ":";
  for (size_t i = 0; i < a.domains.size(); ++i) {
    out += i ? ", " : " ";
    for (size_t j = 0; j < a.domains[i].values.size(); ++j) {
      out += (j ? "/" : "") + a.domains[i].values[j];
    }
    out += " x" + std::to_string(a.domains[i].count);
  }
  return out;
}

std::string FlavorsOf(schema::Admission::Reader admission) {
  std::string out;
  for (auto psa : admission.getPodSetAssignments()) {
    if (!out.empty()) out += "; ";
    out += std::string(psa.getName().cStr()) + " x" + std::to_string(psa.getCount()) + ":";
    bool first = true;
    for (auto f : psa.getFlavors()) {
      out += std::string(first ? " " : ", ") + f.getResource().cStr() + "=" + f.getFlavor().cStr();
      first = false;
    }
    if (psa.hasTopologyAssignment()) {
      out += TopologyText(projections::ToTopologyAssignment(psa.getTopologyAssignment()));
    }
  }
  return out;
}

std::string FlavorsOf(const projections::Engine& engine, const projections::Assignment& a) {
  std::string out;
  for (const projections::PodSetAssignment& psa : a.pod_sets) {
    if (!out.empty()) out += "; ";
    out += psa.name + " x" + std::to_string(psa.count) + ":";
    bool first = true;
    for (const auto& [resource, flavor] : psa.flavors) {
      out += std::string(first ? " " : ", ") + engine.resource_names().Name(resource) + "=" +
             engine.flavor_names().Name(flavor);
      first = false;
    }
    if (psa.topology) out += TopologyText(*psa.topology);
  }
  return out;
}

const char* PodsReportName(schema::PodsReport r) {
  switch (r) {
    case schema::PodsReport::RELEASED:
      return "released";
    case schema::PodsReport::READY:
      return "ready";
    case schema::PodsReport::TERMINATED:
      return "terminated";
    case schema::PodsReport::FINISHED:
      return "finished";
    case schema::PodsReport::FAILED_TO_START:
      return "failedToStart";
  }
  return "unknown";
}

// Collects the history of one workload while the ledger is folded.
class HistoryCollector {
 public:
  HistoryCollector(std::string ns, std::string name)
      : ns_(std::move(ns)), name_(std::move(name)), key_(ns_ + "/" + name_) {}

  void Observe(Sequence sequence, schema::Event::Reader event) {
    last_time_ns_ = event.getRecordedAtNs();
    auto body = event.getBody();
    if (std::optional<schema::Workload::Reader> spec = schema::SpecOf(event)) {
      if (spec->getNamespace() != ns_.c_str() || spec->getName() != name_.c_str()) return;
      uids_.insert(spec->getUid().cStr());
      HistoryEntry e = Base(sequence, event, spec->getUid().cStr());
      Describe(event, &e);
      history_.push_back(std::move(e));
      return;
    }
    std::optional<schema::WorkloadRef::Reader> ref = schema::SubjectOf(event);
    bool mine = ref && Matches(*ref);
    bool preemptor = false;
    if (!mine && body.isPreempted() && Matches(body.getPreempted().getPreemptor())) {
      mine = preemptor = true;
    }
    if (!mine) return;
    HistoryEntry e =
        Base(sequence, event,
             preemptor ? body.getPreempted().getPreemptor().getUid().cStr() : ref->getUid().cStr());
    Describe(event, &e);
    if (body.isPreempted()) {
      auto p = body.getPreempted();
      e.role = preemptor ? "preemptor" : "victim";
      e.other = preemptor ? Key(p.getWorkload()) : Key(p.getPreemptor());
      e.summary = preemptor ? "preempted " + e.other + " to make room (" + e.reason + ")"
                            : "preempted by " + e.other + " (" + e.reason + ")";
    }
    history_.push_back(std::move(e));
  }

  std::vector<HistoryEntry> Take() { return std::move(history_); }
  int64_t last_time_ns() const { return last_time_ns_; }

 private:
  bool Matches(schema::WorkloadRef::Reader ref) const {
    if (ref.getNamespace() == ns_.c_str() && ref.getName() == name_.c_str()) return true;
    return ref.getUid().size() > 0 && uids_.count(ref.getUid().cStr()) != 0;
  }

  static HistoryEntry Base(Sequence sequence, schema::Event::Reader event, const std::string& uid) {
    HistoryEntry e;
    e.sequence = sequence;
    e.recorded_at_ns = event.getRecordedAtNs();
    e.actor = event.getActor().cStr();
    e.type = schema::BodyName(event);
    e.decision = schema::IsDecision(event.getBody().which());
    e.uid = uid;
    e.idempotency_key = event.getIdempotencyKey().cStr();
    if (e.decision) {
      e.causation = event.getCausationSequence();
      e.engine_version = event.getEngineVersion();
    }
    return e;
  }

  // Fills the fields and the summary of `e` that its event's kind has.
  static void Describe(schema::Event::Reader event, HistoryEntry* e) {
    auto b = event.getBody();
    if (DescribeInput(b, e) || DescribeAdmission(b, e) || DescribeSetback(b, e)) return;
    e->summary = e->type;
  }

  // "main x2 {cpu=1 nvidia.com/gpu=8}, ...": each podSet, its count and its requests.
  static std::string PodSetsText(schema::Workload::Reader w) {
    std::string sets;
    for (auto ps : w.getPodSets()) {
      if (!sets.empty()) sets += ", ";
      sets += std::string(ps.getName().cStr()) + " x" + std::to_string(ps.getCount());
      std::string req;
      for (auto r : ps.getRequests()) {
        req += (req.empty() ? "" : " ") + std::string(r.getName().cStr()) + "=" +
               schema::FormatQuantityMilli(r.getMilli(), r.getName().cStr());
      }
      if (!req.empty()) sets += " {" + req + "}";
    }
    return sets;
  }

  // Inputs about the workload: its spec, its end, check and pod reports, revocations.
  static bool DescribeInput(schema::Event::Body::Reader b, HistoryEntry* e) {
    switch (b.which()) {
      case W::WORKLOAD_SUBMITTED: {
        auto w = b.getWorkloadSubmitted().getWorkload();
        const std::string sets = PodSetsText(w);
        e->summary = "submitted to LocalQueue " + std::string(w.getQueueName().cStr()) +
                     (w.getHasPriority() ? ", priority " + std::to_string(w.getPriority()) : "") +
                     (sets.empty() ? "" : ", pods " + sets);
        break;
      }
      case W::WORKLOAD_IMPORTED: {
        auto i = b.getWorkloadImported();
        e->cluster_queue = i.getAdmission().getClusterQueue().cStr();
        e->flavors = FlavorsOf(i.getAdmission());
        e->summary = "imported as admitted in ClusterQueue " + e->cluster_queue + ": " + e->flavors;
        break;
      }
      case W::WORKLOAD_DELETED:
        e->summary = "deleted";
        break;
      case W::WORKLOAD_FINISHED:
        e->message = b.getWorkloadFinished().getMessage().cStr();
        e->summary = "finished" + (e->message.empty() ? "" : ": " + e->message);
        break;
      case W::CHECK_STATE_REPORTED: {
        auto c = b.getCheckStateReported();
        e->check = c.getCheck().cStr();
        e->check_state = schema::CheckStateName(c.getState());
        e->generation = c.getGeneration();
        e->message = c.getMessage().cStr();
        e->via_field_manager = c.getViaFieldManager().cStr();
        e->summary = "check " + e->check + " reported " + e->check_state + " for generation " +
                     std::to_string(e->generation) + (e->message.empty() ? "" : ": " + e->message) +
                     ViaFieldManagerNote(e->via_field_manager) +
                     (c.getPodSetUpdates().size() == 0
                          ? ""
                          : ", podSetUpdates " + schema::DescribePodSetUpdates(c.getPodSetUpdates()));
        break;
      }
      case W::BUDGET_DECIDED: {
        auto d = b.getBudgetDecided();
        e->check = d.getCheck().cStr();
        e->check_state = schema::CheckStateName(d.getState());
        e->generation = d.getGeneration();
        e->message = d.getMessage().cStr();
        e->summary = "budget check " + e->check + " decided " + e->check_state +
                     " for generation " + std::to_string(e->generation) + " by BudgetPolicy " +
                     d.getPolicy().cStr() + ": " + e->message;
        break;
      }
      case W::TOPOLOGY_REPLACED: {
        auto t = b.getTopologyReplaced();
        e->generation = t.getGeneration();
        e->summary = std::string("node ") + t.getNode().cStr() + " failed: pod set " +
                     t.getPodSet().cStr() + " moved," +
                     TopologyText(projections::ToTopologyAssignment(t.getTopologyAssignment()));
        break;
      }
      case W::PODS_REPORTED: {
        auto p = b.getPodsReported();
        e->summary = std::string("pods ") + PodsReportName(p.getReport()) + " (token " +
                     p.getFencingToken().cStr() + ")" +
                     (p.hasMessage() ? std::string(": ") + p.getMessage().cStr() : "");
        break;
      }
      case W::REVOCATION_REQUESTED:
        e->reason = b.getRevocationRequested().getReason().cStr();
        e->summary = "revocation requested: " + e->reason;
        break;
      case W::WORKLOAD_ACTIVATION_SET: {
        auto a = b.getWorkloadActivationSet();
        e->message = a.getMessage().cStr();
        e->summary = std::string(a.getActive() ? "resumed (spec.active true)"
                                               : "stopped (spec.active false)") +
                     (e->message.empty() ? "" : ": " + e->message);
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Decisions on the way in: quota reserved, admitted, why it is still pending.
  static bool DescribeAdmission(schema::Event::Body::Reader b, HistoryEntry* e) {
    switch (b.which()) {
      case W::QUOTA_RESERVED: {
        auto q = b.getQuotaReserved();
        e->cluster_queue = q.getAdmission().getClusterQueue().cStr();
        e->flavors = FlavorsOf(q.getAdmission());
        e->borrowing = q.getBorrowing();
        e->generation = q.getGeneration();
        e->quota_version = q.getQuotaVersion();
        e->message = q.getMessage().cStr();
        e->reason = "QuotaReserved";
        e->summary = "quota reserved in ClusterQueue " + e->cluster_queue + ": " + e->flavors +
                     (e->borrowing ? " (borrowing from the cohort)" : "") + ", quota version " +
                     std::to_string(e->quota_version) + ", generation " +
                     std::to_string(e->generation);
        break;
      }
      case W::ADMITTED: {
        auto a = b.getAdmitted();
        e->generation = a.getGeneration();
        e->quota_version = a.getQuotaVersion();
        for (uint64_t v : a.getCheckVersions()) e->check_versions.push_back(v);
        e->reason = "Admitted";
        std::string checks;
        for (uint64_t v : e->check_versions)
          checks += (checks.empty() ? "" : ", ") + std::to_string(v);
        e->summary =
            "admitted, fencing token " + std::string(a.getFencingToken().cStr()) +
            ", quota version " + std::to_string(e->quota_version) +
            (checks.empty() ? ", no admission checks" : ", check reports at sequences " + checks) +
            (a.getPodSetUpdates().size() == 0
                 ? ""
                 : ", pod template updates from checks: " +
                       schema::DescribePodSetUpdates(a.getPodSetUpdates()));
        break;
      }
      case W::PENDING_REASON_CHANGED: {
        auto p = b.getPendingReasonChanged();
        e->reason = p.getReason().cStr();
        e->message = p.getMessage().cStr();
        e->resource = p.getResource().cStr();
        e->flavor = p.getFlavor().cStr();
        e->shortfall_milli = p.getShortfallMilli();
        e->summary = "pending: " + e->reason + (e->message.empty() ? "" : ": " + e->message);
        break;
      }
      default:
        return false;
    }
    return true;
  }

  // Decisions that set it back: evictions, releases, requeues, rejections, alerts.
  static bool DescribeSetback(schema::Event::Body::Reader b, HistoryEntry* e) {
    switch (b.which()) {
      case W::EVICTION_STARTED: {
        auto v = b.getEvictionStarted();
        e->reason = v.getReason().cStr();
        e->message = v.getMessage().cStr();
        e->generation = v.getGeneration();
        e->summary =
            "eviction started: " + e->reason + (e->message.empty() ? "" : ": " + e->message);
        break;
      }
      case W::QUOTA_RELEASED: {
        auto r = b.getQuotaReleased();
        e->reason = r.getReason().cStr();
        e->generation = r.getGeneration();
        e->summary = "quota released (" + e->reason + ")";
        break;
      }
      case W::REQUEUED: {
        auto r = b.getRequeued();
        e->reason = r.getReason().cStr();
        e->summary = "requeued (attempt " + std::to_string(r.getAttempt()) + ", " + e->reason +
                     ") at " + FormatTimeNs(r.getRequeueAtNs());
        break;
      }
      case W::REJECTED:
        e->reason = b.getRejected().getReason().cStr();
        e->message = b.getRejected().getMessage().cStr();
        e->summary = "rejected: " + e->reason + (e->message.empty() ? "" : ": " + e->message);
        break;
      case W::DEACTIVATED:
        e->reason = b.getDeactivated().getReason().cStr();
        e->message = b.getDeactivated().getMessage().cStr();
        e->summary = "deactivated: " + e->reason + (e->message.empty() ? "" : ": " + e->message);
        break;
      case W::PREEMPTED:
        e->reason = b.getPreempted().getReason().cStr();
        e->message = b.getPreempted().getMessage().cStr();
        break;
      case W::STARVATION_ALERT:
        e->message = b.getStarvationAlert().getMessage().cStr();
        e->summary = "starvation alert: waiting " +
                     Duration(b.getStarvationAlert().getWaitingNs()) +
                     (e->message.empty() ? "" : ": " + e->message);
        break;
      case W::DRAIN_DEADLINE_PASSED:
        e->generation = b.getDrainDeadlinePassed().getGeneration();
        e->message = b.getDrainDeadlinePassed().getMessage().cStr();
        e->summary = "drain deadline passed" + (e->message.empty() ? "" : ": " + e->message);
        break;
      default:
        return false;
    }
    return true;
  }

  const std::string ns_, name_, key_;
  std::set<std::string> uids_;
  std::vector<HistoryEntry> history_;
  int64_t last_time_ns_ = 0;
};

std::string BlockedBy(const WorkloadNow& now, int64_t at_ns) {
  const std::string& p = now.phase;
  if (p == "Pending") {
    if (now.requeue_at_ns > at_ns) {
      return "waiting out a backoff until " + FormatTimeNs(now.requeue_at_ns) + " (" +
             Duration(now.requeue_at_ns - at_ns) + " more), then queued again";
    }
    std::string s = now.pending_reason.empty() ? "queued, not yet nominated"
                                               : now.pending_reason + ": " + now.pending_message;
    if (now.shortfall_known && !now.short_resource.empty()) {
      s += " [short of " + now.short_resource +
           (now.short_flavor.empty() ? "" : " in flavor " + now.short_flavor) + " by " +
           schema::FormatQuantityMilli(now.shortfall_milli, now.short_resource) + "]";
    }
    if (now.queue_position > 0) {
      s += "; position " + std::to_string(now.queue_position) + " of " +
           std::to_string(now.queue_length) + " in ClusterQueue " + now.cluster_queue;
    } else if (now.cluster_queue.empty()) {
      s += "; not in any ClusterQueue's queue";
    }
    return s;
  }
  if (p == "QuotaReserved") {
    std::string waiting;
    for (const CheckNow& c : now.checks) {
      if (c.state == "Ready") continue;
      waiting += (waiting.empty() ? "" : "; ") + c.name + " " + c.state + " since " +
                 FormatTimeNs(c.since_ns) + " (" + Duration(at_ns - c.since_ns) + ")" +
                 (c.report_sequence == 0
                      ? ", no report yet"
                      : ", last report at sequence " + std::to_string(c.report_sequence)) +
                 (c.message.empty() ? "" : ": " + c.message);
    }
    return "quota reserved in ClusterQueue " + now.cluster_queue + "; waiting for admission " +
           "checks: " + (waiting.empty() ? "(none pending)" : waiting);
  }
  if (p == "Admitted") {
    return "nothing: admitted in ClusterQueue " + now.cluster_queue + " since " +
           FormatTimeNs(now.admitted_at_ns != 0 ? now.admitted_at_ns : now.reserved_at_ns) +
           ", fencing token " + now.fencing_token;
  }
  if (p == "Evicting") {
    return "evicting: its quota is held until the runtime reports its pods gone" +
           (now.drain_deadline_ns != 0
                ? " or the drain deadline " + FormatTimeNs(now.drain_deadline_ns) + " passes"
                : std::string());
  }
  return "nothing: it is " + p + " (final)";
}

// The page's phases, derived from the history: [start, end) with a label and a CSS class.
struct Segment {
  std::string label, css;
  int64_t start_ns = 0, end_ns = 0;
};

std::vector<Segment> Segments(const Explanation& x) {
  std::vector<Segment> out;
  auto open = [&](const std::string& label, const std::string& css, int64_t t) {
    if (!out.empty() && out.back().end_ns < 0) {
      if (out.back().label == label) return;
      out.back().end_ns = t;
    }
    out.push_back(Segment{label, css, t, -1});
  };
  auto close = [&](int64_t t) {
    if (!out.empty() && out.back().end_ns < 0) out.back().end_ns = t;
  };
  for (const HistoryEntry& e : x.history) {
    const int64_t t = e.recorded_at_ns;
    if (e.type == "workloadSubmitted")
      open("queued", "queued", t);
    else if (e.type == "workloadImported")
      open("admitted", "admitted", t);
    else if (e.type == "quotaReserved")
      open("reserved", "reserved", t);
    else if (e.type == "admitted")
      open("admitted", "admitted", t);
    else if (e.type == "podsReported" && e.summary.rfind("pods ready", 0) == 0)
      open("running", "running", t);
    else if (e.type == "evictionStarted")
      open("evicting", "evicting", t);
    else if (e.type == "requeued" ||
             (e.type == "quotaReleased" && !out.empty() && out.back().css == "evicting")) {
      open("queued", "queued", t);
    } else if (e.type == "workloadFinished" || e.type == "workloadDeleted" ||
               e.type == "rejected" || e.type == "deactivated") {
      close(t);
      out.push_back(Segment{e.type == "workloadFinished"  ? "finished"
                            : e.type == "workloadDeleted" ? "deleted"
                                                          : e.type,
                            "final", t, t});
    }
  }
  close(x.at_time_ns);
  // Reserved and admitted in the same cycle (no admission checks) is one step for a reader;
  // every other phase stays, however short (an eviction whose quota was released at once).
  std::erase_if(out,
                [](const Segment& s) { return s.css == "reserved" && s.end_ns <= s.start_ns; });
  return out;
}

std::string Html(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

const char* EntryClass(const HistoryEntry& e) {
  const std::string& t = e.type;
  if (t == "workloadSubmitted" || t == "requeued") return "queued";
  if (t == "pendingReasonChanged" || t == "starvationAlert") return "pending";
  if (t == "quotaReserved") return "reserved";
  if (t == "checkStateReported") return "check";
  if (t == "admitted" || t == "workloadImported") return "admitted";
  if (t == "podsReported") return "running";
  if (t == "evictionStarted" || t == "preempted" || t == "revocationRequested" ||
      t == "drainDeadlinePassed" || t == "workloadActivationSet") {
    return "evicting";
  }
  if (t == "quotaReleased") return "released";
  return "final";
}

// A few words for the milestone row.
std::string StepLabel(const HistoryEntry& e) {
  const std::string& t = e.type;
  if (t == "workloadSubmitted") return "submitted";
  if (t == "workloadImported") return "imported (admitted)";
  if (t == "quotaReserved")
    return "quota reserved" + std::string(e.borrowing ? " (borrowing)" : "");
  if (t == "admitted") return "admitted";
  if (t == "checkStateReported") return "check " + e.check + ": " + e.check_state;
  if (t == "podsReported") return e.summary.substr(0, e.summary.find(" ("));
  if (t == "preempted")
    return e.role == "preemptor" ? "preempted " + e.other : "preempted by " + e.other;
  if (t == "evictionStarted") return "evicted: " + e.reason;
  if (t == "quotaReleased") return "quota released";
  if (t == "requeued") return "requeued";
  if (t == "workloadFinished") return "finished";
  if (t == "workloadDeleted") return "deleted";
  if (t == "rejected") return "rejected: " + e.reason;
  if (t == "deactivated") return "deactivated: " + e.reason;
  if (t == "revocationRequested") return "revocation requested";
  if (t == "workloadActivationSet") return e.summary.substr(0, e.summary.find(" ("));
  if (t == "drainDeadlinePassed") return "drain deadline passed";
  if (t == "starvationAlert") return "starvation alert";
  return t;
}

}  // namespace

std::string FormatTimeNs(int64_t ns) { return FormatRfc3339(ns); }

// The events of the workload's history up to `at`, read through the history index: those that
// name it, then those that refer to one of its incarnations by uid alone. nullopt when the log
// keeps no history index.
Result<std::optional<std::vector<Sequence>>> IndexedHistory(ledger::EventLog& log,
                                                            const std::string& key, Sequence at) {
  auto named = log.History(schema::HistoryNameKey(key), at);
  if (!named.ok() || !named->has_value()) return named;
  std::set<Sequence> sequences((*named)->begin(), (*named)->end());
  std::set<std::string> uids;
  for (Sequence s : **named) {
    auto events = log.Read(s, 1);
    if (!events.ok()) return events.status();
    if (events->empty() || events->front().sequence != s) {
      return Status(Code::kCorruption, "the history index names event " + std::to_string(s) +
                                           ", which the ledger does not hold");
    }
    auto decoded = schema::DecodeEvent(events->front().bytes);
    if (!decoded.ok()) return Status(Code::kCorruption, "event " + std::to_string(s) + ": " + decoded.status().message());
    if (auto spec = schema::SpecOf(decoded->root())) uids.insert(spec->getUid().cStr());
  }
  for (const std::string& uid : uids) {
    if (uid.empty()) continue;
    auto by_uid = log.History(schema::HistoryUidKey(uid), at);
    if (!by_uid.ok()) return by_uid.status();
    if (!by_uid->has_value()) return std::optional<std::vector<Sequence>>();
    sequences.insert((*by_uid)->begin(), (*by_uid)->end());
  }
  return std::optional<std::vector<Sequence>>(std::vector<Sequence>(sequences.begin(), sequences.end()));
}

// Shows the events `sequences` (ascending) to the collector, and returns the time of event `at`.
Result<int64_t> CollectIndexed(ledger::EventLog& log, const std::vector<Sequence>& sequences,
                               Sequence at, HistoryCollector& collector) {
  auto show = [&](Sequence s, bool observe) -> Result<int64_t> {
    auto events = log.Read(s, 1);
    if (!events.ok()) return events.status();
    if (events->empty() || events->front().sequence != s) {
      return Status(Code::kCorruption, "the ledger does not hold event " + std::to_string(s));
    }
    auto decoded = schema::DecodeEvent(events->front().bytes);
    if (!decoded.ok()) return Status(Code::kCorruption, "event " + std::to_string(s) + ": " + decoded.status().message());
    if (observe) collector.Observe(s, decoded->root());
    return decoded->root().getRecordedAtNs();
  };
  for (Sequence s : sequences) {
    auto shown = show(s, true);
    if (!shown.ok()) return shown.status();
  }
  if (at == 0) return int64_t{0};
  return show(at, false);
}

bool Ends(const HistoryEntry& e) {
  return e.type == "workloadFinished" || e.type == "workloadDeleted" || e.type == "rejected" ||
         e.type == "deactivated";
}

// The "now" of a workload the decider no longer holds, from its history: retired, if it ended.
bool FillRetired(Explanation& x) {
  const HistoryEntry* ended = nullptr;
  for (const HistoryEntry& e : x.history) {
    if (Ends(e)) ended = &e;
  }
  if (ended == nullptr) return false;
  x.now.phase = "Retired";
  x.now.uid = ended->uid;
  x.now.blocked_by = "it ended at " + FormatTimeNs(ended->recorded_at_ns) + " (" + ended->type +
                     ", sequence " + std::to_string(ended->sequence) +
                     ") and left the decider's live state after its retention; the ledger "
                     "keeps its whole history, shown here";
  return true;
}

// Whether the workload has certainly left the decider's live state after event `at` (at time
// `at_time_ns`), read from its history and the engine configurations (history key "c") alone:
// its latest incarnation ended (the first ending after its last submission) and the retention
// in effect then has passed. false when unsure: the caller folds the state instead.
Result<bool> RetiredByTime(ledger::EventLog& log, const std::vector<HistoryEntry>& history,
                           int64_t at_time_ns) {
  size_t start = 0;
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].type == "workloadSubmitted" || history[i].type == "workloadImported") start = i;
  }
  const HistoryEntry* ended = nullptr;
  for (size_t i = start; i < history.size() && ended == nullptr; ++i) {
    if (Ends(history[i])) ended = &history[i];
  }
  if (ended == nullptr) return false;
  auto configs = log.History(schema::kHistoryConfigKey, ended->sequence);
  if (!configs.ok()) return configs.status();
  if (!configs->has_value()) return false;
  int64_t keep_finished = projections::kDefaultRetentionNs;
  int64_t keep_deactivated = projections::kDefaultRetentionNs;
  if (!(*configs)->empty()) {
    auto events = log.Read((*configs)->back(), 1);
    if (!events.ok()) return events.status();
    if (events->empty()) return false;
    auto decoded = schema::DecodeEvent(events->front().bytes);
    if (!decoded.ok() || !decoded->root().getBody().isEngineConfigDefined()) return false;
    auto c = decoded->root().getBody().getEngineConfigDefined();
    keep_finished = c.getRetainFinishedNs();
    keep_deactivated = c.getRetainDeactivatedNs();
  }
  const int64_t keep = ended->type == "deactivated" ? keep_deactivated : keep_finished;
  if (keep == projections::kRetainForever) return false;
  return at_time_ns >= ended->recorded_at_ns + keep;
}

namespace {

// The workload's state now, from the decider's, with what its history adds: who reported each
// check, the shortfall of its current pending reason, its place in the queue.
void FillNow(const projections::Engine& engine, const projections::WorkloadState& wl,
             Explanation& x) {
  WorkloadNow& now = x.now;
  now.uid = wl.uid;
  now.phase = projections::PhaseName(wl.phase);
  now.queue_name = wl.queue_name;
  now.cluster_queue = wl.cluster_queue;
  now.priority = wl.priority;
  now.requeue_count = wl.requeue_count;
  now.pending_reason = wl.pending_reason;
  now.pending_message = wl.pending_message;
  now.reserved_at_ns = wl.reserved_at_ns;
  now.admitted_at_ns = wl.admitted_at_ns;
  now.requeue_at_ns = wl.requeue_at_ns;
  now.drain_deadline_ns = wl.drain_deadline_ns;
  now.pending_since_ns = wl.pending_since_ns;
  now.fencing_token = wl.fencing_token;
  if (projections::HoldsQuota(wl.phase)) now.flavors = FlavorsOf(engine, wl.admission);
  for (const auto& [check, status] : wl.checks) {
    CheckNow c{check, projections::CheckStateName(status.state), status.message,
               status.last_transition_ns, status.report_sequence, "", ""};
    for (const HistoryEntry& e : x.history) {
      if (c.report_sequence != 0 && e.sequence == c.report_sequence) {
        c.reported_by = e.actor;
        c.via_field_manager = e.via_field_manager;
      }
    }
    now.checks.push_back(std::move(c));
  }
  // The shortfall of the latest pending reason of this incarnation, if it is the current one.
  for (auto e = x.history.rbegin(); e != x.history.rend(); ++e) {
    if (e->uid != wl.uid) continue;
    if (e->type == "quotaReserved" || e->type == "workloadImported") break;
    if (e->type != "pendingReasonChanged") continue;
    if (e->reason == wl.pending_reason) {
      now.shortfall_known = e->shortfall_milli != 0 || !e->resource.empty();
      now.short_resource = e->resource;
      now.short_flavor = e->flavor;
      now.shortfall_milli = e->shortfall_milli;
    }
    break;
  }
  if (wl.queued && !wl.cluster_queue.empty()) {
    const std::vector<std::string> order = engine.PendingInOrder(wl.cluster_queue);
    now.queue_length = order.size();
    auto pos = std::find(order.begin(), order.end(), x.ns + "/" + x.name);
    if (pos != order.end()) now.queue_position = static_cast<size_t>(pos - order.begin()) + 1;
  }
  now.blocked_by = BlockedBy(now, x.at_time_ns);
}

}  // namespace

Result<Explanation> Explain(ledger::EventLog& log, const std::string& ns, const std::string& name,
                            Sequence at, const ReplayProgress& progress,
                            ledger::SnapshotStore* snapshots) {
  HistoryCollector collector(ns, name);
  const std::string key = ns + "/" + name;
  const Sequence head = log.GetHead().sequence;
  auto end = EndOfAppend(log, at == 0 ? head : at);
  if (!end.ok()) return end.status();
  auto indexed = IndexedHistory(log, key, *end);
  if (!indexed.ok()) return indexed.status();
  Explanation x;
  x.ns = ns;
  x.name = name;
  x.engine_version = projections::kEngineVersion;
  if (indexed->has_value()) {
    // Its events through the index; the decider's state only if the workload may be in it.
    auto at_time = CollectIndexed(log, **indexed, *end, collector);
    if (!at_time.ok()) return at_time.status();
    x.at_time_ns = *at_time;
    x.history = collector.Take();
    auto retired = RetiredByTime(log, x.history, x.at_time_ns);
    if (!retired.ok()) return retired.status();
    if (*retired) {
      x.requested = at == 0 ? head : at;
      x.at = *end;
      FillRetired(x);
      return x;
    }
  }
  // Without an index the history is collected while the ledger is folded from the genesis.
  Result<StateAt> state =
      !indexed->has_value()
          ? FoldToSequence(log, at, progress,
                           [&](Sequence s, schema::Event::Reader e) { collector.Observe(s, e); })
      : snapshots != nullptr ? FoldToSequenceFromSnapshot(log, *snapshots, at, progress)
                             : FoldToSequence(log, at, progress);
  if (!state.ok()) return state.status();
  x.requested = state->requested;
  x.at = state->at;
  if (!indexed->has_value()) {
    x.at_time_ns = collector.last_time_ns();
    x.history = collector.Take();
  }
  const projections::Engine& engine = *state->engine;
  auto it = engine.workloads().find(ns + "/" + name);
  if (it == engine.workloads().end() && x.history.empty()) {
    return Status(Code::kNotFound, "no workload " + ns + "/" + name +
                                       " in the ledger up to sequence " + std::to_string(x.at));
  }
  WorkloadNow& now = x.now;
  if (it == engine.workloads().end()) {
    if (FillRetired(x)) return x;
    now.phase = "Unknown";
    now.blocked_by =
        "the decider holds no workload " + ns + "/" + name + " at sequence " + std::to_string(x.at);
    return x;
  }
  FillNow(engine, it->second, x);
  if (it->second.phase == projections::Phase::kPending) {
    EstimateOptions options;
    options.at_ns = x.at_time_ns;
    options.batches_max = kExplainEstimateBatchesMax;
    auto est = EstimateAdmission(log, ns + "/" + name, options);
    if (est.ok()) {
      x.now.estimate = EstimateLine(*est);
    } else if (est.status().code() == Code::kOverloaded) {
      x.now.estimate = "no estimate: the forward simulation did not settle within " +
                       std::to_string(kExplainEstimateBatchesMax) +
                       " batches (admitctl estimate simulates further)";
    }
  }
  return x;
}

std::string ExplainText(const Explanation& x) {
  std::ostringstream out;
  out << "workload " << x.ns << "/" << x.name << " as of sequence " << x.at;
  if (x.requested != x.at) out << " (the end of the append holding sequence " << x.requested << ")";
  out << ", " << FormatTimeNs(x.at_time_ns) << "\n";
  const WorkloadNow& n = x.now;
  out << "  phase:        " << n.phase;
  if (!n.cluster_queue.empty()) out << " in ClusterQueue " << n.cluster_queue;
  if (!n.queue_name.empty()) out << " (LocalQueue " << n.queue_name << ")";
  out << "\n";
  if (!n.uid.empty()) out << "  uid:          " << n.uid << ", priority " << n.priority << "\n";
  if (!n.flavors.empty()) out << "  admission:    " << n.flavors << "\n";
  for (const CheckNow& c : n.checks) {
    out << "  check:        " << c.name << " " << c.state << " since " << FormatTimeNs(c.since_ns)
        << (c.report_sequence == 0
                ? " (no report yet)"
                : " (report at sequence " + std::to_string(c.report_sequence) + " by " +
                      c.reported_by + ViaFieldManagerNote(c.via_field_manager) + ")")
        << (c.message.empty() ? "" : ": " + c.message) << "\n";
  }
  out << "  blocked by:   " << n.blocked_by << "\n";
  if (!n.estimate.empty()) out << "  estimate:     " << n.estimate << "\n";
  out << "\nhistory (" << x.history.size() << " events):\n";
  for (const HistoryEntry& e : x.history) {
    out << "  #" << e.sequence << "  " << FormatTimeNs(e.recorded_at_ns) << "  "
        << (e.decision ? "decision" : "input   ") << "  " << e.type << "  actor=" << e.actor;
    if (e.decision) out << "  cause=" << e.causation << "  engine=v" << e.engine_version;
    out << "\n      " << e.summary << "\n";
  }
  return out.str();
}

std::string ExplainJson(const Explanation& x) {
  Json out;
  out["workload"] = x.ns + "/" + x.name;
  out["requestedSequence"] = x.requested;
  out["atSequence"] = x.at;
  out["at"] = FormatTimeNs(x.at_time_ns);
  out["engineVersion"] = x.engine_version;
  const WorkloadNow& n = x.now;
  Json now;
  now["uid"] = n.uid;
  now["phase"] = n.phase;
  now["localQueue"] = n.queue_name;
  now["clusterQueue"] = n.cluster_queue;
  now["priority"] = n.priority;
  now["requeueCount"] = n.requeue_count;
  now["pendingReason"] = n.pending_reason;
  now["pendingMessage"] = n.pending_message;
  if (n.shortfall_known) {
    now["shortfall"] = {
        {"resource", n.short_resource}, {"flavor", n.short_flavor}, {"milli", n.shortfall_milli}};
  }
  if (n.queue_position > 0) {
    now["queuePosition"] = n.queue_position;
    now["queueLength"] = n.queue_length;
  }
  if (!n.flavors.empty()) now["flavors"] = n.flavors;
  Json checks = Json::array();
  for (const CheckNow& c : n.checks) {
    checks.push_back({{"name", c.name},
                      {"state", c.state},
                      {"since", FormatTimeNs(c.since_ns)},
                      {"reportSequence", c.report_sequence},
                      {"reportedBy", c.reported_by},
                      {"viaFieldManager", c.via_field_manager},
                      {"message", c.message}});
  }
  now["checks"] = checks;
  if (n.requeue_at_ns != 0) now["requeueAt"] = FormatTimeNs(n.requeue_at_ns);
  if (n.drain_deadline_ns != 0) now["drainDeadline"] = FormatTimeNs(n.drain_deadline_ns);
  if (!n.fencing_token.empty()) now["fencingToken"] = n.fencing_token;
  now["blockedBy"] = n.blocked_by;
  if (!n.estimate.empty()) now["estimate"] = n.estimate;
  out["now"] = now;
  Json history = Json::array();
  for (const HistoryEntry& e : x.history) {
    Json h;
    h["sequence"] = e.sequence;
    h["recordedAt"] = FormatTimeNs(e.recorded_at_ns);
    h["kind"] = e.decision ? "decision" : "input";
    h["type"] = e.type;
    h["actor"] = e.actor;
    h["uid"] = e.uid;
    h["summary"] = e.summary;
    if (!e.reason.empty()) h["reason"] = e.reason;
    if (!e.message.empty()) h["message"] = e.message;
    if (!e.cluster_queue.empty()) h["clusterQueue"] = e.cluster_queue;
    if (!e.flavors.empty()) h["flavors"] = e.flavors;
    if (e.borrowing) h["borrowing"] = true;
    if (e.generation != 0) h["generation"] = e.generation;
    if (e.quota_version != 0) h["quotaVersion"] = e.quota_version;
    if (e.type == "admitted") h["checkVersions"] = e.check_versions;
    if (!e.check.empty()) {
      h["check"] = {{"name", e.check}, {"state", e.check_state}};
      if (!e.via_field_manager.empty()) h["check"]["viaFieldManager"] = e.via_field_manager;
    }
    if (!e.resource.empty() || e.shortfall_milli != 0) {
      h["shortfall"] = {
          {"resource", e.resource}, {"flavor", e.flavor}, {"milli", e.shortfall_milli}};
    }
    if (!e.role.empty()) h["preemption"] = {{"role", e.role}, {"other", e.other}};
    if (e.decision) {
      h["causationSequence"] = e.causation;
      h["engineVersion"] = e.engine_version;
    }
    if (!e.idempotency_key.empty()) h["idempotencyKey"] = e.idempotency_key;
    history.push_back(std::move(h));
  }
  out["history"] = history;
  return out.dump(2);
}

namespace {

// The page's head, its style, and the title block.
void HtmlHead(const Explanation& x, std::ostringstream& out) {
  out << R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>)"
      << Html(x.ns + "/" + x.name) << R"( - admission history</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .5em}
.sub{color:#5a6372}.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
.now{border:1px solid #d5dae3;border-left:6px solid #888;border-radius:6px;padding:.8em 1em;background:#f8f9fb}
.now.Pending{border-left-color:#e0a100}.now.QuotaReserved{border-left-color:#3b82f6}
.now.Admitted{border-left-color:#16a34a}.now.Evicting{border-left-color:#dc2626}
.now .phase{font-weight:700;font-size:1.15em}
.bar{position:relative;height:34px;border-radius:6px;overflow:hidden;border:1px solid #d5dae3;margin:.4em 0;background:#f8f9fb}
.seg{position:absolute;top:0;bottom:0;display:flex;align-items:center;justify-content:center;color:#fff;font-size:12px;white-space:nowrap;overflow:hidden;box-shadow:inset -1px 0 #fff}
.seg.mark{width:2px;margin-left:-1px;box-shadow:none}
.axis{display:flex;justify-content:space-between;color:#5a6372;font-size:12px}
.queued{background:#e0a100}.pending{background:#f59e0b}.reserved{background:#3b82f6}.check{background:#8b5cf6}
.admitted{background:#16a34a}.running{background:#0f766e}.evicting{background:#dc2626}.released{background:#64748b}
.final{background:#1f2937}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35em .5em;border-bottom:1px solid #e6e9ef;vertical-align:top}
th{font-size:12px;color:#5a6372;font-weight:600}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:.4em;vertical-align:middle}
.kind{font-size:11px;color:#5a6372;text-transform:uppercase;letter-spacing:.04em}
.legend span{margin-right:1em;font-size:12px}
.steps{margin:.8em 0;line-height:2.2}.step{white-space:nowrap;border:1px solid #d5dae3;border-radius:12px;padding:.15em .6em;font-size:12.5px;background:#fff}
.arrow{color:#94a3b8;margin:0 .35em}
</style></head><body>
)";
  out << "<h1>" << Html(x.ns + "/" + x.name) << "</h1>\n<div class=\"sub\">as of ledger sequence "
      << x.at;
  if (x.requested != x.at) out << " (end of the append holding sequence " << x.requested << ")";
  out << " &middot; " << Html(FormatTimeNs(x.at_time_ns)) << " &middot; engine v"
      << x.engine_version << "</div>\n";
}

// The workload's state now, with its checks.
void HtmlNow(const WorkloadNow& n, std::ostringstream& out) {
  out << "<h2>Now</h2>\n<div class=\"now " << Html(n.phase) << "\"><div class=\"phase\">"
      << Html(n.phase)
      << (n.cluster_queue.empty() ? "" : " in ClusterQueue " + Html(n.cluster_queue)) << "</div>\n";
  out << "<div>" << Html(n.blocked_by) << "</div>\n";
  if (!n.estimate.empty()) out << "<div class='estimate'>" << Html(n.estimate) << "</div>\n";
  if (!n.flavors.empty()) out << "<div class=\"mono\">admission: " << Html(n.flavors) << "</div>\n";
  if (!n.checks.empty()) {
    out << "<table><tr><th>check</th><th>state</th><th>since</th><th>report</th><th>message</th></"
           "tr>\n";
    for (const CheckNow& c : n.checks) {
      out << "<tr><td>" << Html(c.name) << "</td><td>" << Html(c.state) << "</td><td>"
          << Html(FormatTimeNs(c.since_ns)) << "</td><td>"
          << (c.report_sequence == 0
                  ? std::string("none yet")
                  : "#" + std::to_string(c.report_sequence) + " by " +
                        Html(c.reported_by + ViaFieldManagerNote(c.via_field_manager)))
          << "</td><td>" << Html(c.message) << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  out << "</div>\n";
}

// Its phases as a bar over time, its milestones in order, and their legend.
void HtmlTimeline(const Explanation& x, std::ostringstream& out) {
  const std::vector<Segment> segments = Segments(x);
  if (!segments.empty()) {
    // To scale: the axis runs from the submission to the end (a finish, rejection, ...) or, for
    // a workload still live, to the time explained; each phase is placed at its start and as
    // wide as it lasted. An instant (the end, an eviction released at once) is a 2px mark.
    const int64_t begin = segments.front().start_ns;
    const int64_t end = segments.back().css == "final"
                            ? segments.back().end_ns
                            : std::max(x.at_time_ns, segments.back().end_ns);
    const int64_t span = std::max<int64_t>(end - begin, 1);
    // A fraction of the span as a CSS percentage with 3 decimals ("12.345%").
    auto percent = [span](int64_t ns) {
      const int64_t thousandths = static_cast<int64_t>(
          (static_cast<__int128>(ns) * 100'000 + span / 2) / span);
      return std::to_string(thousandths / 1000) + "." +
             std::to_string(1000 + thousandths % 1000).substr(1) + "%";
    };
    out << "<h2>Timeline</h2>\n<div class=\"bar\">";
    for (const Segment& s : segments) {
      const bool instant = s.end_ns <= s.start_ns;
      out << "<div class=\"seg " << s.css << (instant ? " mark" : "") << "\" style=\"left:"
          << percent(s.start_ns - begin);
      if (!instant) out << ";width:" << percent(s.end_ns - s.start_ns);
      out << "\" title=\""
          << Html(s.label + ": " + FormatTimeNs(s.start_ns) + " .. " + FormatTimeNs(s.end_ns) +
                  " (" + Duration(s.end_ns - s.start_ns) + ")")
          << "\">" << (instant ? "" : Html(s.label)) << "</div>";
    }
    out << "</div>\n<div class=\"axis\"><span>" << Html(FormatTimeNs(begin)) << "</span><span>"
        << Html(Duration(end - begin)) << "</span><span>" << Html(FormatTimeNs(end))
        << "</span></div>\n";
    // Milestones in order, for reading the story left to right.
    out << "<div class=\"steps\">";
    bool first_step = true;
    for (const HistoryEntry& e : x.history) {
      const std::string cls = EntryClass(e);
      if (cls == "pending" && e.type != "starvationAlert") continue;  // reasons: in the table
      out << (first_step ? "" : "<span class=\"arrow\">&rarr;</span>") << "<span class=\"step\">"
          << "<i class=\"dot " << cls << "\"></i><b>"
          << Html(FormatTimeNs(e.recorded_at_ns).substr(11)) << "</b> " << Html(StepLabel(e))
          << "</span>";
      first_step = false;
    }
    out << "</div>\n";
    out << "<div class=\"legend\">";
    for (const char* c : {"queued", "pending", "reserved", "check", "admitted", "running",
                          "evicting", "released", "final"}) {
      out << "<span><i class=\"dot " << c << "\"></i>" << c << "</span>";
    }
    out << "</div>\n";
  }
}

// Every recorded event about it, one row each.
void HtmlHistory(const Explanation& x, std::ostringstream& out) {
  out << "<h2>History</h2>\n<table>\n<tr><th>#</th><th>time</th><th>event</th><th>what</th>"
         "<th>actor</th><th>versions</th></tr>\n";
  for (const HistoryEntry& e : x.history) {
    std::string versions;
    if (e.quota_version != 0) versions += "quota v" + std::to_string(e.quota_version);
    if (!e.check_versions.empty()) {
      versions += std::string(versions.empty() ? "" : ", ") + "checks";
      for (uint64_t v : e.check_versions) versions += " #" + std::to_string(v);
    }
    if (e.decision) {
      versions += std::string(versions.empty() ? "" : ", ") + "engine v" +
                  std::to_string(e.engine_version) + ", cause #" + std::to_string(e.causation);
    }
    out << "<tr><td class=\"mono\">" << e.sequence << "</td><td class=\"mono\">"
        << Html(FormatTimeNs(e.recorded_at_ns)) << "</td><td><i class=\"dot " << EntryClass(e)
        << "\"></i>" << Html(e.type) << "<div class=\"kind\">"
        << (e.decision ? "decision" : "input") << "</div></td><td>" << Html(e.summary);
    if (!e.flavors.empty() && e.type != "quotaReserved" && e.type != "workloadImported") {
      out << "<div class=\"mono\">" << Html(e.flavors) << "</div>";
    }
    out << "</td><td>" << Html(e.actor) << "</td><td class=\"mono\">" << Html(versions)
        << "</td></tr>\n";
  }
  out << "</table>\n<p class=\"sub\">Generated from the admission ledger by "
         "<span class=\"mono\">admitctl explain</span>: every row is a recorded event; "
         "the state above is the decider folded to sequence "
      << x.at << ".</p>\n</body></html>\n";
}

}  // namespace

std::string ExplainHtml(const Explanation& x) {
  std::ostringstream out;
  HtmlHead(x, out);
  HtmlNow(x.now, out);
  HtmlTimeline(x, out);
  HtmlHistory(x, out);
  return out.str();
}

Status WriteExplainPage(ledger::EventLog& log, const std::string& ns, const std::string& name,
                        const std::string& path) {
  auto x = Explain(log, ns, name, 0);
  if (!x.ok()) return x.status();
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return Status(Code::kIoError, "cannot write " + path);
  file << ExplainHtml(*x);
  file.close();
  if (!file) return Status(Code::kIoError, "cannot write " + path);
  return Status::Ok();
}

}  // namespace admission::replay
