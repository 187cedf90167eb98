#include "projections/usage.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "schema/event_codec.h"

namespace admission::projections {

namespace {

// Ledger time in milliseconds, rounded down (times before 1970 do not occur in a ledger).
int64_t Ms(int64_t ns) { return ns / 1'000'000; }

std::string_view View(capnp::Text::Reader text) { return std::string_view(text.cStr(), text.size()); }

// Whether `token` is the fencing token of reservation (uid, generation): "uid/generation".
bool IsToken(std::string_view token, std::string_view uid, uint64_t generation) {
  if (token.size() <= uid.size() + 1 || token.substr(0, uid.size()) != uid ||
      token[uid.size()] != '/') {
    return false;
  }
  return token.substr(uid.size() + 1) == std::to_string(generation);
}

}  // namespace

std::vector<std::pair<const char*, const std::string*>> AttributionFields(const Attribution& to) {
  return {{"namespace", &to.ns},         {"localQueue", &to.local_queue},
          {"clusterQueue", &to.cluster_queue}, {"cohort", &to.cohort},
          {"priorityClass", &to.priority_class}, {"flavor", &to.flavor},
          {"resource", &to.resource}};
}

void UsageFold::Apply(uint64_t sequence, schema::Event::Reader event) {
  last_sequence_ = sequence;
  const int64_t at = Ms(event.getRecordedAtNs());
  last_time_ms_ = std::max(last_time_ms_, at);
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
      ApplyQuotaDefined(body.getClusterQueueDefined(), at);
      break;
    case schema::Event::Body::OBJECT_DELETED: {
      auto deleted = body.getObjectDeleted();
      if (std::string(deleted.getKind().cStr()) == "ClusterQueue") {
        EndQuota(deleted.getName().cStr(), at);
        quota_open_.erase(deleted.getName().cStr());
        Touch('q', deleted.getName().cStr());
      }
      break;
    }
    case schema::Event::Body::WORKLOAD_SUBMITTED:
    case schema::Event::Body::WORKLOAD_IMPORTED: {
      const bool imported = body.which() == schema::Event::Body::WORKLOAD_IMPORTED;
      auto wl = imported ? body.getWorkloadImported().getWorkload()
                         : body.getWorkloadSubmitted().getWorkload();
      WorkloadInfo& info = workloads_[wl.getUid().cStr()];
      Touch('w', wl.getUid().cStr());
      info.ns = wl.getNamespace().cStr();
      info.local_queue = wl.getQueueName().cStr();
      info.priority_class = wl.getPriorityClassName().cStr();
      info.imported_pending = imported;
      break;
    }
    case schema::Event::Body::WORKLOAD_FINISHED:
    case schema::Event::Body::WORKLOAD_DELETED: {
      // Never reserved again: its attribution lives on in the hold it may still have.
      auto ref = body.which() == schema::Event::Body::WORKLOAD_FINISHED
                     ? body.getWorkloadFinished().getWorkload()
                     : body.getWorkloadDeleted().getWorkload();
      const std::string_view uid = View(ref.getUid());
      if (uid.empty()) break;
      auto it = workloads_.find(uid);
      if (it == workloads_.end()) break;
      Touch('w', it->first);
      workloads_.erase(it);
      break;
    }
    case schema::Event::Body::QUOTA_RESERVED:
      ApplyQuotaReserved(body.getQuotaReserved(), at);
      break;
    case schema::Event::Body::PODS_REPORTED:
      ApplyPodsReported(body.getPodsReported(), at);
      break;
    case schema::Event::Body::QUOTA_RELEASED: {
      auto released = body.getQuotaReleased();
      auto it = holds_.find(View(released.getWorkload().getUid()));
      if (it == holds_.end() || it->second.generation != released.getGeneration()) break;
      Close(it->second, at, &closed_);
      Touch('h', it->first);
      holds_.erase(it);
      break;
    }
    default:
      break;
  }
}

// A ClusterQueue's (new) definition: its quota spans so far end, new ones open at `at`.
void UsageFold::ApplyQuotaDefined(schema::ClusterQueueDef::Reader cq, int64_t at) {
  const std::string name = cq.getName().cStr();
  cohorts_[name] = cq.getCohortName().cStr();
  Touch('c', name);
  Touch('q', name);
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
}

