#pragma once
// Which workloads an event is about: one list, read by the ledger's history index (written with
// the events) and by `explain` (which reads the history back). See docs/ledger.md, "The history
// index".

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "schema/events.capnp.h"

namespace admission::schema {

// The workload a workload input or a decision is about (a Preempted's victim), if any. Not the
// specification of a submission or import (see SpecOf) nor a Preempted's preemptor.
std::optional<WorkloadRef::Reader> SubjectOf(Event::Reader event);

// The specification a workloadSubmitted or workloadImported carries, if it is one.
std::optional<Workload::Reader> SpecOf(Event::Reader event);

// The history index's keys of an event, each at most once, in a fixed order: "n" NS/NAME for
// every workload it names (the spec, the subject, a preemptor), "u" UID for a reference by uid
// alone (no name: explain reaches it through the uids of the workload's submissions), and "c"
// for an engine configuration. Other events have none. (Older ledgers also hold
// a "u" entry for named references; readers take the union, so both explain the same.)
void HistoryKeysOf(Event::Reader event, std::vector<std::string>* keys);

// HistoryKeysOf's keys without a string each: their bytes one after another in `text`, key i
// being [ends[i-1], ends[i]). The history writer reuses one for every event, so a key costs no
// allocation once the buffers have grown.
struct HistoryKeyTexts {
  std::string text;
  std::vector<size_t> ends;
  size_t size() const { return ends.size(); }
  std::string_view operator[](size_t i) const {
    const size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(text).substr(begin, ends[i] - begin);
  }
};
// Replaces `keys` with the event's history keys (the same keys, in the same order, as
// HistoryKeysOf).
void HistoryKeysInto(Event::Reader event, HistoryKeyTexts* keys);

// HistoryKeysInto for an event in the canonical form the ledger stores (one segment, no segment
// table), which the caller has already checked (DecodeEvent or TakePlainEvent accepted it). The
// reader lives on the stack: no allocation unless `bytes` is not word-aligned.
void HistoryKeysOfCanonical(std::string_view bytes, HistoryKeyTexts* keys);

inline std::string HistoryNameKey(std::string_view ns_name) { return "n" + std::string(ns_name); }
// The history key of every engine configuration (explain reads the retention in effect).
inline constexpr std::string_view kHistoryConfigKey = "c";
inline std::string HistoryUidKey(std::string_view uid) { return "u" + std::string(uid); }

}  // namespace admission::schema
