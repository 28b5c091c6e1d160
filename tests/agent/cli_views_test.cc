// The readable views of `intentd uncertain` and `intentd stats`, against a
// fake agent that answers one canned line (so ages and counts are exact).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

// Listens on a Unix socket; answers the first request line with `response`.
class FakeAgent {
 public:
  FakeAgent(const std::string& path, std::string response) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 4);
    thread_ = std::thread([this, response] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string line;
      char ch;
      while (read(c, &ch, 1) == 1 && ch != '\n') line.push_back(ch);
      request_ = line;
      const std::string out = response + "\n";
      (void)!write(c, out.data(), out.size());
      close(c);
    });
  }
  ~FakeAgent() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  const std::string& path() const { return path_; }
  std::string request() {
    thread_.join();
    thread_ = std::thread([] {});
    return request_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::string request_;
};

TEST(UncertainView, OldestFirstPerTenantWithAgeAttemptsAndActionType) {
  TempDir dir;
  // As the agent orders them: by lease expiry, oldest first, tenants mixed.
  const json actions = json::array({
      {{"tenant_id", "globex"},
       {"key", "k-g1"},
       {"intent_ref", "G-1"},
       {"action_type", "pix.cobranca"},
       {"attempt", 2},
       {"lease_token", 2},
       {"created_at_ms", 1000},
       {"lease_until_ms", 7201000},
       {"expired_for_ms", 3 * 3600 * 1000 + 125000}},
      {{"tenant_id", "acme"},
       {"key", "k-a1"},
       {"intent_ref", "FAT-1"},
       {"action_type", "email.cobranca"},
       {"attempt", 1},
       {"lease_token", 1},
       {"created_at_ms", 5000000},
       {"lease_until_ms", 5300000},
       {"expired_for_ms", 725000}},
      {{"tenant_id", "globex"},
       {"key", "k-g2"},
       {"intent_ref", "G-2"},
       {"action_type", "pix.cobranca"},
       {"attempt", 1},
       {"lease_token", 1},
       {"created_at_ms", 5900000},
       {"lease_until_ms", 6000000},
       {"expired_for_ms", 45000}},
  });
  FakeAgent fake(dir.path() + "/s", json{{"ok", true}, {"actions", actions}}.dump());
  std::string out, err;
  ASSERT_EQ(RunIntentd({"uncertain", "--socket", fake.path(), "--limit", "3"}, &out, &err), 0)
      << err;
  EXPECT_EQ(json::parse(fake.request()), (json{{"op", "uncertain"}, {"limit", 3}}));
  const size_t globex = out.find("tenant globex (2)"), acme = out.find("tenant acme (1)");
  ASSERT_NE(globex, std::string::npos) << out;
  ASSERT_NE(acme, std::string::npos) << out;
  EXPECT_LT(globex, acme) << "the tenant of the oldest action comes first\n" << out;
  const size_t g1 = out.find("G-1"), g2 = out.find("G-2");
  EXPECT_LT(g1, g2);
  EXPECT_LT(g2, acme);
  EXPECT_NE(out.find("3 uncertain actions"), std::string::npos) << out;
  // expired 3h02m ago; created 2h before its lease ran out: age 5h02m; attempt 2.
  EXPECT_NE(out.find("3h02m     5h02m            2  pix.cobranca     G-1"), std::string::npos)
      << out;
  // expired 12m05s ago, created 5 min before the lease end: age 17m05s.
  EXPECT_NE(out.find("12m05s    17m05s           1  email.cobranca   FAT-1"), std::string::npos)
      << out;
  EXPECT_NE(out.find("45s"), std::string::npos);
  EXPECT_NE(out.find("k-a1"), std::string::npos);
  EXPECT_NE(out.find("the first 3; there may be more"), std::string::npos) << out;
}

TEST(UncertainView, JsonIsTheAgentsResponseAndEmptySaysSo) {
  TempDir dir;
  {
    FakeAgent fake(dir.path() + "/s", R"({"ok":true,"actions":[]})");
    std::string out, err;
    ASSERT_EQ(RunIntentd({"uncertain", "--socket", fake.path()}, &out, &err), 0) << err;
    EXPECT_EQ(out, "no uncertain actions\n");
  }
  FakeAgent fake(dir.path() + "/s2", R"({"ok":true,"actions":[]})");
  std::string out, err;
  ASSERT_EQ(
      RunIntentd({"uncertain", "--socket", fake.path(), "--json", "--tenant", "acme"}, &out, &err),
      0);
  EXPECT_EQ(out, "{\"ok\":true,\"actions\":[]}\n");
  EXPECT_EQ(json::parse(fake.request())["tenant_id"], "acme");
}

TEST(StatsView, CountersReadAsSentences) {
  TempDir dir;
  FakeAgent fake(
      dir.path() + "/s",
      json{{"ok", true},
           {"intents_created", 120},
           {"intents_reused", 30},
           {"diverged", 4},
           {"decisions", {{"execute", 118}, {"in_flight", 9}, {"recover", 2}, {"replay", 21}}},
           {"completed", 110},
           {"failed", 3},
           {"released", 5},
           {"lease_lost", 1},
           {"errors", {{"bad_request", 2}, {"forbidden", 0}, {"storage_error", 1}}},
           {"connections", 3},
           {"connections_total", 40},
           {"requests", 500},
           {"uptime_ms", 3723000}}
          .dump());
  std::string out, err;
  ASSERT_EQ(RunIntentd({"stats", "--socket", fake.path()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("intentd up 1h02m, 3 connections open (40 since start), 500 requests"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("118 execute, 9 in_flight, 2 recover, 21 replay"), std::string::npos) << out;
  EXPECT_NE(out.find("redeliveries   30 absorbed"), std::string::npos) << out;
  EXPECT_NE(out.find("diverged       4 payloads differed"), std::string::npos) << out;
  EXPECT_NE(out.find("110 completed, 3 failed, 5 released (retriable), 1 lease_lost"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("errors         3: bad_request 2, storage_error 1"), std::string::npos) << out;
}

}  // namespace
}  // namespace intentd::testing
