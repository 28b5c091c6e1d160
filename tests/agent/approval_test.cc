// Approval above a threshold through the real agent and the CLI: a pending
// intent grants nothing however often it is redelivered; approve survives a
// SIGKILL before the bot's begin; deny ends it failed; only admins decide.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

constexpr char kPolicy[] =
    R"({"policy": {"pix.cobranca": {"money": {"valor": {"approval_above": "1000.00"}}}}})";

json Begin(const std::string& ref, const std::string& valor) { return PixBegin(ref, valor); }

int Cli(const std::vector<std::string>& args, const Agent& agent, std::string* out,
        std::string* err) {
  std::vector<std::string> all = args;
  all.push_back("--socket");
  all.push_back(agent.socket_path());
  return RunIntentd(all, out, err);
}

TEST(Approval, APendingIntentWaitsForAnAdminAndTheDecisionSurvivesSigkill) {
  TempDir dir;
  AgentOptions options;
  options.config_json = kPolicy;
  auto agent = std::make_unique<Agent>(dir.path(), options);
  ASSERT_TRUE(agent->started()) << agent->Log();
  const std::string who = "uid " + std::to_string(getuid());
  {
    Client c(agent->socket_path());
    json r = c.Call(Begin("FAT-BIG", "1800.00"));
    ASSERT_EQ(r.value("decision", ""), "pending_approval") << r.dump();
    EXPECT_FALSE(r.contains("lease_token")) << r.dump();
    EXPECT_EQ(r["approval"].value("state", ""), "pending") << r.dump();
    EXPECT_NE(r["approval"].value("reason", "").find("approval_above"), std::string::npos);
    // Redeliveries, even with another extraction, never execute it.
    for (const char* valor : {"1800.00", "18.00"}) {
      json again = c.Call(Begin("FAT-BIG", valor));
      EXPECT_EQ(again.value("decision", ""), "pending_approval") << again.dump();
    }
    json small = c.Call(Begin("FAT-SMALL", "180.00"));
    EXPECT_EQ(small.value("decision", ""), "execute") << small.dump();
    EXPECT_FALSE(small.contains("approval")) << small.dump();
    ASSERT_EQ(c.Call(Begin("FAT-DENY", "5000.00")).value("decision", ""), "pending_approval");
    json stats = c.Call({{"op", "stats"}});
    EXPECT_EQ(stats["decisions"].value("pending_approval", 0), 4) << stats.dump();
  }
  std::string out, err;
  EXPECT_EQ(Cli({"pending"}, *agent, &out, &err), 4) << out << err;
  EXPECT_NE(out.find("2 intents waiting for approval"), std::string::npos) << out;
  EXPECT_NE(out.find("FAT-BIG"), std::string::npos) << out;
  EXPECT_NE(out.find("R$ 1800.00"), std::string::npos) << out;
  ASSERT_EQ(Cli({"approve", "--tenant", "acme", "--ref", "FAT-BIG", "--action", "pix.cobranca",
                 "--note", "called the customer"},
                *agent, &out, &err),
            0)
      << out << err;
  EXPECT_NE(out.find("state: approved"), std::string::npos) << out;
  // Killed before the bot's begin: the approval is in the store.
  agent->Kill(SIGKILL);
  agent->Wait();
  agent = std::make_unique<Agent>(dir.path(), options);
  ASSERT_TRUE(agent->started()) << agent->Log();
  Client c(agent->socket_path());
  json r = c.Call(Begin("FAT-BIG", "1800.00"));
  ASSERT_EQ(r.value("decision", ""), "execute") << r.dump();
  EXPECT_EQ(r.value("lease_token", 0), 1);
  EXPECT_EQ(r["approval"].value("state", ""), "approved");
  EXPECT_EQ(r["approval"].value("decided_by", ""), who);
  EXPECT_EQ(r["approval"].value("note", ""), "called the customer");
  // Denied: failed for good.
  ASSERT_EQ(
      Cli({"deny", "--tenant", "acme", "--ref", "FAT-DENY", "--action", "pix.cobranca", "--json"},
          *agent, &out, &err),
      0)
      << out << err;
  json denied = json::parse(out);
  EXPECT_EQ(denied["action"].value("status", ""), "failed") << out;
  for (int i = 0; i < 2; ++i) {
    json replay = c.Call(Begin("FAT-DENY", "5000.00"));
    EXPECT_EQ(replay.value("decision", ""), "replay") << replay.dump();
    EXPECT_EQ(replay.value("status", ""), "failed");
    EXPECT_EQ(replay["error"].value("code", ""), "denied") << replay.dump();
    EXPECT_EQ(replay["error"].value("message", ""), "denied by " + who);
  }
  EXPECT_EQ(Cli({"pending"}, *agent, &out, &err), 0) << out << err;
  EXPECT_NE(out.find("no intent waits for approval"), std::string::npos) << out;
  EXPECT_EQ(Cli({"approve", "--tenant", "acme", "--ref", "FAT-BIG", "--action", "pix.cobranca"},
                *agent, &out, &err),
            1);
  EXPECT_NE(err.find("error invalid_state"), std::string::npos) << err;
}

TEST(Approval, OnlyAnAdminDecidesAndABotSeesItsTenantsWaitingIntents) {
  TempDir dir;
  AgentOptions options;
  const std::string uid = std::to_string(getuid());
  options.config_json = R"({"access": [{"uid": )" + uid + R"(, "tenants": ["acme"]}],
      "policy": {"pix.cobranca": {"money": {"valor": {"approval_above": "1000.00"}}}}})";
  Agent agent(dir.path(), options);
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  ASSERT_EQ(c.Call(Begin("FAT-BIG", "1800.00")).value("decision", ""), "pending_approval");
  json r = c.Call({{"op", "approve"},
                   {"tenant_id", "acme"},
                   {"intent_ref", "FAT-BIG"},
                   {"action_type", "pix.cobranca"}});
  EXPECT_EQ(r["error"].value("code", ""), "forbidden") << r.dump();
  // The bot may list its own tenant's waiting intents.
  json pending = c.Call({{"op", "pending"}, {"tenant_id", "acme"}});
  ASSERT_EQ(pending["intents"].size(), 1u) << pending.dump();
  EXPECT_EQ(pending["intents"][0]["money"], json({{"valor", "1800.00"}}));
  EXPECT_EQ(c.Call(Begin("FAT-BIG", "1800.00")).value("decision", ""), "pending_approval");
}

}  // namespace
}  // namespace intentd::testing
