// Who is on the other end of a Unix socket: SO_PEERCRED plus the supplementary
// groups of the peer's uid from the user database.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/server.h"

namespace intentd::transport {

// Fills pid, uid and gid of the peer of a connected AF_UNIX socket (as of
// connect()). False with *error set when getsockopt fails.
bool ReadPeerCredentials(int fd, PeerCredentials* peer, std::string* error);

// The groups of `uid` per the user database: getpwuid_r, then getgrouplist
// with the user's primary group. Empty when the uid has no passwd entry.
// May block (NSS); call it off the I/O threads.
std::vector<gid_t> LookupUserGroups(uid_t uid);

// Caches LookupUserGroups per uid for `ttl`, so a burst of connections from
// one bot costs one lookup. Thread safe.
class GroupCache {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Lookup = std::function<std::vector<gid_t>(uid_t)>;

  GroupCache(std::chrono::milliseconds ttl, Clock clock, Lookup lookup);

  // peer->groups = groups of peer->uid, plus peer->gid when missing, sorted.
  void Fill(PeerCredentials* peer);

 private:
  struct Entry {
    std::vector<gid_t> groups;
    std::chrono::steady_clock::time_point expires;
  };
  static constexpr size_t kMaxEntries = 4096;

  const std::chrono::milliseconds ttl_;
  const Clock clock_;
  const Lookup lookup_;
  std::mutex mu_;
  std::unordered_map<uid_t, Entry> entries_;  // guarded by mu_
};

}  // namespace intentd::transport
