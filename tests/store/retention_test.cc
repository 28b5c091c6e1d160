// Retention: reads hide expired records, compaction drops them, started
// actions and their intents never expire.
#include <gtest/gtest.h>

#include "tests/store/store_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
constexpr int64_t kRetention = 30 * kDay;

TEST_F(StoreTest, CompletedActionAndIntentExpireAfterRetention) {
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

TEST_F(StoreTest, StartedActionAndItsIntentNeverExpire) {
  BeginNew("R1", "k1");
  clock_.Advance(10 * kRetention);
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
  ASSERT_TRUE(store_->CompactAll().ok());
  BeginResult r = BeginAgain("R1", "k1");
  EXPECT_EQ(r.decision, Decision::kRecover);
}

TEST_F(StoreTest, IntentRetentionIsRefreshedWhenItsActionChanges) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(20 * kDay);
  BeginAgain("R1", "k1");  // started: the intent is kept forever
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

TEST_F(StoreTest, FrozenIntentWithoutActionExpiresAfterRetention) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(kRetention);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_F(StoreTest, CompactionDropsExpiredRecordsAndKeepsLiveOnes) {
  BeginNew("old", "k-old");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k-old", 1, std::string(500, 'x'), &a).ok());
  BeginNew("started", "k-started");
  clock_.Advance(kRetention);
  BeginNew("new", "k-new");
  ASSERT_TRUE(store_->Complete("acme", "k-new", 1, "1", &a).ok());
  ASSERT_TRUE(store_->CompactAll().ok());
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

// Finishing an action does not rewrite its intent (IntentLive): an intent
// frozen before another intent began the same key lives on with that action
// past its own deadline, and compaction keeps it (it reads the action) until
// the action's retention ends.
TEST_F(StoreTest, IntentLivesOnWithTheActionOfItsKeyBegunBeforeItsDeadline) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(kRetention - kDay);
  BeginResult r = BeginNew("R2", "k1");  // same key, another intent
  ASSERT_EQ(r.decision, Decision::kExecute);
  clock_.Advance(3 * kRetention);
  ASSERT_TRUE(store_->CompactAll().ok());
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->intent_ref, "R2");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "1", &a).ok());
  clock_.Advance(kRetention - 1);
  ASSERT_TRUE(store_->CompactAll().ok());
  ASSERT_TRUE(store_->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  clock_.Advance(1);
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
  ASSERT_TRUE(store_->CompactAll().ok());
  clock_.Set(kT0);  // reads hide nothing now: only what compaction kept shows
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
}

// An action begun after an intent expired does not bring that intent back,
// neither to reads nor through compaction.
TEST_F(StoreTest, ExpiredIntentStaysExpiredWhenItsKeyIsBegunLater) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  clock_.Advance(kRetention);
  BeginResult r = BeginNew("R2", "k1");  // created at R1's deadline: R1 had expired
  ASSERT_EQ(r.decision, Decision::kExecute);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
  ASSERT_TRUE(store_->CompactAll().ok());
  clock_.Set(kT0);  // R1's own deadline ahead again: only compaction hides it now
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
  ASSERT_TRUE(store_->Lookup("acme", "R2", "pix.cobranca", &l).ok());
  // Frozen afresh, R1 executes nothing new: it shares R2's started action.
  clock_.Set(kT0 + kRetention + 1);
  r = BeginNew("R1", "k1");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
}

}  // namespace
}  // namespace intentd::store::testing
