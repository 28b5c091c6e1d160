// What only the PostgreSQL backend has: the schema and its migrations,
// connections that break, purge batches. (The protocol behaviour runs for
// both backends in the contract_*_test.cc suites.)
#include "store/postgres/postgres_store.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <iostream>
#include <latch>
#include <optional>
#include <thread>

#include "store/open_store.h"
#include "store/postgres/conn.h"
#include "tests/store/postgres_test_util.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

#define REQUIRE_POSTGRES()                                      \
  do {                                                          \
    if (TestPostgresUrl().empty()) GTEST_SKIP() << kNoPostgres; \
  } while (0)

PostgresOptions Options(const std::string& url, const Clock* clock) {
  PostgresOptions o;
  o.url = url;
  o.clock = clock;
  o.purge_interval_ms = 0;
  o.pool_size = 4;
  return o;
}

TEST(PostgresSchema, OpenWithoutSchemaSaysToRunMigrate) {
  REQUIRE_POSTGRES();
  PostgresSchema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  std::unique_ptr<PostgresStore> store;
  Status s = PostgresStore::Open(Options(schema.url(), nullptr), &store);
  EXPECT_EQ(s.code(), Code::kIncompatible);
  EXPECT_NE(s.message().find("run `intentd migrate --store postgresql://"), std::string::npos)
      << s.message();
  // Through OpenStore too, which the agent calls.
  StoreSpec spec;
  spec.url = schema.url();
  std::unique_ptr<Store> any;
  EXPECT_EQ(OpenStore(spec, &any).code(), Code::kIncompatible);
}

TEST(PostgresSchema, OpenRefusesOlderAndNewerSchemas) {
  REQUIRE_POSTGRES();
  PostgresSchema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  ASSERT_TRUE(PostgresExecute(schema.url(),
                              "CREATE TABLE intentd_schema_version ("
                              "version integer PRIMARY KEY, applied_at timestamptz)")
                  .ok());
  std::unique_ptr<PostgresStore> store;
  Status s = PostgresStore::Open(Options(schema.url(), nullptr), &store);
  EXPECT_EQ(s.code(), Code::kIncompatible);
  EXPECT_NE(s.message().find("older"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("intentd migrate"), std::string::npos) << s.message();

  MigrateResult m;
  ASSERT_TRUE(MigratePostgres(schema.url(), &m).ok());
  ASSERT_TRUE(PostgresExecute(schema.url(), "INSERT INTO intentd_schema_version VALUES (" +
                                                std::to_string(kPostgresSchemaVersion + 1) +
                                                ", now())")
                  .ok());
  s = PostgresStore::Open(Options(schema.url(), nullptr), &store);
  EXPECT_EQ(s.code(), Code::kIncompatible);
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("upgrade intentd"), std::string::npos) << s.message();
  // Migrate refuses to touch it either.
  EXPECT_EQ(MigratePostgres(schema.url(), &m).code(), Code::kIncompatible);
}

TEST(PostgresSchema, MigrateIsIdempotentAndKeepsData) {
  REQUIRE_POSTGRES();
  PostgresSchema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  MigrateResult m;
  ASSERT_TRUE(MigratePostgres(schema.url(), &m).ok());
  EXPECT_EQ(m.from_version, 0);
  EXPECT_EQ(m.to_version, kPostgresSchemaVersion);
  ManualClock clock(kT0);
  {
    std::unique_ptr<PostgresStore> store;
    ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
    BeginResult r;
    ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  }
  ASSERT_TRUE(MigratePostgres(schema.url(), &m).ok());
  EXPECT_EQ(m.from_version, kPostgresSchemaVersion);
  EXPECT_EQ(m.to_version, kPostgresSchemaVersion);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  Action a;
  ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.lease_token, 1);
}

TEST(PostgresSchema, ConcurrentMigrationsSerialize) {
  REQUIRE_POSTGRES();
  PostgresSchema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  constexpr int kRuns = 4;
  std::latch start(kRuns);
  std::vector<Status> statuses(kRuns);
  std::vector<MigrateResult> results(kRuns);
  std::vector<std::thread> threads;
  for (int i = 0; i < kRuns; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      statuses[i] = MigratePostgres(schema.url(), &results[i]);
    });
  }
  for (auto& t : threads) t.join();
  int created = 0;
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
    created += results[i].from_version == 0;
  }
  EXPECT_EQ(created, 1);
}

TEST(PostgresSchema, MigrateRefusesATableItDidNotCreateAndChangesNothing) {
  REQUIRE_POSTGRES();
  PostgresSchema schema(/*migrate=*/false);
  ASSERT_TRUE(schema.ok()) << schema.error();
  // e.g. the reference design's own tables, with text columns.
  ASSERT_TRUE(PostgresExecute(schema.url(), "CREATE TABLE intencao (tenant_id text)").ok());
  MigrateResult m;
  Status s = MigratePostgres(schema.url(), &m);
  EXPECT_EQ(s.code(), Code::kStorageError);
  EXPECT_NE(s.message().find("intentd did not create it"), std::string::npos) << s.message();
  // Rolled back: no version table was left behind.
  std::unique_ptr<PostgresStore> store;
  s = PostgresStore::Open(Options(schema.url(), nullptr), &store);
  EXPECT_EQ(s.code(), Code::kIncompatible);
  EXPECT_NE(s.message().find("no intentd schema"), std::string::npos) << s.message();
}

TEST(PostgresConnection, UnreachableServerFailsOpenWithStorageError) {
  TempDir empty;  // a socket directory where nothing listens
  std::unique_ptr<PostgresStore> store;
  Status s = PostgresStore::Open(
      Options("postgresql:///intentd_test?host=" + empty.path(), nullptr), &store);
  EXPECT_EQ(s.code(), Code::kStorageError);
  EXPECT_NE(s.message().find("cannot connect to PostgreSQL"), std::string::npos) << s.message();
}

TEST(PostgresConnection, KilledSessionsAreReplacedWithoutFailingRequests) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  const std::string app = "intentd_" + schema.name();
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(
                  Options(WithUrlParam(schema.url(), "application_name", app), &clock), &store)
                  .ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  ASSERT_EQ(r.decision, Decision::kExecute);
  const std::string kill =
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" + app +
      "'";
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(PostgresExecute(TestPostgresUrl(), kill).ok());
    // The pooled session is dead: the request runs again on a fresh one.
    ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
    EXPECT_EQ(r.decision, Decision::kInFlight);
    ASSERT_TRUE(PostgresExecute(TestPostgresUrl(), kill).ok());
    Action a;
    ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
    EXPECT_EQ(a.lease_token, 1);
  }
}

