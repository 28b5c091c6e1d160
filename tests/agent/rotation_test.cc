// Rotating the HMAC secret as docs/operations.md ("Rotating the HMAC
// secret") says, step by step, with the real agent: nothing frozen changes
// key or decision, new intents take the new secret, every key stays
// reproducible, and the old secret leaves only when no live intent needs it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

std::string Keygen(const std::vector<std::string>& args = {}) {
  std::vector<std::string> all = {"keygen"};
  all.insert(all.end(), args.begin(), args.end());
  std::string out, err;
  EXPECT_EQ(RunIntentd(all, &out, &err), 0) << err;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void WriteKeyFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), 0600);
}

AgentOptions WithKeyFile(const std::string& path, std::vector<std::string> more = {}) {
  AgentOptions o;
  o.secret_in_env = false;
  o.extra_args = {"--hmac-key-file", path};
  o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
  return o;
}

json Begin(const std::string& ref, const std::string& valor = "180.00") {
  json p = PixPayload(valor);
  p.erase("referencia_intencao");
  return {{"op", "begin"},
          {"tenant_id", "acme"},
          {"intent_ref", ref},
          {"action_type", "pix.cobranca"},
          {"payload", p}};
}

// The payload as derive takes it: with its intent reference.
json WithRef(const std::string& ref) {
  json p = PixPayload();
  p["referencia_intencao"] = ref;
  return p;
}

json Complete(const json& begun) {
  return {{"op", "complete"},
          {"tenant_id", "acme"},
          {"key", begun["key"]},
          {"lease_token", begun["lease_token"]},
          {"response", {{"id", "ch"}}}};
}

std::string DeriveKey(const std::string& key_file, const std::string& key_id,
                      const std::string& ref, const std::string& valor = "180.00") {
  json p = PixPayload(valor);
  p["referencia_intencao"] = ref;
  std::string out, err;
  EXPECT_EQ(RunIntentd({"derive", "--tenant", "acme", "--action", "pix.cobranca", "--payload",
                        p.dump(), "--hmac-key-file", key_file, "--key-id", key_id},
                       &out, &err),
            0)
      << err;
  const json d = json::parse(out, nullptr, false);
  EXPECT_EQ(d.value("key_id", ""), key_id) << out;
  return d.value("key", "");
}

