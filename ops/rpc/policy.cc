#include "ops/rpc/policy.h"

#include <algorithm>

#include <yaml-cpp/yaml.h>

#include "ops/rpc/transport.h"

namespace admission::ops::rpc {

namespace {

Status Denied(const std::string& principal, const std::string& method, const std::string& object,
              const std::string& why) {
  return Status(Code::kPermissionDenied, "principal '" + principal + "' may not " + method +
                                             (object.empty() ? "" : " " + object) + ": " + why);
}

std::optional<Role> ParseRole(const std::string& name) {
  if (name == "operator") return Role::kOperator;
  if (name == "tenant") return Role::kTenant;
  if (name == "check-controller") return Role::kCheckController;
  if (name == "runtime") return Role::kRuntime;
  if (name == "auditor") return Role::kAuditor;
  if (name == "bridge") return Role::kBridge;
  return std::nullopt;
}

// The namespace of the workload an input is about ("" for none).
std::string NamespaceOf(schema::Event::Reader e) {
  auto body = e.getBody();
  switch (body.which()) {
    case schema::Event::Body::WORKLOAD_SUBMITTED:
      return body.getWorkloadSubmitted().getWorkload().getNamespace();
    case schema::Event::Body::WORKLOAD_IMPORTED:
      return body.getWorkloadImported().getWorkload().getNamespace();
    case schema::Event::Body::WORKLOAD_DELETED:
      return body.getWorkloadDeleted().getWorkload().getNamespace();
    case schema::Event::Body::WORKLOAD_FINISHED:
      return body.getWorkloadFinished().getWorkload().getNamespace();
    case schema::Event::Body::WORKLOAD_ACTIVATION_SET:
      return body.getWorkloadActivationSet().getWorkload().getNamespace();
    default:
      return "";
  }
}

// Kueue's spec.active: whoever may update the Workload (its namespace's tenant), an operator
// (kueuectl stop workload), or the bridge forwarding the Workload object.
Status MayActivate(const std::string& principal, const PrincipalPolicy& p, const std::string& kind,
                   const std::string& ns) {
  if (p.Has(Role::kOperator) || p.Has(Role::kBridge)) return Status::Ok();
  if (p.Has(Role::kTenant) &&
      std::find(p.namespaces.begin(), p.namespaces.end(), ns) != p.namespaces.end()) {
    return Status::Ok();
  }
  return Denied(principal, "record", kind + " in namespace " + ns,
                "needs the operator role, or the tenant role in that namespace");
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kOperator: return "operator";
    case Role::kTenant: return "tenant";
    case Role::kCheckController: return "check-controller";
    case Role::kRuntime: return "runtime";
    case Role::kAuditor: return "auditor";
    case Role::kBridge: return "bridge";
  }
  return "?";
}

bool PrincipalPolicy::Has(Role role) const {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

Result<Policy> Policy::Parse(const std::string& text, const std::string& source) {
  Policy policy;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status(Code::kInvalidArgument, source + ": not YAML: " + e.what());
  }
  auto bad = [&](const std::string& path, const std::string& why) {
    return Status(Code::kInvalidArgument, source + ": " + path + ": " + why);
  };
  if (!root.IsMap()) return bad("(top)", "expected a map with 'principals'");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "principals") return bad(key, "unknown field (expected 'principals')");
  }
  YAML::Node list = root["principals"];
  if (!list || !list.IsSequence()) return bad("principals", "expected a list of principals");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "principals[" + std::to_string(i) + "]";
    YAML::Node p = list[i];
    if (!p.IsMap()) return bad(path, "expected a map with name and roles");
    for (const auto& kv : p) {
      const std::string key = kv.first.as<std::string>();
      if (key != "name" && key != "roles" && key != "namespaces" && key != "tokenSha256") {
        return bad(path + "." + key,
                   "unknown field (expected name, roles, namespaces, tokenSha256)");
      }
    }
    PrincipalPolicy entry;
    if (!p["name"] || !p["name"].IsScalar() || p["name"].as<std::string>().empty()) {
      return bad(path + ".name", "required: the certificate's common name or uid:N");
    }
    entry.name = p["name"].as<std::string>();
    if (entry.name == kAdminPrincipal) {
      return bad(path + ".name", "'admin' is built in (the daemon's own uid) and may do everything");
    }
    if (entry.name.rfind("uid:", 0) == 0) {
      const std::string n = entry.name.substr(4);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) {
        return bad(path + ".name", "'" + entry.name + "': uid:N needs a number");
      }
    }
    if (policy.principals_.count(entry.name) != 0) {
      return bad(path + ".name", "'" + entry.name + "' appears twice");
    }
    YAML::Node roles = p["roles"];
    if (!roles || !roles.IsSequence() || roles.size() == 0) {
      return bad(path + ".roles",
                 "required: a list of operator, tenant, check-controller, runtime, auditor, "
                 "bridge");
    }
    for (size_t r = 0; r < roles.size(); ++r) {
      const std::string name = roles[r].IsScalar() ? roles[r].as<std::string>() : "";
      auto role = ParseRole(name);
      if (!role) {
        return bad(path + ".roles[" + std::to_string(r) + "]",
                   "'" + name + "' is not a role (operator, tenant, check-controller, runtime, "
                   "auditor, bridge)");
      }
      entry.roles.push_back(*role);
    }
    if (YAML::Node ns = p["namespaces"]) {
      if (!ns.IsSequence()) return bad(path + ".namespaces", "expected a list of namespaces");
      for (size_t n = 0; n < ns.size(); ++n) {
        if (!ns[n].IsScalar() || ns[n].as<std::string>().empty()) {
          return bad(path + ".namespaces[" + std::to_string(n) + "]", "expected a namespace name");
        }
        entry.namespaces.push_back(ns[n].as<std::string>());
      }
    }
    if (YAML::Node token = p["tokenSha256"]) {
      const std::string hex = token.IsScalar() ? token.as<std::string>() : "";
      if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return bad(path + ".tokenSha256",
                   "expected the SHA-256 of the principal's bearer token: 64 lowercase hex "
                   "digits (printf %s TOKEN | sha256sum)");
      }
      for (const auto& [other, policy_entry] : policy.principals_) {
        if (policy_entry.token_sha256 == hex) {
          return bad(path + ".tokenSha256", "the same token as principal '" + other + "'");
        }
      }
      entry.token_sha256 = hex;
    }
    if (entry.Has(Role::kTenant) && entry.namespaces.empty()) {
      return bad(path + ".namespaces", "a tenant needs the namespaces it may use");
    }
    policy.principals_[entry.name] = std::move(entry);
  }
  return policy;
}