// A reservation opens a hold: its attribution and its amounts per podSet, flavor and resource.
void UsageFold::ApplyQuotaReserved(schema::QuotaReserved::Reader qr, int64_t at) {
  const std::string uid = qr.getWorkload().getUid().cStr();
  WorkloadInfo& info = workloads_[uid];
  Touch('w', uid);
  Touch('h', uid);
  Hold hold;
  hold.uid = uid;
  hold.generation = qr.getGeneration();
  hold.base.ns = qr.getWorkload().getNamespace().cStr();
  hold.base.local_queue = info.local_queue;
  hold.base.cluster_queue = qr.getAdmission().getClusterQueue().cStr();
  auto cohort = cohorts_.find(std::string_view(hold.base.cluster_queue));
  if (cohort != cohorts_.end()) hold.base.cohort = cohort->second;
  hold.base.priority_class = info.priority_class;
  for (auto ps : qr.getAdmission().getPodSetAssignments()) {
    for (auto usage : ps.getResourceUsage()) {
      Amount amount;
      amount.pod_set = ps.getName().cStr();
      amount.resource = usage.getName().cStr();
      amount.milli = usage.getMilli();
      for (auto f : ps.getFlavors()) {
        if (amount.resource == View(f.getResource())) amount.flavor = f.getFlavor().cStr();
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
}

// Pods released (used from now on) or failed to start (idle all along), on the current token.
void UsageFold::ApplyPodsReported(schema::PodsReported::Reader pr, int64_t at) {
  const bool released = pr.getReport() == schema::PodsReport::RELEASED;
  // failedToStart (engine v18): no pod ran, even after a release was reported (a runtime
  // that stopped between its write-ahead record and the start), so the hold was idle.
  const bool failed = pr.getReport() == schema::PodsReport::FAILED_TO_START;
  if (!released && !failed) return;
  auto it = holds_.find(View(pr.getWorkload().getUid()));
  if (it == holds_.end() || (released && it->second.released_ms)) return;
  // Only the current reservation's token releases pods (intake refuses others).
  if (!IsToken(View(pr.getFencingToken()), it->second.uid, it->second.generation)) return;
  if (released) {
    it->second.released_ms = at;
  } else {
    it->second.released_ms.reset();
  }
  Touch('h', it->first);
}

template <typename Out>
void UsageFold::Close(const Hold& hold, int64_t at_ms, Out* out) const {
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

std::optional<std::string> UsageFold::EntryValue(const std::string& key) const {
  using nlohmann::json;
  const std::string name = key.substr(1);
  switch (key[0]) {
    case 'w':
      if (auto it = workloads_.find(name); it != workloads_.end()) {
        return json::array({it->second.ns, it->second.local_queue, it->second.priority_class,
                            it->second.imported_pending})
            .dump();
      }
      break;
    case 'h':
      if (auto it = holds_.find(name); it != holds_.end()) {
        const Hold& h = it->second;
        json amounts = json::array();
        for (const Amount& a : h.amounts) {
          amounts.push_back(json::array({a.pod_set, a.flavor, a.resource, a.milli}));
        }
        return json::array({h.uid, h.generation, h.base.ns, h.base.local_queue,
                            h.base.cluster_queue, h.base.cohort, h.base.priority_class, amounts,
                            h.reserved_ms, h.released_ms ? json(*h.released_ms) : json(nullptr)})
            .dump();
      }
      break;
    case 'c':
      if (auto it = cohorts_.find(name); it != cohorts_.end()) return it->second;
      break;
    case 'q':
      if (auto it = quota_open_.find(name); it != quota_open_.end()) {
        json spans = json::array();
        for (const QuotaSpan& q : it->second) {
          spans.push_back(json::array({q.flavor, q.resource, q.nominal_milli, q.start_ms}));
        }
        return spans.dump();
      }
      break;
  }
  return std::nullopt;
}

std::string UsageFold::Marker() const {
  return nlohmann::json::array({last_sequence_, last_time_ms_}).dump();
}

std::vector<std::pair<std::string, std::optional<std::string>>> UsageFold::TakeChanges() {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  for (const std::string& key : changed_) out.emplace_back(key, EntryValue(key));
  changed_.clear();
  out.emplace_back("m", Marker());
  return out;
}

std::vector<std::pair<std::string, std::string>> UsageFold::Entries() const {
  std::vector<std::string> keys;
  for (const auto& [uid, info] : workloads_) keys.push_back("w" + uid);
  for (const auto& [uid, hold] : holds_) keys.push_back("h" + uid);
  for (const auto& [cq, cohort] : cohorts_) keys.push_back("c" + cq);
  for (const auto& [cq, spans] : quota_open_) keys.push_back("q" + cq);
  std::sort(keys.begin(), keys.end());  // workloads_ is unordered: the bytes must not be
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& key : keys) out.emplace_back(key, *EntryValue(key));
  out.emplace_back("m", Marker());
  return out;
}

Status UsageFold::Restore(std::string_view key, std::string_view value) {
  using nlohmann::json;
  const auto bad = [&](const std::string& why) {
    return Status(Code::kCorruption,
                  "billing state entry '" + std::string(key) + "': " + why);
  };
  if (key.empty()) return bad("empty key");
  const std::string name(key.substr(1));
  try {
    switch (key[0]) {
      case 'c':
        cohorts_[name] = std::string(value);
        return Status::Ok();
      case 'm': {
        const json j = json::parse(value);
        last_sequence_ = j.at(0).get<uint64_t>();
        last_time_ms_ = j.at(1).get<int64_t>();
        return Status::Ok();
      }
      case 'w': {
        const json j = json::parse(value);
        workloads_[name] = WorkloadInfo{j.at(0).get<std::string>(), j.at(1).get<std::string>(),
                                        j.at(2).get<std::string>(), j.at(3).get<bool>()};
        return Status::Ok();
      }
      case 'h': {
        const json j = json::parse(value);
        Hold h;
        h.uid = j.at(0).get<std::string>();
        h.generation = j.at(1).get<uint64_t>();
        h.base.ns = j.at(2).get<std::string>();
        h.base.local_queue = j.at(3).get<std::string>();
        h.base.cluster_queue = j.at(4).get<std::string>();
        h.base.cohort = j.at(5).get<std::string>();
        h.base.priority_class = j.at(6).get<std::string>();
        for (const json& a : j.at(7)) {
          h.amounts.push_back(Amount{a.at(0).get<std::string>(), a.at(1).get<std::string>(),
                                     a.at(2).get<std::string>(), a.at(3).get<int64_t>()});
        }
        h.reserved_ms = j.at(8).get<int64_t>();
        if (!j.at(9).is_null()) h.released_ms = j.at(9).get<int64_t>();
        holds_[name] = std::move(h);
        return Status::Ok();
      }
      case 'q': {
        std::vector<QuotaSpan>& spans = quota_open_[name];
        for (const json& q : json::parse(value)) {
          const int64_t start = q.at(3).get<int64_t>();
          spans.push_back(QuotaSpan{name, q.at(0).get<std::string>(), q.at(1).get<std::string>(),
                                    q.at(2).get<int64_t>(), start, start});
        }
        return Status::Ok();
      }
      default:
        return bad("unknown kind");
    }
  } catch (const json::exception& e) {
    return bad(e.what());
  }
}

std::string ExactDecimal(__int128 value, int decimals) {
  const bool negative = value < 0;
  unsigned __int128 v = negative ? static_cast<unsigned __int128>(-value)
                                 : static_cast<unsigned __int128>(value);
  unsigned __int128 scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  unsigned __int128 whole = v / scale;
  unsigned __int128 fraction = v % scale;
  std::string out;
  do {
    out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(whole % 10)));
    whole /= 10;
  } while (whole != 0);
  if (negative) out.insert(out.begin(), '-');
  if (fraction != 0) {
    std::string f(static_cast<size_t>(decimals), '0');
    for (int i = decimals - 1; i >= 0; --i, fraction /= 10) {
      f[static_cast<size_t>(i)] = static_cast<char>('0' + static_cast<int>(fraction % 10));
    }
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

}  // namespace admission::projections
