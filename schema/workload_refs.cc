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

namespace {

// Appends the key `kind` + a + sep + b to `keys` unless it is there already (an event names a
// workload at most three times, so a linear search).
void AddKey(HistoryKeyTexts* keys, char kind, std::string_view a, std::string_view sep,
            std::string_view b) {
  const size_t begin = keys->text.size();
  keys->text.push_back(kind);
  keys->text.append(a);
  keys->text.append(sep);
  keys->text.append(b);
  const std::string_view added = std::string_view(keys->text).substr(begin);
  for (size_t i = 0; i < keys->size(); ++i) {
    if ((*keys)[i] == added) {
      keys->text.resize(begin);
      return;
    }
  }
  keys->ends.push_back(keys->text.size());
}

std::string_view View(capnp::Text::Reader text) { return std::string_view(text.cStr(), text.size()); }

void AddNamed(HistoryKeyTexts* keys, capnp::Text::Reader ns, capnp::Text::Reader name,
              capnp::Text::Reader uid) {
  // HistoryNameKey, or HistoryUidKey for a reference by uid alone, built in place.
  if (name.size() > 0) AddKey(keys, 'n', View(ns), "/", View(name));
  if (uid.size() > 0 && name.size() == 0) AddKey(keys, 'u', View(uid), "", "");
}

}  // namespace

void HistoryKeysInto(Event::Reader event, HistoryKeyTexts* keys) {
  keys->text.clear();
  keys->ends.clear();
  if (auto spec = SpecOf(event)) AddNamed(keys, spec->getNamespace(), spec->getName(), spec->getUid());
  if (auto ref = SubjectOf(event)) AddNamed(keys, ref->getNamespace(), ref->getName(), ref->getUid());
  if (event.getBody().isPreempted()) {
    auto p = event.getBody().getPreempted().getPreemptor();
    AddNamed(keys, p.getNamespace(), p.getName(), p.getUid());
  }
  if (event.getBody().isEngineConfigDefined()) {
    static_assert(kHistoryConfigKey.size() == 1);
    AddKey(keys, kHistoryConfigKey[0], "", "", "");
  }
}

void HistoryKeysOf(Event::Reader event, std::vector<std::string>* keys) {
  HistoryKeyTexts texts;
  HistoryKeysInto(event, &texts);
  keys->clear();
  for (size_t i = 0; i < texts.size(); ++i) keys->emplace_back(texts[i]);
}

void HistoryKeysOfCanonical(std::string_view bytes, HistoryKeyTexts* keys) {
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
  HistoryKeysInto(reader.getRoot<Event>(), keys);
}

}  // namespace admission::schema
