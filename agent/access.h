// Who may do what: the config's access rules applied to a connection's peer.
#pragma once

#include <string>
#include <vector>

#include "agent/config.h"
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
  bool any_rule() const { return matched_; }

 private:
  bool unrestricted_ = false;
  bool matched_ = false;
  bool admin_ = false;
  bool all_tenants_ = false;
  std::vector<std::string> tenants_;
};

}  // namespace intentd::agent
