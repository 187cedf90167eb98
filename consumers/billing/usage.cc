#include "consumers/billing/usage.h"

#include "schema/event_codec.h"

namespace admission::consumers::billing {

namespace {

// Ledger time in milliseconds, rounded down (times before 1970 do not occur in a ledger).
int64_t Ms(int64_t ns) { return ns / 1'000'000; }

std::string Token(const std::string& uid, uint64_t generation) {
  return uid + "/" + std::to_string(generation);
}

}  // namespace

void UsageFold::Apply(uint64_t sequence, schema::Event::Reader event) {
  last_sequence_ = sequence;
  const int64_t at = Ms(event.getRecordedAtNs());
  last_time_ms_ = std::max(last_time_ms_, at);
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED: {
      auto cq = body.getClusterQueueDefined();
      const std::string name = cq.getName().cStr();
      cohorts_[name] = cq.getCohortName().cStr();
      EndQuota(name, at);
      std::vector<QuotaSpan>& spans = quota_open_[name];
      for (auto group : cq.getResourceGroups()) {
        for (auto flavor : group.getFlavors()) {
          for (auto r : flavor.getResources()) {
            spans.push_back(QuotaSpan{name, flavor.getName().cStr(), r.getName().cStr(),
                                      r.getNominalQuotaMilli(), at, at});
          }
        }
      }
      break;
    }
    case schema::Event::Body::OBJECT_DELETED: {
      auto deleted = body.getObjectDeleted();
      if (std::string(deleted.getKind().cStr()) == "ClusterQueue") {
        EndQuota(deleted.getName().cStr(), at);
        quota_open_.erase(deleted.getName().cStr());
      }
      break;
    }
    case schema::Event::Body::WORKLOAD_SUBMITTED:
    case schema::Event::Body::WORKLOAD_IMPORTED: {
      const bool imported = body.which() == schema::Event::Body::WORKLOAD_IMPORTED;
      auto wl = imported ? body.getWorkloadImported().getWorkload()
                         : body.getWorkloadSubmitted().getWorkload();
      WorkloadInfo& info = workloads_[wl.getUid().cStr()];
      info.ns = wl.getNamespace().cStr();
      info.local_queue = wl.getQueueName().cStr();
      info.priority_class = wl.getPriorityClassName().cStr();
      info.imported_pending = imported;
      break;
    }
    case schema::Event::Body::QUOTA_RESERVED: {
      auto qr = body.getQuotaReserved();
      const std::string uid = qr.getWorkload().getUid().cStr();
      WorkloadInfo& info = workloads_[uid];
      Hold hold;
      hold.uid = uid;
      hold.generation = qr.getGeneration();
      hold.base.ns = qr.getWorkload().getNamespace().cStr();
      hold.base.local_queue = info.local_queue;
      hold.base.cluster_queue = qr.getAdmission().getClusterQueue().cStr();
      auto cohort = cohorts_.find(hold.base.cluster_queue);
      if (cohort != cohorts_.end()) hold.base.cohort = cohort->second;
      hold.base.priority_class = info.priority_class;
      for (auto ps : qr.getAdmission().getPodSetAssignments()) {
        for (auto usage : ps.getResourceUsage()) {
          Amount amount;
          amount.pod_set = ps.getName().cStr();
          amount.resource = usage.getName().cStr();
          amount.milli = usage.getMilli();
          for (auto f : ps.getFlavors()) {
            if (amount.resource == f.getResource().cStr()) amount.flavor = f.getFlavor().cStr();
          }
          if (amount.milli != 0) hold.amounts.push_back(std::move(amount));
        }
      }
      hold.reserved_ms = at;
      if (info.imported_pending) {
        hold.released_ms = at;  // an imported workload's pods are running already
        info.imported_pending = false;
      }
      holds_[uid] = std::move(hold);
      break;
    }
    case schema::Event::Body::PODS_REPORTED: {
      auto pr = body.getPodsReported();
      if (pr.getReport() != schema::PodsReport::RELEASED) break;
      auto it = holds_.find(pr.getWorkload().getUid().cStr());
      if (it == holds_.end() || it->second.released_ms) break;
      // Only the current reservation's token releases pods (intake refuses others).
      if (Token(it->second.uid, it->second.generation) != pr.getFencingToken().cStr()) break;
      it->second.released_ms = at;
      break;
    }
    case schema::Event::Body::QUOTA_RELEASED: {
      auto released = body.getQuotaReleased();
      auto it = holds_.find(released.getWorkload().getUid().cStr());
      if (it == holds_.end() || it->second.generation != released.getGeneration()) break;
      Close(it->second, at, &closed_);
      holds_.erase(it);
      break;
    }
    default:
      break;
  }
}

void UsageFold::Close(const Hold& hold, int64_t at_ms, std::vector<Interval>* out) const {
  const int64_t idle_end = hold.released_ms ? *hold.released_ms : at_ms;
  for (const Amount& amount : hold.amounts) {
    Attribution to = hold.base;
    to.flavor = amount.flavor;
    to.resource = amount.resource;
    if (idle_end > hold.reserved_ms) {
      out->push_back(Interval{to, UsageKind::kIdle, amount.milli, hold.reserved_ms, idle_end,
                              hold.uid, hold.generation, amount.pod_set});
    }
    if (hold.released_ms && at_ms > *hold.released_ms) {
      out->push_back(Interval{to, UsageKind::kUsed, amount.milli, *hold.released_ms, at_ms,
                              hold.uid, hold.generation, amount.pod_set});
    }
  }
}

void UsageFold::EndQuota(const std::string& cluster_queue, int64_t at_ms) {
  auto it = quota_open_.find(cluster_queue);
  if (it == quota_open_.end()) return;
  for (QuotaSpan& span : it->second) {
    span.end_ms = at_ms;
    if (span.end_ms > span.start_ms) quota_closed_.push_back(span);
  }
  it->second.clear();
}

std::vector<QuotaSpan> UsageFold::QuotaUntil(int64_t at_ms) const {
  std::vector<QuotaSpan> out = quota_closed_;
  for (const auto& [cq, spans] : quota_open_) {
    for (QuotaSpan span : spans) {
      span.end_ms = at_ms;
      if (span.end_ms > span.start_ms) out.push_back(std::move(span));
    }
  }
  return out;
}

std::vector<Interval> UsageFold::OpenUntil(int64_t at_ms) const {
  std::vector<Interval> out;
  for (const auto& [uid, hold] : holds_) Close(hold, at_ms, &out);
  return out;
}

Result<UsageFold> FoldLedger(ledger::EventLog& log) {
  UsageFold fold;
  const ledger::Head head = log.GetHead();
  ledger::Sequence next = 1;
  Status failure;
  while (next <= head.sequence && failure.ok()) {
    auto shown = log.Scan(next, 4096, [&](ledger::Sequence sequence, std::string_view bytes) {
      if (!failure.ok()) return;
      auto decoded = schema::DecodeEvent(bytes);
      if (!decoded.ok()) {
        failure = Status(Code::kCorruption, "event " + std::to_string(sequence) + ": " +
                                                decoded.status().message());
        return;
      }
      fold.Apply(sequence, decoded->root());
      next = sequence + 1;
    });
    if (!shown.ok()) return shown.status();
    if (*shown == 0) break;
  }
  if (!failure.ok()) return failure;
  return fold;
}

}  // namespace admission::consumers::billing