// The hot pair's one-statement paths (store/postgres/rows.cc, kBeginFresh
// and kCompleteStarted) write only the case they were written for; the
// cases beside it go to the general transaction and answer as it does.

// Both paths of begin on a new intent give the same answer and rows: the
// fresh one, and the general one (taken when allowances are counted; an
// allowance without maximum refuses nothing).
TEST(PostgresOneTrip, FreshBeginWritesWhatTheGeneralTransactionWrites) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  BeginResult fast, general;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &fast).ok());
  IntentCandidate counted = NewIntentRequest("acme", "FAT-2", "k2");
  counted.allowances.push_back(Allowance{"pix", 100, 0, 0});
  ASSERT_TRUE(store->Begin(counted, kLeaseMs, &general).ok());
  for (const BeginResult* r : {&fast, &general}) {
    EXPECT_TRUE(r->created);
    EXPECT_EQ(r->decision, Decision::kExecute);
    EXPECT_EQ(r->action.status, ActionStatus::kStarted);
    EXPECT_EQ(r->action.lease_token, 1);
    EXPECT_EQ(r->action.attempt, 1);
    EXPECT_EQ(r->action.lease_until_ms, kT0 + kLeaseMs);
  }
  LookupResult a, b;
  ASSERT_TRUE(store->Lookup("acme", "FAT-1", "pix.cobranca", &a).ok());
  ASSERT_TRUE(store->Lookup("acme", "FAT-2", "pix.cobranca", &b).ok());
  ASSERT_TRUE(a.action && b.action);
  EXPECT_EQ(a.intent.payload, fast.intent.payload);
  EXPECT_EQ(a.intent.input, fast.intent.input);
  EXPECT_EQ(a.intent.key_id, b.intent.key_id);
  EXPECT_EQ(a.intent.created_at_ms, b.intent.created_at_ms);
  EXPECT_EQ(a.action->intent_ref, "FAT-1");
  EXPECT_EQ(a.action->lease_token, b.action->lease_token);
  EXPECT_EQ(a.action->lease_until_ms, b.action->lease_until_ms);
  EXPECT_EQ(a.action->created_at_ms, b.action->created_at_ms);
  // Both complete in one statement, and their intents follow the action
  // (retention after the completion), like the general Finish.
  Action done;
  ASSERT_TRUE(store->Complete("acme", "k1", 1, "{\"ok\":1}", &done).ok());
  EXPECT_EQ(done.status, ActionStatus::kCompleted);
  EXPECT_EQ(done.response, "{\"ok\":1}");
  EXPECT_EQ(done.intent_ref, "FAT-1");
  EXPECT_EQ(done.attempt, 1);
  EXPECT_EQ(done.lease_until_ms, kT0 + kLeaseMs);
  EXPECT_EQ(done.updated_at_ms, kT0);
  ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &fast).ok());
  EXPECT_EQ(fast.decision, Decision::kReplay);
  EXPECT_FALSE(fast.created);
  EXPECT_EQ(fast.action.response, "{\"ok\":1}");
  clock.Advance(30LL * kDay - 1);
  EXPECT_TRUE(store->Lookup("acme", "FAT-1", "pix.cobranca", &a).ok());
  clock.Advance(1);
  EXPECT_EQ(store->Lookup("acme", "FAT-1", "pix.cobranca", &a).code(), Code::kNotFound);
  EXPECT_TRUE(store->Lookup("acme", "FAT-2", "pix.cobranca", &b).ok());  // still started
}

// A new intent whose key already has an action row: another intent's (the
// same payload under another ref), or an expired one not purged yet. The
// fresh statement fails on the action's key and writes nothing, not even
// the intent; the general transaction then freezes it and decides.
TEST(PostgresOneTrip, FreshBeginOnAKeyWithAnActionRowGoesToTheGeneralTransaction) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  PostgresOptions options = Options(schema.url(), &clock);
  options.retention_ms = kDay;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-2", "k1"), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.action.intent_ref, "FAT-1");
  Action a;
  ASSERT_TRUE(store->Complete("acme", "k1", 1, "\"first\"", &a).ok());
  ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "FAT-2", "k1"), kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kReplay);
  EXPECT_EQ(r.action.response, "\"first\"");
  // Past retention the rows read as absent but are still there (no purge).
  clock.Advance(kDay);
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-3", "k1"), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.intent_ref, "FAT-3");
  EXPECT_EQ(r.action.lease_token, 1);
  ASSERT_TRUE(store->Complete("acme", "k1", 1, "\"third\"", &a).ok());
  EXPECT_EQ(a.intent_ref, "FAT-3");
  EXPECT_EQ(a.response, "\"third\"");
}

// complete outside its one-statement case: each answer is the general
// Finish's, and nothing is written.
TEST(PostgresOneTrip, CompleteOutsideItsCaseAnswersAsTheGeneralTransaction) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  Action a;
  EXPECT_EQ(store->Complete("acme", "k1", 1, "1", &a).code(), Code::kNotFound);
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  EXPECT_EQ(store->Complete("acme", "k1", 2, "1", &a).code(), Code::kInvalidState);
  clock.Advance(kLeaseMs);
  ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  ASSERT_EQ(r.decision, Decision::kRecover);
  EXPECT_EQ(store->Complete("acme", "k1", 1, "old", &a).code(), Code::kLeaseLost);
  EXPECT_EQ(a.lease_token, 2);
  EXPECT_EQ(a.status, ActionStatus::kStarted);
  ASSERT_TRUE(store->Complete("acme", "k1", 2, "new", &a).ok());
  EXPECT_EQ(a.attempt, 2);
  // The repeat of the same completion: kOk, the first response stays.
  ASSERT_TRUE(store->Complete("acme", "k1", 2, "again", &a).ok());
  EXPECT_EQ(a.response, "new");
  EXPECT_EQ(a.updated_at_ms, kT0 + kLeaseMs);
  ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.response, "new");
}

// Group commit (store/postgres/batch.h): concurrent begins of fresh intents
// and completes of started actions go to the server several to a statement.
// Each still gets the answer and the rows it would get alone. The threads
// start together, so that while one statement runs the others gather
// behind it; a round where none did (a scheduler that ran them one by one)
// is run again, at most kRounds times, and at least one batch must form.
constexpr int kRounds = 5;

