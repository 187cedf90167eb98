// BudgetPolicy (admission-ledger.io/v1alpha1, docs/budgets.md): resource-hours per period for a
// scope. A named time zone is resolved here, once, into the UTC offsets the definition records.

#include <date/tz.h>

#include "ops/kueue_yaml/parser.h"
#include "schema/quantity.h"

namespace admission::ops::kueue_yaml_internal {

namespace {

constexpr int64_t kHourNs = 3600LL * kNsPerSecond;
constexpr int64_t kQuarterHourNs = kHourNs / 4;
constexpr int64_t kRollingWindowMaxNs = 744 * kHourNs;  // 31 days: usage is kept 32

// The zone's offsets from 1970 to 2100, or an error for an unknown zone.
Result<std::vector<std::pair<int64_t, int32_t>>> ZoneOffsets(const std::string& name) {
  using namespace std::chrono;
  const date::time_zone* zone = nullptr;
  try {
    zone = date::locate_zone(name);
  } catch (const std::exception& e) {
    return Status(Code::kInvalidArgument,
                  Quote(name) + " is not a time zone of the tz database (e.g. Europe/Berlin, UTC)");
  }
  std::vector<std::pair<int64_t, int32_t>> out;
  const date::sys_seconds end{seconds{4102444800}};  // 2100-01-01
  for (date::sys_seconds t{seconds{0}}; t < end;) {
    const date::sys_info info = zone->get_info(t);
    const int32_t offset = static_cast<int32_t>(info.offset.count());
    if (out.empty() || out.back().second != offset) {
      out.emplace_back(out.empty() ? 0 : t.time_since_epoch().count() * kNsPerSecond, offset);
    }
    if (info.end <= t) break;
    t = info.end;
  }
  return out;
}

}  // namespace

bool DocumentParser::ParseBudgetScope(const YAML::Node& spec, const std::string& sp,
                                      schema::BudgetPolicyDef::Builder def) {
  const YAML::Node scope = Child(spec, "scope");
  const std::string scp = Join(sp, "scope");
  if (Absent(scope)) {
    return Fail(spec, scp, "required: namespace (and localQueue), clusterQueue or cohort");
  }
  if (!ExpectMap(scope, scp)) return false;
  std::string ns, lq, cq, cohort;
  if (!OptString(scope, "namespace", scp, &ns) || !OptString(scope, "localQueue", scp, &lq) ||
      !OptString(scope, "clusterQueue", scp, &cq) || !OptString(scope, "cohort", scp, &cohort)) {
    return false;
  }
  const int kinds = !ns.empty() + !cq.empty() + !cohort.empty();
  if (kinds != 1 || (!lq.empty() && ns.empty())) {
    return Fail(scope, scp,
                "names exactly one of namespace (with localQueue for one queue), clusterQueue "
                "or cohort");
  }
  if (!ns.empty()) {
    def.setScopeKind(lq.empty() ? schema::BudgetScopeKind::NAMESPACE
                                : schema::BudgetScopeKind::LOCAL_QUEUE);
    def.setScopeNamespace(T(ns));
    def.setScopeName(T(lq));
  } else {
    def.setScopeKind(cq.empty() ? schema::BudgetScopeKind::COHORT
                                : schema::BudgetScopeKind::CLUSTER_QUEUE);
    def.setScopeName(T(cq.empty() ? cohort : cq));
  }
  return true;
}

bool DocumentParser::ParseBudgetPeriod(const YAML::Node& spec, const std::string& sp,
                                       schema::BudgetPolicyDef::Builder def) {
  const YAML::Node period = Child(spec, "period");
  const std::string pp = Join(sp, "period");
  if (Absent(period)) return Fail(spec, pp, "required: calendar (Month or Week) or rolling");
  if (!ExpectMap(period, pp)) return false;
  const YAML::Node calendar = Child(period, "calendar");
  const YAML::Node rolling = Child(period, "rolling");
  if (Absent(calendar) == Absent(rolling)) {
    return Fail(period, pp, "names exactly one of calendar (Month or Week) and rolling");
  }
  if (!Absent(rolling)) {
    std::string text;
    if (!ReadString(rolling, Join(pp, "rolling"), &text)) return false;
    Result<int64_t> ns = schema::ParseDurationNs(text);
    if (!ns.ok() || *ns < kQuarterHourNs || *ns > kRollingWindowMaxNs ||
        *ns % kQuarterHourNs != 0) {
      return Fail(rolling, Join(pp, "rolling"),
                  Quote(text) + " is not a window of whole quarter hours from 15m to 744h");
    }
    def.setPeriod(schema::BudgetPeriodKind::ROLLING);
    def.setWindowNs(*ns);
    return true;
  }
  std::string kind;
  if (!ReadEnum(calendar, Join(pp, "calendar"), {"Month", "Week"}, &kind)) return false;
  def.setPeriod(kind == "Month" ? schema::BudgetPeriodKind::MONTH : schema::BudgetPeriodKind::WEEK);
  std::string zone = "UTC";
  if (!OptString(period, "timeZone", pp, &zone)) return false;
  if (zone.empty()) zone = "UTC";
  auto offsets = ZoneOffsets(zone);
  if (!offsets.ok()) return Fail(Child(period, "timeZone"), Join(pp, "timeZone"),
                                 offsets.status().message());
  def.setTimeZone(T(zone));
  auto list = def.initUtcOffsets(static_cast<unsigned>(offsets->size()));
  for (size_t i = 0; i < offsets->size(); ++i) {
    list[static_cast<unsigned>(i)].setFromNs((*offsets)[i].first);
    list[static_cast<unsigned>(i)].setOffsetSeconds((*offsets)[i].second);
  }
  return true;
}

bool DocumentParser::ParseBudgetPolicy(const YAML::Node& obj, const std::string& p) {
  Meta meta(obj);
  if (!ReadMeta(obj, p, Scope::kCluster, false, &meta)) return false;
  const YAML::Node spec = Child(obj, "spec");
  const std::string sp = Join(p, "spec");
  if (Absent(spec)) return Fail(obj, sp, "required: scope, limits and period");
  if (!CheckSpec(spec, p)) return false;
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<schema::Event>().getBody().initBudgetPolicyDefined();
  def.setName(T(meta.name));
  if (!ParseBudgetScope(spec, sp, def)) return false;
  std::map<std::string, int64_t> limits;
  const YAML::Node l = Child(spec, "limits");
  if (Absent(l)) return Fail(spec, Join(sp, "limits"), "required: resource-hours per resource");
  if (!ReadResourceMap(l, Join(sp, "limits"), &limits)) return false;
  if (limits.empty()) return Fail(l, Join(sp, "limits"), "names no resource");
  auto list = def.initLimits(static_cast<unsigned>(limits.size()));
  unsigned i = 0;
  for (const auto& [resource, milli] : limits) {
    if (milli <= 0) {
      return Fail(Child(l, resource), MapKey(Join(sp, "limits"), resource),
                  "must be more than 0 resource-hours");
    }
    list[i].setResource(T(resource));
    list[i++].setMilliUnitHours(milli);
  }
  if (!ParseBudgetPeriod(spec, sp, def)) return false;
  const YAML::Node half_life = Child(spec, "halfLife");
  if (!Absent(half_life)) {
    std::string text;
    if (!ReadString(half_life, Join(sp, "halfLife"), &text)) return false;
    Result<int64_t> ns = schema::ParseDurationNs(text);
    if (!ns.ok() || *ns < kQuarterHourNs || *ns % kQuarterHourNs != 0) {
      return Fail(half_life, Join(sp, "halfLife"),
                  Quote(text) + " is not a whole number of quarter hours (15m or more)");
    }
    def.setHalfLifeNs(*ns);
  }
  const YAML::Node unknown = Child(spec, "unknownRuntime");
  if (!Absent(unknown)) {
    std::string mode;
    if (!ReadEnum(unknown, Join(sp, "unknownRuntime"), {"MaximumExecutionTime", "Reject"},
                  &mode)) {
      return false;
    }
    def.setUnknownRuntime(mode == "Reject" ? schema::UnknownRuntime::REJECT
                                           : schema::UnknownRuntime::MAXIMUM_EXECUTION_TIME);
  }
  return Emit(message, obj, p, "BudgetPolicy", kind_, "", meta.name);
}

}  // namespace admission::ops::kueue_yaml_internal