const PrincipalPolicy* Policy::FindByToken(std::string_view token) const {
  if (token.empty()) return nullptr;
  const std::string hex = schema::HashHex(schema::Sha256Of(token));
  for (const auto& [name, p] : principals_) {
    if (!p.token_sha256.empty() && p.token_sha256 == hex) return &p;
  }
  return nullptr;
}

Result<Policy> Policy::Load(const std::string& path) {
  auto text = ReadFileText(path, "--policy");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

const PrincipalPolicy* Policy::Find(const std::string& principal) const {
  auto it = principals_.find(principal);
  return it == principals_.end() ? nullptr : &it->second;
}

std::vector<std::string> Policy::RolesOf(const std::string& principal) const {
  if (principal == kAdminPrincipal) return {"admin"};
  std::vector<std::string> names;
  if (const PrincipalPolicy* p = Find(principal)) {
    for (Role r : p->roles) names.emplace_back(RoleName(r));
  }
  return names;
}

Status Policy::MayRecord(const std::string& principal, schema::Event::Reader input,
                         const projections::Engine& engine) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const std::string kind = schema::BodyName(input);
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, "record", kind, "the principal is not in the policy");
  auto body = input.getBody();
  switch (body.which()) {
    case schema::Event::Body::WORKLOAD_SUBMITTED:
    case schema::Event::Body::WORKLOAD_IMPORTED:
    case schema::Event::Body::WORKLOAD_DELETED:
    case schema::Event::Body::WORKLOAD_FINISHED: {
      const std::string ns = NamespaceOf(input);
      // A bridge submits, deletes and finishes the workloads of every namespace of its cluster.
      if (p->Has(Role::kBridge)) return Status::Ok();
      if (!p->Has(Role::kTenant)) {
        return Denied(principal, "record", kind + " in " + ns,
                      "needs the tenant role (or the bridge role)");
      }
      if (std::find(p->namespaces.begin(), p->namespaces.end(), ns) == p->namespaces.end()) {
        return Denied(principal, "record", kind + " in namespace " + ns,
                      "not one of its namespaces");
      }
      return Status::Ok();
    }
    case schema::Event::Body::WORKLOAD_ACTIVATION_SET:
      return MayActivate(principal, *p, kind, NamespaceOf(input));
    case schema::Event::Body::CHECK_STATE_REPORTED: {
      auto report = body.getCheckStateReported();
      const std::string check = report.getCheck();
      const std::string via = report.getViaFieldManager();
      auto it = engine.admission_checks().find(check);
      if (!via.empty()) {
        // Forwarded from a cluster's Workload status by a bridge, on the weaker proof of the
        // API server's field manager: only a bridge may vouch for one, and only for the owner.
        if (!p->Has(Role::kBridge)) {
          return Denied(principal, "report-check", check + " via field manager " + via,
                        "only the bridge role forwards reports from a cluster");
        }
        if (it == engine.admission_checks().end()) {
          return Denied(principal, "report-check", check, "no such AdmissionCheck");
        }
        if (it->second.controller != via) {
          return Denied(principal, "report-check", check + " via field manager " + via,
                        "its spec.controllerName is '" + it->second.controller + "'");
        }
        return Status::Ok();
      }
      if (!p->Has(Role::kCheckController)) {
        return Denied(principal, "report-check", check,
                      p->Has(Role::kBridge)
                          ? "a bridge reports a check only as forwarded from a cluster "
                            "(viaFieldManager), or needs the check-controller role"
                          : "needs the check-controller role");
      }
      if (it == engine.admission_checks().end()) {
        return Denied(principal, "report-check", check, "no such AdmissionCheck");
      }
      if (it->second.controller != principal) {
        return Denied(principal, "report-check", check,
                      "its spec.controllerName is '" + it->second.controller + "'");
      }
      return Status::Ok();
    }
    case schema::Event::Body::PODS_REPORTED:
      if (!p->Has(Role::kRuntime) && !p->Has(Role::kBridge)) {
        return Denied(principal, "report pods", "", "needs the runtime role (or the bridge role)");
      }
      return Status::Ok();
    case schema::Event::Body::NODE_CAPACITY_CHANGED:
    case schema::Event::Body::NODE_FAILED:
    case schema::Event::Body::NODE_RECOVERED:
      // A bridge forwards its cluster's Node objects (docs/k8s.md, "Node inventory").
      if (!p->Has(Role::kOperator) && !p->Has(Role::kBridge)) {
        return Denied(principal, "record", kind, "needs the operator role (or the bridge role)");
      }
      return Status::Ok();
    case schema::Event::Body::FLAVOR_DEFINED:
    case schema::Event::Body::COHORT_DEFINED:
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
    case schema::Event::Body::LOCAL_QUEUE_DEFINED:
    case schema::Event::Body::ADMISSION_CHECK_DEFINED:
    case schema::Event::Body::PRIORITY_CLASS_DEFINED:
    case schema::Event::Body::BUDGET_POLICY_DEFINED:
    case schema::Event::Body::TOPOLOGY_DEFINED:
    case schema::Event::Body::OBJECT_DELETED:
      // The Kueue objects a bridge forwards from its cluster, and their deletions.
      if (!p->Has(Role::kOperator) && !p->Has(Role::kBridge)) {
        return Denied(principal, "record", kind, "needs the operator role (or the bridge role)");
      }
      return Status::Ok();
    default:
      // Definitions, configuration, nodes, maintenance, revocations and clock ticks.
      if (!p->Has(Role::kOperator)) return Denied(principal, "record", kind, "needs the operator role");
      return Status::Ok();
  }
}

