// admitd's watches: which events a watcher is shown (its kinds, namespaces, ClusterQueues and
// checks, as the policy narrowed them), the pump that pushes them a page at a time, and the
// end of a watch (fallen behind, refused by a reloaded policy, or closed by its caller).

#include "ops/rpc/server.h"

#include <algorithm>

#include <capnp/dynamic.h>
#include <spdlog/spdlog.h>

#include "ops/rpc/daemon_internal.h"
#include "schema/event_codec.h"

namespace admission::ops::rpc {

namespace {

// Reads of the ledger one watcher pump makes before it yields to the loop.
constexpr int kPumpReadsMax = 16;

bool In(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The workload an event is about, if any: (namespace, name) of its body's `workload` field
// (a WorkloadRef or a Workload), or a revocation's target workload.
std::optional<std::pair<std::string, std::string>> WorkloadOf(schema::Event::Reader event) {
  capnp::DynamicStruct::Reader body =
      capnp::DynamicStruct::Reader(event).get("body").as<capnp::DynamicStruct>();
  KJ_IF_MAYBE(field, body.which()) {
    auto value = body.get(*field);
    if (value.getType() != capnp::DynamicValue::STRUCT) return std::nullopt;
    auto member = value.as<capnp::DynamicStruct>();
    if (event.getBody().which() == schema::Event::Body::REVOCATION_REQUESTED) {
      auto target = event.getBody().getRevocationRequested().getTarget();
      if (!target.isWorkload()) return std::nullopt;
      return std::make_pair(std::string(target.getWorkload().getNamespace()),
                            std::string(target.getWorkload().getName()));
    }
    KJ_IF_MAYBE(w, member.getSchema().findFieldByName("workload")) {
      auto ref = member.get(*w).as<capnp::DynamicStruct>();
      return std::make_pair(std::string(ref.get("namespace").as<capnp::Text>().cStr()),
                            std::string(ref.get("name").as<capnp::Text>().cStr()));
    }
  }
  return std::nullopt;
}

// Whether a watch narrowed to `now` shows nothing `allowed` would not (empty: everything).
bool Within(const std::vector<std::string>& now, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  if (now.empty()) return false;
  return std::all_of(now.begin(), now.end(), [&](const std::string& v) { return In(allowed, v); });
}

}  // namespace

void Daemon::AfterAppend(uint64_t head_before, uint64_t head) {
  if (head == head_before) return;
  std::vector<uint64_t> behind;
  for (auto& [id, w] : watchers_) {
    if (w->busy) {
      w->appended_while_busy += head - head_before;
      if (w->appended_while_busy > kWatchBufferEventsMax) behind.push_back(id);
    } else {
      Pump(*w);
    }
  }
  for (uint64_t id : behind) {
    EndWatch(id, "the watcher fell more than " + std::to_string(kWatchBufferEventsMax) +
                     " events behind; resume from the sequence given");
  }
}

bool Daemon::Matches(const Watcher& w, schema::Event::Reader event) const {
  if (!w.kinds.empty() && !In(w.kinds, schema::BodyName(event))) return false;
  if (w.namespaces.empty() && w.cluster_queues.empty() && w.checks.empty()) return true;
  auto body = event.getBody();
  auto workload = WorkloadOf(event);
  const projections::WorkloadState* wl = nullptr;
  if (workload) {
    auto it = service_.engine().workloads().find(workload->first + "/" + workload->second);
    if (it != service_.engine().workloads().end()) wl = &it->second;
  }
  if (!w.namespaces.empty()) {
    std::string ns = workload ? workload->first : "";
    if (body.which() == schema::Event::Body::LOCAL_QUEUE_DEFINED) {
      ns = body.getLocalQueueDefined().getNamespace();
    }
    if (!In(w.namespaces, ns)) return false;
  }
  if (!w.cluster_queues.empty()) {
    std::string cq = wl != nullptr ? wl->cluster_queue : "";
    if (body.which() == schema::Event::Body::QUOTA_RESERVED) {
      cq = body.getQuotaReserved().getAdmission().getClusterQueue();
    } else if (body.which() == schema::Event::Body::CLUSTER_QUEUE_DEFINED) {
      cq = body.getClusterQueueDefined().getName();
    } else if (body.which() == schema::Event::Body::LOCAL_QUEUE_DEFINED) {
      cq = body.getLocalQueueDefined().getClusterQueue();
    }
    if (!In(w.cluster_queues, cq)) return false;
  }
  if (!w.checks.empty()) {
    bool hit = false;
    if (body.which() == schema::Event::Body::CHECK_STATE_REPORTED) {
      hit = In(w.checks, body.getCheckStateReported().getCheck());
    } else if (body.which() == schema::Event::Body::ADMISSION_CHECK_DEFINED) {
      hit = In(w.checks, body.getAdmissionCheckDefined().getName());
    } else if (body.which() == schema::Event::Body::REVOCATION_REQUESTED &&
               body.getRevocationRequested().getTarget().isCheck()) {
      hit = In(w.checks, body.getRevocationRequested().getTarget().getCheck());
    } else if (body.which() == schema::Event::Body::QUOTA_RESERVED) {
      // A reservation needs the checks its ClusterQueue requires.
      auto cq = service_.engine().cluster_queues().find(
          body.getQuotaReserved().getAdmission().getClusterQueue());
      if (cq != service_.engine().cluster_queues().end() && cq->second.spec) {
        for (const auto& [check, flavors] : cq->second.spec->admission_checks) {
          if (In(w.checks, check)) hit = true;
        }
      }
    } else if (wl != nullptr) {
      for (const auto& [check, status] : wl->checks) {
        if (In(w.checks, check)) hit = true;
      }
    }
    if (!hit) return false;
  }
  return true;
}

void Daemon::Pump(Watcher& w) {
  if (w.busy) return;
  const uint64_t head = log_.GetHead().sequence;
  // A push holds at most kWatchPushEventsMax matching events and, past its first, only as many
  // as fit in kReadPageBytesMax stored bytes: the event that would not fit starts the next push.
  std::vector<ledger::StoredEvent> matched;
  size_t matched_bytes = 0;
  for (int reads = 0; reads < kPumpReadsMax && w.next <= head && matched.empty(); ++reads) {
    auto shown = log_.Scan(w.next, kWatchPushEventsMax,
                           [&](ledger::Sequence sequence, std::string_view bytes) {
      auto decoded = schema::DecodeEvent(bytes);
      if (decoded.ok() && Matches(w, decoded->root())) {
        if (!matched.empty() && matched_bytes + bytes.size() > kReadPageBytesMax) return false;
        matched_bytes += bytes.size();
        matched.push_back(ledger::StoredEvent{sequence, std::string(bytes)});
      }
      w.next = sequence + 1;
      return true;
    });
    if (!shown.ok()) {
      EndWatch(w.id, "reading the ledger failed: " + shown.status().ToString());
      return;
    }
    if (*shown == 0) break;
  }
  if (matched.empty()) {
    if (w.next <= head) {
      // Nothing matched in this many reads: go on after the loop has done other work.
      const uint64_t id = w.id;
      tasks_->add(kj::evalLater([this, id]() {
        auto it = watchers_.find(id);
        if (it != watchers_.end()) Pump(*it->second);
      }));
    }
    return;
  }
  w.busy = true;
  w.appended_while_busy = 0;
  auto push = w.sink.pushRequest();
  FillEvents(push.initEvents(static_cast<unsigned>(matched.size())), matched);
  const uint64_t id = w.id;
  tasks_->add(push.send().then(
      [this, id](capnp::Response<EventSink::PushResults>) {
        auto it = watchers_.find(id);
        if (it == watchers_.end()) return;
        it->second->busy = false;
        Pump(*it->second);
      },
      [this, id](kj::Exception&&) { watchers_.erase(id); }));
}

void Daemon::EndWatch(uint64_t id, const std::string& reason) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto end = it->second->sink.endRequest();
  end.setResumeSequence(it->second->next);
  end.setReason(reason);
  spdlog::info("ending watch {} of {} at {}: {}", id, it->second->principal, it->second->next,
               reason);
  tasks_->add(end.send().ignoreResult());
  watchers_.erase(it);
}

void Daemon::StopWatch(uint64_t id) { watchers_.erase(id); }

void Daemon::RecheckWatches() {
  // Each open watch as if it were asked for now: one the policy refuses, or would narrow to
  // less than it shows, is ended with its resume sequence (the watcher may ask again and get
  // what it may see now). Calls are checked one by one already, so nothing else outlives a
  // principal's removal.
  std::vector<std::pair<uint64_t, std::string>> ended;
  for (auto& [id, w] : watchers_) {
    std::vector<std::string> namespaces = w->asked_namespaces;
    std::vector<std::string> checks = w->asked_checks;
    Status s = policy_.MayWatch(w->principal, &namespaces, &checks, service_.engine());
    if (!s.ok()) {
      ended.emplace_back(id, "the reloaded policy refuses this watch: " + s.message());
    } else if (!Within(w->namespaces, namespaces) || !Within(w->checks, checks)) {
      ended.emplace_back(id, "the reloaded policy narrows what '" + w->principal +
                                 "' may watch; watch again from the sequence given");
    }
  }
  for (const auto& [id, reason] : ended) EndWatch(id, reason);
}

}  // namespace admission::ops::rpc