// One kind's batches (StatementBatches); all zero when the store has none.
StatementBatchCounts Batched(const Store& store, const std::string& kind) {
  for (const StatementBatchCounts& c : store.StatementBatches()) {
    if (c.kind == kind) return c;
  }
  return {};
}

// Begin and Complete as the agent sends them with `posted` (its io thread,
// protocol/dispatcher.cc): BeginAsync or CompleteAsync, answered on the
// store's batch thread, the synchronous call when that path does not
// apply, and the store's `rest` on the calling thread when it leaves one.
// Counts in *off_thread the answers that came from a thread named
// intentd-batch, and in *rests the rests run.
struct AgentCalls {
  bool posted = false;
  std::atomic<int> off_thread{0};
  std::atomic<int> async_answers{0};
  std::atomic<int> rests{0};

  Status Begin(Store& store, const IntentCandidate& request, BeginResult* result) {
    if (posted) {
      std::optional<Status> s = Await([&](Store::WriteDone done) {
        return store.BeginAsync(request, kLeaseMs, result, std::move(done));
      });
      if (s) return *s;
    }
    return store.Begin(request, kLeaseMs, result);
  }
  Status Complete(Store& store, const std::string& tenant, const std::string& key, int64_t token,
                  const std::string& response, Action* action) {
    if (posted) {
      std::optional<Status> s = Await([&](Store::WriteDone done) {
        return store.CompleteAsync(tenant, key, token, response, action, std::move(done));
      });
      if (s) return *s;
    }
    return store.Complete(tenant, key, token, response, action);
  }

 private:
  // nullopt: run the synchronous call.
  std::optional<Status> Await(const std::function<bool(Store::WriteDone)>& start) {
    std::promise<std::pair<Status, Store::Rest>> answered;
    if (!start([&](const Status& s, Store::Rest rest) {
          char name[32] = {};
          pthread_getname_np(pthread_self(), name, sizeof(name));
          if (std::string(name) == "intentd-batch") ++off_thread;
          ++async_answers;
          answered.set_value({s, std::move(rest)});
        })) {
      return std::nullopt;
    }
    auto [status, rest] = answered.get_future().get();
    if (!rest) return status;
    ++rests;
    return rest();
  }
};

void ConcurrentFreshBeginsAndCompletesShareStatements(bool posted) {
  AgentCalls calls;
  calls.posted = posted;
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  constexpr int kThreads = 32;
  bool begins_batched = false, completes_batched = false;
  for (int round = 0; round < kRounds && !(begins_batched && completes_batched); ++round) {
    const StatementBatchCounts begins_before = Batched(*store, "begin");
    const StatementBatchCounts completes_before = Batched(*store, "complete");
    std::latch begin_together(kThreads), complete_together(kThreads);
    std::vector<BeginResult> begun(kThreads);
    std::vector<Status> begin_status(kThreads), complete_status(kThreads);
    std::vector<Action> done(kThreads);
    std::vector<std::thread> threads;
    auto ref = [round](int i) { return "R" + std::to_string(round) + "-" + std::to_string(i); };
    auto key = [round](int i) { return KeyFor(1000 * round + i); };
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        const std::string tenant = i % 2 ? "acme" : "globex";
        begin_together.arrive_and_wait();
        begin_status[i] = calls.Begin(*store, NewIntentRequest(tenant, ref(i), key(i)), &begun[i]);
        complete_together.arrive_and_wait();
        complete_status[i] = calls.Complete(*store, tenant, key(i), begun[i].action.lease_token,
                                            "{\"n\":" + std::to_string(i) + "}", &done[i]);
      });
    }
    for (auto& t : threads) t.join();
    const StatementBatchCounts begins = Batched(*store, "begin");
    const StatementBatchCounts completes = Batched(*store, "complete");
    EXPECT_EQ(begins.requests - begins_before.requests, static_cast<uint64_t>(kThreads));
    EXPECT_EQ(completes.requests - completes_before.requests, static_cast<uint64_t>(kThreads));
    // Every statement sent was timed.
    EXPECT_GT(begins.seconds, begins_before.seconds);
    EXPECT_GT(completes.seconds, completes_before.seconds);
    begins_batched |= begins.statements() - begins_before.statements() < kThreads;
    completes_batched |= completes.statements() - completes_before.statements() < kThreads;
    for (int i = 0; i < kThreads; ++i) {
      const std::string tenant = i % 2 ? "acme" : "globex";
      ASSERT_TRUE(begin_status[i].ok()) << begin_status[i].message();
      EXPECT_TRUE(begun[i].created);
      EXPECT_EQ(begun[i].decision, Decision::kExecute);
      EXPECT_EQ(begun[i].action.tenant_id, tenant);
      EXPECT_EQ(begun[i].action.key, key(i));
      EXPECT_EQ(begun[i].action.intent_ref, ref(i));
      EXPECT_EQ(begun[i].action.lease_token, 1);
      EXPECT_EQ(begun[i].intent.intent_ref, ref(i));
      ASSERT_TRUE(complete_status[i].ok()) << complete_status[i].message();
      EXPECT_EQ(done[i].status, ActionStatus::kCompleted);
      EXPECT_EQ(done[i].intent_ref, ref(i));
      EXPECT_EQ(done[i].response, "{\"n\":" + std::to_string(i) + "}");
      LookupResult row;
      ASSERT_TRUE(store->Lookup(tenant, ref(i), "pix.cobranca", &row).ok());
      ASSERT_TRUE(row.action);
      EXPECT_EQ(row.intent.key, key(i));
      EXPECT_EQ(row.action->status, ActionStatus::kCompleted);
      EXPECT_EQ(row.action->response, done[i].response);
      // The intent follows its completed action's retention, as alone.
      BeginResult again;
      ASSERT_TRUE(
          store->Begin(ExistingIntentRequest(tenant, ref(i), key(i)), kLeaseMs, &again).ok());
      EXPECT_EQ(again.decision, Decision::kReplay);
      EXPECT_EQ(again.action.response, done[i].response);
    }
  }
  EXPECT_TRUE(begins_batched) << "no two begins shared a statement in " << kRounds << " rounds";
  EXPECT_TRUE(completes_batched) << "no two completes shared a statement in " << kRounds
                                 << " rounds";
  // Past the retention of a completion the rows read as absent: the batched
  // complete set the intent's retention like the single statement.
  clock.Advance(30LL * kDay);
  LookupResult gone;
  EXPECT_EQ(store->Lookup("acme", "R0-1", "pix.cobranca", &gone).code(), Code::kNotFound);
  if (posted) {
    // Only posted members waited: the Batcher's own thread ran every batch.
    EXPECT_GT(calls.async_answers.load(), 0);
    EXPECT_EQ(calls.off_thread.load(), calls.async_answers.load());
  }
}

