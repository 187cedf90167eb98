// Forward simulation from the record (docs/whatif.md). One pass over the ledger gathers the
// recorded world; the decider, loaded with the state at `from`, is then run forward in logical
// time on a queue of inputs: the recorded arrivals, deletions, definitions and node events at
// their times, and the inputs the world would have sent in answer to the simulated decisions
// (check reports after their recorded delay from reservation, pods released after their
// recorded delay from admission, the workload finished after its run time).

#include "replay/forward.h"

#include "replay/forward_internal.h"

#include <algorithm>
#include <limits>
#include <set>

#include <capnp/message.h>

#include "projections/budget.h"
#include "projections/definitions.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "schema/fencing_token.h"
#include "schema/time_format.h"

namespace admission::replay {

using internal::RecordedWorkload;
using internal::RecordedWorld;
using internal::RuntimeModel;
using internal::Scheduled;
using internal::Simulation;

namespace {

using W = schema::Event::Body::Which;
constexpr int64_t kDefaultRuntimeNs = 3600LL * 1'000'000'000;
constexpr int kRepetitionsMax = 12;  // windows of repeated arrivals in a forecast

std::string Str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }
std::string_view View(capnp::Text::Reader t) { return std::string_view(t.cStr(), t.size()); }
std::string KeyOf(schema::WorkloadRef::Reader r) {
  return Str(r.getNamespace()) + "/" + Str(r.getName());
}

// What a change replaces: a definition's key, or the engine configuration.
std::string ChangeKey(schema::Event::Reader e) {
  if (e.getBody().isEngineConfigDefined()) return "EngineConfig//";
  return projections::DefinitionKey(e);
}

bool ModelledInput(W which) {
  return which == W::WORKLOAD_FINISHED || which == W::CHECK_STATE_REPORTED ||
         which == W::PODS_REPORTED || which == W::CLOCK_ADVANCED;
}

void NoteDecision(schema::Event::Reader e, RecordedWorld* world) {
  auto b = e.getBody();
  const int64_t at = e.getRecordedAtNs();
  auto find = [&](schema::WorkloadRef::Reader r) -> RecordedWorkload* {
    auto it = world->by_uid.find(Str(r.getUid()));
    return it == world->by_uid.end() ? nullptr : &it->second;
  };
  if (b.isQuotaReserved()) {
    if (auto* w = find(b.getQuotaReserved().getWorkload())) {
      w->reserved_ns[b.getQuotaReserved().getGeneration()] = at;
      w->cluster_queue = Str(b.getQuotaReserved().getAdmission().getClusterQueue());
    }
  } else if (b.isAdmitted()) {
    if (auto* w = find(b.getAdmitted().getWorkload())) {
      w->admitted_ns[b.getAdmitted().getGeneration()] = at;
    }
  } else if (b.isEvictionStarted()) {
    if (auto* w = find(b.getEvictionStarted().getWorkload())) {
      w->evicted_ns.emplace(b.getEvictionStarted().getGeneration(), at);
    }
  }
}

void NoteInput(schema::Event::Reader e, Sequence seq, RecordedWorld* world) {
  auto b = e.getBody();
  const int64_t at = e.getRecordedAtNs();
  if (b.isWorkloadSubmitted() || b.isWorkloadImported()) {
    auto wl = b.isWorkloadSubmitted() ? b.getWorkloadSubmitted().getWorkload()
                                      : b.getWorkloadImported().getWorkload();
    RecordedWorkload& w = world->by_uid[Str(wl.getUid())];
    w.key = Str(wl.getNamespace()) + "/" + Str(wl.getName());
    w.lq_key = Str(wl.getNamespace()) + "/" + Str(wl.getQueueName());
    w.priority_class = Str(wl.getPriorityClassName());
    w.expected_runtime_ns = wl.getExpectedRuntimeNs();
    w.submitted_ns = at;
    w.submitted_seq = seq;
    if (b.isWorkloadSubmitted()) world->submissions.emplace_back(at, std::string());
    world->uid_of_key[w.key] = Str(wl.getUid());
  } else if (b.isWorkloadFinished()) {
    auto ref = b.getWorkloadFinished().getWorkload();
    std::string uid = Str(ref.getUid());
    if (uid.empty()) uid = world->uid_of_key[KeyOf(ref)];
    if (auto it = world->by_uid.find(uid); it != world->by_uid.end()) it->second.finished_ns = at;
  } else if (b.isPodsReported()) {
    const auto report = b.getPodsReported().getReport();
    auto token = schema::ParseFencingToken(View(b.getPodsReported().getFencingToken()));
    auto it = token ? world->by_uid.find(std::string(token->uid)) : world->by_uid.end();
    if (it == world->by_uid.end()) return;
    if (report == schema::PodsReport::RELEASED) {
      it->second.released_ns.emplace(token->generation, at);
    } else if (report == schema::PodsReport::TERMINATED || report == schema::PodsReport::FINISHED) {
      auto evicted = it->second.evicted_ns.find(token->generation);
      if (evicted != it->second.evicted_ns.end()) {
        it->second.pods_gone_delays.push_back(at - evicted->second);
        it->second.evicted_ns.erase(evicted);  // one gone report per eviction
      }
    }
  } else if (b.isCheckStateReported()) {
    auto r = b.getCheckStateReported();
    auto it = world->by_uid.find(Str(r.getWorkload().getUid()));
    if (it == world->by_uid.end()) it = world->by_uid.find(world->uid_of_key[KeyOf(r.getWorkload())]);
    if (it == world->by_uid.end()) return;
    auto reserved = it->second.reserved_ns.find(r.getGeneration());
    if (reserved == it->second.reserved_ns.end()) return;
    RecordedWorkload::Report report{r.getGeneration(), Str(r.getCheck()), Str(e.getActor()),
                                    Str(r.getMessage()), at - reserved->second, r.getState(),
                                    r.getRequeueAfterNs(), at};
    it->second.reports.push_back(std::move(report));
  }
}

}  // namespace

