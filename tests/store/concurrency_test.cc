// Many threads on the same records: one grant per token, one frozen key.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

// 64 threads writing fresh intents on a synced store: their writes are
// made durable by the group commit's sync thread, which wakes every caller
// whose ticket a sync covered (group_commit.h). A caller left asleep (a lost
// wake-up) never finishes: the test says so and aborts after a minute (it
// takes well under a second, a few under TSan); every acknowledged write
// must be there after a reopen.
TEST(Concurrency, SixtyFourThreadsOfSyncedWritesAreAllAnsweredAndKept) {
  TempDir dir;
  ManualClock clock(kT0);
  RocksOptions options = TestOptions(dir.path(), &clock);
  options.sync = true;
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(RocksStore::Open(options, &store).ok());

  constexpr int kThreads = 64, kPairsPerThread = 25;
  std::latch start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::atomic<int>> pairs_done(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kPairsPerThread; ++i) {
        const int n = t * kPairsPerThread + i;
        BeginResult r;
        Status s = AgentBegin(store.get(), "acme", "R" + std::to_string(n), KeyFor(n), &r);
        Action a;
        if (s.ok() && r.decision == Decision::kExecute) {
          s = store->Complete("acme", r.intent.key, r.action.lease_token,
                              "response-" + std::to_string(n), &a);
        }
        if (!s.ok() || r.decision != Decision::kExecute) ++failures;
        pairs_done[t].fetch_add(1);
      }
    });
  }
  // The watchdog: the threads cannot be abandoned (they use this frame).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    int finished = 0;
    for (const auto& d : pairs_done) finished += d.load() == kPairsPerThread;
    if (finished == kThreads) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "%d of %d threads still waiting after 60 s (a lost wake-up?):",
                   kThreads - finished, kThreads);
      for (int t = 0; t < kThreads; ++t) {
        const int done = pairs_done[t].load();
        if (done != kPairsPerThread) std::fprintf(stderr, " thread %d at pair %d;", t, done);
      }
      std::fprintf(stderr, "\n");
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // The group commit shared syncs among these writers.
  const GroupCommitCounts counts = store->CommitCounts().value();
  EXPECT_GE(counts.writes, 2ull * kThreads * kPairsPerThread);
  EXPECT_LT(counts.wal_syncs, counts.writes / 2) << store->EngineStats();

  store.reset();
  ASSERT_TRUE(RocksStore::Open(options, &store).ok());
  for (int n = 0; n < kThreads * kPairsPerThread; ++n) {
    Action a;
    ASSERT_TRUE(store->GetAction("acme", KeyFor(n), &a).ok()) << n;
    EXPECT_EQ(a.status, ActionStatus::kCompleted) << n;
    EXPECT_EQ(a.response, "response-" + std::to_string(n));
  }
}

// Workers begin, then complete, fail, release or vanish, while the clock
// jumps past leases so that recoveries race with stale finishers. Every
// grant must carry a token nobody else got, and tokens per key are 1..n.
TEST(Concurrency, GrantsStayUniqueUnderRacingBeginsFinishesAndExpiry) {
  TempDir dir;
  ManualClock clock(kT0);
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(RocksStore::Open(TestOptions(dir.path(), &clock), &store).ok());

  constexpr int kThreads = 16, kOpsPerThread = 300, kIntents = 6;
  std::mutex mu;
  std::map<std::string, std::set<int64_t>> grants;  // key -> tokens granted
  std::atomic<int> duplicate_grants{0}, unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < kOpsPerThread; ++op) {
        const int n = rng() % kIntents;
        const std::string ref = "R" + std::to_string(n);
        BeginResult r;
        Status s = AgentBegin(store.get(), "acme", ref, KeyFor(n), &r);
        if (!s.ok()) {
          ++unexpected;
          continue;
        }
        if (r.decision == Decision::kExecute || r.decision == Decision::kRecover) {
          std::lock_guard<std::mutex> lock(mu);
          if (!grants[r.intent.key].insert(r.action.lease_token).second) ++duplicate_grants;
        } else {
          continue;
        }
        Action a;
        switch (rng() % 6) {
          case 0:
            s = store->Complete("acme", r.intent.key, r.action.lease_token, "1", &a);
            break;
          case 1:
            s = store->Fail("acme", r.intent.key, r.action.lease_token, "1", true, &a);
            break;
          case 2:
            s = store->Renew("acme", r.intent.key, r.action.lease_token, kLeaseMs, &a);
            break;
          case 3:
            clock.Advance(kLeaseMs);  // everyone's lease expires
            s = store->Fail("acme", r.intent.key, r.action.lease_token, "1", true, &a);
            break;
          default:  // the worker dies
            s = Status::Ok();
        }
        // Taken over (lease_lost), or taken over and finished (invalid_state).
        if (!s.ok() && s.code() != Code::kLeaseLost && s.code() != Code::kInvalidState) {
          ++unexpected;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(duplicate_grants.load(), 0);
  EXPECT_EQ(unexpected.load(), 0);
  for (const auto& [key, tokens] : grants) {
    Action a;
    ASSERT_TRUE(store->GetAction("acme", key, &a).ok());
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), a.lease_token) << key;
    EXPECT_EQ(*tokens.rbegin(), a.lease_token);
    EXPECT_EQ(a.attempt, a.lease_token);
  }
}

