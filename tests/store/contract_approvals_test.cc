// Approvals (store.h, Approval), against every backend: an intent frozen
// pending grants nothing until approved; a denial ends its action failed;
// the pending list follows every change and survives a restart.
#include <gtest/gtest.h>

#include "store/decision.h"
#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

IntentCandidate Held(const std::string& ref, const std::string& key,
                     const std::string& tenant = "acme") {
  IntentCandidate r = NewIntentRequest(tenant, ref, key);
  r.approval_reason = "valor is 8000.00, above 5000.00";
  return r;
}

class ApprovalContract : public StoreContract {
 protected:
  std::vector<std::string> Pending(const std::optional<std::string>& tenant = "acme") {
    std::vector<Intent> intents;
    Status s = store_->PendingApprovals(tenant, 100, &intents);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<std::string> refs;
    for (const Intent& i : intents) refs.push_back(i.tenant_id + "/" + i.intent_ref);
    return refs;
  }
  Status Decide(const std::string& ref, bool approve, LookupResult* result) {
    return store_->DecideApproval("acme", ref, "pix.cobranca", approve, "uid 1000", "checked",
                                  R"({"code":"denied"})", result);
  }
};

TEST_P(ApprovalContract, APendingIntentGrantsNothingUntilApproved) {
  BeginResult r;
  ASSERT_TRUE(store_->Begin(Held("A", KeyFor(1)), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kPendingApproval);
  EXPECT_EQ(r.intent.approval.state, ApprovalState::kPending);
  EXPECT_EQ(r.intent.approval.reason, "valor is 8000.00, above 5000.00");
  Action a;
  EXPECT_EQ(store_->GetAction("acme", KeyFor(1), &a).code(), Code::kNotFound);
  // A redelivery (whatever it would ask) is still pending; nothing granted.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store_->Begin(ExistingIntentRequest("acme", "A", KeyFor(1)), kLeaseMs, &r).ok());
    EXPECT_FALSE(r.created);
    EXPECT_EQ(r.decision, Decision::kPendingApproval);
  }
  clock_.Advance(1000);
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(Held("B", KeyFor(2)), &f).ok());
  ASSERT_TRUE(store_->Begin(Held("C", KeyFor(3), "globex"), kLeaseMs, &r).ok());
  ASSERT_TRUE(store_->Begin(NewIntentRequest("acme", "D", KeyFor(4)), kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kExecute);  // no approval needed
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/A", "acme/B"}));
  EXPECT_EQ(Pending(std::nullopt).size(), 3u);
  Reopen();
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/A", "acme/B"}));

  LookupResult l;
  clock_.Advance(500);
  ASSERT_TRUE(Decide("A", /*approve=*/true, &l).ok());
  EXPECT_EQ(l.intent.approval.state, ApprovalState::kApproved);
  EXPECT_EQ(l.intent.approval.decided_by, "uid 1000");
  EXPECT_EQ(l.intent.approval.note, "checked");
  EXPECT_EQ(l.intent.approval.decided_at_ms, clock_.NowMs());
  EXPECT_FALSE(l.action.has_value());
  EXPECT_EQ(Decide("A", true, &l).code(), Code::kInvalidState);
  EXPECT_EQ(Decide("D", true, &l).code(), Code::kInvalidState);  // never pending
  EXPECT_EQ(Decide("Z", true, &l).code(), Code::kNotFound);
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/B"}));
  Reopen();
  ASSERT_TRUE(store_->Begin(ExistingIntentRequest("acme", "A", KeyFor(1)), kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  ASSERT_TRUE(store_->Lookup("acme", "A", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.approval.state, ApprovalState::kApproved);
  EXPECT_EQ(l.intent.approval.decided_by, "uid 1000");
}

TEST_P(ApprovalContract, ADenialEndsTheActionFailedForEveryLaterBegin) {
  BeginResult r;
  ASSERT_TRUE(store_->Begin(Held("A", KeyFor(1)), kLeaseMs, &r).ok());
  LookupResult l;
  ASSERT_TRUE(Decide("A", /*approve=*/false, &l).ok());
  EXPECT_EQ(l.intent.approval.state, ApprovalState::kDenied);
  ASSERT_TRUE(l.action.has_value());
  EXPECT_EQ(l.action->status, ActionStatus::kFailed);
  EXPECT_EQ(l.action->error, R"({"code":"denied"})");
  EXPECT_EQ(l.action->attempt, 0);
  EXPECT_TRUE(Pending().empty());
  Reopen();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(store_->Begin(ExistingIntentRequest("acme", "A", KeyFor(1)), kLeaseMs, &r).ok());
    EXPECT_EQ(r.decision, Decision::kReplay);
    EXPECT_EQ(r.action.status, ActionStatus::kFailed);
  }
  EXPECT_EQ(Decide("A", true, &l).code(), Code::kInvalidState);
}

TEST_P(ApprovalContract, AnAmendSetsTheApprovalAfresh) {
  FreezeResult f;
  ASSERT_TRUE(store_->Freeze(Held("A", KeyFor(1)), &f).ok());
  // Corrected below the threshold: no approval needed any more.
  IntentCandidate amend = ExistingIntentRequest("acme", "A", KeyFor(1));
  amend.candidate = NewIntentRequest("acme", "A", KeyFor(2)).candidate;
  AmendResult a;
  ASSERT_TRUE(store_->Amend(amend, /*force=*/false, &a).ok());
  EXPECT_EQ(a.intent.approval.state, ApprovalState::kNone);
  EXPECT_TRUE(Pending().empty());
  BeginResult r;
  // Amended above it again (after approval): pending again.
  amend.expected_key = KeyFor(2);
  amend.candidate = NewIntentRequest("acme", "A", KeyFor(3)).candidate;
  amend.approval_reason = "again";
  ASSERT_TRUE(store_->Amend(amend, /*force=*/false, &a).ok());
  EXPECT_EQ(a.intent.approval.state, ApprovalState::kPending);
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/A"}));
  ASSERT_TRUE(store_->Begin(ExistingIntentRequest("acme", "A", KeyFor(3)), kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kPendingApproval);
  // A pending intent past retention is gone from the list too.
  clock_.Advance(31 * kDay);
  EXPECT_TRUE(Pending().empty());
  ASSERT_TRUE(Compact().ok());
  EXPECT_TRUE(Pending().empty());
}

TEST_P(ApprovalContract, ThePendingListIsOldestFirstAndCutToItsLimit) {
  // Frozen in the reverse of their key order, across two tenants.
  FreezeResult f;
  for (const char* ref : {"Z", "M", "A"}) {
    ASSERT_TRUE(store_->Freeze(Held(ref, KeyFor(ref[0])), &f).ok());
    clock_.Advance(1000);
    ASSERT_TRUE(store_->Freeze(Held(ref, KeyFor(ref[0]), "globex"), &f).ok());
    clock_.Advance(1000);
  }
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/Z", "acme/M", "acme/A"}));
  std::vector<Intent> two;
  ASSERT_TRUE(store_->PendingApprovals(std::nullopt, 2, &two).ok());
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].tenant_id + "/" + two[0].intent_ref, "acme/Z");
  EXPECT_EQ(two[1].tenant_id + "/" + two[1].intent_ref, "globex/Z");
  LookupResult l;
  ASSERT_TRUE(Decide("Z", /*approve=*/true, &l).ok());
  EXPECT_EQ(Pending(), (std::vector<std::string>{"acme/M", "acme/A"}));
}

INSTANTIATE_STORE_CONTRACT(ApprovalContract);

}  // namespace
}  // namespace intentd::store::testing
