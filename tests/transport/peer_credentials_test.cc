#include "transport/peer_credentials.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace intentd::transport {
namespace {

TEST(PeerCredentials, SocketPairReportsThisProcess) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  PeerCredentials peer;
  std::string error;
  ASSERT_TRUE(ReadPeerCredentials(fds[0], &peer, &error)) << error;
  EXPECT_EQ(peer.pid, getpid());
  EXPECT_EQ(peer.uid, getuid());
  EXPECT_EQ(peer.gid, getgid());
  close(fds[0]);
  close(fds[1]);
}

TEST(PeerCredentials, NotASocketIsAnError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  PeerCredentials peer;
  std::string error;
  EXPECT_FALSE(ReadPeerCredentials(fds[0], &peer, &error));
  EXPECT_NE(error.find("SO_PEERCRED"), std::string::npos);
  close(fds[0]);
  close(fds[1]);
}

TEST(LookupUserGroups, IncludesThePrimaryGroupOfAKnownUser) {
  // root (uid 0) exists everywhere, with primary group 0.
  std::vector<gid_t> groups = LookupUserGroups(0);
  EXPECT_NE(std::find(groups.begin(), groups.end(), 0u), groups.end());
}

TEST(LookupUserGroups, UnknownUidHasNoGroups) {
  EXPECT_TRUE(LookupUserGroups(static_cast<uid_t>(4000000000u)).empty());
}

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
};

TEST(GroupCache, AddsThePeerGidAndSorts) {
  FakeClock clock;
  GroupCache cache(
      std::chrono::seconds(30), [&] { return clock.now; },
      [](uid_t) {
        return std::vector<gid_t>{30, 10, 20};
      });
  PeerCredentials peer;
  peer.uid = 1000;
  peer.gid = 15;
  cache.Fill(&peer);
  EXPECT_EQ(peer.groups, (std::vector<gid_t>{10, 15, 20, 30}));
  peer.gid = 20;  // already a member: not repeated
  cache.Fill(&peer);
  EXPECT_EQ(peer.groups, (std::vector<gid_t>{10, 20, 30}));
}

TEST(GroupCache, LooksUpOncePerUidUntilTheEntryExpires) {
  FakeClock clock;
  int lookups = 0;
  std::vector<gid_t> answer{100};
  GroupCache cache(
      std::chrono::seconds(30), [&] { return clock.now; },
      [&](uid_t) {
        ++lookups;
        return answer;
      });
  PeerCredentials peer;
  peer.uid = 1000;
  peer.gid = 100;
  cache.Fill(&peer);
  cache.Fill(&peer);
  EXPECT_EQ(lookups, 1);

  PeerCredentials other;
  other.uid = 1001;
  other.gid = 100;
  cache.Fill(&other);
  EXPECT_EQ(lookups, 2);

  answer = {100, 200};  // the user was added to a group
  clock.now += std::chrono::seconds(29);
  cache.Fill(&peer);
  EXPECT_EQ(lookups, 2);
  EXPECT_EQ(peer.groups, (std::vector<gid_t>{100}));
  clock.now += std::chrono::seconds(1);
  cache.Fill(&peer);
  EXPECT_EQ(lookups, 3);
  EXPECT_EQ(peer.groups, (std::vector<gid_t>{100, 200}));
}

}  // namespace
}  // namespace intentd::transport
