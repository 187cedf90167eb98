#include "schema/workload_refs.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <capnp/serialize.h>

#include "schema/event_codec.h"

namespace admission::schema {

namespace {
using W = Event::Body::Which;
}

std::optional<WorkloadRef::Reader> SubjectOf(Event::Reader event) {
  auto b = event.getBody();
  switch (b.which()) {
    case W::WORKLOAD_DELETED: return b.getWorkloadDeleted().getWorkload();
    case W::WORKLOAD_FINISHED: return b.getWorkloadFinished().getWorkload();
    case W::CHECK_STATE_REPORTED: return b.getCheckStateReported().getWorkload();
    case W::PODS_REPORTED: return b.getPodsReported().getWorkload();
    case W::WORKLOAD_ACTIVATION_SET: return b.getWorkloadActivationSet().getWorkload();
    case W::REVOCATION_REQUESTED:
      if (b.getRevocationRequested().getTarget().isWorkload()) {
        return b.getRevocationRequested().getTarget().getWorkload();
      }
      return std::nullopt;
    case W::QUOTA_RESERVED: return b.getQuotaReserved().getWorkload();
    case W::ADMITTED: return b.getAdmitted().getWorkload();
    case W::PENDING_REASON_CHANGED: return b.getPendingReasonChanged().getWorkload();
    case W::EVICTION_STARTED: return b.getEvictionStarted().getWorkload();
    case W::QUOTA_RELEASED: return b.getQuotaReleased().getWorkload();
    case W::REQUEUED: return b.getRequeued().getWorkload();
    case W::REJECTED: return b.getRejected().getWorkload();
    case W::DEACTIVATED: return b.getDeactivated().getWorkload();
    case W::PREEMPTED: return b.getPreempted().getWorkload();
    case W::STARVATION_ALERT: return b.getStarvationAlert().getWorkload();
    case W::DRAIN_DEADLINE_PASSED: return b.getDrainDeadlinePassed().getWorkload();
    case W::BUDGET_DECIDED: return b.getBudgetDecided().getWorkload();
    case W::TOPOLOGY_REPLACED: return b.getTopologyReplaced().getWorkload();
    default: return std::nullopt;
  }
}

std::optional<Workload::Reader> SpecOf(Event::Reader event) {
  auto b = event.getBody();
  if (b.isWorkloadSubmitted()) return b.getWorkloadSubmitted().getWorkload();
  if (b.isWorkloadImported()) return b.getWorkloadImported().getWorkload();
  return std::nullopt;
}

void HistoryKeysOf(Event::Reader event, std::vector<std::string>* keys) {
  keys->clear();
  auto add = [&](std::string key) {
    if (std::find(keys->begin(), keys->end(), key) == keys->end()) keys->push_back(std::move(key));
  };
  auto named = [&](capnp::Text::Reader ns, capnp::Text::Reader name, capnp::Text::Reader uid) {
    if (name.size() > 0) {
      add(HistoryNameKey(std::string(ns.cStr(), ns.size()) + "/" + std::string(name.cStr(), name.size())));
    }
    if (uid.size() > 0) add(HistoryUidKey(std::string_view(uid.cStr(), uid.size())));
  };
  if (auto spec = SpecOf(event)) named(spec->getNamespace(), spec->getName(), spec->getUid());
  if (auto ref = SubjectOf(event)) named(ref->getNamespace(), ref->getName(), ref->getUid());
  if (event.getBody().isPreempted()) {
    auto p = event.getBody().getPreempted().getPreemptor();
    named(p.getNamespace(), p.getName(), p.getUid());
  }
  if (event.getBody().isEngineConfigDefined()) add(std::string(kHistoryConfigKey));
}

void HistoryKeysOfCanonical(std::string_view bytes, std::vector<std::string>* keys) {
  // Canonical bytes are one segment without a table; a reader wants them word-aligned.
  const size_t words = bytes.size() / sizeof(capnp::word);
  std::unique_ptr<capnp::word[]> copy;
  const capnp::word* start = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    copy = std::make_unique<capnp::word[]>(words);
    std::memcpy(copy.get(), bytes.data(), words * sizeof(capnp::word));
    start = copy.get();
  }
  kj::ArrayPtr<const capnp::word> segments[1] = {kj::arrayPtr(start, words)};
  capnp::SegmentArrayMessageReader reader(kj::arrayPtr(segments, 1), EventReaderOptions());
  HistoryKeysOf(reader.getRoot<Event>(), keys);
}

}  // namespace admission::schema
