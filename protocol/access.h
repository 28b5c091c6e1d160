// Who may do what: the config's access rules applied to a connection's peer.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"
#include "transport/server.h"

namespace intentd::agent {

// The rights of one peer, computed from the rules that match it (by uid, or
// by a gid among the peer's groups). With no rules at all everything is
// allowed: the socket file's permissions are then the boundary.
class Access {
 public:
  Access(const std::vector<AccessRule>& rules, const transport::PeerCredentials& peer);

  bool MayUseTenant(const std::string& tenant_id) const;
  bool admin() const { return admin_; }
  // Every tenant ("*" in a matching rule, or no rules at all): what
  // whole-store operations (backup, keys) need besides admin().
  bool all_tenants() const { return unrestricted_ || all_tenants_; }
  // The tenants named by the matching rules (when !all_tenants()).
  const std::vector<std::string>& tenants() const { return tenants_; }
  bool any_rule() const { return matched_; }
  // Who is asking, as approvals record it: "uid 1000" (built on demand: an
  // Access is made per request).
  std::string who() const { return "uid " + std::to_string(uid_); }

 private:
  bool unrestricted_ = false;
  bool matched_ = false;
  bool admin_ = false;
  bool all_tenants_ = false;
  std::vector<std::string> tenants_;
  uid_t uid_ = 0;
};

}  // namespace intentd::agent
