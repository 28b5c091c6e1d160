// The readable views of `intentd stats`, `seen` and the other client
// commands, against a fake agent that answers canned lines (so times and
// counts are exact). `uncertain`'s view: uncertain_view_test.cc.
#include <gtest/gtest.h>

#include "tests/agent/agent_util.h"
#include "tests/agent/fake_agent.h"

namespace intentd::testing {
namespace {

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
  EXPECT_NE(out.find("intentd up 1h02m (since 20"), std::string::npos) << out;
  EXPECT_NE(out.find("Z), 3 connections open (40 since start), 500 requests"), std::string::npos)
      << out;
  EXPECT_NE(out.find("118 execute, 9 in_flight, 2 recover, 21 replay"), std::string::npos) << out;
  EXPECT_NE(out.find("redeliveries   30 absorbed"), std::string::npos) << out;
  EXPECT_NE(out.find("diverged       4 payloads differed"), std::string::npos) << out;
  EXPECT_NE(out.find("110 completed, 3 failed, 5 released (retriable), 1 lease_lost"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("errors         3: bad_request 2, storage_error 1"), std::string::npos) << out;
}

// Every instant a person reads is ISO 8601 in UTC with its milliseconds;
// --json keeps the agent's epoch milliseconds.
TEST(SeenView, InstantsAreIso8601Utc) {
  TempDir dir;
  const json claimed = {{"ok", true},
                        {"first", true},
                        {"state", "processing"},
                        {"count", 1},
                        {"first_seen_at_ms", 1796323135699},
                        {"expires_at_ms", 1798915135699},
                        {"lease_token", 2},
                        {"lease_until_ms", 1796323255699}};
  {
    FakeAgent fake(dir.path() + "/s1", claimed.dump());
    std::string out, err;
    ASSERT_EQ(RunIntentd({"seen", "--socket", fake.path(), "--tenant", "acme", "--channel", "w",
                          "--message-id", "m1", "--lease-ms", "120000"},
                         &out, &err),
              0)
        << err;
    EXPECT_NE(out.find("claimed with lease token 2 until 2026-12-03T18:40:55.699Z (an earlier "
                       "claim expired unfinished)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("expires at 2027-01-02T18:38:55.699Z unless seen again"), std::string::npos)
        << out;
    EXPECT_EQ(out.find("1796323"), std::string::npos) << "no epoch milliseconds\n" << out;
  }
  const json duplicate = {{"ok", true},
                          {"first", false},
                          {"state", "done"},
                          {"count", 3},
                          {"first_seen_at_ms", 1796323135699},
                          {"expires_at_ms", 1798915135699}};
  {
    FakeAgent fake(dir.path() + "/s2", duplicate.dump());
    std::string out, err;
    ASSERT_EQ(RunIntentd({"seen", "--socket", fake.path(), "--tenant", "acme", "--channel", "w",
                          "--message-id", "m1"},
                         &out, &err),
              0)
        << err;
    EXPECT_NE(out.find("duplicate: drop it (seen 3 times, first at 2026-12-03T18:38:55.699Z, "
                       "state done)"),
              std::string::npos)
        << out;
  }
  FakeAgent fake(dir.path() + "/s3", duplicate.dump());
  std::string out, err;
  ASSERT_EQ(RunIntentd({"seen", "--socket", fake.path(), "--tenant", "acme", "--channel", "w",
                        "--message-id", "m1", "--json"},
                       &out, &err),
            0);
  EXPECT_EQ(json::parse(out)["first_seen_at_ms"], 1796323135699);
}

TEST(ClientView, InstantsOfAnyAnswerAreIso8601AndDurationsStayMilliseconds) {
  TempDir dir;
  const json status = {{"ok", true},
                       {"action",
                        {{"status", "started"},
                         {"created_at_ms", 0},
                         {"updated_at_ms", -1},
                         {"lease_until_ms", 1796323135699}}},
                       {"retry_after_ms", 4500}};
  FakeAgent fake(dir.path() + "/s", status.dump());
  std::string out, err;
  ASSERT_EQ(
      RunIntentd({"status", "--socket", fake.path(), "--tenant", "acme", "--key", "k"}, &out, &err),
      0)
      << err;
  EXPECT_NE(out.find("  lease_until: 2026-12-03T18:38:55.699Z\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  created_at: 1970-01-01T00:00:00.000Z\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  updated_at: 1969-12-31T23:59:59.999Z\n"), std::string::npos) << out;
  EXPECT_NE(out.find("retry_after_ms: 4500\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace intentd::testing
