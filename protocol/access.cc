#include "protocol/access.h"

#include <algorithm>

namespace intentd::agent {

Access::Access(const std::vector<AccessRule>& rules, const transport::PeerCredentials& peer)
    : uid_(peer.uid) {
  if (rules.empty()) {
    unrestricted_ = matched_ = admin_ = all_tenants_ = true;
    return;
  }
  for (const AccessRule& rule : rules) {
    bool match =
        (rule.uid && *rule.uid == peer.uid) ||
        (rule.gid && (*rule.gid == peer.gid || std::find(peer.groups.begin(), peer.groups.end(),
                                                         *rule.gid) != peer.groups.end()));
    if (!match) continue;
    matched_ = true;
    admin_ = admin_ || rule.admin;
    for (const std::string& t : rule.tenants) {
      if (t == "*")
        all_tenants_ = true;
      else
        tenants_.push_back(t);
    }
  }
}

bool Access::MayUseTenant(const std::string& tenant_id) const {
  if (unrestricted_ || all_tenants_) return true;
  return std::find(tenants_.begin(), tenants_.end(), tenant_id) != tenants_.end();
}

}  // namespace intentd::agent