std::optional<int64_t> RecordedWorkload::LastStart() const {
  if (admitted_ns.empty()) return std::nullopt;
  auto released = released_ns.find(admitted_ns.rbegin()->first);
  return released != released_ns.end() ? released->second : admitted_ns.rbegin()->second;
}

std::optional<int64_t> RecordedWorkload::RecordedRuntime() const {
  std::optional<int64_t> start = LastStart();
  if (!finished_ns || !start) return std::nullopt;
  return std::max<int64_t>(0, *finished_ns - *start);
}

Status internal::Gather(ledger::EventLog& log, const ForwardOptions& options,
              const std::set<std::string>& changed_keys, RecordedWorld* world,
              OutcomeFold* recorded_before, OutcomeFold* recorded) {
  const ledger::Head head = log.GetHead();
  Sequence next = 1;
  Status failure;
  bool started = options.from_ns == 0;
  while (next <= head.sequence && failure.ok()) {
    auto shown = log.Scan(next, 4096, [&](Sequence seq, std::string_view bytes) {
      next = seq + 1;
      auto decoded = schema::DecodeEvent(bytes);
      if (!decoded.ok()) {
        failure = Status(Code::kCorruption, "event " + std::to_string(seq) + ": " +
                                                decoded.status().message());
        return false;
      }
      auto e = decoded->root();
      const int64_t at = e.getRecordedAtNs();
      world->last_ns = std::max(world->last_ns, at);
      const bool decision = schema::IsDecision(e.getBody().which());
      decision ? NoteDecision(e, world) : NoteInput(e, seq, world);
      if (e.getBody().isWorkloadSubmitted()) world->submissions.back().second = std::string(bytes);
      if (!started && at >= options.from_ns) started = true;
      if (!started) {
        if (recorded_before != nullptr) recorded_before->Apply(e);
        if (e.getEndsBatch() || decision) world->start_after = seq;
      }
      if (recorded != nullptr && (options.to_ns == 0 || at <= options.to_ns)) recorded->Apply(e);
      if (started && !decision && !ModelledInput(e.getBody().which()) &&
          (options.to_ns == 0 || at <= options.to_ns)) {
        const std::string key = ChangeKey(e);
        if (key.empty() || changed_keys.count(key) == 0) {
          world->passthrough.emplace_back(at, std::string(bytes));
        }
      }
      return true;
    });
    if (!shown.ok()) return shown.status();
    if (*shown == 0) break;
  }
  return failure;
}

