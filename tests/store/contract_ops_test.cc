// The protocol operations, against every backend (manual clock, no sleeps).
#include <gtest/gtest.h>

#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
using namespace std::string_literals;

TEST_P(StoreContract, BeginOnNewIntentFreezesItAndExecutes) {
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

TEST_P(StoreContract, SecondBeginWhileLeaseLiveIsInFlight) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(1000);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_FALSE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.retry_after_ms, kLeaseMs - 1000);
  EXPECT_EQ(r.action.lease_token, 1);
}

TEST_P(StoreContract, ExpiredLeaseGrantsRecoverWithNextToken) {
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

TEST_P(StoreContract, CompleteThenBeginReplaysFirstResponse) {
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

TEST_P(StoreContract, ExpiredLeaseNotTakenOverStillCompletes) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(10 * kLeaseMs);
  Action a;
  ASSERT_TRUE(store_->Renew("acme", "k1", 1, 5000, &a).ok());
  EXPECT_EQ(a.lease_until_ms, clock_.NowMs() + 5000);
  clock_.Advance(10 * kLeaseMs);
  EXPECT_TRUE(store_->Complete("acme", "k1", 1, "1", &a).ok());
}

TEST_P(StoreContract, RetriableFailReleasesAndNextBeginExecutesAgain) {
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

TEST_P(StoreContract, NonRetriableFailReplaysError) {
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

TEST_P(StoreContract, TokenNeverGrantedIsInvalidState) {
  BeginNew("FAT-1", "k1");
  Action a;
  EXPECT_EQ(store_->Complete("acme", "k1", 2, "1", &a).code(), Code::kInvalidState);
  EXPECT_EQ(store_->Renew("acme", "k1", 0, kLeaseMs, &a).code(), Code::kLeaseLost);
}

TEST_P(StoreContract, UnknownActionIsNotFound) {
  Action a;
  EXPECT_EQ(store_->Complete("acme", "nope", 1, "1", &a).code(), Code::kNotFound);
  EXPECT_EQ(store_->GetAction("acme", "nope", &a).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_P(StoreContract, FrozenIntentWithoutActionHasNoStatusButLooksUp) {
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

TEST_P(StoreContract, ARedeliveryIsOneCallOnTheIntentAsFrozen) {
  BeginNew("FAT-1", "k1");
  // A candidate that derived another key (a diverged extraction, a rotated
  // secret): the call acts on the frozen intent and its action, k2 untouched.
  IntentCandidate other = NewIntentRequest("acme", "FAT-1", "k2");
  other.candidate->payload = "{\"valor\":\"99\"}";
  BeginResult r;
  ASSERT_TRUE(store_->Begin(other, kLeaseMs, &r).ok());
  EXPECT_FALSE(r.created);
  EXPECT_EQ(r.intent.key, "k1");
  EXPECT_EQ(r.decision, Decision::kInFlight);
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k2", &a).code(), Code::kNotFound);
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(other, &f).ok());
  EXPECT_FALSE(f.created);
  EXPECT_EQ(f.intent.key, "k1");
  // No candidate at all (a payload that did not derive): the same.
  IntentCandidate bare_frozen;
  bare_frozen.tenant_id = "acme";
  bare_frozen.intent_ref = "FAT-1";
  bare_frozen.action_type = "pix.cobranca";
  ASSERT_TRUE(store_->Begin(bare_frozen, kLeaseMs, &r).ok());
  EXPECT_EQ(r.intent.key, "k1");
  EXPECT_EQ(r.decision, Decision::kInFlight);
}

TEST_P(StoreContract, RequiringTheSamePayloadConflictsWithTheFrozenIntentAndWritesNothing) {
  BeginNew("FAT-1", "k1");
  // The candidate's own payload: acted on.
  IntentCandidate same = NewIntentRequest("acme", "FAT-1", "k1");
  same.require_same_payload = true;
  BeginResult r;
  ASSERT_TRUE(store_->Begin(same, kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kInFlight);
  // Another: kConflict with the intent as stored; nothing written.
  IntentCandidate other = NewIntentRequest("acme", "FAT-1", "k2");
  other.candidate->payload = "{\"valor\":\"99\"}";
  other.require_same_payload = true;
  r = BeginResult();
  EXPECT_EQ(store_->Begin(other, kLeaseMs, &r).code(), Code::kConflict);
  EXPECT_EQ(r.intent.key, "k1");
  EXPECT_EQ(r.intent.payload, same.candidate->payload);
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k2", &a).code(), Code::kNotFound);
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.attempt, 1);
  // The caller compared the fields and comes back with the key: acted on.
  other.expected_key = "k1";
  ASSERT_TRUE(store_->Begin(other, kLeaseMs, &r).ok());
  EXPECT_EQ(r.intent.key, "k1");
  EXPECT_EQ(r.decision, Decision::kInFlight);
  // An absent intent is frozen from the candidate as ever.
  IntentCandidate fresh = NewIntentRequest("acme", "FAT-2", "k3");
  fresh.require_same_payload = true;
  ASSERT_TRUE(store_->Begin(fresh, kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
}

TEST_P(StoreContract, StaleViewOfIntentIsConflictAndWritesNothing) {
  BeginNew("FAT-1", "k1");
  BeginResult r;
  // Caller compared against another key.
  EXPECT_EQ(store_->Begin(ExistingIntentRequest("acme", "FAT-1", "k2"), kLeaseMs, &r).code(),
            Code::kConflict);
  EXPECT_EQ(r.intent.key, "k1");  // the intent as stored, to compare again
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k2", &a).code(), Code::kNotFound);
  // Caller believed it present, but it is not.
  EXPECT_EQ(store_->Begin(ExistingIntentRequest("acme", "FAT-9", "k9"), kLeaseMs, &r).code(),
            Code::kConflict);
  FreezeResult f;
  EXPECT_EQ(store_->Freeze(ExistingIntentRequest("acme", "FAT-9", "k9"), &f).code(),
            Code::kConflict);
  // No view and no payload.
  IntentCandidate bare;
  bare.tenant_id = "acme";
  bare.intent_ref = "FAT-9";
  bare.action_type = "pix.cobranca";
  EXPECT_EQ(store_->Begin(bare, kLeaseMs, &r).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "FAT-9", "pix.cobranca", &l).code(), Code::kNotFound);
}

TEST_P(StoreContract, NonPositiveLeaseIsInvalidArgument) {
  BeginResult r;
  EXPECT_EQ(store_->Begin(NewIntentRequest("acme", "FAT-1", "k1"), 0, &r).code(),
            Code::kInvalidArgument);
  BeginNew("FAT-1", "k1");
  Action a;
  EXPECT_EQ(store_->Renew("acme", "k1", 1, -1, &a).code(), Code::kInvalidArgument);
}

TEST_P(StoreContract, TenantsAreSeparateEvenForEqualKeysAndOddBytes) {
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

TEST_P(StoreContract, IntentsDifferByActionType) {
  BeginNew("FAT-1", "k1");
  BeginResult r;
  ASSERT_TRUE(
      store_->Begin(NewIntentRequest("acme", "FAT-1", "k2", "email.cobranca"), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
}

TEST_P(StoreContract, TwoIntentsWithOneKeyShareTheAction) {
  BeginNew("FAT-1", "k1");
  BeginResult r = BeginNew("FAT-2", "k1");
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.action.intent_ref, "FAT-1");
}

TEST_P(StoreContract, RecordsSurviveReopen) {
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

TEST_P(StoreContract, TheInputAsSentIsFrozenWithTheIntentAndReplacedOnlyByAmend) {
  const std::string input =
      R"({"cliente_id":"c-42","descricao":"Pedido 42","valor":"180.00","vencimento":"2026-12-10"})";
  IntentCandidate first = NewIntentRequest("acme", "FAT-1", "k1");
  first.candidate->input = input;
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(first, &f).ok());
  EXPECT_EQ(f.intent.input, input);
  // A later attempt's input (another extraction) changes nothing.
  IntentCandidate later = NewIntentRequest("acme", "FAT-1", "k1");
  later.candidate->input = R"({"descricao":"something else","valor":"180.00"})";
  FreezeResult again;
  ASSERT_TRUE(store_->Freeze(ExistingIntentRequest("acme", "FAT-1", "k1"), &again).ok());
  EXPECT_EQ(again.intent.input, input);
  BeginResult r;
  ASSERT_TRUE(store_->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  EXPECT_EQ(r.intent.input, input);
  Reopen();
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.input, input);
  // Amend replaces it with the payload and key.
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"wrong\"", false, &a).ok());
  IntentCandidate amend = ExistingIntentRequest("acme", "FAT-1", "k1");
  Intent fixed;
  fixed.key = "k2";
  fixed.payload = "{}";
  fixed.rules_version = 2;
  fixed.input = R"({"valor":"190.00"})";
  amend.candidate = fixed;
  AmendResult ar;
  ASSERT_TRUE(store_->Amend(amend, false, &ar).ok());
  EXPECT_EQ(ar.intent.input, fixed.input);
  ASSERT_TRUE(store_->Lookup("acme", "FAT-1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.input, fixed.input);
  // An intent frozen without one reads as none.
  IntentCandidate bare = NewIntentRequest("acme", "FAT-2", "k3");
  ASSERT_TRUE(store_->Freeze(bare, &f).ok());
  ASSERT_TRUE(store_->Lookup("acme", "FAT-2", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.input, "");
}

TEST_P(StoreContract, AmendReplacesKeyAndKeepsOldActionReadable) {
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

TEST_P(StoreContract, AmendWithForceWhileStarted) {
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

TEST_P(StoreContract, AmendOfAbsentIntentIsNotFoundAndNeedsCandidate) {
  IntentCandidate amend = ExistingIntentRequest("acme", "FAT-1", "k1");
  AmendResult ar;
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kInvalidArgument);
  Intent fixed;
  fixed.key = "k2";
  amend.candidate = fixed;
  EXPECT_EQ(store_->Amend(amend, false, &ar).code(), Code::kNotFound);
}

TEST_P(StoreContract, OpaqueBytesRoundTripExactly) {
  // Any byte in tenant, ref, type and key (NUL, 0xFF, invalid UTF-8), and
  // payload/response/error bytes kept exactly (no JSON re-encoding).
  const std::string tenant = "t\0\xff\x01"s;
  const std::string ref = "ref\0\xc3\x28"s;
  const std::string type = "type\0x"s;
  const std::string key = "k\0\x80"s;
  IntentCandidate request = NewIntentRequest(tenant, ref, key, type);
  request.candidate->payload = "{\"b\":1,  \"a\":\"\\u0000\xe2\x82\xac\"}\0tail"s;
  BeginResult r;
  ASSERT_TRUE(store_->Begin(request, kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kExecute);
  LookupResult l;
  ASSERT_TRUE(store_->Lookup(tenant, ref, type, &l).ok());
  EXPECT_EQ(l.intent.payload, request.candidate->payload);
  EXPECT_EQ(l.intent.key, key);
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->intent_ref, ref);
  EXPECT_EQ(l.action->action_type, type);
  // Prefixes and neighbours are other records.
  EXPECT_EQ(store_->Lookup(tenant.substr(0, 2), ref, type, &l).code(), Code::kNotFound);
  EXPECT_EQ(store_->Lookup(tenant, "ref", type, &l).code(), Code::kNotFound);
  const std::string response = "{\"id\":\"\xf0\x9f\x92\xb8\"}\0\xff"s;
  Action a;
  ASSERT_TRUE(store_->Complete(tenant, key, 1, response, &a).ok());
  ASSERT_TRUE(store_->GetAction(tenant, key, &a).ok());
  EXPECT_EQ(a.response, response);
  EXPECT_EQ(a.tenant_id, tenant);
  EXPECT_EQ(a.key, key);
  EXPECT_EQ(store_->GetAction(tenant, "k", &a).code(), Code::kNotFound);
}

TEST_P(StoreContract, LookupOfIntentWhoseActionIsAnotherIntentsShowsIt) {
  BeginNew("FAT-1", "k1");
  BeginNew("FAT-2", "k1");
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "FAT-2", "pix.cobranca", &l).ok());
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->intent_ref, "FAT-1");
  Action a;
  ASSERT_TRUE(store_->Complete("acme", "k1", 1, "\"done\"", &a).ok());
  EXPECT_EQ(BeginAgain("FAT-2", "k1").decision, Decision::kReplay);
}

TEST_P(StoreContract, ReleasedSharedKeyIsReExecutedThroughTheOtherIntent) {
  BeginNew("FAT-1", "k1");
  BeginNew("FAT-2", "k1");
  Action a;
  ASSERT_TRUE(store_->Fail("acme", "k1", 1, "\"timeout\"", true, &a).ok());
  BeginResult r = BeginAgain("FAT-2", "k1");
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 2);
  EXPECT_EQ(r.action.intent_ref, "FAT-1");  // the action keeps its identity
  clock_.Advance(kLeaseMs);
  r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kRecover);
  EXPECT_EQ(r.previous_lease_token, 2);
  EXPECT_EQ(r.action.lease_token, 3);
}

TEST_P(StoreContract, RetryAfterMsCountsDownAndRenewMovesIt) {
  BeginNew("FAT-1", "k1");
  clock_.Advance(kLeaseMs - 1);
  EXPECT_EQ(BeginAgain("FAT-1", "k1").retry_after_ms, 1);
  Action a;
  ASSERT_TRUE(store_->Renew("acme", "k1", 1, 60'000, &a).ok());
  EXPECT_EQ(a.lease_until_ms, clock_.NowMs() + 60'000);
  BeginResult r = BeginAgain("FAT-1", "k1");
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_EQ(r.retry_after_ms, 60'000);
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.updated_at_ms, kT0 + kLeaseMs - 1);
  EXPECT_EQ(a.created_at_ms, kT0);
}

INSTANTIATE_STORE_CONTRACT(StoreContract);

}  // namespace
}  // namespace intentd::store::testing
