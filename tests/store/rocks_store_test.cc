// The protocol operations through the RocksDB store (manual clock, no sleeps).
#include <gtest/gtest.h>

#include "tests/store/store_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
using namespace std::string_literals;

TEST_F(StoreTest, BeginOnNewIntentFreezesItAndExecutes) {
  BeginResult r = BeginNew("FAT-1", "k1");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.intent.key, "k1");
  EXPECT_EQ(r.intent.rules_version, 2);
  EXPECT_EQ(r.intent.created_at_ms, kT0);
  EXPECT_EQ(r.action.lease_token, 1);
  EXPECT_EQ(r.action.attempt, 1);
  EXPECT_EQ(r.action.lease_until_ms, kT0 + kLeaseMs);
  EXPECT_EQ(r.action.status, ActionStatus::kStarted);

  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.payload, r.intent.payload);
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->lease_token, 1);
}

TEST_F(StoreTest, SecondBeginWhileLeaseLiveIsInFlight) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(1000);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_FALSE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.retry_after_ms, kLeaseMs - 1000);
  EXPECT_EQ(r.action.lease_token, 1);
}

TEST_F(StoreTest, ExpiredLeaseGrantsRecoverWithNextToken) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(kLeaseMs);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kRecover);
  EXPECT_EQ(r.previous_lease_token, 1);
  EXPECT_EQ(r.action.lease_token, 2);
  EXPECT_EQ(r.action.attempt, 2);
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.lease_token, 2);
  // The stale worker is fenced out.
  EXPECT_EQ(store_->Complete("acme", "k1", 1, "\"late\"", &a).code(), Code::kLeaseLost);
  EXPECT_EQ(a.lease_token, 2);
  EXPECT_EQ(a.status, ActionStatus::kStarted);
}

TEST_F(StoreTest, CompleteThenBeginReplaysFirstResponse) {
  BeginNew("FAT-1", "k1");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "{\"txid\":\"A\"}", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kCompleted);
  // The repeat succeeds and keeps the first response.
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "{\"txid\":\"B\"}", &a).ok());
  EXPECT_EQ(a.response, "{\"txid\":\"A\"}");
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kReplay);
  EXPECT_EQ(r.action.response, "{\"txid\":\"A\"}");
  EXPECT_EQ(store_->Fail("acme", "k1", 1, "\"x\"", false, &a).code(), Code::kInvalidState);
  EXPECT_EQ(store_->Renew("acme", "k1", 1, kLeaseMs, &a).code(), Code::kInvalidState);
}

TEST_F(StoreTest, ExpiredLeaseNotTakenOverStillCompletes) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(10 * kLeaseMs);
  Action a;
  ASSERT_TRUE(store_->Renew("acme", "k1", 1, 5000, &a).ok());
  EXPECT_EQ(a.lease_until_ms, clock_.NowMs() + 5000);
  clock_.Advance(10 * kLeaseMs);
  EXPECT_TRUE(store_->Complete("acme", "k1", 1, "1", &a).ok());
}

TEST_F(StoreTest, RetriableFailReleasesAndNextBeginExecutesAgain) {
  BeginNew("FAT-1", "k1");
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "{\"e\":\"timeout\"}", true, &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kReleased);
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "{\"e\":\"again\"}", true, &a).ok());  // repeat
  EXPECT_EQ(a.error, "{\"e\":\"timeout\"}");
  EXPECT_EQ(store_->Complete("acme", "k1", 1, "1", &a).code(), Code::kInvalidState);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 2);
  EXPECT_EQ(r.action.attempt, 2);
  EXPECT_EQ(r.action.error, "");
}

TEST_F(StoreTest, NonRetriableFailReplaysError) {
  BeginNew("FAT-1", "k1");
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"declined\"", false, &a).ok());
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"other\"", false, &a).ok());
  EXPECT_EQ(a.error, "\"declined\"");
  EXPECT_EQ(store_->Fail("acme", "k1", 1, "\"x\"", true, &a).code(), Code::kInvalidState);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kReplay);
  EXPECT_EQ(r.action.status, ActionStatus::kFailed);
  EXPECT_EQ(r.action.error, "\"declined\"");
}

TEST_F(StoreTest, TokenNeverGrantedIsInvalidState) {
  BeginNew("FAT-1", "k1");
  Action a;
  EXPECT_EQ(store_->Complete("acme", "k1", 2, "1", &a).code(), Code::kInvalidState);
  EXPECT_EQ(store_->Renew("acme", "k1", 0, kLeaseMs, &a).code(), Code::kLeaseLost);
}

TEST_F(StoreTest, UnknownActionIsNotFound) {
  Action a;
  EXPECT_EQ(store_->Complete("acme", "nope", 1, "1", &a).code(), Code::kNotFound);
  EXPECT_EQ(store_->GetAction("acme", "nope", &a).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_F(StoreTest, FrozenIntentWithoutActionHasNoStatusButLooksUp) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(NewIntentRequest("acme", "FAT-1", "k1"), &f).ok());
  EXPECT_TRUE(f.created);
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k1", &a).code(), Code::kNotFound);
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key, "k1");
  EXPECT_FALSE(l.action.has_value());
  // A caller that read it freezes nothing new.
  ASSERT_TRUE(store_->Freeze(ExistingIntentRequest("acme", "FAT-1", "k1"), &f).ok());
  EXPECT_FALSE(f.created);
  EXPECT_EQ(f.intent.key, "k1");
  // Then begin executes on the frozen intent.
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_FALSE(r.created);
}

