// `intentd uncertain`: each row carries what the on-call engineer asks the
// provider about (txid, amount, intent_ref, age) from one pipelined batch of
// lookups, and the exit status says whether anything is left to settle.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/agent/agent_util.h"
#include "tests/agent/fake_agent.h"

namespace intentd::testing {
namespace {

const std::string kKeyG1 = std::string(64, 'a');
const std::string kKeyA1 = std::string(64, 'b');
const std::string kKeyG2 = std::string(64, 'c');

json Action(const std::string& tenant, const std::string& key, const std::string& ref,
            const std::string& type, int attempt, long long created, long long lease_until,
            long long expired_for) {
  return {{"tenant_id", tenant},      {"key", key},
          {"intent_ref", ref},        {"action_type", type},
          {"attempt", attempt},       {"lease_token", attempt},
          {"created_at_ms", created}, {"lease_until_ms", lease_until},
          {"updated_at_ms", created}, {"expired_for_ms", expired_for}};
}

// As the agent orders them: by lease expiry, oldest first, tenants mixed.
json ThreeActions() {
  return json::array(
      {Action("globex", kKeyG1, "G-1", "pix.cobranca", 2, 1000, 7201000, 3 * 3600 * 1000 + 125000),
       Action("acme", kKeyA1, "FAT-1", "email.cobranca", 1, 5000000, 5300000, 725000),
       Action("globex", kKeyG2, "G-2", "pix.cobranca", 1, 5900000, 6000000, 45000)});
}

// The fake's lookups: G-1 frozen at R$ 180.00, FAT-1 an e-mail (no money),
// G-2 amended since to another key.
std::string Answer(const json& request, const json& actions) {
  if (request["op"] == "uncertain") return json{{"ok", true}, {"actions", actions}}.dump();
  const std::string ref = request.value("intent_ref", "");
  if (ref == "G-1") {
    return json{{"ok", true},
                {"found", true},
                {"key", kKeyG1},
                {"payload", {{"valor", "18000"}, {"chave_pix_destino", "11144477735"}}}}
        .dump();
  }
  if (ref == "FAT-1") {
    return json{{"ok", true}, {"found", true}, {"key", kKeyA1}, {"payload", {{"template", "x"}}}}
        .dump();
  }
  if (ref == "G-2") {
    return json{{"ok", true},
                {"found", true},
                {"key", std::string(64, 'd')},
                {"payload", {{"valor", "99900"}}}}
        .dump();
  }
  return json{{"ok", false}, {"error", {{"code", "forbidden"}, {"message", "not yours"}}}}.dump();
}

std::string EmptyConfig(const TempDir& dir) {
  const std::string path = dir.path() + "/intentd.json";
  std::ofstream(path) << "{}\n";
  return path;
}

TEST(UncertainView, RowsShowTxidAmountRefAndAgeFromOnePipelinedBatch) {
  TempDir dir;
  const json actions = ThreeActions();
  FakeAgent fake(dir.path() + "/s", [&](const json& r) { return Answer(r, actions); });
  std::string out, err;
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", fake.path(), "--limit", "3", "--config",
                        EmptyConfig(dir)},
                       &out, &err),
            4)
      << "rows listed: exit 4, as reconcile's \"left uncertain\"\n"
      << err;
  // One connection: the list, then every row's lookup, pipelined.
  const std::vector<std::string> requests = fake.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(json::parse(requests[0]), (json{{"op", "uncertain"}, {"limit", 3}}));
  EXPECT_EQ(json::parse(requests[1]), (json{{"op", "lookup"},
                                            {"tenant_id", "globex"},
                                            {"intent_ref", "G-1"},
                                            {"action_type", "pix.cobranca"}}));
  EXPECT_EQ(json::parse(requests[3])["intent_ref"], "G-2");

  const size_t globex = out.find("tenant globex (2)"), acme = out.find("tenant acme (1)");
  ASSERT_NE(globex, std::string::npos) << out;
  ASSERT_NE(acme, std::string::npos) << out;
  EXPECT_LT(globex, acme) << "the tenant of the oldest action comes first\n" << out;
  EXPECT_NE(out.find("3 uncertain actions at 20"), std::string::npos) << out;
  EXPECT_NE(out.find("expired age    attempts action_type    intent_ref amount    txid"),
            std::string::npos)
      << out;
  // G-1: expired 3h02m ago, created 2h before its lease ran out: age 5h02m.
  EXPECT_NE(out.find("3h02m   5h02m         2 pix.cobranca   G-1        R$ 180.00 " +
                     kKeyG1.substr(0, 35) + " " + kKeyG1 + "\n"),
            std::string::npos)
      << out;
  // FAT-1: an action type without money fields.
  EXPECT_NE(out.find("12m05s  17m05s        1 email.cobranca FAT-1      -         " +
                     kKeyA1.substr(0, 35)),
            std::string::npos)
      << out;
  // G-2: its intent now keys another action: its amount is not this one's.
  EXPECT_NE(out.find("45s     2m25s         1 pix.cobranca   G-2        ?         "),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("? G-2: the intent was amended since: it now keys txid " + std::string(35, 'd')),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("999.00"), std::string::npos) << "the amended payload is not shown\n" << out;
  EXPECT_NE(out.find("the first 3; there may be more"), std::string::npos) << out;
}

