// Retention on RocksDB beyond the backend contract (contract_retention_test.cc
// runs the common cases on every backend): an intent living on through the
// action of its key, and what export says of it.
#include <gtest/gtest.h>

#include <map>

#include "store/decision.h"
#include "store/export.h"
#include "tests/store/store_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
constexpr int64_t kRetention = 30 * kDay;

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

// Export writes the deadline an intent really has: one living on through its
// started action goes out as "forever" (the importing store then lets it
// follow that action too), an expired one is not exported.
TEST_F(StoreTest, ExportGivesAnIntentLivingThroughItsActionThatActionsDeadline) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R1", "k1"), &f).ok());
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "R3", "k3"), &f).ok());  // no action
  clock_.Advance(kRetention - kDay);
  BeginNew("R2", "k1");  // started: keeps R1 past R1's own deadline
  clock_.Advance(2 * kRetention);
  store_.reset();
  OfflineOptions offline;
  offline.path = dir_.path();
  offline.clock = &clock_;
  std::map<std::string, int64_t> deadlines;
  ExportCounts counts;
  Status s = ExportStore(
      offline,
      [&](const ExportRecord& r) {
        if (r.kind == ExportRecord::Kind::kIntent)
          deadlines[r.intent.intent_ref] = r.retain_until_ms;
        return Status::Ok();
      },
      &counts);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(counts.intents, 2u);
  EXPECT_EQ(counts.expired, 1u);  // R3
  EXPECT_EQ(deadlines["R1"], kRetainForever);
  EXPECT_EQ(deadlines["R2"], kRetainForever);
  EXPECT_EQ(deadlines.count("R3"), 0u);
}

}  // namespace
}  // namespace intentd::store::testing