namespace {


}  // namespace

std::optional<int64_t> NearestRank(std::vector<int64_t> v, int q) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t rank = (v.size() * static_cast<size_t>(q) + 99) / 100;
  return v[std::max<size_t>(rank, 1) - 1];
}

const char* RuntimeSourceName(RuntimeSource source) {
  switch (source) {
    case RuntimeSource::kRecorded: return "recorded";
    case RuntimeSource::kStillRunning: return "still running at the record's end (a lower bound)";
    case RuntimeSource::kExpected: return "its expected runtime";
    case RuntimeSource::kClassMedian: return "the median of its LocalQueue and priority class";
    case RuntimeSource::kAllMedian: return "the median of every recorded run";
    case RuntimeSource::kDefault: return "1h (nothing recorded ran to go by)";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// The outcome fold.

void OutcomeFold::Apply(schema::Event::Reader e) {
  usage_.Apply(e.getSequence(), e);
  auto b = e.getBody();
  const int64_t at = e.getRecordedAtNs();
  if (schema::IsDecision(b.which())) ++decisions_;
  auto of = [&](schema::WorkloadRef::Reader r) -> WorkloadOutcome* {
    auto it = workloads_.find(KeyOf(r));
    if (it == workloads_.end()) {
      auto uid = uid_key_.find(Str(r.getUid()));
      if (uid == uid_key_.end()) return nullptr;
      it = workloads_.find(uid->second);
    }
    return it == workloads_.end() ? nullptr : &it->second;
  };
  switch (b.which()) {
    case W::WORKLOAD_SUBMITTED:
    case W::WORKLOAD_IMPORTED: {
      auto wl = b.isWorkloadSubmitted() ? b.getWorkloadSubmitted().getWorkload()
                                        : b.getWorkloadImported().getWorkload();
      WorkloadOutcome o;
      o.key = Str(wl.getNamespace()) + "/" + Str(wl.getName());
      o.uid = Str(wl.getUid());
      o.local_queue = o.key.substr(0, o.key.find('/')) + "/" + Str(wl.getQueueName());
      o.priority_class = Str(wl.getPriorityClassName());
      o.submitted_ns = at;
      uid_key_[o.uid] = o.key;
      workloads_[o.key] = std::move(o);
      break;
    }
    case W::QUOTA_RESERVED:
      if (auto* o = of(b.getQuotaReserved().getWorkload())) {
        auto admission = b.getQuotaReserved().getAdmission();
        o->cluster_queue = Str(admission.getClusterQueue());
        std::string text;
        for (auto ps : admission.getPodSetAssignments()) {
          text += (text.empty() ? "" : "; ") + Str(ps.getName()) + ":";
          for (auto f : ps.getFlavors()) text += " " + Str(f.getResource()) + "=" + Str(f.getFlavor());
        }
        last_admission_[o->key] = text;
      }
      break;
    case W::ADMITTED:
      if (auto* o = of(b.getAdmitted().getWorkload()); o != nullptr && !o->admitted_ns) {
        o->admitted_ns = at;
        o->admission = last_admission_[o->key];
      }
      break;
    case W::PREEMPTED:
      if (auto* o = of(b.getPreempted().getWorkload())) ++o->preemptions;
      break;
    case W::REJECTED:
      if (auto* o = of(b.getRejected().getWorkload())) o->rejected = true;
      break;
    case W::DEACTIVATED:
      if (auto* o = of(b.getDeactivated().getWorkload())) o->rejected = true;
      break;
    case W::WORKLOAD_FINISHED:
      if (auto* o = of(b.getWorkloadFinished().getWorkload()); o != nullptr && !o->finished_ns) {
        o->finished_ns = at;
      }
      break;
    case W::LOCAL_QUEUE_DEFINED: {
      auto lq = b.getLocalQueueDefined();
      lq_cluster_queue_[Str(lq.getNamespace()) + "/" + Str(lq.getName())] =
          Str(lq.getClusterQueue());
      break;
    }
    default:
      break;
  }
}

RunOutcome OutcomeFold::Finish(int64_t end_ns) const {
  RunOutcome out;
  out.workloads = workloads_;
  // A workload never reserved (pending at the end, or rejected before) counts in the
  // ClusterQueue its LocalQueue points to.
  for (auto& [key, w] : out.workloads) {
    auto lq = lq_cluster_queue_.find(w.local_queue);
    if (w.cluster_queue.empty() && lq != lq_cluster_queue_.end()) w.cluster_queue = lq->second;
  }
  out.usage.assign(usage_.closed().begin(), usage_.closed().end());
  for (projections::Interval& open : usage_.OpenUntil(end_ns / 1'000'000)) {
    out.usage.push_back(std::move(open));
  }
  out.quota = usage_.QuotaUntil(end_ns / 1'000'000);
  out.end_ns = end_ns;
  out.decisions = decisions_;
  return out;
}

// ---------------------------------------------------------------------------------------------
// The simulation.

Simulation::Simulation(const RecordedWorld& world, std::unique_ptr<projections::Engine> engine,
                       Sequence after, RuntimeModel model, ForwardResult* result)
    : world_(world), engine_(std::move(engine)), seq_(after), model_(model), result_(result) {
  // Run times and check delays to model with: every recorded one, or (forecast) those known at
  // model.as_of_ns.
  const int q = model_.forecast ? model_.quantile : 50;
  std::map<std::string, std::vector<int64_t>> by_class, by_check;
  std::vector<int64_t> all;
  for (const auto& [uid, w] : world_.by_uid) {
    std::optional<int64_t> r = w.RecordedRuntime();
    if (r && (!model_.forecast || *w.finished_ns <= model_.as_of_ns)) {
      by_class[w.lq_key + "|" + w.priority_class].push_back(*r);
      all.push_back(*r);
    }
    for (const RecordedWorkload::Report& rep : w.reports) {
      if (!model_.forecast || rep.at_ns <= model_.as_of_ns) by_check[rep.check].push_back(rep.delay_ns);
    }
  }
  for (auto& [cls, runs] : by_class) class_runtime_[cls] = NearestRank(std::move(runs), q).value_or(-1);
  for (auto& [check, delays] : by_check) check_delay_[check] = NearestRank(std::move(delays), 50).value_or(-1);
  all_runtime_ = NearestRank(std::move(all), q).value_or(-1);
}

int64_t Simulation::RuntimeOf(const std::string& uid) {
  auto alias = original_uid_.find(uid);
  auto it = world_.by_uid.find(alias == original_uid_.end() ? uid : alias->second);
  RuntimeSource source = RuntimeSource::kDefault;
  int64_t runtime = kDefaultRuntimeNs;
  if (it != world_.by_uid.end()) {
    const RecordedWorkload& w = it->second;
    auto cls = class_runtime_.find(w.lq_key + "|" + w.priority_class);
    std::optional<int64_t> recorded = model_.forecast ? std::nullopt : w.RecordedRuntime();
    std::optional<int64_t> start = w.LastStart();
    if (recorded) {
      source = RuntimeSource::kRecorded, runtime = *recorded;
    } else if (!model_.forecast && start) {
      source = RuntimeSource::kStillRunning, runtime = std::max<int64_t>(0, world_.last_ns - *start);
    } else if (w.expected_runtime_ns > 0) {
      source = RuntimeSource::kExpected, runtime = w.expected_runtime_ns;
    } else if (cls != class_runtime_.end()) {
      source = RuntimeSource::kClassMedian, runtime = cls->second;
    } else if (all_runtime_ >= 0) {
      source = RuntimeSource::kAllMedian, runtime = all_runtime_;
    }
    if (result_ != nullptr && result_->runtime_source.emplace(w.key, source).second) {
      ++result_->runtime_sources[source];
    }
  }
  return runtime;
}

// An input's bytes with the envelope the decider reads: sequence, time, version, batch end.
std::string Simulation::Stamp(const std::string& bytes, int64_t at, bool ends_batch) {
  auto decoded = schema::DecodeEvent(bytes);
  capnp::MallocMessageBuilder m;
  m.setRoot(decoded->root());
  auto e = m.getRoot<schema::Event>();
  e.setSequence(++seq_);
  e.setRecordedAtNs(at);
  e.setEngineVersion(projections::kEngineVersion);
  e.setEndsBatch(ends_batch);
  e.setIdempotencyKey("");
  return schema::EncodeEvent(m);
}

void Simulation::ScheduleChecks(const projections::WorkloadState& wl, int64_t at) {
  const RecordedWorkload* w = nullptr;
  if (auto it = world_.by_uid.find(wl.uid); it != world_.by_uid.end()) w = &it->second;
  for (const auto& [check, cs] : wl.checks) {
    if (cs.state != projections::CheckState::kPending) continue;
    auto spec = engine_->admission_checks().find(check);
    if (spec == engine_->admission_checks().end() ||
        spec->second.controller == projections::kBudgetController) {
      continue;
    }
    // The recorded report for this generation, else the workload's last, else Ready after the
    // check's median delay.
    const RecordedWorkload::Report* pick = nullptr;
    static const std::vector<RecordedWorkload::Report> kNoReports;
    // Both lvalues: a reference into the record, not a copy `pick` would outlive.
    const std::vector<RecordedWorkload::Report>& reports = w != nullptr ? w->reports : kNoReports;
    for (const auto& r : reports) {
      if (r.check != check || (model_.forecast && r.at_ns > model_.as_of_ns)) continue;
      if (pick == nullptr || r.generation <= wl.generation) pick = &r;
    }
    capnp::MallocMessageBuilder m;
    auto e = m.initRoot<schema::Event>();
    e.setActor(spec->second.controller);
    auto rep = e.initBody().initCheckStateReported();
    auto ref = rep.initWorkload();
    ref.setNamespace(wl.ns);
    ref.setName(wl.name);
    ref.setUid(wl.uid);
    rep.setCheck(check);
    rep.setGeneration(wl.generation);
    int64_t delay = 0;
    if (pick != nullptr) {
      rep.setState(pick->state);
      rep.setMessage(pick->message);
      rep.setRequeueAfterNs(pick->requeue_after_ns);
      delay = pick->delay_ns;
    } else {
      rep.setState(schema::CheckState::READY);
      auto median = check_delay_.find(check);
      delay = median == check_delay_.end() ? 0 : median->second;
    }
    Schedule(at + delay, schema::EncodeEvent(m));
  }
}

void Simulation::OnDecision(schema::Event::Reader d, int64_t at) {
  auto b = d.getBody();
  if (b.isQuotaReserved()) {
    auto it = engine_->workloads().find(KeyOf(b.getQuotaReserved().getWorkload()));
    if (it != engine_->workloads().end()) ScheduleChecks(it->second, at);
  } else if (b.isAdmitted()) {
    auto a = b.getAdmitted();
    const std::string uid = Str(a.getWorkload().getUid());
    // The pods' release after its recorded delay from admission; none when the record admitted
    // it and never released pods (a runtime that was not there); at once when it never ran.
    int64_t release_delay = 0;
    bool release = true;
    if (auto w = world_.by_uid.find(uid); w != world_.by_uid.end() && !w->second.admitted_ns.empty()) {
      const auto& rec = w->second;
      release = !rec.released_ns.empty();
      for (const auto& [gen, admitted] : rec.admitted_ns) {
        auto rel = rec.released_ns.find(gen);
        if (rel == rec.released_ns.end()) continue;
        release_delay = std::max<int64_t>(0, rel->second - admitted);
        break;
      }
    }
    const int64_t runtime = RuntimeOf(uid);
    if (release) {
      capnp::MallocMessageBuilder pods;
      auto pr = pods.initRoot<schema::Event>().initBody().initPodsReported();
      pr.setWorkload(a.getWorkload());
      pr.setReport(schema::PodsReport::RELEASED);
      pr.setFencingToken(a.getFencingToken());
      Schedule(at + release_delay, schema::EncodeEvent(pods));
    }
    capnp::MallocMessageBuilder fin;
    fin.initRoot<schema::Event>().initBody().initWorkloadFinished().setWorkload(a.getWorkload());
    Schedule(at + release_delay + runtime, schema::EncodeEvent(fin), KeyOf(a.getWorkload()),
             Str(a.getFencingToken()));
  } else if (b.isEvictionStarted()) {
    auto it = engine_->workloads().find(KeyOf(b.getEvictionStarted().getWorkload()));
    if (it == engine_->workloads().end() || !it->second.pods_released) return;
    // Gone after the recorded delay of this workload's eviction of the same rank, else at once.
    int64_t delay = 0;
    if (auto w = world_.by_uid.find(it->second.uid); w != world_.by_uid.end()) {
      const size_t rank = evictions_[it->second.uid]++;
      const auto& delays = w->second.pods_gone_delays;
      if (rank < delays.size()) delay = delays[rank];
    }
    capnp::MallocMessageBuilder pods;
    auto pr = pods.initRoot<schema::Event>().initBody().initPodsReported();
    pr.setWorkload(b.getEvictionStarted().getWorkload());
    pr.setReport(schema::PodsReport::TERMINATED);
    pr.setFencingToken(schema::FencingToken(it->second.uid, it->second.generation));
    Schedule(at + delay, schema::EncodeEvent(pods));
  }
}

void Simulation::SeedFromState(int64_t t0) {
  for (const auto& [key, wl] : engine_->workloads()) {
    if (wl.phase == projections::Phase::kReserved) {
      ScheduleChecks(wl, std::max(t0, wl.reserved_at_ns));
      continue;
    }
    if (wl.phase != projections::Phase::kAdmitted) continue;
    int64_t start = t0;
    bool release = !wl.pods_released;
    if (auto w = world_.by_uid.find(wl.uid); w != world_.by_uid.end()) {
      const RecordedWorkload& rec = w->second;
      auto released = rec.released_ns.find(wl.generation);
      auto admitted = rec.admitted_ns.find(wl.generation);
      if (wl.pods_released && released != rec.released_ns.end()) {
        start = released->second;
      } else if (!wl.pods_released && rec.released_ns.empty() &&
                 admitted != rec.admitted_ns.end()) {
        // The record never released its pods (no runtime reported them): its run counts from
        // its admission (RecordedWorkload::LastStart), and no release is sent (as OnDecision).
        start = admitted->second;
        release = false;
      }
    }
    capnp::MallocMessageBuilder ref_message;
    auto ref = ref_message.initRoot<schema::WorkloadRef>();
    ref.setNamespace(wl.ns);
    ref.setName(wl.name);
    ref.setUid(wl.uid);
    if (release) {
      capnp::MallocMessageBuilder pods;
      auto pr = pods.initRoot<schema::Event>().initBody().initPodsReported();
      pr.setWorkload(ref.asReader());
      pr.setReport(schema::PodsReport::RELEASED);
      pr.setFencingToken(wl.fencing_token);
      Schedule(t0, schema::EncodeEvent(pods));
    }
    capnp::MallocMessageBuilder fin;
    fin.initRoot<schema::Event>().initBody().initWorkloadFinished().setWorkload(ref.asReader());
    Schedule(std::max(t0, start + RuntimeOf(wl.uid)), schema::EncodeEvent(fin), key,
             wl.fencing_token);
  }
}

void Simulation::SeedArrivals() {
  if (!model_.forecast || model_.repeat_arrivals_ns <= 0 || world_.submissions.empty()) return;
  if (window_ns_ == 0) {
    const int64_t history = model_.as_of_ns - world_.submissions.front().first;
    window_ns_ = std::max<int64_t>(1'000'000'000, std::min(model_.repeat_arrivals_ns, history));
    arrivals_until_ns_ = model_.as_of_ns;
  }
  const int64_t from = model_.as_of_ns - window_ns_;
  const int64_t shift = arrivals_until_ns_ + window_ns_ - model_.as_of_ns;
  ++repetitions_;
  auto first = std::lower_bound(world_.submissions.begin(), world_.submissions.end(), from,
                                [](const auto& s, int64_t t) { return s.first < t; });
  for (auto it = first; it != world_.submissions.end() && it->first < model_.as_of_ns; ++it) {
    auto decoded = schema::DecodeEvent(it->second);
    if (!decoded.ok()) continue;
    capnp::MallocMessageBuilder m;
    auto wl = m.initRoot<schema::Event>().initBody().initWorkloadSubmitted();
    wl.setWorkload(decoded->root().getBody().getWorkloadSubmitted().getWorkload());
    auto w = wl.getWorkload();
    const std::string suffix = "-next" + std::to_string(repetitions_);
    original_uid_[Str(w.getUid()) + suffix] = Str(w.getUid());
    w.setName(Str(w.getName()) + suffix);
    w.setUid(Str(w.getUid()) + suffix);
    if (w.getCreationTimestampNs() != 0) w.setCreationTimestampNs(w.getCreationTimestampNs() + shift);
    Schedule(it->first + shift, schema::EncodeEvent(m));
  }
  arrivals_until_ns_ += window_ns_;
}

Status Simulation::Run(uint64_t batches_max, int64_t until_ns, OutcomeFold* fold,
                       const std::string& stop_when_admitted) {
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  for (uint64_t batches = 0; batches < batches_max; ++batches) {
    // Forecast: the next window of repeated arrivals once the simulation reaches it.
    while (window_ns_ > 0 && arrivals_until_ns_ < until_ns && repetitions_ < kRepetitionsMax &&
           (queue_.empty() || queue_.begin()->first.first >= arrivals_until_ns_)) {
      SeedArrivals();
    }
    const int64_t next_input = queue_.empty() ? kNever : queue_.begin()->first.first;
    const int64_t timer = engine_->next_timer_ns();
    const int64_t at = std::min(next_input, timer < 0 ? kNever : timer);
    if (at == kNever || at > until_ns) return Status::Ok();
    std::vector<std::string> inputs;
    while (!queue_.empty() && queue_.begin()->first.first == at) {
      Scheduled s = std::move(queue_.begin()->second);
      queue_.erase(queue_.begin());
      if (!s.token.empty()) {  // a finish: only of the admission it was scheduled for
        auto it = engine_->workloads().find(s.key);
        if (it == engine_->workloads().end() || it->second.fencing_token != s.token ||
            it->second.phase != projections::Phase::kAdmitted) {
          continue;
        }
      }
      inputs.push_back(std::move(s.bytes));
    }
    if (inputs.empty()) {
      capnp::MallocMessageBuilder m;
      m.initRoot<schema::Event>().initBody().initClockAdvanced().setToNs(at);
      inputs.push_back(schema::EncodeEvent(m));
    }
    uint64_t last = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string stamped = Stamp(inputs[i], at, i + 1 == inputs.size());
      auto event = schema::DecodeEvent(stamped);
      if (!event.ok()) return event.status();
      projections::InputVerdict verdict = engine_->Validate(event->root());
      if (!verdict.status.ok() || verdict.noop) continue;  // as intake would refuse it
      engine_->ApplyInput(event->root());
      if (fold != nullptr) fold->Apply(event->root());
      last = event->root().getSequence();
    }
    if (last == 0) last = seq_;
    auto batch = engine_->EndBatchDecisions(last, at, projections::kEngineVersion);
    if (result_ != nullptr) ++result_->simulated_batches;
    bool stop = false;
    for (size_t i = 0; i < batch.size(); ++i) {
      auto d = batch.events[i].get();
      d.setSequence(++seq_);
      if (fold != nullptr) fold->Apply(d.asReader());
      OnDecision(d.asReader(), at);
      stop = stop || (!stop_when_admitted.empty() && d.getBody().isAdmitted() &&
                      KeyOf(d.getBody().getAdmitted().getWorkload()) == stop_when_admitted);
    }
    if (stop) return Status::Ok();
  }
  return Status(Code::kOverloaded,
                "the simulation did not settle within " + std::to_string(batches_max) +
                    " batches");
}

Result<ForwardResult> Forward(ledger::EventLog& log, const ForwardOptions& options) {
  std::set<std::string> changed_keys;
  for (const std::string& bytes : options.changes) {
    auto e = schema::DecodeEvent(bytes);
    if (!e.ok()) return e.status();
    const auto which = e->root().getBody().which();
    if (projections::DefinitionKey(e->root()).empty() && which != W::ENGINE_CONFIG_DEFINED &&
        which != W::OBJECT_DELETED) {
      return Status(Code::kInvalidArgument,
                    std::string("a change is a definition, a deletion of one or an engine "
                                "configuration, not ") + schema::BodyName(e->root()));
    }
    const std::string key = ChangeKey(e->root());
    if (!key.empty()) changed_keys.insert(key);
  }
  RecordedWorld world;
  OutcomeFold before, recorded;
  Status gathered = internal::Gather(log, options, changed_keys, &world, &before, &recorded);
  if (!gathered.ok()) return gathered;
  if (options.from_ns > world.last_ns) {
    return Status(Code::kInvalidArgument,
                  "from " + FormatRfc3339(options.from_ns) + " is after the ledger's last event (" +
                      (world.last_ns == 0 ? std::string("none") : FormatRfc3339(world.last_ns)) +
                      ")");
  }
  ForwardResult result;
  result.from_ns = options.from_ns;
  result.to_ns = options.to_ns == 0 ? world.last_ns : options.to_ns;
  auto start = FoldToSequence(log, world.start_after);
  if (world.start_after == 0) start = StateAt{Genesis().engine, 0, 0};
  if (!start.ok()) return start.status();
  const Sequence after = world.start_after;
  int64_t t0 = std::max<int64_t>(options.from_ns, start->engine->now_ns());
  if (options.from_ns == 0 && !world.passthrough.empty()) t0 = world.passthrough.front().first;
  Simulation sim(world, std::move(start->engine), after, RuntimeModel{}, &result);
  sim.SeedFromState(t0);
  for (const std::string& change : options.changes) sim.Schedule(t0, change);
  for (const auto& [at, bytes] : world.passthrough) sim.Schedule(std::max(at, t0), bytes);
  OutcomeFold simulated = before;
  Status ran = sim.Run(options.batches_max, result.to_ns + options.drain_ns, &simulated);
  if (!ran.ok()) return ran;
  result.recorded = recorded.Finish(result.to_ns);
  result.simulated = simulated.Finish(result.to_ns);
  return result;
}

}  // namespace admission::replay