TEST(UncertainView, JsonAddsTxidAgeAndMoneyAndKeepsMilliseconds) {
  TempDir dir;
  const json actions = ThreeActions();
  FakeAgent fake(dir.path() + "/s", [&](const json& r) { return Answer(r, actions); });
  std::string out, err;
  ASSERT_EQ(
      RunIntentd({"uncertain", "--socket", fake.path(), "--json", "--config", EmptyConfig(dir)},
                 &out, &err),
      4)
      << err;
  const json j = json::parse(out);
  ASSERT_EQ(j["actions"].size(), 3u) << out;
  const json& g1 = j["actions"][0];
  EXPECT_EQ(g1["txid"], kKeyG1.substr(0, 35));
  EXPECT_EQ(g1["money"], (json{{"valor", "180.00"}}));
  EXPECT_EQ(g1["payload"]["valor"], "18000");
  EXPECT_EQ(g1["age_ms"], 7200000 + 3 * 3600 * 1000 + 125000);
  EXPECT_EQ(g1["lease_until_ms"], 7201000) << "the agent's members stay";
  EXPECT_EQ(j["actions"][1]["money"], json::object());
  EXPECT_FALSE(j["actions"][2].contains("money"));
  EXPECT_FALSE(j["actions"][2].contains("payload"));
  EXPECT_NE(j["actions"][2]["amount_unavailable"].get<std::string>().find("amended"),
            std::string::npos);
}

TEST(UncertainView, NothingListedExitsZero) {
  TempDir dir;
  for (const bool as_json : {false, true}) {
    FakeAgent fake(dir.path() + (as_json ? "/s2" : "/s1"), R"({"ok":true,"actions":[]})");
    std::vector<std::string> args = {"uncertain", "--socket", fake.path(), "--tenant", "acme"};
    if (as_json) args.push_back("--json");
    std::string out, err;
    ASSERT_EQ(RunIntentd(args, &out, &err), 0) << err;
    if (as_json) {
      EXPECT_EQ(json::parse(out), (json{{"ok", true}, {"actions", json::array()}}));
    } else {
      EXPECT_EQ(out, "no uncertain actions\n");
    }
    EXPECT_EQ(fake.requests().size(), 1u) << "no lookup without rows";
    EXPECT_EQ(json::parse(fake.request())["tenant_id"], "acme");
  }
}

