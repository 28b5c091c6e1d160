// Agents on two "hosts" (two real intentd processes, two sockets) sharing
// one PostgreSQL database: bots racing the same intents through both get
// exactly one `execute`. Needs scripts/with-postgres.sh (skipped otherwise).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "store/postgres/postgres_store.h"
#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

std::string PostgresUrl() {
  const char* url = std::getenv("INTENTD_TEST_POSTGRES");
  return url != nullptr ? url : "";
}

constexpr char kNoPostgres[] =
    "INTENTD_TEST_POSTGRES is unset: run the tests under scripts/with-postgres.sh to include "
    "the agents sharing a PostgreSQL store";

// A fresh schema in the test database (dropped at the end), optionally migrated.
class Schema {
 public:
  explicit Schema(bool migrate) {
    std::random_device rd;
    name_ = "agent_" + std::to_string(getpid()) + "_" + std::to_string(rd() % 1000000000);
    const std::string base = PostgresUrl();
    url_ = base + (base.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
           name_;
    store::Status s = store::PostgresExecute(PostgresUrl(), "CREATE SCHEMA " + name_);
    if (s.ok() && migrate) {
      store::MigrateResult result;
      s = store::MigratePostgres(url_, &result);
    }
    error_ = s.message();
    ok_ = s.ok();
  }
  ~Schema() {
    store::PostgresExecute(PostgresUrl(), "DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& url() const { return url_; }

 private:
  std::string name_, url_, error_;
  bool ok_ = false;
};

AgentOptions WithStore(const std::string& url) {
  AgentOptions options;
  options.extra_args = {"--store", url};
  return options;
}

json Begin(const std::string& ref, const std::string& valor) { return PixBegin(ref, valor); }

TEST(PostgresAgents, ClientsRacingThroughTwoAgentsGetOneExecutePerIntent) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/true);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir_a, dir_b;
  Agent a(dir_a.path(), WithStore(schema.url()));
  ASSERT_TRUE(a.started()) << a.Log();
  Agent b(dir_b.path(), WithStore(schema.url()));
  ASSERT_TRUE(b.started()) << b.Log();

  constexpr int kClients = 16, kIntents = 12;
  std::latch start(kClients);
  std::mutex mu;
  std::map<std::string, int> executes;                // intent -> executes granted
  std::map<std::string, std::set<std::string>> keys;  // intent -> keys answered
  std::atomic<int> errors{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      Client c(i % 2 == 0 ? a.socket_path() : b.socket_path());
      start.arrive_and_wait();
      for (int n = 0; n < kIntents; ++n) {
        const std::string ref = "FAT-" + std::to_string((n + i) % kIntents);
        // Redeliveries whose model output differs: the frozen payload wins.
        json r = c.Call(Begin(ref, i % 3 == 0 ? "1800.00" : "180.00"));
        if (!r.is_object() || !r.value("ok", false)) {
          ADD_FAILURE() << ref << ": " << r.dump();
          ++errors;
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        keys[ref].insert(r["key"].get<std::string>());
        if (r["decision"] == "execute")
          ++executes[ref];
        else
          EXPECT_EQ(r["decision"], "in_flight") << r.dump();
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_EQ(keys.size(), static_cast<size_t>(kIntents));
  for (const auto& [ref, answered] : keys) {
    EXPECT_EQ(executes[ref], 1) << ref;
    EXPECT_EQ(answered.size(), 1u) << ref << ": every agent answers the frozen key";
  }

  // Completed through one agent, replayed through the other.
  Client ca(a.socket_path()), cb(b.socket_path());
  json first = cb.Call(Begin("FAT-0", "180.00"));
  ASSERT_EQ(first["decision"], "in_flight") << first.dump();
  json lookup = ca.Call({{"op", "lookup"},
                         {"tenant_id", "acme"},
                         {"intent_ref", "FAT-0"},
                         {"action_type", "pix.cobranca"}});
  ASSERT_TRUE(lookup.value("ok", false)) << lookup.dump();
  json done = ca.Call({{"op", "complete"},
                       {"tenant_id", "acme"},
                       {"key", lookup["key"]},
                       {"lease_token", lookup["action"]["lease_token"]},
                       {"response", {{"id", "ch_1"}}}});
  ASSERT_EQ(done["status"], "completed") << done.dump();
  json replay = cb.Call(Begin("FAT-0", "180.00"));
  EXPECT_EQ(replay["decision"], "replay") << replay.dump();
  EXPECT_EQ(replay["response"], json({{"id", "ch_1"}})) << replay.dump();
}

TEST(PostgresAgents, MigrateCreatesTheSchemaOnceAndServeRefusesWithoutIt) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir;
  AgentOptions options = WithStore(schema.url());
  options.wait_ready = false;
  Agent refused(dir.path(), options);
  ASSERT_FALSE(refused.Start());
  EXPECT_FALSE(refused.Running());
  EXPECT_NE(refused.Log().find("run `intentd migrate --store postgresql://"), std::string::npos)
      << refused.Log();

  std::string out, err;
  ASSERT_EQ(RunIntentd({"migrate", "--store", schema.url()}, &out, &err), 0) << err;
  const std::string version = std::to_string(store::kPostgresSchemaVersion);
  EXPECT_NE(out.find("created the intentd schema, version " + version), std::string::npos) << out;
  ASSERT_EQ(RunIntentd({"migrate", "--store", schema.url()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("at version " + version + " already"), std::string::npos) << out;
  ASSERT_EQ(RunIntentd({"migrate", "--store", schema.url(), "--json"}, &out, &err), 0) << err;
  const json migrated = json::parse(out);
  EXPECT_EQ(migrated["kind"], "postgresql");
  EXPECT_EQ(migrated["from_version"], store::kPostgresSchemaVersion);
  EXPECT_EQ(migrated["to_version"], store::kPostgresSchemaVersion);
  EXPECT_EQ(migrated["migrated"], false);
  EXPECT_EQ(RunIntentd({"migrate"}, &out, &err), 2);
  EXPECT_NE(err.find("--store is required"), std::string::npos) << err;
  EXPECT_EQ(RunIntentd({"migrate", "--store", "mysql://x"}, &out, &err), 2);

  Agent served(dir.path(), WithStore(schema.url()));
  ASSERT_TRUE(served.started()) << served.Log();
  Client c(served.socket_path());
  EXPECT_EQ(c.Call(Begin("FAT-1", "180.00"))["decision"], "execute");
}

// The database stops under a running agent: storage_error, never a grant;
// the agent stays up and recovers by itself when the database is back.
TEST(PostgresAgents, AgentSurvivesADatabaseRestart) {
  const char* ctl = std::getenv("INTENTD_TEST_POSTGRES_CTL");
  if (ctl == nullptr) GTEST_SKIP() << kNoPostgres;
  std::string cluster = "/tmp/intentd-pga-XXXXXX";
  ASSERT_NE(mkdtemp(cluster.data()), nullptr);
  auto run = [&](const std::string& command) {
    return std::system((std::string(ctl) + " " + command + " " + cluster).c_str()) == 0;
  };
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[&] {
    run("stop");
    std::error_code ec;
    std::filesystem::remove_all(cluster, ec);
  }};
  ASSERT_TRUE(run("init") && run("start"));
  const std::string url = "postgresql:///intentd_test?host=" + cluster;
  store::MigrateResult migrated;
  ASSERT_TRUE(store::MigratePostgres(url, &migrated).ok());
  TempDir dir;
  Agent agent(dir.path(), WithStore(url));
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  ASSERT_EQ(c.Call(Begin("FAT-1", "180.00"))["decision"], "execute");

  ASSERT_TRUE(run("stop"));
  for (int i = 0; i < 5; ++i) {
    json r = c.Call(Begin("FAT-2", "180.00"));
    ASSERT_TRUE(r.is_object()) << agent.Log();
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_EQ(r["error"]["code"], "storage_error") << r.dump();
  }
  EXPECT_TRUE(c.Call({{"op", "ping"}})["ok"].get<bool>());

  ASSERT_TRUE(run("start"));
  json r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = c.Call(Begin("FAT-2", "180.00"));
  } while (!r.value("ok", false) && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(r["decision"], "execute");  // nothing was granted while it was down
  EXPECT_EQ(r["created"], true);
  EXPECT_EQ(c.Call(Begin("FAT-1", "180.00"))["decision"], "in_flight");
  EXPECT_TRUE(agent.Running());
}

// SIGTERM while begins and completes are in flight through the PostgreSQL
// store on every path: posted to the batch statements (a new intent, the
// granted token), and the store's general transaction on a worker after a
// statement that wrote nothing (a redelivery, a stale token). Every answer
// is a success, a refusal as shutting down, or invalid_state for a stale
// token (lines the agent had not read when it stopped get none); the agent
// exits 0 in seconds; after a restart every execute and every completion it
// answered is there.
TEST(PostgresAgents, SigtermUnderLoadAnswersInFlightRequestsAndExitsZero) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/true);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir;
  auto agent = std::make_unique<Agent>(dir.path(), WithStore(schema.url()));
  ASSERT_TRUE(agent->started()) << agent->Log();
  constexpr int kConns = 8, kRefs = 20;
  auto ref = [](char kind, int c, int i) {
    return std::string(1, kind) + std::to_string(c) + "-" + std::to_string(i);
  };
  // Intents begun before: their keys, each started under token 1.
  std::vector<std::vector<std::string>> keys(kConns);
  {
    Client c(agent->socket_path());
    for (int conn = 0; conn < kConns; ++conn) {
      for (int i = 0; i < kRefs; ++i) {
        json r = c.Call(Begin(ref('P', conn, i), "180.00"));
        ASSERT_EQ(r["decision"], "execute") << r.dump();
        keys[conn].push_back(r["key"].get<std::string>());
      }
    }
  }
  // Each connection pipelines, per intent: its redelivery, a complete under
  // a token never granted, a new intent's begin, and the complete under the
  // granted token.
  std::vector<std::unique_ptr<Client>> clients;
  for (int conn = 0; conn < kConns; ++conn) {
    clients.push_back(std::make_unique<Client>(agent->socket_path()));
    std::string lines;
    for (int i = 0; i < kRefs; ++i) {
      json complete = {{"op", "complete"},
                       {"tenant_id", "acme"},
                       {"key", keys[conn][i]},
                       {"response", {{"id", ref('P', conn, i)}}}};
      json stale = complete, granted = complete;
      stale["lease_token"] = 7;
      granted["lease_token"] = 1;
      for (json line : {Begin(ref('P', conn, i), "180.00"), stale,
                        Begin(ref('N', conn, i), "180.00"), granted}) {
        line["id"] = static_cast<int>(lines.size());  // unique per connection
        lines += line.dump() + "\n";
      }
    }
    ASSERT_TRUE(clients.back()->SendRaw(lines));
  }
  std::string first;
  ASSERT_TRUE(clients.front()->ReadLine(&first));  // the agent is working on them
  const auto start = std::chrono::steady_clock::now();
  agent->Kill(SIGTERM);
  std::set<std::string> executed;
  int answered = 0, refused = 0, completed = 0;
  for (int conn = 0; conn < kConns; ++conn) {
    std::string line = conn == 0 ? first : "";
    while (!line.empty() || clients[conn]->ReadLine(&line, 6000)) {
      const json r = json::parse(line, nullptr, false);
      line.clear();
      ASSERT_TRUE(r.is_object()) << agent->Log();
      ++answered;
      if (!r.value("ok", false)) {
        const std::string code = r["error"].value("code", "");
        EXPECT_TRUE(code == "shutting_down" || code == "invalid_state") << r.dump();
        refused += code == "shutting_down";
        continue;
      }
      if (r.contains("decision")) {
        EXPECT_TRUE(r["decision"] == "execute" || r["decision"] == "in_flight") << r.dump();
        if (r["decision"] == "execute") {
          executed.insert(r["payload"]["referencia_intencao"].get<std::string>());
        }
      } else {
        EXPECT_EQ(r["status"], "completed") << r.dump();
        ++completed;  // each of a distinct P intent
      }
    }
  }
  EXPECT_EQ(agent->Wait(), 0) << agent->Log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  agent.reset();
  // Everything acknowledged is there after a restart.
  Agent again(dir.path(), WithStore(schema.url()));
  ASSERT_TRUE(again.started()) << again.Log();
  Client d(again.socket_path());
  for (const std::string& r : executed) {
    const json found = d.Call({{"op", "lookup"},
                               {"tenant_id", "acme"},
                               {"intent_ref", r},
                               {"action_type", "pix.cobranca"}});
    EXPECT_TRUE(found.value("found", false) && !found["action"].is_null()) << found.dump();
  }
  int completed_found = 0;
  for (int conn = 0; conn < kConns; ++conn) {
    for (int i = 0; i < kRefs; ++i) {
      const json found = d.Call({{"op", "lookup"},
                                 {"tenant_id", "acme"},
                                 {"intent_ref", ref('P', conn, i)},
                                 {"action_type", "pix.cobranca"}});
      completed_found += found["action"].is_object() && found["action"]["status"] == "completed";
    }
  }
  EXPECT_GE(completed_found, completed);
  std::cout << "answered " << answered << " (" << refused << " shutting down), executes "
            << executed.size() << ", completions " << completed << "\n";
}

// The policy is the agent's, whatever holds the records: on PostgreSQL too a
// refused payload freezes nothing, an accepted one answers its key types
// and money, and a redelivery of an intent frozen before the policy is read
// back.
TEST(PostgresAgents, APolicyRefusesBeforeAnythingIsWrittenAndNeverRefusesAFrozenIntent) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/true);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir_before;
  TempDir dir;
  json frozen;
  {
    Agent before(dir_before.path(), WithStore(schema.url()));
    ASSERT_TRUE(before.started()) << before.Log();
    Client c(before.socket_path());
    json payload = Begin("FAT-OLD", "9000.00");
    payload["payload"]["chave_pix_destino"] = "11944477736";  // read as a phone
    frozen = c.Call(payload);
    ASSERT_EQ(frozen.value("decision", ""), "execute") << frozen.dump();
  }
  AgentOptions options = WithStore(schema.url());
  options.config_json = R"({"policy": {"pix.cobranca": {
      "pix_keys": {"chave_pix_destino": {"types": ["cpf", "email"], "phone": "+55"}},
      "money": {"valor": {"max_per_action": "5000.00", "per_day": {"max_total": "400.00"}}}}}})";
  Agent agent(dir.path(), options);
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  json phone = Begin("FAT-PHONE", "180.00");
  phone["payload"]["chave_pix_destino"] = "11944477736";
  json r = c.Call(phone);
  EXPECT_EQ(r["error"].value("code", ""), "invalid_field") << r.dump();
  r = c.Call(Begin("FAT-BIG", "18000"));
  EXPECT_EQ(r["error"].value("code", ""), "policy_refused") << r.dump();
  for (const char* ref : {"FAT-PHONE", "FAT-BIG"}) {
    json found = c.Call({{"op", "lookup"},
                         {"tenant_id", "acme"},
                         {"intent_ref", ref},
                         {"action_type", "pix.cobranca"}});
    EXPECT_FALSE(found.value("found", true)) << ref << ": " << found.dump();
  }
  r = c.Call(Begin("FAT-OK", "180.00"));
  ASSERT_EQ(r.value("decision", ""), "execute") << r.dump();
  EXPECT_EQ(r["pix_key_types"], json({{"chave_pix_destino", "cpf"}}));
  EXPECT_EQ(r["money"], json({{"valor", "180.00"}}));
  // Frozen before the policy: read back, not refused, the same key.
  json again = Begin("FAT-OLD", "9000.00");
  again["payload"]["chave_pix_destino"] = "11944477736";
  r = c.Call(again);
  EXPECT_EQ(r.value("decision", ""), "in_flight") << r.dump();
  EXPECT_EQ(r["key"], frozen["key"]);
  EXPECT_EQ(r["pix_key_types"], json({{"chave_pix_destino", "phone"}}));
  // The daily total: 180.00 frozen (FAT-OK; FAT-OLD before the policy is
  // not counted), 180.00 more fits, then 40.00 remain.
  r = c.Call(Begin("FAT-2", "180.00"));
  ASSERT_EQ(r.value("decision", ""), "execute") << r.dump();
  r = c.Call(Begin("FAT-3", "180.00"));
  EXPECT_EQ(r["error"].value("code", ""), "policy_refused") << r.dump();
  EXPECT_NE(r["error"].value("message", "").find("40.00 remain"), std::string::npos) << r.dump();
  r = c.Call(Begin("FAT-3", "40.00"));
  EXPECT_EQ(r.value("decision", ""), "execute") << r.dump();
  r = c.Call(Begin("FAT-4", "0.01"));
  EXPECT_EQ(r["error"].value("code", ""), "policy_refused") << r.dump();
}