TEST(PostgresGroupCommit, ConcurrentFreshBeginsAndCompletesShareStatements) {
  REQUIRE_POSTGRES();
  ConcurrentFreshBeginsAndCompletesShareStatements(/*posted=*/false);
}

TEST(PostgresGroupCommit, PostedFreshBeginsAndCompletesShareStatements) {
  REQUIRE_POSTGRES();
  ConcurrentFreshBeginsAndCompletesShareStatements(/*posted=*/true);
}

// What a batch must not do in one statement: two begins of one intent, two
// intents of one key, a key that already has an action row; and what it
// must leave to the general transaction: an intent already frozen (a
// redelivery). Racing begins of each kind grant once per key, and every
// answer is the one the general transaction gives; completes under a stale
// token change nothing.
void RacingDuplicatesAndTakenKeysGrantOnce(bool posted) {
  AgentCalls calls;
  calls.posted = posted;
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "TAKEN", "k-taken"), kLeaseMs, &r).ok());
  constexpr int kGroups = 8;
  constexpr int kThreads = 5 * kGroups;
  for (int round = 0; round < kRounds; ++round) {
    // Threads 5j..5j+4: two on intent D<j> (key kd<j>), one on E<j> sharing
    // kd<j>, one on T<j> whose key k-taken has TAKEN's started action, one
    // redelivering P<j> (frozen before, key kp<j>) as if it were new.
    auto ref = [round](int i) {
      const char* kind[] = {"D", "D", "E", "T", "P"};
      return std::string(kind[i % 5]) + std::to_string(round) + "-" + std::to_string(i / 5);
    };
    auto key = [round](int i) {
      const int j = round * 100 + i / 5;
      if (i % 5 == 3) return std::string("k-taken");
      return (i % 5 == 4 ? "kp" : "kd") + std::to_string(j);
    };
    for (int j = 0; j < kGroups; ++j) {
      const int p = 5 * j + 4;
      ASSERT_TRUE(store->Begin(NewIntentRequest("acme", ref(p), key(p)), kLeaseMs, &r).ok());
    }
    std::latch together(kThreads);
    std::vector<BeginResult> begun(kThreads);
    std::vector<Status> status(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        together.arrive_and_wait();
        status[i] = calls.Begin(*store, NewIntentRequest("acme", ref(i), key(i)), &begun[i]);
      });
    }
    for (auto& t : threads) t.join();
    for (int j = 0; j < kGroups; ++j) {
      int executed = 0, created_d = 0;
      for (int i = 5 * j; i < 5 * j + 3; ++i) {
        ASSERT_TRUE(status[i].ok()) << status[i].message();
        executed += begun[i].decision == Decision::kExecute;
        if (i < 5 * j + 2) created_d += begun[i].created;
        if (begun[i].decision != Decision::kExecute) {
          EXPECT_EQ(begun[i].decision, Decision::kInFlight) << ref(i);
        }
      }
      EXPECT_EQ(executed, 1) << "key " << key(5 * j);  // D<j> and E<j> share it
      EXPECT_EQ(created_d, 1) << ref(5 * j);
      EXPECT_TRUE(begun[5 * j + 2].created);
      const int t = 5 * j + 3;
      ASSERT_TRUE(status[t].ok()) << status[t].message();
      EXPECT_TRUE(begun[t].created);
      EXPECT_EQ(begun[t].decision, Decision::kInFlight);
      EXPECT_EQ(begun[t].action.intent_ref, "TAKEN");
      const int p = 5 * j + 4;
      ASSERT_TRUE(status[p].ok()) << status[p].message();
      EXPECT_FALSE(begun[p].created) << ref(p);
      EXPECT_EQ(begun[p].decision, Decision::kInFlight) << ref(p);
      Action a;
      for (int i : {5 * j, p}) {
        ASSERT_TRUE(store->GetAction("acme", key(i), &a).ok());
        EXPECT_EQ(a.lease_token, 1);
        EXPECT_EQ(a.status, ActionStatus::kStarted);
      }
    }
  }
  // Racing completes of one action, half under a stale token: one applies.
  std::latch together(kThreads);
  std::vector<Status> status(kThreads);
  std::vector<Action> done(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      together.arrive_and_wait();
      status[i] = calls.Complete(*store, "acme", "k-taken", i % 2 ? 1 : 7, "\"r\"", &done[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    if (i % 2) {
      ASSERT_TRUE(status[i].ok()) << status[i].message();
      EXPECT_EQ(done[i].status, ActionStatus::kCompleted);
      EXPECT_EQ(done[i].response, "\"r\"");
    } else {
      EXPECT_EQ(status[i].code(), Code::kInvalidState) << status[i].message();
    }
  }
}

TEST(PostgresGroupCommit, RacingDuplicatesAndTakenKeysGrantOnce) {
  REQUIRE_POSTGRES();
  RacingDuplicatesAndTakenKeysGrantOnce(/*posted=*/false);
}

TEST(PostgresGroupCommit, PostedRacingDuplicatesAndTakenKeysGrantOnce) {
  REQUIRE_POSTGRES();
  RacingDuplicatesAndTakenKeysGrantOnce(/*posted=*/true);
}

// The posted path takes only its own cases; the others are the
// synchronous call's, and nothing is started for them.
TEST(PostgresGroupCommit, PostedWritesRefuseWhatIsNotTheirCase) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  EXPECT_TRUE(store->SupportsAsyncWrites());
  BeginResult r;
  auto never = [](const Status&, const Store::Rest&) {
    ADD_FAILURE() << "done called for a refused write";
  };
  EXPECT_FALSE(store->BeginAsync(ExistingIntentRequest("acme", "X", "kx"), kLeaseMs, &r, never));
  IntentCandidate counted = NewIntentRequest("acme", "Y", "ky");
  counted.allowances.push_back(Allowance{});
  EXPECT_FALSE(store->BeginAsync(counted, kLeaseMs, &r, never));
  EXPECT_FALSE(store->BeginAsync(NewIntentRequest("acme", "Z", "kz"), 0, &r, never));
  EXPECT_EQ(Batched(*store, "begin").requests, 0u);
}

