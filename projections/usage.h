#pragma once
// The usage model of billing and budgets: a pure fold of the ledger into the intervals in which admissions held
// resources (docs/billing.md). No clock, no I/O: the same events give the same intervals, from
// any copy of the ledger.
//
// For each reservation of a workload (uid, generation), per podSet, flavor and resource:
//   idle: from QuotaReserved to the pods' `released` report (the write-ahead point: no pods
//         before it), or to QuotaReleased when the pods were never released;
//   used: from `released` to QuotaReleased (every hold ends with one: finish, delete, the pods
//         reported gone after an eviction, a drain confirmed or its deadline passed).
// An imported workload's pods count as released when it is admitted. Amounts are the podSet's
// resourceUsage (the admitted count x the per-pod request, so partial admission bills what was
// admitted). Time is ledger time (recordedAtNs), in integer milliseconds.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "schema/result.h"
#include "schema/events.capnp.h"

namespace admission::projections {

// `value` / 10^decimals as an exact decimal: "1.5", "0.001", "-2.5", "12".
std::string ExactDecimal(__int128 value, int decimals);

// Who an interval is billed to.
struct Attribution {
  std::string ns;
  std::string local_queue;
  std::string cluster_queue;
  std::string cohort;          // the ClusterQueue's cohort when the quota was reserved
  std::string priority_class;
  std::string flavor;
  std::string resource;
  auto operator<=>(const Attribution&) const = default;
};

// An attribution's fields under the names usage records and reports give them, in order
// (namespace, localQueue, clusterQueue, cohort, priorityClass, flavor, resource).
std::vector<std::pair<const char*, const std::string*>> AttributionFields(const Attribution& to);

enum class UsageKind { kUsed, kIdle };

// A closed interval [start_ms, end_ms) of `milli` (milli-units of the resource) held.
struct Interval {
  Attribution to;
  UsageKind kind = UsageKind::kUsed;
  int64_t milli = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::string uid;
  uint64_t generation = 0;
  std::string pod_set;
};

// A ClusterQueue's nominal quota of one flavor and resource over [start_ms, end_ms).
struct QuotaSpan {
  std::string cluster_queue, flavor, resource;
  int64_t nominal_milli = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
};

class UsageFold {
 public:
  // Folds one stored event (any kind; those billing does not need are skipped).
  void Apply(uint64_t sequence, schema::Event::Reader event);

  // Every interval closed so far, in the order they closed (a deque: a long ledger closes
  // millions, and a vector would move them all each time it grows).
  const std::deque<Interval>& closed() const { return closed_; }
  // The intervals still open, closed at `at_ms` (not recorded): what a report up to now counts.
  std::vector<Interval> OpenUntil(int64_t at_ms) const;
  // Nominal quota: spans that ended (a redefinition or deletion), and those still in force,
  // closed at `at_ms`.
  std::vector<QuotaSpan> QuotaUntil(int64_t at_ms) const;
  uint64_t last_sequence() const { return last_sequence_; }
  int64_t last_time_ms() const { return last_time_ms_; }

  // Persistence, for a consumer that keeps the fold in a key-value store between runs
  // (docs/billing.md, "From admitd's watch"). With tracking on, Apply notes every entry of the
  // open state it changes; TakeChanges returns those entries, encoded, with std::nullopt for
  // one that is gone, and forgets them. Restore puts one entry back (a fresh fold, entries in
  // any order). DropClosed forgets the closed intervals and quota spans (emitted already), so
  // that a long-running consumer holds only the open state.
  void TrackChanges(bool on) { track_ = on; }
  std::vector<std::pair<std::string, std::optional<std::string>>> TakeChanges();
  Status Restore(std::string_view key, std::string_view value);
  // Every entry of the open state, in key order (a snapshot of the decider stores them).
  std::vector<std::pair<std::string, std::string>> Entries() const;
  bool HasClosed() const { return !closed_.empty() || !quota_closed_.empty(); }
  void DropClosed() {
    closed_.clear();
    quota_closed_.clear();
  }

 private:
  struct Amount {
    std::string pod_set, flavor, resource;
    int64_t milli = 0;
  };
  struct Hold {
    std::string uid;
    uint64_t generation = 0;
    Attribution base;  // without flavor and resource
    std::vector<Amount> amounts;
    int64_t reserved_ms = 0;
    std::optional<int64_t> released_ms;
  };
  struct WorkloadInfo {
    std::string ns, local_queue, priority_class;
    bool imported_pending = false;  // the next reservation is an import's: pods already run
  };
  std::optional<std::string> EntryValue(const std::string& key) const;
  std::string Marker() const;  // the "m" entry: last sequence and time
  template <typename Out>
  void Close(const Hold& hold, int64_t at_ms, Out* out) const;

  // By uid, until the workload finishes or is deleted (the fold holds only what can still be
  // reserved or is held).
  // Lookups by a capnp Text view, without building a string.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, WorkloadInfo, TextHash, std::equal_to<>> workloads_;
  std::map<std::string, std::string, std::less<>> cohorts_;  // ClusterQueue -> cohort
  std::map<std::string, Hold, std::less<>> holds_;           // by uid: the reservation held
  std::vector<QuotaSpan> quota_closed_;
  std::map<std::string, std::vector<QuotaSpan>> quota_open_;  // by ClusterQueue
  void EndQuota(const std::string& cluster_queue, int64_t at_ms);
  // Apply's steps for the events that open quota spans, holds and pod releases.
  void ApplyQuotaDefined(schema::ClusterQueueDef::Reader cq, int64_t at_ms);
  void ApplyQuotaReserved(schema::QuotaReserved::Reader qr, int64_t at_ms);
  void ApplyPodsReported(schema::PodsReported::Reader pr, int64_t at_ms);
  std::deque<Interval> closed_;
  bool track_ = false;
  std::set<std::string> changed_;  // entry keys: "w" / "h" + uid, "c" / "q" + ClusterQueue
  void Touch(char kind, std::string_view name) {
    if (track_) changed_.insert(std::string(1, kind).append(name));
  }
  uint64_t last_sequence_ = 0;
  int64_t last_time_ms_ = 0;
};

}  // namespace admission::projections
