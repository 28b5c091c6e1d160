// The real intentd binary on a temporary socket and data directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

json BeginRequest(const std::string& ref, const json& payload = PixPayload()) {
  json p = payload;
  p.erase("referencia_intencao");
  return {{"op", "begin"},
          {"tenant_id", "acme"},
          {"intent_ref", ref},
          {"action_type", "pix.cobranca"},
          {"payload", p}};
}

TEST(Serve, AnswersEveryOpOverTheSocket) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  json b = c.Call(BeginRequest("FAT-1"));
  ASSERT_EQ(b["decision"], "execute") << b.dump();
  json done = c.Call({{"op", "complete"},
                      {"tenant_id", "acme"},
                      {"key", b["key"]},
                      {"lease_token", b["lease_token"]},
                      {"response", {{"id", "ch_1"}}}});
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(c.Call(BeginRequest("FAT-1"))["decision"], "replay");
  EXPECT_EQ(
      c.Call({{"op", "status"}, {"tenant_id", "acme"}, {"key", b["key"]}})["action"]["status"],
      "completed");
  json stats = c.Call({{"op", "stats"}});
  EXPECT_EQ(stats["connections"], 1);
  EXPECT_GE(stats["connections_total"].get<int>(), 1);
}

TEST(Serve, BadFramesGetErrorsAndTheConnectionGoesOn) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  std::string line;
  for (const std::string& bad :
       {std::string("nope"), std::string("{\"op\":\"p\xc3\x28\"}"), std::string("[1]")}) {
    ASSERT_TRUE(c.SendRaw(bad + "\n"));
    ASSERT_TRUE(c.ReadLine(&line));
    EXPECT_EQ(json::parse(line)["error"]["code"], "bad_request") << bad;
  }
  EXPECT_TRUE(c.Call({{"op", "ping"}})["ok"].get<bool>());
  // A 70 KB line: frame_too_large, then the connection is closed.
  ASSERT_TRUE(c.SendRaw(std::string(70000, 'a') + "\n"));
  ASSERT_TRUE(c.ReadLine(&line));
  EXPECT_EQ(json::parse(line)["error"]["code"], "frame_too_large");
  EXPECT_TRUE(c.ReadEof());
  // The agent keeps serving others.
  Client d(agent.socket_path());
  EXPECT_TRUE(d.Call({{"op", "ping"}})["ok"].get<bool>());
}

TEST(Serve, ThousandPipelinedRequestsAnswerInOrder) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  std::string batch;
  for (int i = 0; i < 1000; ++i) {
    json r = i % 2 == 0 ? json{{"id", i}, {"op", "ping"}} : BeginRequest("P-" + std::to_string(i));
    r["id"] = i;
    batch += r.dump() + "\n";
  }
  ASSERT_TRUE(c.SendRaw(batch));
  for (int i = 0; i < 1000; ++i) {
    std::string line;
    ASSERT_TRUE(c.ReadLine(&line)) << i;
    json r = json::parse(line);
    ASSERT_EQ(r["id"], i);
    ASSERT_TRUE(r["ok"].get<bool>()) << line;
    if (i % 2 == 1) {
      ASSERT_EQ(r["decision"], "execute");
    }
  }
}

TEST(Serve, FiftyClientsRacingOneIntentGetOneExecute) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  constexpr int kClients = 50;
  std::vector<json> results(kClients);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Client c(agent.socket_path());
      ready.fetch_add(1);
      while (ready.load() < kClients) std::this_thread::yield();
      json p = PixPayload(i % 2 ? "180.00" : "180");
      results[i] = c.Call(BeginRequest("RACE-1", p));
    });
  }
  for (auto& t : threads) t.join();
  int executes = 0;
  std::set<std::string> keys;
  for (const json& r : results) {
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
    executes += r["decision"] == "execute";
    keys.insert(r["key"].get<std::string>());
  }
  EXPECT_EQ(executes, 1);
  EXPECT_EQ(keys.size(), 1u);
}

TEST(Serve, SigkillAndRestartKeepsAcknowledgedData) {
  TempDir dir;
  json begun, completed_key;
  {
    Agent agent(dir.path());
    ASSERT_TRUE(agent.started()) << agent.Log();
    Client c(agent.socket_path());
    begun = c.Call(BeginRequest("K-1"));
    json other = c.Call(BeginRequest("K-2"));
    ASSERT_TRUE(c.Call({{"op", "complete"},
                        {"tenant_id", "acme"},
                        {"key", other["key"]},
                        {"lease_token", 1},
                        {"response", "paid"}})["ok"]
                    .get<bool>());
    completed_key = other["key"];
    agent.Kill(SIGKILL);
    EXPECT_EQ(agent.Wait(), 128 + SIGKILL);
  }
  Agent again(dir.path());  // the stale socket file is replaced
  ASSERT_TRUE(again.started()) << again.Log();
  Client c(again.socket_path());
  json r1 = c.Call(BeginRequest("K-1"));
  EXPECT_EQ(r1["decision"], "in_flight");
  EXPECT_EQ(r1["key"], begun["key"]);
  json r2 = c.Call(BeginRequest("K-2"));
  EXPECT_EQ(r2["decision"], "replay");
  EXPECT_EQ(r2["response"], "paid");
}