// A posted write that is not its statement's case (a redelivered intent, a
// complete under a token not granted) leaves a `rest`, which goes straight
// to the general transaction: the one-statement write is not sent twice.
TEST(PostgresGroupCommit, APostedWriteOutsideItsCaseLeavesTheGeneralTransaction) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  AgentCalls calls;
  calls.posted = true;
  BeginResult first, again;
  ASSERT_TRUE(calls.Begin(*store, NewIntentRequest("acme", "R", "kr"), &first).ok());
  ASSERT_TRUE(first.created);
  EXPECT_EQ(calls.rests.load(), 0);
  EXPECT_EQ(Batched(*store, "begin").statements(), 1u);
  // The redelivery: one posted statement that wrote nothing, then the rest.
  ASSERT_TRUE(calls.Begin(*store, NewIntentRequest("acme", "R", "kr"), &again).ok());
  EXPECT_EQ(calls.rests.load(), 1);
  EXPECT_EQ(Batched(*store, "begin").statements(), 2u);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.decision, Decision::kInFlight);
  EXPECT_EQ(again.action.lease_token, first.action.lease_token);
  // A token never granted: one posted statement, then the general refusal.
  Action action;
  EXPECT_EQ(calls.Complete(*store, "acme", "kr", 7, "\"r\"", &action).code(), Code::kInvalidState);
  EXPECT_EQ(calls.rests.load(), 2);
  EXPECT_EQ(Batched(*store, "complete").statements(), 1u);
  // The granted token applies in the posted statement, then a second
  // complete with it (the action is completed) is the general one's answer.
  ASSERT_TRUE(
      calls.Complete(*store, "acme", "kr", first.action.lease_token, "\"r\"", &action).ok());
  EXPECT_EQ(action.status, ActionStatus::kCompleted);
  EXPECT_EQ(calls.rests.load(), 2);
  Action replayed, direct;
  const Status posted =
      calls.Complete(*store, "acme", "kr", first.action.lease_token, "\"r\"", &replayed);
  EXPECT_EQ(calls.rests.load(), 3);
  EXPECT_EQ(Batched(*store, "complete").statements(), 3u);
  const Status sync = store->Complete("acme", "kr", first.action.lease_token, "\"r\"", &direct);
  EXPECT_EQ(posted.code(), sync.code()) << posted.message() << " / " << sync.message();
  EXPECT_EQ(replayed.status, direct.status);
  EXPECT_EQ(replayed.response, direct.response);
}

// A redelivered begin whose decision writes nothing (a completed action
// replays, a live lease is in flight, a diverged extraction reads the frozen
// intent back), and a complete its statement did not apply whose answer
// writes nothing (a retried completion, a token never granted), are decided
// from one read, without the general transaction's row locks: each is
// answered while another session holds every action's row, which the
// general transaction locks and the one-statement writes lock only for a
// row they write. A redelivery whose decision writes (an expired lease
// recovered) still locks: it waits for that session, then decides on what
// the session left. (The intents' rows are not the probe: the complete
// batch's statement locks a row's intent before it checks the action.)
void RedeliveriesDecidedWithoutLocks(bool posted) {
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(Options(schema.url(), &clock), &store).ok());
  AgentCalls calls;
  calls.posted = posted;
  BeginResult r;
  Action done;
  ASSERT_TRUE(calls.Begin(*store, NewIntentRequest("acme", "DONE", "kd"), &r).ok());
  ASSERT_TRUE(calls.Complete(*store, "acme", "kd", r.action.lease_token, "\"paid\"", &done).ok());
  ASSERT_TRUE(calls.Begin(*store, NewIntentRequest("acme", "LIVE", "kl"), &r).ok());
  const int64_t live_token = r.action.lease_token;
  ASSERT_TRUE(calls.Begin(*store, NewIntentRequest("acme", "LATE", "kt"), &r).ok());
  const int64_t late_token = r.action.lease_token;

  std::string error;
  std::unique_ptr<pg::Connection> locker =
      pg::Connection::Connect(schema.url(), /*sync=*/true, &error);
  ASSERT_TRUE(locker) << error;
  ASSERT_TRUE(locker->ExecSimple("BEGIN")) << locker->error_message();
  ASSERT_TRUE(locker->ExecSimple("SELECT 1 FROM acao_idempotente FOR UPDATE"))
      << locker->error_message();
  auto begin_in_background = [&](IntentCandidate request) {
    return std::async(std::launch::async, [&calls, &store, request] {
      BeginResult out;
      const Status s = calls.Begin(*store, request, &out);
      return std::make_pair(s, out);
    });
  };
  auto complete_in_background = [&](std::string key, int64_t token, std::string response) {
    return std::async(std::launch::async, [&calls, &store, key, token, response] {
      Action out;
      const Status s = calls.Complete(*store, "acme", key, token, response, &out);
      return std::make_pair(s, out);
    });
  };
  auto replay = begin_in_background(NewIntentRequest("acme", "DONE", "kd"));
  auto retried = complete_in_background("kd", done.lease_token, "\"paid twice\"");
  auto never_granted = complete_in_background("kl", live_token + 1, "\"x\"");
  auto diverged = begin_in_background(NewIntentRequest("acme", "DONE", "k-other"));
  auto in_flight = begin_in_background(NewIntentRequest("acme", "LIVE", "kl"));
  // Within the locker's idle_in_transaction_session_timeout (30 s, conn.cc),
  // which would end its session and release the rows.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const bool answered = replay.wait_until(deadline) == std::future_status::ready &&
                        diverged.wait_until(deadline) == std::future_status::ready &&
                        in_flight.wait_until(deadline) == std::future_status::ready &&
                        retried.wait_until(deadline) == std::future_status::ready &&
                        never_granted.wait_until(deadline) == std::future_status::ready;
  EXPECT_TRUE(answered)
      << "a request whose answer writes nothing waited for the actions' row locks";
  // Past LATE's lease: its redelivery recovers, a write, under the lock.
  clock.Advance(kLeaseMs);
  auto recover = begin_in_background(NewIntentRequest("acme", "LATE", "kt"));
  const bool recovered_under_lock =
      recover.wait_for(std::chrono::milliseconds(300)) == std::future_status::ready;
  EXPECT_FALSE(recovered_under_lock) << "a recovery did not wait for its action's row lock";
  ASSERT_TRUE(locker->ExecSimple("ROLLBACK")) << locker->error_message();

  const auto [replay_status, replayed] = replay.get();
  ASSERT_TRUE(replay_status.ok()) << replay_status.message();
  EXPECT_FALSE(replayed.created);
  EXPECT_EQ(replayed.decision, Decision::kReplay);
  EXPECT_EQ(replayed.action.response, "\"paid\"");
  EXPECT_EQ(replayed.action.lease_token, done.lease_token);
  EXPECT_EQ(replayed.intent.key, "kd");
  const auto [diverged_status, frozen] = diverged.get();
  ASSERT_TRUE(diverged_status.ok()) << diverged_status.message();
  EXPECT_EQ(frozen.decision, Decision::kReplay);
  EXPECT_EQ(frozen.intent.key, "kd");
  EXPECT_EQ(frozen.intent.payload, replayed.intent.payload);
  const auto [in_flight_status, flying] = in_flight.get();
  ASSERT_TRUE(in_flight_status.ok()) << in_flight_status.message();
  EXPECT_EQ(flying.decision, Decision::kInFlight);
  EXPECT_EQ(flying.action.status, ActionStatus::kStarted);
  EXPECT_GT(flying.retry_after_ms, 0);
  const auto [retried_status, retried_action] = retried.get();
  ASSERT_TRUE(retried_status.ok()) << retried_status.message();
  EXPECT_EQ(retried_action.status, ActionStatus::kCompleted);
  EXPECT_EQ(retried_action.response, "\"paid\"");  // the first result stays
  const auto [never_status, live_action] = never_granted.get();
  EXPECT_EQ(never_status.code(), Code::kInvalidState) << never_status.message();
  EXPECT_EQ(live_action.lease_token, live_token);
  const auto [recover_status, recovered] = recover.get();
  ASSERT_TRUE(recover_status.ok()) << recover_status.message();
  EXPECT_EQ(recovered.decision, Decision::kRecover);
  EXPECT_EQ(recovered.previous_lease_token, late_token);
  EXPECT_EQ(recovered.action.lease_token, late_token + 1);
  // The answers are the general transaction's (ExistingIntentRequest goes
  // straight to it).
  BeginResult general;
  ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "DONE", "kd"), kLeaseMs, &general).ok());
  EXPECT_EQ(general.decision, replayed.decision);
  EXPECT_EQ(general.action.response, replayed.action.response);
  EXPECT_EQ(general.intent.updated_at_ms, replayed.intent.updated_at_ms);
  EXPECT_EQ(general.intent.key_id, replayed.intent.key_id);
  EXPECT_EQ(general.intent.input, replayed.intent.input);
}

