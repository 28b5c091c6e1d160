// Many threads on the same records, against every backend: one grant per
// token, one frozen key.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

// On a synced RocksDB store: racing callers then wait for their writes'
// tickets in the group commit's rounds (store/rocks/group_commit.h).
class ConcurrencyContract : public StoreContract {
 protected:
  ConcurrencyContract() : StoreContract(/*rocks_sync=*/true) {}
};

TEST_P(ConcurrencyContract, SixtyFourRacingBeginsOnOneFreshIntentExecuteOnce) {
  constexpr int kThreads = 64;
  std::latch start(kThreads);
  std::vector<BeginResult> results(kThreads);
  std::vector<Status> statuses(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      // Each worker extracted a different payload (different key).
      statuses[i] = AgentBegin(store_.get(), "acme", "FAT-1", KeyFor(i), &results[i]);
    });
  }
  for (auto& t : threads) t.join();

  int executes = 0, created = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
    executes += results[i].decision == Decision::kExecute;
    created += results[i].created;
    EXPECT_EQ(results[i].intent.key, results[0].intent.key);
    EXPECT_EQ(results[i].action.lease_token, 1);
    if (results[i].decision != Decision::kExecute) {
      EXPECT_EQ(results[i].decision, Decision::kInFlight);
    }
  }
  EXPECT_EQ(executes, 1);
  EXPECT_EQ(created, 1);
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key, results[0].intent.key);
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->attempt, 1);
  if (rocks_ != nullptr) {  // the race ran through the group commit
    EXPECT_GT(rocks_->CommitCounts()->wal_syncs, 0u) << rocks_->EngineStats();
  }
}

// Workers begin (on intents that share keys pairwise, so that an action's
// owner is often another intent), then complete, release, renew or vanish,
// while the clock jumps past leases so that recoveries race with stale
// finishers. Every grant must carry a token nobody else got, and the tokens
// of a key are 1..n.
TEST_P(ConcurrencyContract, GrantsStayUniqueUnderRacingBeginsFinishesAndExpiry) {
  constexpr int kThreads = 16, kOpsPerThread = 150, kIntents = 6;
  std::mutex mu;
  std::map<std::string, std::set<int64_t>> grants;  // key -> tokens granted
  std::atomic<int> duplicate_grants{0}, unexpected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < kOpsPerThread; ++op) {
        const int n = rng() % kIntents;
        BeginResult r;
        Status s = AgentBegin(store_.get(), "acme", "R" + std::to_string(n), KeyFor(n / 2), &r);
        if (!s.ok()) {
          ADD_FAILURE() << s.message();
          ++unexpected;
          continue;
        }
        if (r.decision != Decision::kExecute && r.decision != Decision::kRecover) continue;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!grants[r.intent.key].insert(r.action.lease_token).second) ++duplicate_grants;
        }
        Action a;
        switch (rng() % 6) {
          case 0:
            s = store_->Complete("acme", r.intent.key, r.action.lease_token, "1", &a);
            break;
          case 1:
            s = store_->Fail("acme", r.intent.key, r.action.lease_token, "1", true, &a);
            break;
          case 2:
            s = store_->Renew("acme", r.intent.key, r.action.lease_token, kLeaseMs, &a);
            break;
          case 3:
            clock_.Advance(kLeaseMs);  // everyone's lease expires
            s = store_->Fail("acme", r.intent.key, r.action.lease_token, "1", true, &a);
            break;
          default:  // the worker dies
            s = Status::Ok();
        }
        // Taken over (lease_lost), or taken over and finished (invalid_state).
        if (!s.ok() && s.code() != Code::kLeaseLost && s.code() != Code::kInvalidState) {
          ADD_FAILURE() << s.message();
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
    ASSERT_TRUE(store_->GetAction("acme", key, &a).ok());
    EXPECT_EQ(static_cast<int64_t>(tokens.size()), a.lease_token) << key;
    EXPECT_EQ(*tokens.rbegin(), a.lease_token);
    EXPECT_EQ(a.attempt, a.lease_token);
  }
}

// Each round, threads race begin on a released action, through its own
// intent and through another intent with the same key: exactly one
// execute per round, with the next token.
TEST_P(ConcurrencyContract, RacingBeginsOnAReleasedActionGrantOncePerRound) {
  BeginNew("FAT-1", "k1");
  BeginNew("FAT-2", "k1");  // in_flight: shares the action
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"retry\"", true, &a).ok());
  constexpr int kThreads = 8, kRounds = 30;
  for (int round = 0; round < kRounds; ++round) {
    std::latch start(kThreads);
    std::vector<BeginResult> results(kThreads);
    std::vector<Status> statuses(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        statuses[i] = store_->Begin(ExistingIntentRequest("acme", i % 2 ? "FAT-1" : "FAT-2", "k1"),
                                    kLeaseMs, &results[i]);
      });
    }
    for (auto& t : threads) t.join();
    int executes = 0;
    int64_t token = 0;
    for (int i = 0; i < kThreads; ++i) {
      ASSERT_TRUE(statuses[i].ok()) << statuses[i].message();
      if (results[i].decision == Decision::kExecute) {
        ++executes;
        token = results[i].action.lease_token;
      } else {
        EXPECT_EQ(results[i].decision, Decision::kInFlight);
      }
    }
    ASSERT_EQ(executes, 1) << "round " << round;
    ASSERT_EQ(token, round + 2);
    ASSERT_TRUE(store_->Fail("acme", "k1", token, "\"retry\"", true, &a).ok());
  }
}

INSTANTIATE_STORE_CONTRACT(ConcurrencyContract);

}  // namespace
}  // namespace intentd::store::testing
