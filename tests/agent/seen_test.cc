// The `seen`, `done` and `forget` ops through the real agent: racing
// connections, SIGKILL and restart, argument errors, access, counters, CLI.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <latch>
#include <map>
#include <random>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

json Seen(const std::string& id, json extra = json::object()) {
  json r = {{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"message_id", id}};
  r.update(extra);
  return r;
}

TEST(Seen, SixtyFourConnectionsRacingOneMessageGetOneFirst) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  constexpr int kClients = 64;
  std::latch start(kClients);
  std::vector<json> single(kClients), batch(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Client c(agent.socket_path());
      start.arrive_and_wait();
      single[i] = c.Call(Seen("wamid.race", i % 2 ? json{{"lease_ms", 60000}} : json::object()));
      // A webhook redelivered to every connection, its messages in any order.
      std::vector<std::string> ids;
      for (int n = 0; n < 20; ++n) ids.push_back("wamid.b" + std::to_string(n));
      std::shuffle(ids.begin(), ids.end(), std::mt19937(i));
      batch[i] = c.Call(
          {{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"messages", ids}});
    });
  }
  for (auto& t : threads) t.join();
  int first = 0;
  std::map<std::string, int> batch_first;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(single[i].value("ok", false)) << single[i].dump();
    first += single[i]["first"].get<bool>();
    ASSERT_TRUE(batch[i].value("ok", false)) << batch[i].dump();
    ASSERT_EQ(batch[i]["results"].size(), 20u);
    for (const json& r : batch[i]["results"]) {
      batch_first[r["message_id"].get<std::string>()] += r["first"].get<bool>();
    }
  }
  EXPECT_EQ(first, 1);
  ASSERT_EQ(batch_first.size(), 20u);
  for (const auto& [id, n] : batch_first) EXPECT_EQ(n, 1) << id;
  Client c(agent.socket_path());
  EXPECT_EQ(c.Call(Seen("wamid.race"))["count"], kClients + 1);
  const json stats = c.Call({{"op", "stats"}});
  EXPECT_EQ(stats["seen"]["first"], 21) << stats.dump();
  // The single id: 63 duplicates and the one above; the batch: 20 firsts
  // of 64 x 20 sightings.
  EXPECT_EQ(stats["seen"]["duplicates"], (kClients - 1) + 1 + (kClients * 20 - 20)) << stats.dump();
}

TEST(Seen, SigkillAndRestartKeepAcknowledgedSightings) {
  TempDir dir;
  json claim;
  {
    Agent agent(dir.path());
    ASSERT_TRUE(agent.started()) << agent.Log();
    Client c(agent.socket_path());
    for (int i = 0; i < 100; ++i) {
      const json r = c.Call(Seen("m" + std::to_string(i), {{"meta", {{"n", i}}}}));
      ASSERT_EQ(r["first"], true) << r.dump();
    }
    claim = c.Call(Seen("claimed", {{"lease_ms", 60000}}));
    ASSERT_EQ(claim["lease_token"], 1) << claim.dump();
    agent.Kill(SIGKILL);
    EXPECT_EQ(agent.Wait(), 128 + SIGKILL);
  }
  Agent again(dir.path());
  ASSERT_TRUE(again.started()) << again.Log();
  Client c(again.socket_path());
  for (int i = 0; i < 100; ++i) {
    const json r = c.Call(Seen("m" + std::to_string(i)));
    EXPECT_EQ(r["first"], false) << r.dump();
    EXPECT_EQ(r["count"], 2) << r.dump();
    EXPECT_EQ(r["meta"], json({{"n", i}})) << r.dump();
  }
  const json busy = c.Call(Seen("claimed", {{"lease_ms", 60000}}));
  EXPECT_EQ(busy["first"], false) << busy.dump();
  EXPECT_EQ(busy["state"], "processing") << busy.dump();
  EXPECT_GT(busy["retry_after_ms"].get<int64_t>(), 0) << busy.dump();
  const json done = c.Call({{"op", "done"},
                            {"tenant_id", "acme"},
                            {"channel", "whatsapp"},
                            {"message_id", "claimed"},
                            {"lease_token", 1}});
  EXPECT_EQ(done["state"], "done") << done.dump();
}