TEST(PostgresOneTrip, RedeliveriesThatWriteNothingAreDecidedWithoutTheRowLocks) {
  REQUIRE_POSTGRES();
  RedeliveriesDecidedWithoutLocks(/*posted=*/false);
}

TEST(PostgresGroupCommit, PostedRedeliveriesThatWriteNothingAreDecidedWithoutTheRowLocks) {
  REQUIRE_POSTGRES();
  RedeliveriesDecidedWithoutLocks(/*posted=*/true);
}

// Rows of acao_idempotente written by the tests' own SQL, followed by a
// SELECT of these columns.
#define INSERT_ACTION_ROWS                                                                     \
  "INSERT INTO acao_idempotente (tenant_id, chave, action_type, intent_ref, status, attempt, " \
  "lease_token, lease_until_ms, created_at_ms, updated_at_ms, retain_until_ms) "

// The store's sessions (pg::Connection::Connect) plan a batch's keyed join
// as index lookups even on a table of a few hundred rows, where the planner
// left to itself hash-joins a sequential scan: a prepared batch keeps the
// plan made then (conn.cc). The join has the batches' shape (unnest'ed
// arrays joined on the action's primary key); PostgresExecute runs it on
// such a session.
TEST(PostgresPlans, KeyedBatchJoinsUseTheIndexOnSmallTables) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  const std::string fill = INSERT_ACTION_ROWS
      "SELECT 't'::bytea, ('k' || g)::bytea, 'a'::bytea, ('r' || g)::bytea, 'completed', 1, 1, "
      "0, 0, 0, 1 FROM generate_series(1, 300) g; ANALYZE acao_idempotente";
  ASSERT_TRUE(PostgresExecute(schema.url(), fill).ok());
  const std::string check = R"sql(
