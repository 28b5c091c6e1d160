// The protocol's tables, row by row, on the pure decision functions.
#include "store/decision.h"

#include <gtest/gtest.h>

namespace intentd::store {
namespace {

constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kLease = 300'000;

Intent TestIntent() {
  Intent i;
  i.tenant_id = "acme";
  i.intent_ref = "FAT-1";
  i.action_type = "pix.cobranca";
  i.key = "k1";
  i.payload = "{}";
  return i;
}

Action Record(ActionStatus status, int64_t token, int64_t lease_until) {
  Action a;
  a.tenant_id = "acme";
  a.key = "k1";
  a.action_type = "pix.cobranca";
  a.intent_ref = "FAT-1";
  a.status = status;
  a.attempt = token;
  a.lease_token = token;
  a.lease_until_ms = lease_until;
  a.created_at_ms = kNow - 1000;
  a.updated_at_ms = kNow - 500;
  if (status == ActionStatus::kCompleted) a.response = "\"first\"";
  if (status == ActionStatus::kFailed || status == ActionStatus::kReleased) a.error = "\"boom\"";
  return a;
}

TEST(DecideBegin, NoActionExecutesWithFirstTokenAndIntentIdentity) {
  BeginStep step = DecideBegin(std::nullopt, TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kExecute);
  EXPECT_TRUE(step.write);
  EXPECT_EQ(step.action.status, ActionStatus::kStarted);
  EXPECT_EQ(step.action.lease_token, 1);
  EXPECT_EQ(step.action.attempt, 1);
  EXPECT_EQ(step.action.lease_until_ms, kNow + kLease);
  EXPECT_EQ(step.action.tenant_id, "acme");
  EXPECT_EQ(step.action.key, "k1");
  EXPECT_EQ(step.action.intent_ref, "FAT-1");
  EXPECT_EQ(step.action.action_type, "pix.cobranca");
  EXPECT_EQ(step.action.created_at_ms, kNow);
  EXPECT_EQ(step.action.updated_at_ms, kNow);
}

TEST(DecideBegin, ReleasedExecutesWithNextTokenAndClearsError) {
  BeginStep step =
      DecideBegin(Record(ActionStatus::kReleased, 3, kNow - 10), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kExecute);
  EXPECT_TRUE(step.write);
  EXPECT_EQ(step.action.status, ActionStatus::kStarted);
  EXPECT_EQ(step.action.lease_token, 4);
  EXPECT_EQ(step.action.attempt, 4);
  EXPECT_EQ(step.action.lease_until_ms, kNow + kLease);
  EXPECT_EQ(step.action.error, "");
  EXPECT_EQ(step.action.created_at_ms, kNow - 1000);
  EXPECT_EQ(step.action.updated_at_ms, kNow);
}

TEST(DecideBegin, LiveLeaseIsInFlightWithTimeLeft) {
  BeginStep step =
      DecideBegin(Record(ActionStatus::kStarted, 2, kNow + 1234), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kInFlight);
  EXPECT_FALSE(step.write);
  EXPECT_EQ(step.retry_after_ms, 1234);
  EXPECT_EQ(step.action.lease_token, 2);
}

TEST(DecideBegin, LeaseOneMillisecondBeforeExpiryIsStillInFlight) {
  BeginStep step =
      DecideBegin(Record(ActionStatus::kStarted, 1, kNow + 1), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kInFlight);
  EXPECT_EQ(step.retry_after_ms, 1);
}

TEST(DecideBegin, ExpiredLeaseGrantsRecoverWithNextToken) {
  // Expiry at exactly lease_until: now < lease_until is false.
  BeginStep step = DecideBegin(Record(ActionStatus::kStarted, 5, kNow), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kRecover);
  EXPECT_TRUE(step.write);
  EXPECT_EQ(step.previous_lease_token, 5);
  EXPECT_EQ(step.action.lease_token, 6);
  EXPECT_EQ(step.action.attempt, 6);
  EXPECT_EQ(step.action.status, ActionStatus::kStarted);
  EXPECT_EQ(step.action.lease_until_ms, kNow + kLease);
  EXPECT_EQ(step.action.updated_at_ms, kNow);
}

TEST(DecideBegin, CompletedReplaysItsResponse) {
  BeginStep step =
      DecideBegin(Record(ActionStatus::kCompleted, 2, kNow - 5), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kReplay);
  EXPECT_FALSE(step.write);
  EXPECT_EQ(step.action.response, "\"first\"");
}

TEST(DecideBegin, FailedReplaysItsError) {
  BeginStep step =
      DecideBegin(Record(ActionStatus::kFailed, 2, kNow + 50), TestIntent(), kLease, kNow);
  EXPECT_EQ(step.decision, Decision::kReplay);
  EXPECT_FALSE(step.write);
  EXPECT_EQ(step.action.error, "\"boom\"");
}

TEST(DecideBegin, LeaseDeadlineSaturatesInsteadOfWrapping) {
  BeginStep step = DecideBegin(std::nullopt, TestIntent(), INT64_MAX, kNow);
  EXPECT_EQ(step.action.lease_until_ms, INT64_MAX);
}

// complete / fail / renew: every (state, token, operation) row.
struct FinishRow {
  const char* name;
  ActionStatus status;
  int64_t token_delta;  // request token - current token
  FinishKind kind;
  Status::Code code;
  bool write;
  ActionStatus status_after;
};

class DecideFinishTable : public ::testing::TestWithParam<FinishRow> {};

TEST_P(DecideFinishTable, Row) {
  const FinishRow& row = GetParam();
  const Action current = Record(row.status, 4, kNow + 100);
  const std::string payload = "\"second\"";
  FinishRequest request{row.kind, 4 + row.token_delta, &payload, kLease};
  FinishStep step = DecideFinish(current, request, kNow);
  EXPECT_EQ(step.status.code(), row.code) << step.status.message();
  EXPECT_EQ(step.write, row.write);
  EXPECT_EQ(step.action.status, row.status_after);
  EXPECT_EQ(step.action.lease_token, 4);  // finishing never changes the token
  if (!row.write) {
    EXPECT_EQ(step.action.response, current.response);
    EXPECT_EQ(step.action.error, current.error);
    EXPECT_EQ(step.action.updated_at_ms, current.updated_at_ms);
  }
}

using S = ActionStatus;
using K = FinishKind;
using C = Status::Code;
const FinishRow kFinishRows[] = {
    // started, current token: applied
    {"StartedCompleteApplies", S::kStarted, 0, K::kComplete, C::kOk, true, S::kCompleted},
    {"StartedFailApplies", S::kStarted, 0, K::kFail, C::kOk, true, S::kFailed},
    {"StartedRetriableFailReleases", S::kStarted, 0, K::kRelease, C::kOk, true, S::kReleased},
    {"StartedRenewApplies", S::kStarted, 0, K::kRenew, C::kOk, true, S::kStarted},
    // started, older token: taken over
    {"StartedCompleteOldTokenLeaseLost", S::kStarted, -1, K::kComplete, C::kLeaseLost, false,
     S::kStarted},
    {"StartedFailOldTokenLeaseLost", S::kStarted, -3, K::kFail, C::kLeaseLost, false, S::kStarted},
    {"StartedReleaseOldTokenLeaseLost", S::kStarted, -1, K::kRelease, C::kLeaseLost, false,
     S::kStarted},
    {"StartedRenewOldTokenLeaseLost", S::kStarted, -1, K::kRenew, C::kLeaseLost, false,
     S::kStarted},
    // started, token never granted
    {"StartedCompleteFutureTokenInvalid", S::kStarted, 1, K::kComplete, C::kInvalidState, false,
     S::kStarted},
    {"StartedFailFutureTokenInvalid", S::kStarted, 1, K::kFail, C::kInvalidState, false,
     S::kStarted},
    {"StartedRenewFutureTokenInvalid", S::kStarted, 7, K::kRenew, C::kInvalidState, false,
     S::kStarted},
    // completed: only the repeated complete succeeds
    {"CompletedRepeatCompleteOk", S::kCompleted, 0, K::kComplete, C::kOk, false, S::kCompleted},
    {"CompletedCompleteOldTokenInvalid", S::kCompleted, -1, K::kComplete, C::kInvalidState, false,
     S::kCompleted},
    {"CompletedCompleteFutureTokenInvalid", S::kCompleted, 1, K::kComplete, C::kInvalidState, false,
     S::kCompleted},
    {"CompletedFailInvalid", S::kCompleted, 0, K::kFail, C::kInvalidState, false, S::kCompleted},
    {"CompletedReleaseInvalid", S::kCompleted, 0, K::kRelease, C::kInvalidState, false,
     S::kCompleted},
    {"CompletedRenewInvalid", S::kCompleted, 0, K::kRenew, C::kInvalidState, false, S::kCompleted},
    // failed: only the repeated non-retriable fail succeeds
    {"FailedRepeatFailOk", S::kFailed, 0, K::kFail, C::kOk, false, S::kFailed},
    {"FailedFailOldTokenInvalid", S::kFailed, -1, K::kFail, C::kInvalidState, false, S::kFailed},
    {"FailedReleaseInvalid", S::kFailed, 0, K::kRelease, C::kInvalidState, false, S::kFailed},
    {"FailedCompleteInvalid", S::kFailed, 0, K::kComplete, C::kInvalidState, false, S::kFailed},
    {"FailedRenewInvalid", S::kFailed, 0, K::kRenew, C::kInvalidState, false, S::kFailed},
    // released: only the repeated retriable fail succeeds
    {"ReleasedRepeatReleaseOk", S::kReleased, 0, K::kRelease, C::kOk, false, S::kReleased},
    {"ReleasedReleaseFutureTokenInvalid", S::kReleased, 1, K::kRelease, C::kInvalidState, false,
     S::kReleased},
    {"ReleasedFailInvalid", S::kReleased, 0, K::kFail, C::kInvalidState, false, S::kReleased},
    {"ReleasedCompleteInvalid", S::kReleased, 0, K::kComplete, C::kInvalidState, false,
     S::kReleased},
    {"ReleasedRenewInvalid", S::kReleased, 0, K::kRenew, C::kInvalidState, false, S::kReleased},
};

INSTANTIATE_TEST_SUITE_P(Protocol, DecideFinishTable, ::testing::ValuesIn(kFinishRows),
                         [](const ::testing::TestParamInfo<FinishRow>& info) {
                           return std::string(info.param.name);
                         });

TEST(DecideFinish, CompleteStoresResponseAndUpdateTime) {
  const std::string response = "{\"txid\":\"abc\"}";
  FinishStep step = DecideFinish(Record(ActionStatus::kStarted, 2, kNow + 10),
                                 {FinishKind::kComplete, 2, &response, 0}, kNow);
  ASSERT_TRUE(step.status.ok());
  EXPECT_EQ(step.action.response, response);
  EXPECT_EQ(step.action.updated_at_ms, kNow);
}

// The PostgreSQL store writes a complete on a started action under its
// token in one statement (store/postgres/rows.cc, kCompleteStarted) that sets
// status, response, error and updated_at and keeps every other field: this
// pins that DecideFinish changes exactly those, whatever the other fields
// hold (change both together).
TEST(DecideFinish, CompleteOfAStartedActionChangesOnlyStatusResponseErrorAndUpdateTime) {
  const std::string response = "{\"txid\":\"abc\"}";
  for (int64_t lease_until : {kNow - 60'000, kNow + 10}) {
    Action current = Record(ActionStatus::kStarted, 4, lease_until);
    current.attempt = 7;
    current.error = "\"left over\"";
    current.response = "\"left over\"";
    FinishStep step = DecideFinish(current, {FinishKind::kComplete, 4, &response, 0}, kNow);
    ASSERT_TRUE(step.status.ok());
    ASSERT_TRUE(step.write);
    Action expected = current;
    expected.status = ActionStatus::kCompleted;
    expected.response = response;
    expected.error.clear();
    expected.updated_at_ms = kNow;
    EXPECT_EQ(step.action.tenant_id, expected.tenant_id);
    EXPECT_EQ(step.action.key, expected.key);
    EXPECT_EQ(step.action.action_type, expected.action_type);
    EXPECT_EQ(step.action.intent_ref, expected.intent_ref);
    EXPECT_EQ(step.action.status, expected.status);
    EXPECT_EQ(step.action.attempt, expected.attempt);
    EXPECT_EQ(step.action.lease_token, expected.lease_token);
    EXPECT_EQ(step.action.lease_until_ms, expected.lease_until_ms);
    EXPECT_EQ(step.action.response, expected.response);
    EXPECT_EQ(step.action.error, expected.error);
    EXPECT_EQ(step.action.created_at_ms, expected.created_at_ms);
    EXPECT_EQ(step.action.updated_at_ms, expected.updated_at_ms);
  }
}

TEST(DecideFinish, FailStoresError) {
  const std::string error = "{\"code\":\"declined\"}";
  FinishStep step = DecideFinish(Record(ActionStatus::kStarted, 2, kNow + 10),
                                 {FinishKind::kFail, 2, &error, 0}, kNow);
  ASSERT_TRUE(step.status.ok());
  EXPECT_EQ(step.action.error, error);
}

TEST(DecideFinish, ExpiredLeaseNotTakenOverIsStillCurrent) {
  const Action current = Record(ActionStatus::kStarted, 3, kNow - 60'000);
  const std::string response = "1";
  for (FinishKind kind :
       {FinishKind::kComplete, FinishKind::kFail, FinishKind::kRelease, FinishKind::kRenew}) {
    FinishStep step = DecideFinish(current, {kind, 3, &response, kLease}, kNow);
    EXPECT_TRUE(step.status.ok()) << static_cast<int>(kind) << " " << step.status.message();
    EXPECT_TRUE(step.write);
  }
}

TEST(DecideFinish, RenewMovesLeaseToNowPlusLease) {
  FinishStep step = DecideFinish(Record(ActionStatus::kStarted, 1, kNow + 5),
                                 {FinishKind::kRenew, 1, nullptr, 42'000}, kNow);
  ASSERT_TRUE(step.status.ok());
  EXPECT_EQ(step.action.lease_until_ms, kNow + 42'000);
  EXPECT_EQ(step.action.attempt, 1);
}

TEST(DecideFinish, RepeatedCompleteKeepsFirstResponse) {
  const std::string second = "\"second\"";
  FinishStep step = DecideFinish(Record(ActionStatus::kCompleted, 2, kNow),
                                 {FinishKind::kComplete, 2, &second, 0}, kNow);
  ASSERT_TRUE(step.status.ok());
  EXPECT_FALSE(step.write);
  EXPECT_EQ(step.action.response, "\"first\"");
}

TEST(DecideAmend, RefusedWhileStartedOrCompletedUnlessForced) {
  EXPECT_TRUE(DecideAmend(std::nullopt, false).ok());
  EXPECT_EQ(DecideAmend(Record(ActionStatus::kStarted, 1, kNow), false).code(),
            Status::Code::kInvalidState);
  EXPECT_EQ(DecideAmend(Record(ActionStatus::kCompleted, 1, kNow), false).code(),
            Status::Code::kInvalidState);
  EXPECT_TRUE(DecideAmend(Record(ActionStatus::kFailed, 1, kNow), false).ok());
  EXPECT_TRUE(DecideAmend(Record(ActionStatus::kReleased, 1, kNow), false).ok());
  EXPECT_TRUE(DecideAmend(Record(ActionStatus::kStarted, 1, kNow), true).ok());
  EXPECT_TRUE(DecideAmend(Record(ActionStatus::kCompleted, 1, kNow), true).ok());
}

IntentCandidate Request(std::optional<std::string> expected, std::optional<std::string> key) {
  IntentCandidate r;
  r.tenant_id = "acme";
  r.intent_ref = "FAT-1";
  r.action_type = "pix.cobranca";
  r.expected_key = std::move(expected);
  if (key) {
    Intent c;
    c.key = *key;
    r.candidate = c;
  }
  return r;
}

TEST(CheckIntentCandidate, AbsentIntent) {
  EXPECT_TRUE(CheckIntentCandidate(nullptr, Request(std::nullopt, "k1")).ok());
  EXPECT_EQ(CheckIntentCandidate(nullptr, Request("k1", "k1")).code(), Status::Code::kConflict);
  EXPECT_EQ(CheckIntentCandidate(nullptr, Request(std::nullopt, std::nullopt)).code(),
            Status::Code::kNotFound);
  EXPECT_EQ(CheckIntentCandidate(nullptr, Request(std::nullopt, "")).code(),
            Status::Code::kInvalidArgument);
}

TEST(CheckIntentCandidate, PresentIntent) {
  const Intent stored = TestIntent();  // key k1
  EXPECT_TRUE(CheckIntentCandidate(&stored, Request("k1", std::nullopt)).ok());
  EXPECT_TRUE(CheckIntentCandidate(&stored, Request("k1", "k9")).ok());  // candidate ignored
  EXPECT_EQ(CheckIntentCandidate(&stored, Request("k2", std::nullopt)).code(),
            Status::Code::kConflict);
  // No expectation: a redelivery acts on the intent as frozen, whatever
  // key its candidate derived.
  EXPECT_TRUE(CheckIntentCandidate(&stored, Request(std::nullopt, "k1")).ok());
  EXPECT_TRUE(CheckIntentCandidate(&stored, Request(std::nullopt, "k9")).ok());
  EXPECT_TRUE(CheckIntentCandidate(&stored, Request(std::nullopt, std::nullopt)).ok());
}

TEST(CheckIntentCandidate, RequiringTheSamePayload) {
  const Intent stored = TestIntent();
  IntentCandidate same = Request(std::nullopt, "k1");
  same.candidate->payload = stored.payload;
  same.candidate->rules_version = stored.rules_version;
  same.require_same_payload = true;
  EXPECT_TRUE(SameFrozenPayload(stored, same));
  EXPECT_TRUE(CheckIntentCandidate(&stored, same).ok());
  // Another payload, the same payload under other rules, or none: conflict.
  IntentCandidate other = same;
  other.candidate->payload = stored.payload + " ";
  EXPECT_FALSE(SameFrozenPayload(stored, other));
  EXPECT_EQ(CheckIntentCandidate(&stored, other).code(), Status::Code::kConflict);
  IntentCandidate older = same;
  older.candidate->rules_version = stored.rules_version + 1;
  EXPECT_EQ(CheckIntentCandidate(&stored, older).code(), Status::Code::kConflict);
  IntentCandidate none = Request(std::nullopt, std::nullopt);
  none.require_same_payload = true;
  EXPECT_EQ(CheckIntentCandidate(&stored, none).code(), Status::Code::kConflict);
  // The key compared against overrides it (the caller compared the fields).
  other.expected_key = stored.key;
  EXPECT_TRUE(CheckIntentCandidate(&stored, other).ok());
  // It does not matter for an absent intent.
  EXPECT_TRUE(CheckIntentCandidate(nullptr, same).ok());
}

TEST(Retention, StartedNeverExpiresOthersAfterRetention) {
  EXPECT_EQ(ActionRetainUntil(ActionStatus::kStarted, kNow, 1000), kRetainForever);
  EXPECT_EQ(ActionRetainUntil(ActionStatus::kCompleted, kNow, 1000), kNow + 1000);
  EXPECT_EQ(ActionRetainUntil(ActionStatus::kFailed, kNow, 1000), kNow + 1000);
  EXPECT_EQ(ActionRetainUntil(ActionStatus::kReleased, kNow, 1000), kNow + 1000);
  EXPECT_EQ(ActionRetainUntil(ActionStatus::kCompleted, kNow, INT64_MAX), INT64_MAX);
  EXPECT_FALSE(RetentionExpired(kNow + 1, kNow));
  EXPECT_TRUE(RetentionExpired(kNow, kNow));
  EXPECT_FALSE(RetentionExpired(kRetainForever, INT64_MAX - 1));
}

TEST(Retention, IntentLivesItsOwnRetentionThenWithTheActionItHadByThen) {
  Action action;
  action.status = ActionStatus::kCompleted;
  action.created_at_ms = kNow - 100;
  // Within its own deadline: live, whatever the action.
  EXPECT_TRUE(IntentLive(kNow + 1, nullptr, kNow));
  EXPECT_TRUE(IntentLive(kNow + 1, &action, kNow));
  // Past it: live only with a live action (the caller passes nullptr for an
  // absent or expired one) created by the deadline.
  EXPECT_FALSE(IntentLive(kNow, nullptr, kNow));
  EXPECT_TRUE(IntentLive(kNow - 50, &action, kNow));
  EXPECT_TRUE(IntentLive(kNow - 99, &action, kNow));
  EXPECT_FALSE(IntentLive(kNow - 100, &action, kNow));  // created as the intent expired
  EXPECT_FALSE(IntentLive(kNow - 101, &action, kNow));  // created after
  // Format 2's "forever" on the intent of a started action: it follows its action only.
  EXPECT_FALSE(IntentLive(kRetainForever, nullptr, kNow));
  EXPECT_TRUE(IntentLive(kRetainForever, &action, kNow));
}

TEST(Retention, PostgresIntentFollowsItsActionsChanges) {
  const int64_t r = 1000;
  // Changed action: deadline moves with it.
  EXPECT_EQ(IntentRetainAfter(kNow + 5, ActionStatus::kStarted, true, kNow, r), kRetainForever);
  EXPECT_EQ(IntentRetainAfter(kRetainForever, ActionStatus::kStarted, true, kNow, r), std::nullopt);
  EXPECT_EQ(IntentRetainAfter(kRetainForever, ActionStatus::kCompleted, true, kNow, r), kNow + r);
  EXPECT_EQ(IntentRetainAfter(kNow - 7, ActionStatus::kReleased, true, kNow, r), kNow + r);
  // Unchanged action: only a mismatch is repaired.
  EXPECT_EQ(IntentRetainAfter(kNow + 5, ActionStatus::kStarted, false, kNow, r), kRetainForever);
  EXPECT_EQ(IntentRetainAfter(kRetainForever, ActionStatus::kCompleted, false, kNow, r), kNow + r);
  EXPECT_EQ(IntentRetainAfter(kNow + 5, ActionStatus::kCompleted, false, kNow, r), std::nullopt);
}

TEST(SaturatingAdd, ClampsAtBothEnds) {
  EXPECT_EQ(SaturatingAdd(1, 2), 3);
  EXPECT_EQ(SaturatingAdd(INT64_MAX - 1, 5), INT64_MAX);
  EXPECT_EQ(SaturatingAdd(INT64_MIN + 1, -5), INT64_MIN);
}

TEST(Names, StatusAndDecisionNamesMatchTheProtocol) {
  EXPECT_STREQ(ActionStatusName(ActionStatus::kStarted), "started");
  EXPECT_STREQ(ActionStatusName(ActionStatus::kCompleted), "completed");
  EXPECT_STREQ(ActionStatusName(ActionStatus::kFailed), "failed");
  EXPECT_STREQ(ActionStatusName(ActionStatus::kReleased), "released");
  EXPECT_STREQ(DecisionName(Decision::kExecute), "execute");
  EXPECT_STREQ(DecisionName(Decision::kInFlight), "in_flight");
  EXPECT_STREQ(DecisionName(Decision::kRecover), "recover");
  EXPECT_STREQ(DecisionName(Decision::kReplay), "replay");
}

}  // namespace
}  // namespace intentd::store