// A webhook redelivered to every connection of two agents sharing one
// database: each message id is first exactly once; a SIGKILLed agent's
// acknowledged sightings are there for the other and for its restart.
TEST(PostgresAgents, SeenRacingThroughTwoAgentsIsFirstOncePerMessageAndSurvivesSigkill) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/true);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir_a, dir_b;
  auto a = std::make_unique<Agent>(dir_a.path(), WithStore(schema.url()));
  ASSERT_TRUE(a->started()) << a->Log();
  Agent b(dir_b.path(), WithStore(schema.url()));
  ASSERT_TRUE(b.started()) << b.Log();

  constexpr int kClients = 64, kIds = 10;
  std::latch start(kClients);
  std::mutex mu;
  std::map<std::string, int> first;
  std::atomic<int> errors{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      Client c(i % 2 == 0 ? a->socket_path() : b.socket_path());
      start.arrive_and_wait();
      json ids = json::array();
      for (int n = 0; n < kIds; ++n) ids.push_back("wamid." + std::to_string((n + i) % kIds));
      const json r = c.Call(
          {{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"messages", ids}});
      if (!r.is_object() || !r.value("ok", false)) {
        ADD_FAILURE() << r.dump();
        ++errors;
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      for (const json& m : r["results"])
        first[m["message_id"].get<std::string>()] += m["first"].get<bool>();
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_EQ(first.size(), static_cast<size_t>(kIds));
  for (const auto& [id, n] : first) EXPECT_EQ(n, 1) << id;

  const json claim = Client(a->socket_path())
                         .Call({{"op", "seen"},
                                {"tenant_id", "acme"},
                                {"channel", "whatsapp"},
                                {"message_id", "claimed"},
                                {"lease_ms", 60000}});
  ASSERT_EQ(claim["lease_token"], 1) << claim.dump();
  a->Kill(SIGKILL);
  a->Wait();
  a.reset();
  const json busy = Client(b.socket_path())
                        .Call({{"op", "seen"},
                               {"tenant_id", "acme"},
                               {"channel", "whatsapp"},
                               {"message_id", "claimed"},
                               {"lease_ms", 60000}});
  EXPECT_EQ(busy["first"], false) << busy.dump();
  EXPECT_EQ(busy["state"], "processing") << busy.dump();
  Agent again(dir_a.path(), WithStore(schema.url()));
  ASSERT_TRUE(again.started()) << again.Log();
  Client c(again.socket_path());
  const json dup = c.Call(
      {{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"message_id", "wamid.3"}});
  EXPECT_EQ(dup["first"], false) << dup.dump();
  EXPECT_EQ(dup["count"], kClients + 1) << dup.dump();
  const json done = c.Call({{"op", "done"},
                            {"tenant_id", "acme"},
                            {"channel", "whatsapp"},
                            {"message_id", "claimed"},
                            {"lease_token", 1}});
  EXPECT_EQ(done["state"], "done") << done.dump();
}

// Agents sharing a database derive new intents under one keyring id: one
// whose keyring makes another current is refused, until it switches them.
TEST(PostgresAgents, AgentsAgreeOnTheCurrentKeyIdUnlessOneSwitchesIt) {
  if (PostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
  Schema schema(/*migrate=*/true);
  ASSERT_TRUE(schema.ok()) << schema.error();
  TempDir dir;
  auto keygen = [](const std::string& id) {
    std::string out, err;
    EXPECT_EQ(RunIntentd({"keygen", "--id", id}, &out, &err), 0) << err;
    return out.substr(0, out.find('\n'));
  };
  const std::string k0 = keygen("0"), k1 = keygen("1");
  auto ring = [&](const std::string& name, const std::string& text) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), 0600);
    return path;
  };
  const std::string old_current = ring("old", "*" + k0 + "\n" + k1 + "\n");
  const std::string new_current = ring("new", k0 + "\n*" + k1 + "\n");
  auto options = [&](const std::string& key_file, std::vector<std::string> more = {}) {
    AgentOptions o = WithStore(schema.url());
    o.secret_in_env = false;
    o.extra_args.insert(o.extra_args.end(), {"--hmac-key-file", key_file});
    o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
    return o;
  };
  TempDir da, db, dc;
  Agent a(da.path(), options(old_current));
  ASSERT_TRUE(a.started()) << a.Log();
  const json first = Client(a.socket_path()).Call(Begin("FAT-K", "180.00"));
  EXPECT_EQ(first["key_id"], "0") << first.dump();
  {
    AgentOptions o = options(new_current);
    o.wait_ready = false;
    Agent b(db.path(), o);
    EXPECT_FALSE(b.Start());
    EXPECT_NE(b.Log().find("the database records current key id \"0\""), std::string::npos)
        << b.Log();
  }
  Agent b(db.path(), options(new_current, {"--switch-key-id"}));
  ASSERT_TRUE(b.started()) << b.Log();
  const json fresh = Client(b.socket_path()).Call(Begin("FAT-L", "180.00"));
  EXPECT_EQ(fresh["key_id"], "1") << fresh.dump();
  const json again = Client(b.socket_path()).Call(Begin("FAT-K", "180.00"));
  EXPECT_EQ(again["key"], first["key"]) << again.dump();
  EXPECT_EQ(again["key_id"], "0");
  AgentOptions o = options(old_current);
  o.wait_ready = false;
  Agent c(dc.path(), o);
  EXPECT_FALSE(c.Start());
  EXPECT_NE(c.Log().find("--switch-key-id"), std::string::npos) << c.Log();
}

}  // namespace
}  // namespace intentd::testing
