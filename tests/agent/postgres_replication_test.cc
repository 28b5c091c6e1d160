// `intentd serve --require-sync-replication`: the agent starts on a
// PostgreSQL primary only while a synchronous standby keeps its commits, and
// says what is missing otherwise; without the flag nothing changes. Needs
// scripts/with-postgres.sh (skipped otherwise).
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "store/postgres/postgres_store.h"
#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

constexpr char kNoPostgres[] =
    "INTENTD_TEST_POSTGRES(_CTL) is unset: run the tests under scripts/with-postgres.sh to "
    "include the synchronous replication checks";

AgentOptions RequiringSync(const std::string& url, std::vector<std::string> more = {}) {
  AgentOptions options;
  options.extra_args = {"--store", url, "--require-sync-replication"};
  for (std::string& a : more) options.extra_args.push_back(std::move(a));
  return options;
}

// Starts an agent that is expected to refuse; returns its log.
std::string RefusedStart(const AgentOptions& options, int* exit_status) {
  TempDir dir;
  AgentOptions o = options;
  o.wait_ready = false;
  Agent agent(dir.path(), o);
  agent.Start();
  *exit_status = agent.Wait();
  return agent.Log();
}

// The standard output of a shell command (trailing newline removed).
std::string Output(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buffer[512];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, p)) > 0) out.append(buffer, n);
  pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(PostgresReplication, TheFlagNeedsAPostgresStore) {
  std::string out, err;
  EXPECT_EQ(RunIntentd({"serve", "--store", "rocksdb:/nonexistent", "--require-sync-replication"},
                       &out, &err, {std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret}),
            2);
  EXPECT_NE(err.find("--require-sync-replication needs a PostgreSQL --store"), std::string::npos)
      << err;
}

// The test database of with-postgres.sh has no standby: refused with the
// flag, served without it.
TEST(PostgresReplication, AServerWithoutAStandbyIsRefusedOnlyWithTheFlag) {
  const char* base = std::getenv("INTENTD_TEST_POSTGRES");
  if (base == nullptr) GTEST_SKIP() << kNoPostgres;
  const std::string url = base;
  store::MigrateResult migrated;
  ASSERT_TRUE(store::MigratePostgres(url, &migrated).ok());
  int status = 0;
  const std::string log = RefusedStart(RequiringSync(url), &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("--require-sync-replication"), std::string::npos) << log;
  EXPECT_NE(log.find("synchronous_standby_names is empty"), std::string::npos) << log;

  TempDir dir;
  AgentOptions plain;
  plain.extra_args = {"--store", url};
  Agent agent(dir.path(), plain);
  ASSERT_TRUE(agent.started()) << agent.Log();
  EXPECT_EQ(agent.Log().find("synchronous replication"), std::string::npos) << agent.Log();
}

// A primary with a synchronous standby of its own (with-postgres.sh's
// helper): accepted; refused on the standby itself, with --sync none and
// once the standby is gone. And a commit whose wait for the standby is
// cancelled (PostgreSQL then commits locally and only warns) is not
// acknowledged: a failover could lose it.
TEST(PostgresReplication, APrimaryWithASyncStandbyIsAcceptedAndEachGapRefused) {
  const char* ctl_env = std::getenv("INTENTD_TEST_POSTGRES_CTL");
  if (ctl_env == nullptr) GTEST_SKIP() << kNoPostgres;
  const std::string ctl = ctl_env;
  std::string work = "/tmp/intentd-pgsync-XXXXXX";
  ASSERT_NE(mkdtemp(work.data()), nullptr);
  chmod(work.c_str(), 0755);  // the servers run as postgres when this runs as root
  const std::string primary = work + "/primary", standby = work + "/standby";
  auto run = [&](const std::string& args) {
    return std::system((ctl + " " + args + " >/dev/null").c_str()) == 0;
  };
  auto psql = [&](const std::string& dir, const std::string& sql) {
    return Output(ctl + " psql " + dir + " -c \"" + sql + "\"");
  };
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[&] {
    for (const std::string& dir : {standby, primary}) {
      std::system((ctl + " stop " + dir + " >/dev/null 2>&1").c_str());
    }
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }};
  ASSERT_TRUE(run("init " + primary) && run("start " + primary));
  const std::string primary_url = "postgresql:///intentd_test?host=" + primary;
  store::MigrateResult migrated;
  ASSERT_TRUE(store::MigratePostgres(primary_url, &migrated).ok());
  ASSERT_TRUE(run("standby " + standby + " " + primary) && run("start " + standby));
  psql(primary, "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby)'");
  psql(primary, "SELECT pg_reload_conf()");
  std::string state;
  for (int i = 0; i < 100 && state != "sync"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = psql(primary, "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'");
  }
  ASSERT_EQ(state, "sync");

  TempDir dir;
  Agent agent(dir.path(), RequiringSync(primary_url));
  ASSERT_TRUE(agent.started()) << agent.Log();
  EXPECT_NE(agent.Log().find("synchronous replication, as required: synchronous_commit on, "
                             "synchronous_standby_names 'FIRST 1 (standby)', 1 synchronous "
                             "standby(s) streaming: standby (sync, streaming)"),
            std::string::npos)
      << agent.Log();
  Client c(agent.socket_path());
  EXPECT_EQ(c.Call(PixBegin("FAT-SYNC-1", "180.00"))["decision"], "execute");

  int status = 0;
  std::string log = RefusedStart(RequiringSync(primary_url, {"--sync", "none"}), &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("synchronous_commit is off (--sync none sets it off"), std::string::npos)
      << log;

  log = RefusedStart(RequiringSync("postgresql:///intentd_test?host=" + standby), &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("the server is a standby (in recovery)"), std::string::npos) << log;

  // The standby is gone: the agent's next commit waits for it, and is
  // cancelled as an impatient operator (or a statement_timeout) would.
  ASSERT_TRUE(run("stop " + standby));
  ASSERT_TRUE(c.SendRaw(PixBegin("FAT-SYNC-2", "180.00").dump() + "\n"));
  std::string waiting;
  for (int i = 0; i < 100 && waiting.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    waiting = psql(primary, "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
  }
  ASSERT_FALSE(waiting.empty()) << "no commit waits for the standby";
  EXPECT_EQ(psql(primary, "SELECT pg_cancel_backend(" + waiting + ")"), "t");
  std::string line;
  ASSERT_TRUE(c.ReadLine(&line)) << agent.Log();
  const json answer = json::parse(line, nullptr, false);
  ASSERT_FALSE(answer.value("ok", true))
      << "a commit the standby may lack was acknowledged: " << line;
  const json error = answer.value("error", json::object());
  EXPECT_EQ(error.value("code", ""), "storage_error") << line;
  EXPECT_NE(error.value("message", "").find("committed with a warning"), std::string::npos) << line;

  log = RefusedStart(RequiringSync(primary_url), &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("no synchronous standby is streaming (pg_stat_replication: no standby "
                     "connected)"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace intentd::testing
