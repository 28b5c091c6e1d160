// What the operator commands print: every command that prints a result takes
// --json, serve names its action types, and restore's ownership advice comes
// only when the files end up another user's than the store's directory.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

namespace fs = std::filesystem;

// The subcommands, as `intentd --help` lists them ("Commands:" then
// "  name  summary" lines).
std::vector<std::string> Subcommands() {
  std::string out, err;
  RunIntentd({"--help"}, &out, &err);
  std::vector<std::string> names;
  std::istringstream lines(out);
  std::string line;
  bool on = false;
  while (std::getline(lines, line)) {
    if (line == "Commands:") {
      on = true;
    } else if (on && line.empty()) {
      break;
    } else if (on && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return names;
}

TEST(OperatorOutput, EveryCommandThatPrintsAResultTakesJson) {
  const std::vector<std::string> commands = Subcommands();
  ASSERT_GT(commands.size(), 20u);
  for (const std::string& cmd : commands) {
    // serve runs the agent (no result); version is one line: checked below.
    if (cmd == "serve" || cmd == "version") continue;
    std::string out, err;
    ASSERT_EQ(RunIntentd({cmd, "--help"}, &out, &err), 0) << cmd << ": " << err;
    EXPECT_NE(out.find("\n  --json"), std::string::npos) << cmd << " --help lists no --json\n"
                                                         << out;
  }
  std::string out, err;
  ASSERT_EQ(RunIntentd({"version", "--json"}, &out, &err), 0) << err;
  const json v = json::parse(out);
  EXPECT_EQ(v["protocol"], 1);
  EXPECT_TRUE(v["version"].is_string());
  EXPECT_EQ(RunIntentd({"version", "--bogus"}, &out, &err), 2);
}

TEST(OperatorOutput, OfflineCommandsPrintJson) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(RunIntentd({"keygen", "--json", "--id", "k2"}, &out, &err), 0) << err;
  json k = json::parse(out);
  EXPECT_EQ(k["secret"].get<std::string>().size(), 64u);
  EXPECT_EQ(k["keyring_line"], "k2:" + k["secret"].get<std::string>());
  // derive prints JSON either way: --json changes nothing.
  const std::vector<std::string> derive = {
      "derive",
      "--tenant",
      "acme",
      "--action",
      "email.cobranca",
      "--payload",
      R"({"cliente_id":"c1","template":"t","referencia_intencao":"R-1"})",
      "--config",
      dir.path() + "/intentd.json"};
  std::ofstream(dir.path() + "/intentd.json") << "{}\n";
  const std::vector<std::string> env = {std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret};
  std::string plain;
  ASSERT_EQ(RunIntentd(derive, &plain, &err, env), 0) << err;
  std::vector<std::string> with_json = derive;
  with_json.push_back("--json");
  ASSERT_EQ(RunIntentd(with_json, &out, &err, env), 0) << err;
  EXPECT_EQ(out, plain);
  ASSERT_EQ(
      RunIntentd({"migrate", "--store", "rocksdb:" + dir.path() + "/s", "--json"}, &out, &err), 0)
      << err;
  EXPECT_EQ(json::parse(out)["migrated"], false);
}

TEST(OperatorOutput, ServeNamesItsActionTypesAndRestoreAdvisesOnlyWhenItApplies) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  EXPECT_NE(agent.Log().find("2 action types (pix.cobranca, email.cobranca)"), std::string::npos)
      << agent.Log();
  Client c(agent.socket_path());
  ASSERT_EQ(c.Call({{"op", "begin"},
                    {"tenant_id", "acme"},
                    {"intent_ref", "FAT-2026-000123"},
                    {"action_type", "pix.cobranca"},
                    {"payload", PixPayload()}})["decision"],
            "execute");
  const std::string backup = dir.path() + "/b";
  std::string out, err;
  ASSERT_EQ(RunIntentd({"backup", "--socket", agent.socket_path(), backup}, &out, &err), 0) << err;

  // Restored by the owner of the directory that holds it (a dev agent run as
  // its own user, or as root on root's directory): nothing to chown.
  ASSERT_EQ(
      RunIntentd({"restore", backup, "--data-dir", dir.path() + "/mine", "--json"}, &out, &err), 0)
      << err;
  EXPECT_EQ(err, "");
  const json restored = json::parse(out);
  EXPECT_EQ(restored["intents"], 1);
  EXPECT_EQ(restored["verified"], true);
  EXPECT_FALSE(restored.contains("chown"));

  ASSERT_EQ(RunIntentd({"export", "--data-dir", dir.path() + "/mine", "--output",
                        dir.path() + "/x.jsonl", "--json"},
                       &out, &err),
            0)
      << err;
  EXPECT_EQ(json::parse(err),
            (json{{"intents", 1}, {"actions", 1}, {"counters", 0}, {"past_retention", 0}}));
  ASSERT_EQ(RunIntentd({"import", "--data-dir", dir.path() + "/copy", "--input",
                        dir.path() + "/x.jsonl", "--json"},
                       &out, &err),
            0)
      << err;
  EXPECT_EQ(json::parse(out)["added"], 2);

  if (geteuid() != 0) GTEST_SKIP() << "the other half needs root (to own a directory as nobody)";
  // The agent's directory belongs to another user (the package's
  // /var/lib/intentd is intentd's): root's restore says what to chown.
  const std::string agents = dir.path() + "/agents";
  fs::create_directories(agents);
  ASSERT_EQ(chown(agents.c_str(), 65534, 65534), 0);
  ASSERT_EQ(RunIntentd({"restore", backup, "--data-dir", agents + "/data"}, &out, &err), 0) << err;
  EXPECT_NE(
      err.find("belongs to " + std::string(getpwuid(65534) ? getpwuid(65534)->pw_name : "65534")),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("chown -R "), std::string::npos) << err;
  EXPECT_NE(err.find(" " + agents + "/data\n"), std::string::npos) << err;
}

}  // namespace
}  // namespace intentd::testing
