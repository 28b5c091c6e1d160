#include "transport/peer_credentials.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace intentd::transport {

bool ReadPeerCredentials(int fd, PeerCredentials* peer, std::string* error) {
  struct ucred cred {};
  socklen_t length = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    *error = std::string("getsockopt(SO_PEERCRED): ") + std::strerror(errno);
    return false;
  }
  peer->pid = cred.pid;
  peer->uid = cred.uid;
  peer->gid = cred.gid;
  return true;
}

std::vector<gid_t> LookupUserGroups(uid_t uid) {
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  int rc;
  while ((rc = getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (1u << 20)) {
    buffer.resize(buffer.size() * 2);
  }
  if (rc != 0 || found == nullptr) return {};

  int count = 32;
  std::vector<gid_t> groups(count);
  for (int attempt = 0; attempt < 8; ++attempt) {
    int n = count;
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) >= 0) {
      groups.resize(n);
      return groups;
    }
    // n now holds the number needed (glibc); grow at least twofold anyway.
    count = std::max(n, count * 2);
    groups.resize(count);
  }
  return {pw.pw_gid};
}

GroupCache::GroupCache(std::chrono::milliseconds ttl, Clock clock, Lookup lookup)
    : ttl_(ttl), clock_(std::move(clock)), lookup_(std::move(lookup)) {}

void GroupCache::Fill(PeerCredentials* peer) {
  std::vector<gid_t> groups;
  bool hit = false;
  const auto now = clock_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(peer->uid);
    if (it != entries_.end() && now < it->second.expires) {
      groups = it->second.groups;
      hit = true;
    }
  }
  if (!hit) {
    // The lookup may block on NSS: never under the lock.
    groups = lookup_(peer->uid);
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_[peer->uid] = Entry{groups, now + ttl_};
  }
  if (std::find(groups.begin(), groups.end(), peer->gid) == groups.end()) {
    groups.push_back(peer->gid);
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  peer->groups = std::move(groups);
}

}  // namespace intentd::transport