TEST(UncertainView, MoneyFieldsAreTheConfigsAndAFailedLookupIsSaid) {
  TempDir dir;
  const std::string config = dir.path() + "/types.json";
  std::ofstream(config) << R"({"action_types":{"boleto.emissao":{"fields":[
      {"name":"cliente_id","kind":"text"},{"name":"valor_total","kind":"money"},
      {"name":"taxa","kind":"money"}]}}})";
  const json actions =
      json::array({Action("acme", kKeyA1, "B-1", "boleto.emissao", 1, 0, 1000, 5000),
                   Action("acme", kKeyG1, "B-2", "pix.cobranca", 1, 0, 2000, 4000)});
  auto answer = [&](const json& r) -> std::string {
    if (r["op"] == "uncertain") return json{{"ok", true}, {"actions", actions}}.dump();
    if (r["intent_ref"] == "B-1") {
      return json{
          {"ok", true},
          {"found", true},
          {"key", kKeyA1},
          {"payload", {{"cliente_id", "12345"}, {"valor_total", "123456"}, {"taxa", "250"}}}}
          .dump();
    }
    return json{{"ok", false}, {"error", {{"code", "storage_error"}, {"message", "disk"}}}}.dump();
  };
  {
    FakeAgent fake(dir.path() + "/s1", answer);
    std::string out, err;
    EXPECT_EQ(RunIntentd({"uncertain", "--socket", fake.path(), "--config", config}, &out, &err), 4)
        << err;
    EXPECT_NE(out.find("taxa R$ 2.50, valor_total R$ 1234.56"), std::string::npos) << out;
    EXPECT_EQ(out.find("12345 "), std::string::npos) << "a text field is not money\n" << out;
    EXPECT_NE(out.find("? B-2: lookup failed: storage_error: disk"), std::string::npos) << out;
  }
  // Without the config that declares it, the type's money fields are unknown.
  FakeAgent fake(dir.path() + "/s2", answer);
  std::string out, err;
  EXPECT_EQ(
      RunIntentd({"uncertain", "--socket", fake.path(), "--config", EmptyConfig(dir)}, &out, &err),
      4);
  EXPECT_NE(out.find("? B-1: the action type is not in the config read"), std::string::npos) << out;
  // A config named but missing is an error, before the agent is asked.
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", fake.path(), "--config", dir.path() + "/no.json"},
                       &out, &err),
            1);
  EXPECT_NE(err.find("no.json"), std::string::npos) << err;
}

TEST(UncertainView, RefusedExitsOneAndUnreachableThree) {
  TempDir dir;
  FakeAgent fake(dir.path() + "/s",
                 R"({"ok":false,"error":{"code":"forbidden","message":"pass tenant_id"}})");
  std::string out, err;
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", fake.path()}, &out, &err), 1);
  EXPECT_NE(err.find("error forbidden: pass tenant_id"), std::string::npos) << err;
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", dir.path() + "/none"}, &out, &err), 3);
  EXPECT_EQ(RunIntentd({"uncertain", "--limit", "x"}, &out, &err), 2);
}

// The on-call path against the real agent: the row has the txid and the
// frozen amount; once settled, nothing is listed and the exit status is 0.
TEST(UncertainCli, RealAgentRowNeedsNoLookupAndSettlingClearsIt) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  const std::string sock = agent.socket_path();
  std::string out, err;
  ASSERT_EQ(RunIntentd({"begin", "--socket", sock, "--json", "--tenant", "acme", "--ref",
                        "FAT-2026-000123", "--action", "pix.cobranca", "--payload",
                        PixPayload("1234.50").dump(), "--lease-ms", "1000"},
                       &out, &err),
            0)
      << err;
  const std::string key = json::parse(out)["key"];
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ASSERT_EQ(RunIntentd({"uncertain", "--socket", sock, "--config", EmptyConfig(dir)}, &out, &err),
            4)
      << err;
  EXPECT_NE(out.find("FAT-2026-000123"), std::string::npos) << out;
  EXPECT_NE(out.find("R$ 1234.50 " + key.substr(0, 35) + " " + key), std::string::npos) << out;
  ASSERT_EQ(RunIntentd({"uncertain", "--socket", sock, "--json", "--tenant", "acme", "--config",
                        EmptyConfig(dir)},
                       &out, &err),
            4);
  const json row = json::parse(out)["actions"][0];
  EXPECT_EQ(row["money"]["valor"], "1234.50");
  EXPECT_EQ(row["txid"], key.substr(0, 35));
  // Settle by hand, as the runbook says: recover, then complete.
  ASSERT_EQ(RunIntentd({"begin", "--socket", sock, "--json", "--tenant", "acme", "--ref",
                        "FAT-2026-000123", "--action", "pix.cobranca"},
                       &out, &err),
            0);
  ASSERT_EQ(json::parse(out)["decision"], "recover") << out;
  ASSERT_EQ(RunIntentd({"complete", "--socket", sock, "--tenant", "acme", "--key", key, "--token",
                        "2", "--response", R"({"reconciled_by":"ops"})"},
                       &out, &err),
            0)
      << err;
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", sock, "--config", EmptyConfig(dir)}, &out, &err),
            0);
  EXPECT_EQ(out, "no uncertain actions\n");
}

}  // namespace
}  // namespace intentd::testing
