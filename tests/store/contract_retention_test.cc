// Retention and the uncertain listing, against every backend.
#include <gtest/gtest.h>

#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
constexpr int64_t kRetention = 30 * kDay;

class RetentionContract : public StoreContract {};

TEST_P(RetentionContract, CompletedActionAndIntentExpireAfterRetention) {
  BeginNew("R1", "k1");
  clock_.Advance(kDay);
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "1", &a).ok());
  clock_.Set(kT0 + kDay + kRetention - 1);
  EXPECT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  LookupResult l;
  EXPECT_TRUE(store_->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  clock_.Set(kT0 + kDay + kRetention);
  EXPECT_EQ(store_->GetAction("acme", "k1", &a).code(), Code::kNotFound);
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
  // Forgotten: a new begin freezes and executes afresh.
  BeginResult r = BeginNew("R1", "k1");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
}

TEST_P(RetentionContract, StartedActionAndItsIntentNeverExpire) {
  BeginNew("R1", "k1");
  clock_.Advance(10 * kRetention);
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
  ASSERT_TRUE(Compact().ok());
  BeginResult r = BeginAgain("R1", "k1");
  EXPECT_EQ(r.decision, Decision::kRecover);
}

TEST_P(RetentionContract, IntentRetentionIsRefreshedWhenItsActionChanges) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(20 * kDay);
  BeginAgain("R1", "k1");     // started: the intent is kept forever
  clock_.Advance(20 * kDay);  // past the freeze's own deadline
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "1", &a).ok());
  clock_.Advance(kRetention - 1);
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->status, ActionStatus::kCompleted);
  clock_.Advance(1);
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_P(RetentionContract, FrozenIntentWithoutActionExpiresAfterRetention) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(kRetention);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_P(RetentionContract, CompactionDropsExpiredRecordsAndKeepsLiveOnes) {
  BeginNew("old", "k-old");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k-old", 1, std::string(500, 'x'), &a).ok());
  BeginNew("started", "k-started");
  clock_.Advance(kRetention);
  BeginNew("new", "k-new");
  ASSERT_TRUE(store_->Complete("acme", "k-new", 1, "1", &a).ok());
  ASSERT_TRUE(Compact().ok());
  // Turn the clock back: reads no longer hide the old records, so only what
  // compaction kept physically can be seen.
  clock_.Set(kT0);
  EXPECT_EQ(store_->GetAction("acme", "k-old", &a).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "old", "pix.cobranca", &l).code(), Code::kNotFound);
  EXPECT_TRUE(store_->GetAction("acme", "k-started", &a).ok());
  EXPECT_TRUE(store_->Lookup("acme", "started", "pix.cobranca", &l).ok());
  EXPECT_TRUE(store_->GetAction("acme", "k-new", &a).ok());
  EXPECT_TRUE(store_->Lookup("acme", "new", "pix.cobranca", &l).ok());
}

TEST_P(RetentionContract, OwnerIntentIsKeptWhileAnotherIntentRestartsItsAction) {
  BeginNew("FAT-1", "k1");  // FAT-1 owns the action of k1
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"timeout\"", true, &a).ok());  // released
  clock_.Advance(kDay);
  BeginResult r = BeginNew("FAT-2", "k1");  // same key: executes the released action again
  ASSERT_EQ(r.decision, Decision::kExecute);
  clock_.Advance(2 * kRetention);  // started: nothing pointing at it may expire
  ASSERT_TRUE(Compact().ok());
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  ASSERT_TRUE(store_->Lookup("acme", "FAT-2", "pix.cobranca", &l).ok());
  ASSERT_TRUE(store_->Complete("acme", "k1", 2, "\"ok\"", &a).ok());
  clock_.Advance(kRetention - 1);
  EXPECT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  clock_.Advance(1);
  EXPECT_EQ(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_P(RetentionContract, ExpiredRecordsAreReplacedAfresh) {
  BeginNew("R1", "k1");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "\"first\"", &a).ok());
  clock_.Advance(kRetention);
  // Not compacted: the expired rows are still there physically.
  BeginResult r = BeginNew("R1", "k2");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.intent.key, "k2");
  EXPECT_EQ(r.intent.created_at_ms, kT0 + kRetention);
  r = BeginNew("R9", "k1");  // the expired action's key, from another intent
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  EXPECT_EQ(r.action.intent_ref, "R9");
  EXPECT_EQ(r.action.created_at_ms, kT0 + kRetention);
  EXPECT_EQ(r.action.response, "");
  ASSERT_TRUE(store_->Complete("acme", "k2", 1, "1", &a).ok());
  FreezeResult f;
  clock_.Advance(kRetention);
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k3"), &f).ok());
  EXPECT_TRUE(f.created);
  EXPECT_EQ(f.intent.key, "k3");
}