TEST(Seen, BadArgumentsGetClearErrorsAndRecordNothing) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  const json many = json::array();
  json too_many = json::array();
  for (int i = 0; i < 1001; ++i) too_many.push_back("x" + std::to_string(i));
  struct Case {
    json request;
    const char* code;
    const char* field;
  };
  const json base = {{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}};
  auto with = [&](json extra) {
    json r = base;
    r.update(extra);
    return r;
  };
  const std::vector<Case> cases = {
      {with(json::object()), "missing_field", "message_id"},
      {{{"op", "seen"}, {"tenant_id", "acme"}, {"message_id", "bad"}}, "missing_field", "channel"},
      {with({{"channel", " "}, {"message_id", "bad"}}), "invalid_field", "channel"},
      {with({{"channel", std::string(65, 'c')}, {"message_id", "bad"}}), "invalid_field",
       "channel"},
      {with({{"message_id", ""}}), "invalid_field", "message_id"},
      {with({{"message_id", 7}}), "invalid_field", "message_id"},
      {with({{"message_id", std::string(257, 'x')}}), "invalid_field", "message_id"},
      {with({{"message_id", "bad"}, {"messages", {"bad2"}}}), "invalid_field", "message_id"},
      {with({{"messages", many}}), "invalid_field", "messages"},
      {with({{"messages", too_many}}), "invalid_field", "messages"},
      {with({{"messages", "bad"}}), "invalid_field", "messages"},
      {with({{"messages", {"bad", 3}}}), "invalid_field", "messages[1]"},
      {with({{"messages", {"bad", {{"meta", 1}}}}}), "missing_field", "messages[1].message_id"},
      {with({{"messages", {{{"message_id", "bad"}, {"meta", std::string(5000, 'm')}}}}}),
       "invalid_field", "messages[0].meta"},
      {with({{"message_id", "bad"}, {"meta", std::string(4095, 'm')}}), "invalid_field", "meta"},
      {with({{"message_id", "bad"}, {"ttl_ms", 0}}), "invalid_field", "ttl_ms"},
      {with({{"message_id", "bad"}, {"ttl_ms", "1d"}}), "invalid_field", "ttl_ms"},
      {with({{"message_id", "bad"}, {"lease_ms", 999}}), "invalid_field", "lease_ms"},
      {{{"op", "done"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"message_id", "bad"}},
       "missing_field",
       "lease_token"},
      {{{"op", "done"},
        {"tenant_id", "acme"},
        {"channel", "whatsapp"},
        {"message_id", "bad"},
        {"lease_token", 1}},
       "not_found",
       "message_id"},
      {{{"op", "forget"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}},
       "missing_field",
       "message_id"},
  };
  for (const Case& k : cases) {
    const json r = c.Call(k.request);
    ASSERT_TRUE(r.is_object()) << k.request.dump().substr(0, 200);
    EXPECT_EQ(r.value("ok", true), false) << r.dump();
    EXPECT_EQ(r["error"]["code"], k.code) << r.dump().substr(0, 300);
    EXPECT_EQ(r["error"]["field"], k.field) << r.dump().substr(0, 300);
    EXPECT_FALSE(r["error"]["message"].get<std::string>().empty());
  }
  // Nothing was recorded by any of them, and a meta of exactly 4096 bytes
  // (a 4094-byte string and its quotes) is taken.
  const json r = c.Call(Seen("bad", {{"meta", std::string(4094, 'm')}}));
  EXPECT_EQ(r["first"], true) << r.dump().substr(0, 300);
  const json plain = c.Call({{"op", "done"},
                             {"tenant_id", "acme"},
                             {"channel", "whatsapp"},
                             {"message_id", "bad"},
                             {"lease_token", 1}});
  EXPECT_EQ(plain["error"]["code"], "invalid_state") << plain.dump();
}

TEST(Seen, ForgetNeedsAdminAndTenantsFollowTheAccessRules) {
  TempDir dir;
  AgentOptions options;
  options.config_json =
      R"({"access": [{"uid": )" + std::to_string(getuid()) + R"(, "tenants": ["acme"]}]})";
  Agent agent(dir.path(), options);
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  EXPECT_EQ(c.Call(Seen("m"))["first"], true);
  json other = Seen("m");
  other["tenant_id"] = "other";
  EXPECT_EQ(c.Call(other)["error"]["code"], "forbidden");
  const json forget = c.Call(
      {{"op", "forget"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"message_id", "m"}});
  EXPECT_EQ(forget["error"]["code"], "forbidden") << forget.dump();
  EXPECT_EQ(c.Call(Seen("m"))["first"], false);
}

TEST(Seen, ForgetAndMetricsCountPerChannel) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  c.Call(Seen("a"));
  c.Call(Seen("a"));
  c.Call(Seen("a"));
  json ig = Seen("a");
  ig["channel"] = "instagram";
  c.Call(ig);
  const json forget = c.Call(
      {{"op", "forget"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"message_id", "a"}});
  EXPECT_EQ(forget["forgotten"], true) << forget.dump();
  EXPECT_EQ(c.Call(Seen("a"))["first"], true);
  const std::string text = c.Call({{"op", "metrics"}})["text"].get<std::string>();
  EXPECT_NE(text.find("intentd_messages_first_total{channel=\"whatsapp\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("intentd_messages_duplicate_total{channel=\"whatsapp\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("intentd_messages_first_total{channel=\"instagram\"} 1\n"),
            std::string::npos);
}

TEST(Seen, CliRecordsPrintsAndPricesTheSavedCalls) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  const std::vector<std::string> base = {"seen",     "--socket",     agent.socket_path(),
                                         "--tenant", "acme",         "--channel",
                                         "whatsapp", "--message-id", "w1"};
  std::string out, err;
  ASSERT_EQ(RunIntentd(base, &out, &err), 0) << err;
  EXPECT_NE(out.find("first sighting"), std::string::npos) << out;
  ASSERT_EQ(RunIntentd(base, &out, &err), 0) << err;
  EXPECT_NE(out.find("duplicate: drop it (seen 2 times"), std::string::npos) << out;
  std::vector<std::string> done = base;
  done.push_back("--done");
  EXPECT_EQ(RunIntentd(done, &out, &err), 2) << "--done needs --token";
  done.insert(done.end(), {"--token", "1"});
  EXPECT_EQ(RunIntentd(done, &out, &err), 1);
  EXPECT_NE(err.find("error invalid_state"), std::string::npos) << err;
  ASSERT_EQ(RunIntentd({"cost", "--socket", agent.socket_path(), "--json"}, &out, &err), 0) << err;
  const json cost = json::parse(out);
  EXPECT_EQ(cost["agent"]["seen_duplicates"], 1) << out;
  EXPECT_EQ(cost["agent"]["saved_by_dedup"], "0.17") << out;  // R$ 0.165, half up
}

}  // namespace
}  // namespace intentd::testing