// Steps 1-4 of the runbook, and the removal refused while intents live.
TEST(Rotation, TheRunbookKeepsEveryFrozenKeyAndRefusesToDropALiveSecret) {
  TempDir dir;
  const std::string plain = dir.path() + "/hmac-key";
  WriteKeyFile(plain, Keygen() + "\n");
  json started, completed;
  {
    Agent agent(dir.path(), WithKeyFile(plain));
    ASSERT_TRUE(agent.started()) << agent.Log();
    Client c(agent.socket_path());
    started = c.Call(Begin("R-started"));
    completed = c.Call(Begin("R-completed", "99.00"));
    ASSERT_EQ(c.Call(Complete(completed))["status"], "completed");
    EXPECT_EQ(started["key_id"], "0") << started.dump();
  }
  // 1-2. The keyring: the secret in use as id 0, a new one current.
  std::string old_secret;
  std::ifstream(plain) >> old_secret;
  const std::string ring = dir.path() + "/keyring";
  WriteKeyFile(ring, "0:" + old_secret + "\n*" + Keygen({"--id", "1"}) + "\n");
  // 3. Restart with it.
  {
    Agent agent(dir.path(), WithKeyFile(ring));
    ASSERT_TRUE(agent.started()) << agent.Log();
    Client c(agent.socket_path());
    // Redeliveries of intents frozen before: the same key and decision.
    const json again = c.Call(Begin("R-started"));
    EXPECT_EQ(again["decision"], "in_flight") << again.dump();
    EXPECT_EQ(again["key"], started["key"]);
    EXPECT_EQ(again["key_id"], "0");
    const json replay = c.Call(Begin("R-completed", "99.00"));
    EXPECT_EQ(replay["decision"], "replay") << replay.dump();
    EXPECT_EQ(replay["key"], completed["key"]);
    // A new intent, the same payload as R-started: the new secret's key.
    const json fresh = c.Call(Begin("R-new"));
    EXPECT_EQ(fresh["decision"], "execute") << fresh.dump();
    EXPECT_EQ(fresh["key_id"], "1");
    EXPECT_NE(fresh["key"], started["key"]);
    // Every key reproducible, byte for byte, under its own id.
    EXPECT_EQ(DeriveKey(ring, "0", "R-started"), started["key"]);
    EXPECT_EQ(DeriveKey(ring, "1", "R-new"), fresh["key"]);
    EXPECT_EQ(DeriveKey(plain, "0", "R-started"), started["key"]);  // the plain form is id 0
    const json derived = c.Call({{"op", "derive"},
                                 {"tenant_id", "acme"},
                                 {"action_type", "pix.cobranca"},
                                 {"key_id", "0"},
                                 {"payload", WithRef("R-started")}});
    EXPECT_EQ(derived["key"], started["key"]) << derived.dump();
    const json unknown = c.Call({{"op", "derive"},
                                 {"tenant_id", "acme"},
                                 {"action_type", "pix.cobranca"},
                                 {"key_id", "9"},
                                 {"payload", WithRef("R-started")}});
    EXPECT_EQ(unknown["error"]["field"], "key_id") << unknown.dump();
    // 4. `keys`: which id keys how many live intents.
    const json keys = c.Call({{"op", "keys"}});
    ASSERT_TRUE(keys.value("ok", false)) << keys.dump();
    EXPECT_EQ(keys["current"], "1");
    ASSERT_EQ(keys["keys"].size(), 2u) << keys.dump();
    EXPECT_EQ(keys["keys"][0]["key_id"], "0");
    EXPECT_EQ(keys["keys"][0]["live_intents"], 2);
    EXPECT_EQ(keys["keys"][1]["live_intents"], 1);
    const json lookup = c.Call({{"op", "lookup"},
                                {"tenant_id", "acme"},
                                {"intent_ref", "R-new"},
                                {"action_type", "pix.cobranca"}});
    EXPECT_EQ(lookup["key_id"], "1") << lookup.dump();
  }
  // Exports carry each intent's key id.
  std::string out, err;
  ASSERT_EQ(RunIntentd({"export", "--data-dir", dir.path() + "/data"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("\"key_id\":\"0\""), std::string::npos);
  EXPECT_NE(out.find("\"key_id\":\"1\""), std::string::npos);
  // Imported elsewhere, the ids stay.
  TempDir other;
  {
    std::ofstream(other.path() + "/export.jsonl") << out;
    ASSERT_EQ(RunIntentd({"import", "--data-dir", other.path() + "/data", "--input",
                          other.path() + "/export.jsonl"},
                         &out, &err),
              0)
        << err;
    Agent agent(other.path(), WithKeyFile(ring));
    ASSERT_TRUE(agent.started()) << agent.Log();
    const json lookup = Client(agent.socket_path())
                            .Call({{"op", "lookup"},
                                   {"tenant_id", "acme"},
                                   {"intent_ref", "R-started"},
                                   {"action_type", "pix.cobranca"}});
    EXPECT_EQ(lookup["key_id"], "0") << lookup.dump();
    EXPECT_EQ(lookup["key"], started["key"]);
  }
  // 5. Too early: the old secret still keys live intents.
  const std::string new_only = dir.path() + "/keyring-new";
  std::string ring_text;
  {
    std::ifstream in(ring);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0:", 0) != 0) ring_text += line + "\n";
    }
  }
  WriteKeyFile(new_only, ring_text);
  {
    AgentOptions o = WithKeyFile(new_only);
    o.wait_ready = false;
    Agent agent(dir.path(), o);
    EXPECT_FALSE(agent.Start());
    EXPECT_FALSE(agent.Running());
    const std::string log = agent.Log();
    EXPECT_NE(log.find("key id 0 keys 2 live intents of 1 tenants (acme)"), std::string::npos)
        << log;
  }
  // Forced: it starts, and says what it dropped.
  Agent forced(dir.path(), WithKeyFile(new_only, {"--drop-key-id", "0"}));
  ASSERT_TRUE(forced.started()) << forced.Log();
  EXPECT_NE(forced.Log().find("dropped as asked"), std::string::npos) << forced.Log();
  const json again = Client(forced.socket_path()).Call(Begin("R-started"));
  EXPECT_EQ(again["key"], started["key"]) << again.dump();  // frozen keys never change
}

// Step 5 as written: once retention has passed, the old secret leaves.
TEST(Rotation, TheOldSecretLeavesWithoutForceOnceRetentionHasPassed) {
  TempDir dir;
  const std::string ring = dir.path() + "/keyring";
  const std::string id0 = Keygen({"--id", "0"});
  const std::string id1 = Keygen({"--id", "1"});
  WriteKeyFile(ring, "*" + id0 + "\n");
  const std::vector<std::string> short_retention = {"--retention", "1s"};
  {
    Agent agent(dir.path(), WithKeyFile(ring, short_retention));
    ASSERT_TRUE(agent.started()) << agent.Log();
    Client c(agent.socket_path());
    const json begun = c.Call(Begin("R1"));
    ASSERT_EQ(c.Call(Complete(begun))["status"], "completed");
  }
  WriteKeyFile(ring, id0 + "\n*" + id1 + "\n");
  {
    Agent agent(dir.path(), WithKeyFile(ring, short_retention));
    ASSERT_TRUE(agent.started()) << agent.Log();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  WriteKeyFile(ring, "*" + id1 + "\n");
  Agent agent(dir.path(), WithKeyFile(ring, short_retention));
  ASSERT_TRUE(agent.started()) << agent.Log();
  EXPECT_NE(agent.Log().find("key id 0 left the keyring and keys no live intent any more"),
            std::string::npos)
      << agent.Log();
}

}  // namespace
}  // namespace intentd::testing