std::vector<std::string> Keys(const std::vector<Action>& actions) {
  std::vector<std::string> keys;
  for (const auto& a : actions) keys.push_back(a.tenant_id + "/" + a.key);
  return keys;
}

class UncertainContract : public StoreContract {
 protected:
  std::vector<std::string> ListAll(size_t limit = 100) {
    std::vector<Action> actions;
    Status s = store_->Uncertain(std::nullopt, limit, &actions);
    EXPECT_TRUE(s.ok()) << s.message();
    return Keys(actions);
  }
  std::vector<std::string> ListTenant(const std::string& tenant, size_t limit = 100) {
    std::vector<Action> actions;
    Status s = store_->Uncertain(tenant, limit, &actions);
    EXPECT_TRUE(s.ok()) << s.message();
    return Keys(actions);
  }
};

using V = std::vector<std::string>;

TEST_P(UncertainContract, ListsOnlyExpiredStartedActionsOldestFirst) {
  BeginNew("R1", "k1", "t1");  // lease until T0+L
  clock_.Advance(10);
  BeginNew("R2", "k2", "t2");  // T0+10+L
  clock_.Advance(10);
  BeginNew("R3", "k3", "t1");  // T0+20+L
  Action a;
  BeginNew("R4", "k4", "t1");
  ASSERT_TRUE(store_->Complete("t1", "k4", 1, "1", &a).ok());  // not started: never listed

  EXPECT_EQ(ListAll(), V{});
  clock_.Set(kT0 + kLeaseMs);  // lease_until <= now: k1 only
  EXPECT_EQ(ListAll(), V{"t1/k1"});
  clock_.Set(kT0 + kLeaseMs + 1000);
  EXPECT_EQ(ListAll(), (V{"t1/k1", "t2/k2", "t1/k3"}));
  EXPECT_EQ(ListAll(2), (V{"t1/k1", "t2/k2"}));
  EXPECT_EQ(ListAll(0), V{});
  EXPECT_EQ(ListTenant("t1"), (V{"t1/k1", "t1/k3"}));
  EXPECT_EQ(ListTenant("t2"), V{"t2/k2"});
  EXPECT_EQ(ListTenant("t"), V{});
}

TEST_P(UncertainContract, EntriesCarryTheFullRecord) {
  BeginNew("R1", "k1", "t1");
  clock_.Advance(kLeaseMs);
  std::vector<Action> actions;
  ASSERT_TRUE(store_->Uncertain(std::nullopt, 10, &actions).ok());
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].intent_ref, "R1");
  EXPECT_EQ(actions[0].action_type, "pix.cobranca");
  EXPECT_EQ(actions[0].lease_token, 1);
  EXPECT_EQ(actions[0].lease_until_ms, kT0 + kLeaseMs);
  EXPECT_EQ(actions[0].created_at_ms, kT0);
}

TEST_P(UncertainContract, RenewRecoverCompleteFailKeepTheIndexExact) {
  BeginNew("R1", "k1", "t");
  BeginNew("R2", "k2", "t");
  BeginNew("R3", "k3", "t");
  BeginNew("R4", "k4", "t");
  clock_.Advance(kLeaseMs);
  EXPECT_EQ(ListAll(), (V{"t/k1", "t/k2", "t/k3", "t/k4"}));

  Action a;
  ASSERT_TRUE(store_->Renew("t", "k1", 1, kLeaseMs, &a).ok());  // live again
  ASSERT_TRUE(store_->Complete("t", "k2", 1, "1", &a).ok());
  ASSERT_TRUE(store_->Fail("t", "k3", 1, "1", true, &a).ok());
  EXPECT_EQ(ListAll(), V{"t/k4"});
  BeginResult r = BeginAgain("R4", "k4", "t");  // recover: new lease, live
  ASSERT_EQ(r.decision, Decision::kRecover);
  EXPECT_EQ(ListAll(), V{});
  r = BeginAgain("R3", "k3", "t");  // released -> execute: started again
  ASSERT_EQ(r.decision, Decision::kExecute);

  clock_.Advance(kLeaseMs);
  EXPECT_EQ(ListAll(), (V{"t/k1", "t/k3", "t/k4"}));
  // Ordering follows the current lease, not the first one.
  ASSERT_TRUE(store_->Renew("t", "k1", 1, 1000, &a).ok());
  clock_.Advance(1000);
  EXPECT_EQ(ListAll(), (V{"t/k3", "t/k4", "t/k1"}));
  Reopen();
  EXPECT_EQ(ListTenant("t"), (V{"t/k3", "t/k4", "t/k1"}));
}

INSTANTIATE_STORE_CONTRACT(RetentionContract);
INSTANTIATE_STORE_CONTRACT(UncertainContract);

}  // namespace
}  // namespace intentd::store::testing