TEST_F(StoreTest, StaleViewOfIntentIsConflictAndWritesNothing) {
  BeginNew("FAT-1", "k1");
  BeginResult r;
  // Caller believed the intent absent, with another payload's key.
  EXPECT_EQ(store_->Begin(NewIntentRequest("acme", "FAT-1", "k2"), kLeaseMs, &r).code(),
            Code::kConflict);
  EXPECT_EQ(store_->Begin(ExistingIntentRequest("acme", "FAT-1", "k2"), kLeaseMs, &r).code(),
            Code::kConflict);
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k2", &a).code(), Code::kNotFound);
  // Caller believed it present, but it is not.
  EXPECT_EQ(store_->Begin(ExistingIntentRequest("acme", "FAT-9", "k9"), kLeaseMs, &r).code(),
            Code::kConflict);
  FreezeResult f;
  EXPECT_EQ(store_->Freeze(NewIntentRequest("acme", "FAT-1", "k1"), &f).code(), Code::kConflict);
  // No view and no payload.
  IntentCandidate bare;
  bare.tenant_id = "acme";
  bare.intent_ref = "FAT-9";
  bare.action_type = "pix.cobranca";
  EXPECT_EQ(store_->Begin(bare, kLeaseMs, &r).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "FAT-9", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_F(StoreTest, NonPositiveLeaseIsInvalidArgument) {
  BeginResult r;
  EXPECT_EQ(store_->Begin(NewIntentRequest("acme", "FAT-1", "k1"), 0, &r).code(),
            Code::kInvalidArgument);
  BeginNew("FAT-1", "k1");
  Action a;
  EXPECT_EQ(store_->Renew("acme", "k1", 1, -1, &a).code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, TenantsAreSeparateEvenForEqualKeysAndOddBytes) {
  const std::string odd = "ac\0me"s;
  BeginNew("FAT-1", "k1", "acme");
  BeginResult r = BeginNew("FAT-1", "k1", odd);
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  Action a;
  ASSERT_TRUE(store_->Complete(odd, "k1", 1, "1", &a).ok());
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
  ASSERT_TRUE(store_->GetAction(odd, "k1", &a).ok());
  EXPECT_EQ(a.tenant_id, odd);
  EXPECT_EQ(a.status, ActionStatus::kCompleted);
  EXPECT_EQ(store_->GetAction("ac", "k1", &a).code(), Code::kNotFound);
}

TEST_F(StoreTest, IntentsDifferByActionType) {
  BeginNew("FAT-1", "k1");
  BeginResult r;
  ASSERT_TRUE(
      store_->Begin(NewIntentRequest("acme", "FAT-1", "k2", "email.cobranca"), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
}

TEST_F(StoreTest, TwoIntentsWithOneKeyShareTheAction) {
  BeginNew("FAT-1", "k1");
  BeginResult r = BeginNew("FAT-2", "k1");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.action.intent_ref, "FAT-1");
}

TEST_F(StoreTest, RecordsSurviveReopen) {
  BeginNew("FAT-1", "k1");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "\"ok\"", &a).ok());
  BeginNew("FAT-2", "k2");
  Reopen();
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.response, "\"ok\"");
  BeginResult r = BeginAgain("FAT-2", "k2");
  EXPECT_EQ(r.decision, Decision::kInFlight);
}

TEST_F(StoreTest, AmendReplacesKeyAndKeepsOldActionReadable) {
  BeginNew("FAT-1", "k180");
  IntentCandidate amend = ExistingIntentRequest("acme", "FAT-1", "k180");
  Intent fixed;
  fixed.payload = "{\"valor\":\"180000\"}";
  fixed.key = "k1800";
  fixed.rules_version = 2;
  amend.candidate = fixed;
  AmendResult ar;
  // Started: refused without force.
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kInvalidState);
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k180", 1, "\"wrong amount\"", false, &a).ok());
  clock_.Advance(5);
  ASSERT_TRUE(store_->Amend(amend, false, &ar).ok());
  EXPECT_EQ(ar.previous_key, "k180");
  EXPECT_EQ(ar.intent.key, "k1800");
  EXPECT_EQ(ar.intent.payload, fixed.payload);
  EXPECT_EQ(ar.intent.created_at_ms, kT0);
  EXPECT_EQ(ar.intent.updated_at_ms, kT0 + 5);
  ASSERT_TRUE(store_->GetAction("acme", "k180", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kFailed);
  // The stale view is now a conflict; the new key executes.
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kConflict);
  BeginResult r = BeginAgain("FAT-1", "k1800");
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
}

TEST_F(StoreTest, AmendWithForceWhileStarted) {
  BeginNew("FAT-1", "k1");
  IntentCandidate amend = ExistingIntentRequest("acme", "FAT-1", "k1");
  Intent fixed;
  fixed.key = "k2";
  amend.candidate = fixed;
  AmendResult ar;
  ASSERT_TRUE(store_->Amend(amend, true, &ar).ok());
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key, "k2");
  EXPECT_FALSE(l.action.has_value());
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
}

TEST_F(StoreTest, AmendOfAbsentIntentIsNotFoundAndNeedsCandidate) {
  IntentCandidate amend = ExistingIntentRequest("acme", "FAT-1", "k1");
  AmendResult ar;
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kInvalidArgument);
  Intent fixed;
  fixed.key = "k2";
  amend.candidate = fixed;
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kNotFound);
}

}  // namespace
}  // namespace intentd::store::testing
