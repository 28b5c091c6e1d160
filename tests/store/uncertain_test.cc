// The lease index behind Uncertain stays exact under every transition.
#include <gtest/gtest.h>

#include "tests/store/store_fixture.h"

namespace intentd::store::testing {
namespace {

std::vector<std::string> Keys(const std::vector<Action>& actions) {
  std::vector<std::string> keys;
  for (const auto& a : actions) keys.push_back(a.tenant_id + "/" + a.key);
  return keys;
}

class UncertainTest : public StoreTest {
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

TEST_F(UncertainTest, ListsOnlyExpiredStartedActionsOldestFirst) {
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

TEST_F(UncertainTest, EntriesCarryTheFullRecord) {
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

TEST_F(UncertainTest, RenewRecoverCompleteFailKeepTheIndexExact) {
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

}  // namespace
}  // namespace intentd::store::testing