TEST(Serve, SigtermAnswersInFlightRequestsAndExitsZero) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  std::string batch;
  for (int i = 0; i < 200; ++i) {
    json r = BeginRequest("T-" + std::to_string(i));
    r["id"] = i;
    batch += r.dump() + "\n";
  }
  ASSERT_TRUE(c.SendRaw(batch));
  std::string first;
  ASSERT_TRUE(c.ReadLine(&first));  // the agent is working on them
  auto start = std::chrono::steady_clock::now();
  agent.Kill(SIGTERM);
  int answered = 1, executes = json::parse(first)["decision"] == "execute";
  std::string line;
  while (c.ReadLine(&line, 6000)) {
    json r = json::parse(line);
    ++answered;
    if (r["ok"].get<bool>())
      executes += r["decision"] == "execute";
    else
      EXPECT_EQ(r["error"]["code"], "shutting_down");
  }
  EXPECT_EQ(agent.Wait(), 0) << agent.Log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Everything acknowledged is there after a restart.
  Agent again(dir.path());
  ASSERT_TRUE(again.started()) << again.Log();
  Client d(again.socket_path());
  int found = 0;
  for (int i = 0; i < 200; ++i) {
    json r = d.Call({{"op", "lookup"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "T-" + std::to_string(i)},
                     {"action_type", "pix.cobranca"}});
    found += r["found"].get<bool>() && !r["action"].is_null();
  }
  EXPECT_GE(found, executes);
}

TEST(Serve, SecondAgentOnTheSameStoreOrSocketIsRefused) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  std::string out, err;
  // Same data dir, other socket: the store lock refuses it.
  int code =
      RunIntentd({"serve", "--socket", dir.path() + "/other.sock", "--data-dir", agent.data_dir()},
                 &out, &err, {std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret});
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("store"), std::string::npos) << err;
  // Same socket, other data dir: the live socket refuses it.
  code = RunIntentd({"serve", "--socket", agent.socket_path(), "--data-dir", dir.path() + "/d2"},
                    &out, &err, {std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret});
  EXPECT_EQ(code, 1);
  EXPECT_NE(err.find("listen"), std::string::npos) << err;
  EXPECT_TRUE(Client(agent.socket_path()).Call({{"op", "ping"}})["ok"].get<bool>());
}

TEST(Serve, RefusesToStartWithoutAGoodSecret) {
  TempDir dir;
  std::string out, err;
  std::vector<std::string> args = {"serve", "--socket", dir.path() + "/s.sock", "--data-dir",
                                   dir.path() + "/data"};
  EXPECT_EQ(RunIntentd(args, &out, &err), 1);
  EXPECT_NE(err.find("no HMAC secret"), std::string::npos) << err;
  EXPECT_EQ(RunIntentd(args, &out, &err, {"IDEMPOTENCY_HMAC_KEY=short"}), 1);
  EXPECT_NE(err.find("at least 32"), std::string::npos) << err;
  EXPECT_EQ(err.find("short"), std::string::npos) << "the secret leaked: " << err;
  const std::string key_file = dir.path() + "/key";
  std::ofstream(key_file) << "0123456789abcdef0123456789abcdef0123456789abcdef\n";
  chmod(key_file.c_str(), 0640);
  args.push_back("--hmac-key-file");
  args.push_back(key_file);
  EXPECT_EQ(RunIntentd(args, &out, &err), 1);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  EXPECT_EQ(err.find("0123456789abcdef"), std::string::npos) << "the secret leaked: " << err;
}

TEST(Serve, KeyFileAndCredentialsDirectoryGiveTheSameKeys) {
  TempDir dir;
  const std::string secret = kTestSecret;
  const std::string key_file = dir.path() + "/hmac-key";
  std::ofstream(key_file) << secret << "\n";
  chmod(key_file.c_str(), 0600);
  json payload = PixPayload();
  std::string env_out, file_out, cred_out, err;
  std::vector<std::string> derive = {"derive",       "--tenant",  "acme",        "--action",
                                     "pix.cobranca", "--payload", payload.dump()};
  ASSERT_EQ(RunIntentd(derive, &env_out, &err, {"IDEMPOTENCY_HMAC_KEY=" + secret}), 0) << err;
  std::vector<std::string> with_file = derive;
  with_file.push_back("--hmac-key-file");
  with_file.push_back(key_file);
  ASSERT_EQ(RunIntentd(with_file, &file_out, &err), 0) << err;
  ASSERT_EQ(RunIntentd(derive, &cred_out, &err, {"CREDENTIALS_DIRECTORY=" + dir.path()}), 0) << err;
  EXPECT_EQ(env_out, file_out);
  EXPECT_EQ(env_out, cred_out);
  json d = json::parse(env_out);
  EXPECT_EQ(d["rules_version"], 2);
  EXPECT_EQ(d["txid"], d["key"].get<std::string>().substr(0, 35));
}