DO $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN SELECT a.intent_ref FROM unnest('
      '''{t,t,t,t,t,t,t,t,t,t}''::bytea[], ''{k1,k2,k3,k4,k5,k6,k7,k8,k9,k10}''::bytea[]) '
      'AS r(tenant_id, chave) JOIN acao_idempotente a '
      'ON a.tenant_id = r.tenant_id AND a.chave = r.chave' LOOP
    IF line LIKE '%Seq Scan%' OR line LIKE '%Hash%' OR line LIKE '%Merge%' THEN
      RAISE EXCEPTION 'the keyed join was planned as: %', line;
    END IF;
  END LOOP;
END $$)sql";
  const Status s = PostgresExecute(schema.url(), check);
  EXPECT_TRUE(s.ok()) << s.message();
  // The test of the test: a session without those settings plans it so.
  const Status plain =
      PostgresExecute(schema.url(), "SET enable_seqscan = on; SET enable_hashjoin = on; " + check);
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.message().find("the keyed join was planned as"), std::string::npos)
      << plain.message();
}

// A migrated database of a test's own, with pg_stat_statements, dropped at
// the end: the server's statement counts are kept per database, and the
// other tests' schemas share the test database. `stats` is a session on it
// for the test's own statements.
class CountedDatabase {
 public:
  explicit CountedDatabase(const std::string& name)
      : base_(TestPostgresUrl()),
        name_(name + "_" + std::to_string(getpid())),
        url_(WithUrlParam(base_, "dbname", name_)) {}
  ~CountedDatabase() {
    PostgresExecute(base_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  }

  // Creates and migrates it, with `settings` (`name = value`) for its
  // sessions. Empty when done; else what failed. *skip: the server does
  // not count statements (pg_stat_statements is not in its
  // shared_preload_libraries), which a test skips on.
  std::string Create(const std::vector<std::string>& settings, bool* skip) {
    *skip = false;
    if (!PostgresExecute(base_, "DROP DATABASE IF EXISTS " + name_).ok() ||
        !PostgresExecute(base_, "CREATE DATABASE " + name_).ok()) {
      return "cannot create the database " + name_;
    }
    for (const std::string& setting : settings) {
      const Status s = PostgresExecute(base_, "ALTER DATABASE " + name_ + " SET " + setting);
      if (!s.ok()) return s.message();
    }
    MigrateResult migrated;
    const Status m = MigratePostgres(url_, &migrated);
    if (!m.ok()) return m.message();
    std::string error;
    stats_ = pg::Connection::Connect(url_, /*sync=*/true, &error);
    if (!stats_) return error;
    if (!stats_->ExecSimple("CREATE EXTENSION pg_stat_statements")) return stats_->error_message();
    pg::Result r;
    *skip = !stats_->ExecSimple("SELECT count(*) FROM pg_stat_statements", &r);
    return "";
  }
  const std::string& url() const { return url_; }
  pg::Connection& stats() { return *stats_; }
  // The counts of this database's statements only.
  static constexpr const char* kOwnStatements =
      "dbid = (SELECT oid FROM pg_database WHERE datname = current_database())";

 private:
  std::string base_, name_, url_;
  std::unique_ptr<pg::Connection> stats_;
};

#define REQUIRE_COUNTED_DATABASE(db, ...)                                                   \
  do {                                                                                      \
    bool skip = false;                                                                      \
    const std::string failed = (db).Create({__VA_ARGS__}, &skip);                           \
    ASSERT_EQ(failed, "");                                                                  \
    if (skip) {                                                                             \
      GTEST_SKIP() << "the server does not count statements (pg_stat_statements is not in " \
                      "its shared_preload_libraries): "                                     \
                   << (db).stats().error_message();                                         \
    }                                                                                       \
  } while (0)

// The complete batch is planned once per session, not at every execution:
// the server's counts (pg_stat_statements, which scripts/with-postgres.sh
// loads) show its plans staying at the five custom plans and one generic
// plan of the store's one session while it runs many batches.
TEST(PostgresPlans, TheCompleteBatchIsPlannedOncePerSession) {
  REQUIRE_POSTGRES();
  CountedDatabase db("t_plans");
  // Planning is counted only when asked, here for the store's sessions.
  REQUIRE_COUNTED_DATABASE(db, "pg_stat_statements.track_planning = on");
  const std::string url = db.url();
  pg::Connection* stats = &db.stats();
  const std::string counts = std::string("SELECT calls, plans FROM pg_stat_statements WHERE ") +
                             CountedDatabase::kOwnStatements +
                             " AND query LIKE 'WITH r AS%own AS MATERIALIZED%'";
  pg::Result r;
  ManualClock clock(kT0);
  PostgresOptions options = Options(url, &clock);
  options.pool_size = 1;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  // Rounds of concurrent completes until the batch statement (two or more
  // members; one goes as the single statement) ran at least 12 times.
  constexpr int kThreads = 8;
  int64_t calls = 0, plans = 0;
  for (int round = 0; round < 60 && calls < 12; ++round) {
    std::vector<BeginResult> begun(kThreads);
    auto ref = [round](int i) { return "P" + std::to_string(round) + "-" + std::to_string(i); };
    auto key = [round](int i) { return KeyFor(1000 * round + i); };
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_TRUE(store->Begin(NewIntentRequest("acme", ref(i), key(i)), kLeaseMs, &begun[i]).ok());
    }
    std::latch together(kThreads);
    std::vector<Status> completed(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        Action done;
        together.arrive_and_wait();
        completed[i] = store->Complete("acme", key(i), begun[i].action.lease_token, "1", &done);
      });
    }
    for (auto& t : threads) t.join();
    for (const Status& s : completed) ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_TRUE(stats->ExecSimple(counts, &r)) << stats->error_message();
    if (r.rows() == 1) {  // simple query protocol: text
      calls = std::stoll(r.Bytes(0, 0));
      plans = std::stoll(r.Bytes(0, 1));
    }
  }
  ASSERT_GE(calls, 12) << "the complete batch ran " << calls << " times in 60 rounds";
  // None at all: the server did not count planning, and nothing was checked.
  ASSERT_GT(plans, 0) << "pg_stat_statements.track_planning did not apply";
  EXPECT_LE(plans, 6) << "the complete batch was planned " << plans << " times in " << calls
                      << " executions on one session";
}

// A complete reaches its action by the primary key, not by the tenant's
// range of the lease index of started actions (store/postgres/rows.cc,
// kCompleteStarted). That index holds an entry for every action the tenant
// started until vacuum removes those no longer started, which it cannot
// while an older snapshot is open (a backup, a standby's feedback), and
// the table's statistics lag behind it. Here 50 tenants have a few started
// actions each when the statistics are taken, and the store's one session
// completes actions alone (the single statement) and together (the batch
// statement). Then one tenant gets 30,000 such entries (actions started,
// then completed; no autovacuum in this database), and each of the next
// completes must still read about the pages of its own rows. The batch
// statement's sixth execution, its first generic plan, falls among those
// unless each of the first phase's three rounds split in two.
TEST(PostgresPlans, ACompleteReadsItsActionByKeyNotTheTenantsLeaseIndex) {
  REQUIRE_POSTGRES();
  CountedDatabase db("t_lease_walk");
  REQUIRE_COUNTED_DATABASE(db);
  pg::Connection& stats = db.stats();
  ManualClock clock(kT0);
  PostgresOptions options = Options(db.url(), &clock);
  options.pool_size = 1;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  constexpr int kAlone = 8, kTogether = 8, kRounds = 3;
  constexpr int kPerPhase = kAlone + kTogether * kRounds;
  std::vector<BeginResult> begun(2 * kPerPhase);
  for (int i = 0; i < 2 * kPerPhase; ++i) {
    ASSERT_TRUE(store
                    ->Begin(NewIntentRequest("acme", "W-" + std::to_string(i), KeyFor(i)), kLeaseMs,
                            &begun[i])
                    .ok());
  }
  ASSERT_TRUE(stats.ExecSimple(
      "ALTER TABLE acao_idempotente SET (autovacuum_enabled = false); " INSERT_ACTION_ROWS
      "SELECT ('other' || t)::bytea, ('k' || g)::bytea, 'a', ('r' || g)::bytea, 'started', 1, "
      "1, 0, 0, 0, 9223372036854775807 FROM generate_series(1, 49) t, generate_series(1, 2) g; "
      "ANALYZE acao_idempotente"))
      << stats.error_message();
  // Completes actions [first, first + kPerPhase): kAlone one at a time, then
  // kRounds rounds of kTogether at once.
  std::atomic<int> done{0};
  auto complete = [&](int i) {
    Action a;
    const Status s = store->Complete("acme", KeyFor(i), begun[i].action.lease_token, "1", &a);
    EXPECT_TRUE(s.ok()) << s.message();
    if (s.ok() && a.status == ActionStatus::kCompleted) done.fetch_add(1);
  };
  auto phase = [&](int first) {
    for (int i = 0; i < kAlone; ++i) complete(first + i);
    for (int round = 0; round < kRounds; ++round) {
      std::latch together(kTogether);
      std::vector<std::thread> threads;
      for (int j = 0; j < kTogether; ++j) {
        threads.emplace_back([&, round, j] {
          together.arrive_and_wait();
          complete(first + kAlone + kTogether * round + j);
        });
      }
      for (auto& t : threads) t.join();
    }
  };
  phase(0);  // the single statement's generic plan, the batch's first custom ones
  ASSERT_TRUE(stats.ExecSimple(
      INSERT_ACTION_ROWS
      "SELECT t.tenant_id, ('old' || g)::bytea, t.action_type, ('old' || g)::bytea, 'started', "
      "1, 1, g, 0, 0, 9223372036854775807 FROM (SELECT tenant_id, action_type FROM "
      "acao_idempotente WHERE status = 'completed' LIMIT 1) t, generate_series(1, 30000) g; "
      "UPDATE acao_idempotente SET status = 'completed', retain_until_ms = 9223372036854775806 "
      "WHERE chave >= 'old'::bytea AND chave < 'ole'::bytea; SELECT pg_stat_statements_reset()"))
      << stats.error_message();
  phase(kPerPhase);
  ASSERT_EQ(done.load(), 2 * kPerPhase);
  // Per statement: the single one (WITH own ...) and the batch (WITH r ...).
  pg::Result r;
  ASSERT_TRUE(stats.ExecSimple(
      std::string("SELECT left(query, 8), sum(calls), sum(rows), "
                  "sum(shared_blks_hit + shared_blks_read) FROM pg_stat_statements WHERE ") +
          CountedDatabase::kOwnStatements +
          " AND query LIKE '%UPDATE acao_idempotente a SET%' GROUP BY 1 ORDER BY 1",
      &r))
      << stats.error_message();
  ASSERT_EQ(r.rows(), 2) << "the single and the batch statement did not both run";
  int64_t completed = 0;
  for (int row = 0; row < r.rows(); ++row) {  // simple query protocol: text
    const std::string statement = r.Bytes(row, 0);
    const int64_t calls = std::stoll(r.Bytes(row, 1)), rows = std::stoll(r.Bytes(row, 2)),
                  pages = std::stoll(r.Bytes(row, 3));
    completed += rows;
    ASSERT_GT(rows, 0) << statement;
    // By the key, a completed action reads 23 pages (its action's and its
    // intent's, through their indexes, and the index entries it writes);
    // the batch statement testing `a.status = 'started'` walked
    // the tenant's 30,000 entries, 77-126 pages per completed action.
    EXPECT_LE(pages, 50 * rows) << "'" << statement << "...': " << pages << " pages for " << rows
                                << " completes in " << calls << " statements";
    std::cout << "'" << statement << "...': " << pages / rows << " pages per completed action ("
              << calls << " statements)\n";
  }
  EXPECT_EQ(completed, kPerPhase);
}

TEST(PostgresPurge, DeletesExpiredRowsInBoundedBatchesAndKeepsTheRest) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  PostgresOptions options = Options(schema.url(), &clock);
  options.retention_ms = kDay;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  Action a;
  for (int i = 0; i < 5; ++i) {
    BeginResult r;
    ASSERT_TRUE(
        store->Begin(NewIntentRequest("acme", "done-" + std::to_string(i), KeyFor(i)), kLeaseMs, &r)
            .ok());
    ASSERT_TRUE(store->Complete("acme", KeyFor(i), 1, "1", &a).ok());
  }
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "started", "ks"), kLeaseMs, &r).ok());
  size_t deleted = 0;
  ASSERT_TRUE(store->PurgeExpired(100, &deleted).ok());
  EXPECT_EQ(deleted, 0u);  // nothing expired yet
  clock.Advance(kDay);
  ASSERT_TRUE(store->PurgeExpired(2, &deleted).ok());
  EXPECT_EQ(deleted, 4u);  // 2 actions + 2 intents
  size_t total = deleted;
  while (store->PurgeExpired(2, &deleted).ok() && deleted > 0) total += deleted;
  EXPECT_EQ(total, 10u);
  // Physically gone: even with the clock set back, reads find nothing.
  clock.Set(kT0);
  EXPECT_EQ(store->GetAction("acme", KeyFor(0), &a).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store->Lookup("acme", "done-4", "pix.cobranca", &l).code(), Code::kNotFound);
  EXPECT_TRUE(store->GetAction("acme", "ks", &a).ok());
  EXPECT_TRUE(store->Lookup("acme", "started", "pix.cobranca", &l).ok());
}

TEST(PostgresPurge, BackgroundThreadPurgesOnItsOwn) {
  REQUIRE_POSTGRES();
  PostgresSchema schema;
  ASSERT_TRUE(schema.ok()) << schema.error();
  ManualClock clock(kT0);
  PostgresOptions options = Options(schema.url(), &clock);
  options.retention_ms = kDay;
  options.purge_interval_ms = 20;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  Action a;
  ASSERT_TRUE(store->Complete("acme", "k1", 1, "1", &a).ok());
  clock.Advance(kDay);
  // Real time passes for the thread (its interval); the records' time is the manual clock.
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    clock.Set(kT0);  // reads would show the rows again if they were still there
    gone = store->GetAction("acme", "k1", &a).code() == Code::kNotFound;
    clock.Set(kT0 + kDay);
  }
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace intentd::store::testing
