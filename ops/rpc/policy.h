#pragma once
// Who may do what through admitd: principals (a TLS certificate's common name, `uid:N` for a
// Unix peer, or `admin`) and their roles, from a YAML file (docs/admitd.md, "Policy").

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "projections/engine.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::ops::rpc {

enum class Role { kOperator, kTenant, kCheckController, kRuntime, kAuditor, kBridge };
const char* RoleName(Role role);

struct PrincipalPolicy {
  std::string name;
  std::vector<Role> roles;
  std::vector<std::string> namespaces;  // a tenant's namespaces
  std::string token_sha256;             // the dashboard's bearer token, hashed (hex); empty: none
  bool Has(Role role) const;
};

// The principal every capability check passes for: the daemon's own uid and root on its
// Unix socket.
inline constexpr const char* kAdminPrincipal = "admin";

class Policy {
 public:
  // Errors: kInvalidArgument naming the field path (principals[2].roles[0]) and the value.
  static Result<Policy> Parse(const std::string& yaml_text, const std::string& source);
  static Result<Policy> Load(const std::string& path);

  // null when the principal is not in the policy (admin is always known).
  const PrincipalPolicy* Find(const std::string& principal) const;
  // The principal whose tokenSha256 is the SHA-256 of `token` (the dashboard's bearer token).
  const PrincipalPolicy* FindByToken(std::string_view token) const;
  std::vector<std::string> RolesOf(const std::string& principal) const;

  // What a call needs. Each returns Ok, or kPermissionDenied naming the principal, the method
  // and the object.
  Status MayRecord(const std::string& principal, schema::Event::Reader input,
                   const projections::Engine& engine) const;
  // recordManifest's check before its manifest is parsed, by role alone: mode "apply" and
  // "delete" give definitions and their deletions (the operator or bridge role), "submit" and
  // "import" workloads (tenant or bridge, as admitctl submit and import). Necessary, not enough:
  // MayRecord still checks every event the manifest gives. REQUIRES: mode is one of the four.
  Status MayRecordManifest(const std::string& principal, std::string_view mode) const;
  Status MayRead(const std::string& principal, const std::string& method) const;
  Status MayOperate(const std::string& principal, const std::string& method) const;
  // get and explain: auditors and operators see everything; a tenant its namespaces.
  Status MaySee(const std::string& principal, const std::string& method,
                const std::string& ns) const;
  // The namespaces a principal's get is limited to (empty: all). REQUIRES: MaySee passed for "".
  std::vector<std::string> ScopeOf(const std::string& principal) const;
  // watch: operators, auditors, runtimes and bridges see every event; a tenant only its namespaces and a
  // check controller only its checks (the filter is narrowed to them).
  Status MayWatch(const std::string& principal, std::vector<std::string>* namespaces,
                  std::vector<std::string>* checks, const projections::Engine& engine) const;

 private:
  std::map<std::string, PrincipalPolicy> principals_;
};

}  // namespace admission::ops::rpc
