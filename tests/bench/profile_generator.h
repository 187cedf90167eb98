#pragma once
// Kueue's scheduler performance profile (its baseline when the generator file is not there)
// simulated in logical time through ops::Service: shared by replay_bench (a 5M-event ledger)
// and retention_bench (10 million workloads).

#include <capnp/message.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "kueue_profile.h"

namespace admission::bench {

inline constexpr int64_t kStartNs = 1'795'910'400'000'000'000;  // 2026-11-29T00:00:00Z
inline constexpr int64_t kNsPerMs = 1'000'000;
inline constexpr size_t kInputsPerAppendMax = 1024;

// Kueue's baseline profile, used when the file is not there.
inline std::vector<CohortClass> BuiltInBaseline() {
  QueuesSet qs;
  qs.class_name = "cq";
  qs.count = 6;
  qs.nominal_milli = 20'000;
  qs.borrowing_limit_milli = 100'000;
  qs.reclaim = schema::ReclaimWithinCohortPolicy::ANY;
  qs.within = schema::WithinClusterQueuePolicy::LOWER_PRIORITY;
  qs.sets = {{350, 100, {{"small", 200, 50, 1000}}},
             {100, 500, {{"medium", 500, 100, 5000}}},
             {50, 1200, {{"large", 1000, 200, 20000}}}};
  return {CohortClass{"cohort", 5, {qs}}};
}

inline std::optional<std::vector<CohortClass>> LoadProfile(const std::string& path) {
  std::string error;
  auto cohorts = LoadKueueProfile(path, 1, &error);
  if (!cohorts) {
    std::printf("# %s: %s; using the built-in baseline profile\n", path.c_str(), error.c_str());
  }
  return cohorts;
}

// ------------------------------------------------------------------------------------------
// Generation: the profile simulated in logical time through ops::Service.

struct SimWorkload {
  std::string ns, name, uid;
  int32_t priority = 0;
  int64_t cpu_milli = 0;
  int64_t runtime_ms = 0;
  int64_t creation_ms = 0;
  uint64_t running_generation = 0;
};

struct SimEvent {
  int64_t t_ms;
  int kind;  // 0 finish, 1 create (finishes first at an instant, as Kueue's runner)
  size_t wl;
  uint64_t generation;
  bool operator>(const SimEvent& o) const {
    return std::tie(t_ms, kind, wl) > std::tie(o.t_ms, o.kind, o.wl);
  }
};

class Generator {
 public:
  Generator(ops::Service& service, std::vector<CohortClass> profile,
            std::function<void(const std::string&)> fail, int64_t round_gap_ms = 1000)
      : service_(service), profile_(std::move(profile)), fail_(std::move(fail)),
        round_gap_ms_(round_gap_ms) {}

  Status Define();
  // Runs one round of the profile with fresh names; returns when every workload finished (or
  // can no longer be admitted).
  Status Round(uint64_t round);
  uint64_t decisions() const { return decisions_; }

 private:
  Status Record(std::vector<std::string>& inputs, int64_t t_ms);
  void Apply(const std::vector<std::string>& decisions, int64_t t_ms);