Status Policy::MayRecordManifest(const std::string& principal, std::string_view mode) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const std::string what = "a manifest (mode " + std::string(mode) + ")";
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, "recordManifest", what, "the principal is not in the policy");
  if (p->Has(Role::kBridge)) return Status::Ok();
  if (mode == "submit" || mode == "import") {
    // As the events: workloadSubmitted and workloadImported need the tenant role (in the
    // namespace, checked per event by MayRecord) or the bridge role.
    if (p->Has(Role::kTenant)) return Status::Ok();
    return Denied(principal, "recordManifest", what, "needs the tenant role (or the bridge role)");
  }
  if (p->Has(Role::kOperator)) return Status::Ok();
  return Denied(principal, "recordManifest", what, "needs the operator role (or the bridge role)");
}

Status Policy::MayRead(const std::string& principal, const std::string& method) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, method, "", "the principal is not in the policy");
  if (p->Has(Role::kAuditor) || p->Has(Role::kOperator)) return Status::Ok();
  return Denied(principal, method, "", "needs the auditor or operator role");
}

Status Policy::MayOperate(const std::string& principal, const std::string& method) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, method, "", "the principal is not in the policy");
  if (p->Has(Role::kOperator)) return Status::Ok();
  return Denied(principal, method, "", "needs the operator role");
}