// Readers that take several records at once (Lookup: an intent and its
// action; Uncertain: the lease index and each action) while writers change
// them: with unordered writes (options.cc) a snapshot can hold half of
// a batch, so they read under stripe locks. Writers begin fresh intents, let
// every lease expire and complete; nothing here ever freezes an intent
// without its action, so a Lookup that finds one saw half a begin, and
// Uncertain must never call the index corrupt.
// Synced too: writers then hold their stripe locks until their sync, and
// Lookup and Uncertain's second look wait for them; and with 16 writers,
// more than RocksStoreImpl::kQueueFromCommitters, the store's writer thread
// writes many of their batches, several as one.
class LookupAndUncertain : public ::testing::TestWithParam<bool> {};

TEST_P(LookupAndUncertain, NeverSeeHalfAnOperation) {
  TempDir dir;
  ManualClock clock(kT0);
  RocksOptions options = TestOptions(dir.path(), &clock);
  options.sync = GetParam();
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(RocksStore::Open(options, &store).ok());

  constexpr int kWriters = 16, kIntentsPerWriter = 200;
  std::atomic<int> writers_left{kWriters}, written{0};
  std::atomic<int> half_seen{0}, uncertain_errors{0}, lookup_errors{0}, write_errors{0};
  std::atomic<int> lookups_with_action{0}, uncertain_listed{0};
  std::string first_error;
  std::mutex error_mu;
  auto note = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.empty()) first_error = s.message();
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kIntentsPerWriter; ++i) {
        const int n = w * kIntentsPerWriter + i;
        BeginResult r;
        Status s = AgentBegin(store.get(), "acme", "R" + std::to_string(n), KeyFor(n), &r);
        if (s.ok()) {
          written.fetch_add(1);
          clock.Advance(kLeaseMs);  // every started lease expires: Uncertain lists it
          Action a;
          s = store->Complete("acme", r.intent.key, r.action.lease_token, "{}", &a);
        }
        if (!s.ok()) {
          ++write_errors;
          note(s);
        }
      }
      --writers_left;
    });
  }
  threads.emplace_back([&] {
    std::mt19937 rng(1);
    while (writers_left.load() > 0) {
      const int done = written.load();
      if (done == 0) continue;
      const int n = static_cast<int>(rng() % done);
      LookupResult found;
      Status s = store->Lookup("acme", "R" + std::to_string(n), "pix.cobranca", &found);
      if (s.code() == Code::kNotFound) continue;  // `written` counts a little early
      if (!s.ok()) {
        ++lookup_errors;
        note(s);
      } else if (!found.action) {
        ++half_seen;  // the intent of a begin without its action
      } else {
        ++lookups_with_action;
      }
    }
  });
  for (int scanner = 0; scanner < 2; ++scanner) {
    threads.emplace_back([&, scanner] {
      while (writers_left.load() > 0) {
        std::vector<Action> actions;
        Status s = scanner == 0 ? store->Uncertain(std::nullopt, 1000, &actions)
                                : store->Uncertain(std::string("acme"), 1000, &actions);
        if (!s.ok()) {
          ++uncertain_errors;
          note(s);
        }
        uncertain_listed.fetch_add(static_cast<int>(actions.size()));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(write_errors.load(), 0) << first_error;
  EXPECT_EQ(lookup_errors.load(), 0) << first_error;
  EXPECT_EQ(uncertain_errors.load(), 0) << first_error;
  EXPECT_EQ(half_seen.load(), 0);
  // The readers did read while the writers wrote.
  EXPECT_GT(lookups_with_action.load(), 0);
  EXPECT_GT(uncertain_listed.load(), 0);
  std::vector<Action> left;
  ASSERT_TRUE(store->Uncertain(std::nullopt, 1000, &left).ok());
  EXPECT_TRUE(left.empty());
  // Every write is there: each intent with its completed action.
  int complete = 0;
  for (int n = 0; n < kWriters * kIntentsPerWriter; ++n) {
    LookupResult found;
    ASSERT_TRUE(store->Lookup("acme", "R" + std::to_string(n), "pix.cobranca", &found).ok()) << n;
    complete += found.action && found.action->status == ActionStatus::kCompleted &&
                found.action->response == "{}";
  }
  EXPECT_EQ(complete, kWriters * kIntentsPerWriter);
}

INSTANTIATE_TEST_SUITE_P(Concurrency, LookupAndUncertain, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Synced") : std::string("Unsynced");
                         });

}  // namespace
}  // namespace intentd::store::testing