  ops::Service& service_;
  std::vector<CohortClass> profile_;
  std::vector<std::string> queues_;  // ClusterQueue = namespace = LocalQueue name
  std::vector<SimWorkload> wls_;
  std::unordered_map<std::string, size_t> index_;
  std::priority_queue<SimEvent, std::vector<SimEvent>, std::greater<SimEvent>> events_;
  int64_t base_ms_ = 0;  // logical ms of the round's t = 0 since kStartNs
  int64_t last_ms_ = 0;
  uint64_t decisions_ = 0;
  std::function<void(const std::string&)> fail_;
  int64_t round_gap_ms_ = 1000;  // logical time between the end of a round and the next
};

inline std::string Encode(const std::function<void(schema::Event::Body::Builder)>& fill) {
  capnp::MallocMessageBuilder message(512);
  fill(message.initRoot<schema::Event>().getBody());
  return schema::EncodeEvent(message);
}

inline Status Generator::Define() {
  std::vector<std::string> inputs;
  inputs.push_back(Encode([](auto b) { b.initFlavorDefined().setName("rf"); }));
  for (const CohortClass& cc : profile_) {
    for (int ci = 0; ci < cc.count; ++ci) {
      const std::string cohort = cc.class_name + "-" + std::to_string(ci);
      for (size_t qsi = 0; qsi < cc.queues_sets.size(); ++qsi) {
        const QueuesSet& qs = cc.queues_sets[qsi];
        for (int qi = 0; qi < qs.count; ++qi) {
          const std::string name =
              qs.class_name + "-" + std::to_string(qsi) + "-" + std::to_string(qi) + "-" + cohort;
          queues_.push_back(name);
          inputs.push_back(Encode([&](schema::Event::Body::Builder b) {
            FillProfileClusterQueue(b, name, cohort, qs.nominal_milli, qs.borrowing_limit_milli,
                                    qs.reclaim, qs.within);
          }));
          inputs.push_back(Encode([&](schema::Event::Body::Builder b) {
            auto lq = b.initLocalQueueDefined();
            lq.setNamespace(name);
            lq.setName(name);
            lq.setClusterQueue(name);
          }));
        }
      }
    }
  }
  return Record(inputs, 0);
}

inline Status Generator::Record(std::vector<std::string>& inputs, int64_t t_ms) {
  for (size_t i = 0; i < inputs.size(); i += kInputsPerAppendMax) {
    const size_t n = std::min(kInputsPerAppendMax, inputs.size() - i);
    std::vector<std::string> part(inputs.begin() + static_cast<ptrdiff_t>(i),
                                  inputs.begin() + static_cast<ptrdiff_t>(i + n));
    ops::IntakeOptions options;
    options.at_ns = kStartNs + (base_ms_ + t_ms) * kNsPerMs;
    options.actor = "replay_bench";
    auto outcome = service_.Record(part, options);
    if (!outcome.ok()) return outcome.status();
    decisions_ += outcome->decisions.size();
    Apply(outcome->decisions, t_ms);
  }
  inputs.clear();
  return Status::Ok();
}

inline void Generator::Apply(const std::vector<std::string>& decisions, int64_t t_ms) {
  for (const std::string& bytes : decisions) {
    auto decoded = schema::DecodeEvent(bytes);
    if (!decoded.ok()) {
      fail_("decision does not decode: " + decoded.status().ToString());
      continue;
    }
    auto body = decoded->root().getBody();
    auto find = [&](schema::WorkloadRef::Reader ref) -> SimWorkload* {
      auto it = index_.find(std::string(ref.getNamespace().cStr()) + "/" + ref.getName().cStr());
      return it == index_.end() ? nullptr : &wls_[it->second];
    };
    if (body.isAdmitted()) {
      SimWorkload* w = find(body.getAdmitted().getWorkload());
      if (w == nullptr) continue;
      w->running_generation = body.getAdmitted().getGeneration();
      events_.push(SimEvent{t_ms + w->runtime_ms, 0, static_cast<size_t>(w - wls_.data()),
                            w->running_generation});
    } else if (body.isEvictionStarted()) {
      if (SimWorkload* w = find(body.getEvictionStarted().getWorkload())) w->running_generation = 0;
    } else if (body.isQuotaReleased()) {
      if (SimWorkload* w = find(body.getQuotaReleased().getWorkload())) w->running_generation = 0;
    }
  }
}

inline Status Generator::Round(uint64_t round) {
  wls_.clear();
  index_.clear();
  size_t queue = 0;
  for (const CohortClass& cc : profile_) {
    for (int ci = 0; ci < cc.count; ++ci) {
      for (const QueuesSet& qs : cc.queues_sets) {
        for (int qi = 0; qi < qs.count; ++qi, ++queue) {
          for (size_t si = 0; si < qs.sets.size(); ++si) {
            const WorkloadsSet& ws = qs.sets[si];
            int64_t n = 0;
            for (int k = 0; k < ws.count; ++k) {
              for (size_t ti = 0; ti < ws.workloads.size(); ++ti) {
                const WorkloadTemplate& t = ws.workloads[ti];
                SimWorkload w;
                w.ns = queues_[queue];
                w.name = "r" + std::to_string(round) + "-" + t.class_name + "-" +
                         std::to_string(si) + "-" + std::to_string(k) + "-" + std::to_string(ti);
                w.uid = w.ns + "." + w.name;
                w.priority = t.priority;
                w.cpu_milli = t.request_milli;
                w.runtime_ms = t.runtime_ms;
                w.creation_ms = (++n) * ws.interval_ms;
                index_[w.ns + "/" + w.name] = wls_.size();
                events_.push(SimEvent{w.creation_ms, 1, wls_.size(), 0});
                wls_.push_back(std::move(w));
              }
            }
          }
        }
      }
    }
  }
  std::vector<std::string> inputs;
  while (!events_.empty()) {
    const int64_t t = events_.top().t_ms;
    while (!events_.empty() && events_.top().t_ms == t) {
      const SimEvent e = events_.top();
      events_.pop();
      SimWorkload& w = wls_[e.wl];
      if (e.kind == 1) {
        inputs.push_back(Encode([&](schema::Event::Body::Builder b) {
          auto wl = b.initWorkloadSubmitted().initWorkload();
          wl.setNamespace(w.ns);
          wl.setName(w.name);
          wl.setUid(w.uid);
          wl.setQueueName(w.ns);
          wl.setHasPriority(true);
          wl.setPriority(w.priority);
          wl.setCreationTimestampNs(kStartNs + (base_ms_ + w.creation_ms) * kNsPerMs);
          auto ps = wl.initPodSets(1)[0];
          ps.setName("main");
          ps.setCount(1);
          auto req = ps.initRequests(1)[0];
          req.setName("cpu");
          req.setMilli(w.cpu_milli);
        }));
      } else if (w.running_generation == e.generation && e.generation != 0) {
        inputs.push_back(Encode([&](schema::Event::Body::Builder b) {
          auto f = b.initWorkloadFinished();
          auto ref = f.initWorkload();
          ref.setNamespace(w.ns);
          ref.setName(w.name);
          ref.setUid(w.uid);
          f.setMessage("By test runner");
        }));
        w.running_generation = 0;
      }
    }
    if (!inputs.empty()) ADM_RETURN_IF_ERROR(Record(inputs, t));
    last_ms_ = std::max(last_ms_, t);
  }
  base_ms_ += last_ms_ + round_gap_ms_;
  last_ms_ = 0;
  return Status::Ok();
}

}  // namespace admission::bench