Status Policy::MaySee(const std::string& principal, const std::string& method,
                      const std::string& ns) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, method, "", "the principal is not in the policy");
  if (p->Has(Role::kAuditor) || p->Has(Role::kOperator)) return Status::Ok();
  // Check controllers, runtimes and bridges look workloads up to report on them.
  if (p->Has(Role::kCheckController) || p->Has(Role::kRuntime) || p->Has(Role::kBridge)) {
    return Status::Ok();
  }
  if (p->Has(Role::kTenant)) {
    if (ns.empty() ||
        std::find(p->namespaces.begin(), p->namespaces.end(), ns) != p->namespaces.end()) {
      return Status::Ok();
    }
    return Denied(principal, method, "namespace " + ns, "not one of its namespaces");
  }
  return Denied(principal, method, ns, "no role that may read workloads");
}

std::vector<std::string> Policy::ScopeOf(const std::string& principal) const {
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr || p->Has(Role::kAuditor) || p->Has(Role::kOperator) ||
      p->Has(Role::kCheckController) || p->Has(Role::kRuntime) || p->Has(Role::kBridge)) {
    return {};
  }
  return p->namespaces;
}

Status Policy::MayWatch(const std::string& principal, std::vector<std::string>* namespaces,
                        std::vector<std::string>* checks,
                        const projections::Engine& engine) const {
  if (principal == kAdminPrincipal) return Status::Ok();
  const PrincipalPolicy* p = Find(principal);
  if (p == nullptr) return Denied(principal, "watch", "", "the principal is not in the policy");
  if (p->Has(Role::kAuditor) || p->Has(Role::kOperator) || p->Has(Role::kRuntime) ||
      p->Has(Role::kBridge)) {
    return Status::Ok();
  }
  if (p->Has(Role::kCheckController)) {
    std::vector<std::string> owned;
    for (const auto& [name, spec] : engine.admission_checks()) {
      if (spec.controller == principal) owned.push_back(name);
    }
    if (checks->empty()) {
      *checks = owned;
    } else {
      for (const std::string& c : *checks) {
        if (std::find(owned.begin(), owned.end(), c) == owned.end()) {
          return Denied(principal, "watch", "check " + c, "not one of its checks");
        }
      }
    }
    if (checks->empty()) return Denied(principal, "watch", "", "it owns no AdmissionCheck");
    return Status::Ok();
  }
  if (p->Has(Role::kTenant)) {
    if (namespaces->empty()) {
      *namespaces = p->namespaces;
      return Status::Ok();
    }
    for (const std::string& ns : *namespaces) {
      if (std::find(p->namespaces.begin(), p->namespaces.end(), ns) == p->namespaces.end()) {
        return Denied(principal, "watch", "namespace " + ns, "not one of its namespaces");
      }
    }
    return Status::Ok();
  }
  return Denied(principal, "watch", "", "no role that may watch");
}

}  // namespace admission::ops::rpc
