// Kueue's record of an imported admission, from the Workload's status (engine v22): what
// Kueue's conditions say about when it was reserved and admitted, PodsReady, the admission
// checks, the requeue count and an eviction in progress. What the ledger cannot honour (a
// reservation still waiting for its checks, a check not Ready) is refused, or with
// ParseOptions::lenient dropped and listed.

#include <array>
#include <map>
#include <string>
#include <vector>

#include "ops/kueue_yaml/parser.h"
#include "schema/time_format.h"

namespace admission::ops::kueue_yaml_internal {

namespace {

struct ConditionSeen {
  YAML::Node node;
  std::string path, status, reason, message;
  int64_t transition_ns = 0;
};

}  // namespace

bool DocumentParser::ReadTime(const YAML::Node& parent, std::string_view key,
                              const std::string& p, int64_t* out_ns) {
  const YAML::Node n = Child(parent, key);
  if (Absent(n)) return true;
  std::string text;
  if (!ReadString(n, Join(p, key), &text)) return false;
  Result<int64_t> ns = ParseRfc3339(text);
  if (!ns.ok()) return Fail(n, Join(p, key), ns.status().message());
  *out_ns = *ns;
  return true;
}

// status.admissionChecks of an admitted workload: every one Ready, with its message and time.
bool DocumentParser::ParseImportedChecks(const YAML::Node& checks, const std::string& stp,
                                         schema::WorkloadImported::Builder imported) {
  if (!Absent(checks)) {
    const std::string cp = Join(stp, "admissionChecks");
    if (!ExpectSequence(checks, cp, 64)) return false;
    std::vector<std::array<std::string, 2>> ready;  // name, message
    std::vector<int64_t> times;
    for (size_t i = 0; i < checks.size(); ++i) {
      const std::string ip = Index(cp, i);
      std::string name, state, message;
      int64_t at = 0;
      if (!ExpectMap(checks[i], ip) || !ReqString(checks[i], "name", ip, &name, "the check") ||
          !OptString(checks[i], "state", ip, &state) ||
          !OptString(checks[i], "message", ip, &message) ||
          !ReadTime(checks[i], "lastTransitionTime", ip, &at)) {
        return false;
      }
      if (state != "Ready") {
        if (!Unhonoured(checks[i], ip, "check " + Quote(name) + " is " + Quote(state) +
                                           ", not Ready (Kueue admits a workload once all are)")) {
          return false;
        }
        continue;
      }
      ready.push_back({name, message});
      times.push_back(at);
    }
    auto list = imported.initChecks(static_cast<unsigned>(ready.size()));
    for (size_t i = 0; i < ready.size(); ++i) {
      list[static_cast<unsigned>(i)].setName(T(ready[i][0]));
      list[static_cast<unsigned>(i)].setMessage(T(ready[i][1]));
      list[static_cast<unsigned>(i)].setLastTransitionNs(times[i]);
    }
  }
  return true;
}

bool DocumentParser::ParseImportedStatus(const YAML::Node& obj, const std::string& p,
                                         bool admitted,
                                         schema::WorkloadImported::Builder imported) {
  const YAML::Node status = Child(obj, "status");
  const std::string stp = Join(p, "status");
  std::map<std::string, ConditionSeen> seen;
  const YAML::Node conditions = Child(status, "conditions");
  if (!Absent(conditions)) {
    const std::string cp = Join(stp, "conditions");
    if (!ExpectSequence(conditions, cp, 64)) return false;
    for (size_t i = 0; i < conditions.size(); ++i) {
      const YAML::Node c = conditions[i];
      ConditionSeen s;
      s.node = c;
      s.path = Index(cp, i);
      std::string type;
      if (!ExpectMap(c, s.path) || !ReqString(c, "type", s.path, &type, "the condition's type") ||
          !OptString(c, "status", s.path, &s.status) ||
          !OptString(c, "reason", s.path, &s.reason) ||
          !OptString(c, "message", s.path, &s.message) ||
          !ReadTime(c, "lastTransitionTime", s.path, &s.transition_ns)) {
        return false;
      }
      seen[type] = std::move(s);
    }
  }
  auto is_true = [&](const char* type) {
    auto it = seen.find(type);
    return it != seen.end() && it->second.status == "True";
  };
  if (is_true("Evicted")) {
    // Admitted: an eviction in progress, imported as evicting, its pods to be reported gone.
    // Pending: evicted and requeued (Kueue resets Evicted at the next reservation); the time
    // may order its queue (engine v23).
    const ConditionSeen& e = seen["Evicted"];
    imported.setEvictionReason(T(e.reason.empty() ? "Evicted" : e.reason));
    imported.setEvictionMessage(T(e.message));
    imported.setEvictedAtNs(e.transition_ns);
  }
  if (!admitted && is_true("QuotaReserved")) {
    return Fail(seen["QuotaReserved"].node, seen["QuotaReserved"].path,
                "QuotaReserved is True but there is no status.admission");
  }
  if (is_true("QuotaReserved")) imported.setReservedAtNs(seen["QuotaReserved"].transition_ns);
  if (is_true("Admitted")) {
    imported.setAdmittedAtNs(seen["Admitted"].transition_ns);
  } else if (is_true("QuotaReserved") &&
             !Unhonoured(seen["QuotaReserved"].node, seen["QuotaReserved"].path,
                         "quota reserved but not Admitted (admission checks pending): the "
                         "ledger imports admitted workloads only")) {
    return false;
  }
  if (is_true("PodsReady")) {
    imported.setPodsReady(true);
    imported.setPodsReadyAtNs(seen["PodsReady"].transition_ns);
  }
  // The ledger's own export (`get workloads -o yaml`) says it as status.podsReady.
  bool pods_ready = false;
  const YAML::Node ready = Child(status, "podsReady");
  if (!Absent(ready)) {
    if (!ReadBool(ready, Join(stp, "podsReady"), &pods_ready)) return false;
    if (pods_ready) imported.setPodsReady(true);
  }
  // A pending workload's checks start again at its next reservation (Kueue resets them).
  if (admitted && !ParseImportedChecks(Child(status, "admissionChecks"), stp, imported)) {
    return false;
  }
  const YAML::Node requeue_state = Child(status, "requeueState");
  const YAML::Node requeue = Child(requeue_state, "count");
  if (!Absent(requeue)) {
    int32_t count = 0;
    if (!ReadInt32(requeue, Join(stp, "requeueState.count"), 0, &count)) return false;
    imported.setRequeueCount(static_cast<uint32_t>(count));
  }
  int64_t requeue_at = 0;
  if (!ReadTime(requeue_state, "requeueAt", Join(stp, "requeueState"), &requeue_at)) return false;
  if (!admitted) imported.setRequeueAtNs(requeue_at);
  return true;
}

}  // namespace admission::ops::kueue_yaml_internal
