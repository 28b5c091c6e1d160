// The `stats` op's "prevented": begins that kept a payment from being made
// twice (replays of completed actions, recoveries), per action type, with the
// money frozen in them; and `intentd stats` / `intentd cost` reading it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

// A pix.cobranca payload for any intent_ref (referencia_intencao is taken
// from intent_ref when absent).
json Pix(const std::string& valor) {
  json p = PixPayload(valor);
  p.erase("referencia_intencao");
  return p;
}

json Begin(const std::string& ref, const std::string& type, const json& payload,
           int lease_ms = 300000) {
  json r = {{"op", "begin"},
            {"tenant_id", "acme"},
            {"intent_ref", ref},
            {"action_type", type},
            {"lease_ms", lease_ms}};
  if (!payload.is_null()) r["payload"] = payload;
  return r;
}

TEST(Prevented, CountsReplaysOfCompletedAndRecoveriesWithTheirFrozenMoney) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());

  // FAT-1, R$ 180.00: charged, then redelivered twice (two replays).
  json b = c.Call(Begin("FAT-1", "pix.cobranca", Pix("180.00")));
  ASSERT_EQ(b["decision"], "execute") << b;
  ASSERT_EQ(c.Call({{"op", "complete"},
                    {"tenant_id", "acme"},
                    {"key", b["key"]},
                    {"lease_token", 1},
                    {"response", {{"id", "ch_1"}}}})["ok"],
            true);
  EXPECT_EQ(c.Call(Begin("FAT-1", "pix.cobranca", nullptr))["decision"], "replay");
  EXPECT_EQ(c.Call(Begin("FAT-1", "pix.cobranca", nullptr))["decision"], "replay");
  // FAT-2, R$ 1,000.05: refused by the provider (terminal): its replay
  // prevented no charge.
  b = c.Call(Begin("FAT-2", "pix.cobranca", Pix("1000.05")));
  ASSERT_EQ(c.Call({{"op", "fail"},
                    {"tenant_id", "acme"},
                    {"key", b["key"]},
                    {"lease_token", 1},
                    {"retriable", false},
                    {"error", {{"reason", "refused"}}}})["ok"],
            true);
  EXPECT_EQ(c.Call(Begin("FAT-2", "pix.cobranca", nullptr))["decision"], "replay");
  // FAT-3, R$ 25.50: in flight (not counted), then its worker dies and a
  // redelivery recovers it.
  EXPECT_EQ(c.Call(Begin("FAT-3", "pix.cobranca", Pix("25.50"), 1000))["decision"], "execute");
  EXPECT_EQ(c.Call(Begin("FAT-3", "pix.cobranca", nullptr))["decision"], "in_flight");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(c.Call(Begin("FAT-3", "pix.cobranca", nullptr))["decision"], "recover");
  // An e-mail replay: counted, no money fields.
  b = c.Call(Begin("M-1", "email.cobranca", {{"cliente_id", "c1"}, {"template", "t"}}));
  c.Call({{"op", "complete"},
          {"tenant_id", "acme"},
          {"key", b["key"]},
          {"lease_token", 1},
          {"response", {{"sent", true}}}});
  EXPECT_EQ(c.Call(Begin("M-1", "email.cobranca", nullptr))["decision"], "replay");

  const json stats = c.Call({{"op", "stats"}});
  EXPECT_EQ(stats["prevented"]["pix.cobranca"], (json{{"replayed", 2},
                                                      {"recovered", 1},
                                                      {"replayed_cents", {{"valor", 36000}}},
                                                      {"recovered_cents", {{"valor", 2550}}}}))
      << stats;
  EXPECT_EQ(stats["prevented"]["email.cobranca"], (json{{"replayed", 1},
                                                        {"recovered", 0},
                                                        {"replayed_cents", json::object()},
                                                        {"recovered_cents", json::object()}}))
      << stats;

  std::string out, err;
  ASSERT_EQ(RunIntentd({"stats", "--socket", agent.socket_path()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("prevented      4 double charges (3 replays of a completed action, 1 "
                     "recovery), R$ 385.50 frozen in them"),
            std::string::npos)
      << out;
  ASSERT_EQ(RunIntentd({"cost", "--json"}, &out, &err, {"INTENTD_SOCKET=" + agent.socket_path()}),
            0)
      << err;
  const json cost = json::parse(out);
  EXPECT_EQ(cost["agent"]["prevented"]["count"], 4);
  EXPECT_EQ(cost["agent"]["prevented"]["amount"], "385.50");
  EXPECT_EQ(
      cost["agent"]["prevented"]["by_action_type"]["pix.cobranca"]["recovered_amount"]["valor"],
      "25.50");
}

}  // namespace
}  // namespace intentd::testing