TEST(Cli, DeriveMatchesTheVectorOfTheContract) {
  std::string out, err;
  json payload = {{"cliente_id", "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"},
                  {"valor", "180.00"},
                  {"chave_pix_destino", "111.222.333-44"},
                  {"referencia_intencao", "FAT-2026-000123"}};
  ASSERT_EQ(
      RunIntentd({"derive", "--tenant", "acme", "--action", "pix.cobranca", "--payload",
                  payload.dump(), "--rules-version", "1"},
                 &out, &err,
                 {"IDEMPOTENCY_HMAC_KEY=test-only-hmac-key-0123456789abcdef0123456789abcdef"}),
      0)
      << err;
  EXPECT_EQ(json::parse(out)["key"],
            "d9e9a99dd868f1409d904c50bab2365550206115e01a5020a45e187ff64a140a");
  payload["valor"] = "10.005";
  EXPECT_EQ(RunIntentd({"derive", "--tenant", "acme", "--action", "pix.cobranca", "--payload",
                        payload.dump()},
                       &out, &err, {std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret}),
            1);
  json e = json::parse(out);
  EXPECT_EQ(e["code"], "invalid_field");
  EXPECT_EQ(e["field"], "valor");
}

TEST(Cli, KeygenPrintsFreshHexKeys) {
  std::string a, b, err;
  ASSERT_EQ(RunIntentd({"keygen"}, &a, &err), 0);
  ASSERT_EQ(RunIntentd({"keygen"}, &b, &err), 0);
  ASSERT_EQ(a.size(), 65u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), 64u);
  EXPECT_NE(a, b);
}

TEST(Cli, UnknownFlagsAndHelp) {
  std::string out, err;
  EXPECT_EQ(RunIntentd({"serve", "--bogus"}, &out, &err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos);
  for (const char* cmd : {"serve", "keygen", "derive", "ping", "begin", "complete", "fail", "renew",
                          "status", "lookup", "amend", "uncertain", "stats", "cost"}) {
    EXPECT_EQ(RunIntentd({cmd, "--help"}, &out, &err), 0) << cmd;
    EXPECT_NE(out.find("sage: intentd " + std::string(cmd)), std::string::npos)
        << cmd << ": " << out;
  }
  EXPECT_EQ(RunIntentd({"frobnicate"}, &out, &err), 2);
  EXPECT_EQ(RunIntentd({"serve", "--wal-spares", "maybe"}, &out, &err), 2);
  EXPECT_NE(err.find("--wal-spares must be on or off"), std::string::npos) << err;
  // A duration without its unit is refused, never read as seconds.
  EXPECT_EQ(RunIntentd({"serve", "--retention", "30"}, &out, &err), 2);
  EXPECT_NE(err.find("with its unit"), std::string::npos) << err;
}

TEST(Cli, ClientCommandsRoundTrip) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  std::string out, err;
  const std::string sock = agent.socket_path();
  ASSERT_EQ(RunIntentd({"ping", "--socket", sock}, &out, &err), 0) << err;
  ASSERT_EQ(RunIntentd({"begin", "--socket", sock, "--json", "--tenant", "acme", "--ref", "C-1",
                        "--action", "email.cobranca", "--payload",
                        R"({"cliente_id":"c1","template":" Lembrete "})"},
                       &out, &err),
            0)
      << err;
  json b = json::parse(out);
  EXPECT_EQ(b["decision"], "execute");
  EXPECT_EQ(b["payload"]["template"], "lembrete");
  const std::string key = b["key"];
  ASSERT_EQ(RunIntentd({"complete", "--socket", sock, "--tenant", "acme", "--key", key, "--token",
                        "1", "--response", R"({"sent":true})"},
                       &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("status: completed"), std::string::npos) << out;
  EXPECT_EQ(
      RunIntentd({"renew", "--socket", sock, "--tenant", "acme", "--key", key, "--token", "1"},
                 &out, &err),
      1);
  EXPECT_NE(err.find("invalid_state"), std::string::npos) << err;
  EXPECT_EQ(RunIntentd({"status", "--socket", sock, "--tenant", "acme", "--key", key, "--json"},
                       &out, &err),
            0);
  EXPECT_EQ(json::parse(out)["action"]["response"]["sent"], true);
  EXPECT_EQ(RunIntentd({"stats", "--socket", sock}, &out, &err), 0);
  EXPECT_NE(out.find("1 execute, 0 in_flight"), std::string::npos) << out;
  EXPECT_EQ(RunIntentd({"uncertain", "--socket", sock}, &out, &err), 0);
  EXPECT_EQ(RunIntentd({"ping", "--socket", dir.path() + "/nothing.sock"}, &out, &err), 3);
  EXPECT_EQ(RunIntentd({"begin", "--socket", sock, "--payload", "{bad"}, &out, &err), 2);
}

}  // namespace
}  // namespace intentd::testing
