// The action state machine of the protocol as pure functions of
// (record, request, now): no I/O, no clock, no locks. The RocksDB store reads
// the records, calls these under its locks and writes what they return.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "store/status.h"
#include "store/store.h"

namespace intentd::store {

// begin's decisions and their names in the protocol ("decision" of begin's
// answer; stats and metrics count each), in Decision's order: the one list
// that DecisionName, the agent's counters and tests/docs/protocol_doc_test.py
// read.
struct DecisionSpec {
  Decision decision;
  const char* name;
};
inline constexpr DecisionSpec kDecisions[] = {
    {Decision::kExecute, "execute"},
    {Decision::kInFlight, "in_flight"},
    {Decision::kRecover, "recover"},
    {Decision::kReplay, "replay"},
    {Decision::kPendingApproval, "pending_approval"},
};
inline constexpr size_t kDecisionCount = std::size(kDecisions);
constexpr bool DecisionsInOrder() {
  for (size_t i = 0; i < kDecisionCount; ++i) {
    if (static_cast<size_t>(kDecisions[i].decision) != i) return false;
  }
  return true;
}
static_assert(DecisionsInOrder(), "kDecisions[i] must be the Decision of value i");
static_assert(kDecisions[kDecisionCount - 1].decision == Decision::kPendingApproval,
              "kDecisions ends with the last Decision: add a new one to both, and here");

// retain_until_ms of a record that must never expire (a started action and
// the intents that point at it).
inline constexpr int64_t kRetainForever = std::numeric_limits<int64_t>::max();

// a + b, clamped to the int64 range (deadlines far in the future must not wrap).
int64_t SaturatingAdd(int64_t a, int64_t b);

// Retention deadline of an action in `status` changed at now_ms: forever
// while started, else now_ms + retention_ms.
int64_t ActionRetainUntil(ActionStatus status, int64_t now_ms, int64_t retention_ms);

// A record whose retention deadline has passed reads as absent.
inline bool RetentionExpired(int64_t retain_until_ms, int64_t now_ms) {
  return retain_until_ms <= now_ms;
}

// The day of an allowance counter (store.h, Allowance): days since the Unix
// epoch of the calendar in Brazil time, UTC-03:00 all year (Brazil has kept
// no daylight saving time since 2019). Day 0 began 1970-01-01T03:00:00Z.
inline constexpr int64_t kBrazilOffsetMs = -3 * 3600 * 1000;
inline constexpr int64_t kDayMs = 86400 * 1000;
inline int64_t CounterDay(int64_t now_ms) {
  const int64_t local = now_ms + kBrazilOffsetMs;
  return local >= 0 ? local / kDayMs : -((-local + kDayMs - 1) / kDayMs);
}
// A counter of `day` is kept until retention_ms after the day's end.
inline int64_t CounterRetainUntil(int64_t day, int64_t retention_ms) {
  return SaturatingAdd((day + 1) * kDayMs - kBrazilOffsetMs, retention_ms);
}
// Whether counting `amount` once more on a counter holding (total, count)
// stays within `allowance`'s maxima.
inline bool WithinAllowance(const Allowance& allowance, int64_t total, int64_t count) {
  return (allowance.max_count == 0 || count < allowance.max_count) &&
         (allowance.max_total == 0 || (allowance.amount <= allowance.max_total &&
                                       total <= allowance.max_total - allowance.amount));
}

// Whether an intent is live at now_ms. An intent is kept retention_ms after
// its own last write (freeze, begin, amend: retain_until_ms is that deadline)
// and, past it, as long as the action of its key lives (forever while
// started, retention after its last change) if that action was created
// before the deadline: an action created later, for another intent with the
// same key, does not bring an expired intent back. `action`: the live action
// of the intent's key, nullptr when there is none. So finishing an action
// never rewrites its intent. (Format 2 stores wrote kRetainForever on the
// intent of a started action and moved it when the action changed; such an
// intent follows its action only.)
bool IntentLive(int64_t retain_until_ms, const Action* action, int64_t now_ms);
// Whether `action` (live) keeps an intent whose own deadline is
// retain_until_ms: it was created before that deadline.
inline bool ActionKeepsIntent(int64_t retain_until_ms, const Action& action) {
  return action.created_at_ms < retain_until_ms;
}

// The PostgreSQL backend's intent retention (the RocksDB store uses
// IntentLive, above): the intent's row carries the deadline of the action it
// points at, forever while the action is started, else retention after the
// action's last change.
// Returns the intent's new retain_until_ms, or nullopt when `current_ms`
// (its stored one) is right. `action_changed`: the action was just written
// (the deadline moves to now + retention); otherwise only a mismatch with the
// action's state is repaired (a finite deadline on an intent of a started
// action, or "forever" left on an intent of a finished one).
std::optional<int64_t> IntentRetainAfter(int64_t current_ms, ActionStatus action_status,
                                         bool action_changed, int64_t now_ms, int64_t retention_ms);

// The kNotFound answers every store gives, one wording for both (a client
// or a test matching the text sees the same on RocksDB and PostgreSQL).
inline Status NoSuchAction() { return Status::NotFound("no action for this tenant and key"); }
inline Status NoSuchIntent() { return Status::NotFound("no such intent"); }
inline Status NoSuchMessage() { return Status::NotFound("no record of this message"); }

// The lease of a started action is live while now < lease_until_ms.
inline bool LeaseLive(const Action& action, int64_t now_ms) {
  return now_ms < action.lease_until_ms;
}

// Whether the call may go on with the stored intent (nullptr: absent), as
// IntentCandidate says: kConflict when the caller expected another key or
// required the candidate's payload; kNotFound when the intent is absent and
// the request carries no candidate to write; kInvalidArgument when the
// candidate to write has an empty key.
Status CheckIntentCandidate(const Intent* stored, const IntentCandidate& request);

// The intent a request creates when the check passed on an absent intent.
Intent NewIntent(const IntentCandidate& request, int64_t now_ms);
// The approval an intent written from `request` starts with: pending with
// its approval_reason, or none (a new intent, and an amend, which sets it
// afresh).
Approval RequestedApproval(const IntentCandidate& request);

struct BeginStep {
  Decision decision = Decision::kExecute;
  bool write = false;                // the action record changes (execute, recover)
  Action action;                     // the record after the step
  int64_t previous_lease_token = 0;  // kRecover
  int64_t retry_after_ms = 0;        // kInFlight: lease_until_ms - now > 0
};

// A begin's answer: the intent (`created`: this call wrote it) and the
// step taken on its action.
void SetBeginResult(bool created, Intent intent, BeginStep step, BeginResult* result);

// The begin decision for the action of `intent` (current: its record, or
// nullopt when absent). A new action takes its identity from the intent.
// An intent whose approval is pending gets kPendingApproval, nothing written.
//   none, released       -> execute (token+1, attempt+1, lease now+lease_ms)
//   started, lease live  -> in_flight
//   started, expired     -> recover (token+1, attempt+1, previous token)
//   completed, failed    -> replay
BeginStep DecideBegin(const std::optional<Action>& current, const Intent& intent, int64_t lease_ms,
                      int64_t now_ms);

enum class FinishKind {
  kComplete,  // -> completed, stores `response`
  kFail,      // non-retriable -> failed, stores `error`
  kRelease,   // retriable fail -> released, stores `error`
  kRenew,     // lease_until = now + lease_ms
};

struct FinishRequest {
  FinishKind kind = FinishKind::kComplete;
  int64_t lease_token = 0;
  const std::string* payload = nullptr;  // response or error (not for renew)
  int64_t lease_ms = 0;                  // renew only
};

struct FinishStep {
  Status status;       // kOk, kLeaseLost or kInvalidState
  bool write = false;  // the record changes
  Action action;       // the record after the step (unchanged unless write)
};

// complete / fail / renew on an existing action, fenced by lease token:
//   started, token == current  -> applied (an expired, not taken over lease
//                                 is still current)
//   started, token <  current  -> kLeaseLost
//   started, token >  current  -> kInvalidState (never granted)
//   completed + complete, failed + fail, released + retriable fail with the
//   current token -> kOk, nothing changes (the first result stays)
//   any other on completed/failed/released -> kInvalidState
FinishStep DecideFinish(const Action& current, const FinishRequest& request, int64_t now_ms);

// amend is refused while the current key's action (nullopt: none) is started
// or completed, unless forced.
Status DecideAmend(const std::optional<Action>& current_key_action, bool force);

// A decision on `intent`'s pending approval (Store::DecideApproval).
// kInvalidState unless pending. *after: the intent with its approval
// decided. A denial of an intent whose key has no live action (`current`)
// also writes *failed: the action, failed with `error`.
struct ApprovalStep {
  Intent after;
  std::optional<Action> failed;
};
Status DecideApprovalStep(const Intent& intent, const std::optional<Action>& current, bool approve,
                          const std::string& by, const std::string& note, const std::string& error,
                          int64_t now_ms, ApprovalStep* step);

// The `seen` op's default ttl: the store's retention, but at least 7 days,
// the time Meta's Cloud API keeps redelivering an unacknowledged webhook.
inline constexpr int64_t kMinMessageTtlMs = 7LL * 24 * 3600 * 1000;
int64_t DefaultMessageTtlMs(int64_t retention_ms);

struct SeenStep {
  bool first = false;          // the caller processes the message
  MessageRecord record;        // the record after the step (always written)
  int64_t retry_after_ms = 0;  // a duplicate of a live claim: lease_until - now
};

// One sighting of `message` (current: its live record, nullopt when absent
// or past retention). Every sighting counts and moves the deadline to at
// least now + ttl_ms. lease_ms > 0 is a claim:
//   record              plain seen         seen with lease_ms
//   absent              first (seen)       first (processing, token 1)
//   seen, done          duplicate          duplicate
//   processing, live    duplicate          duplicate, retry_after_ms
//   processing, expired duplicate          first (token + 1, new lease)
// The meta of the first sighting stays. A claim keeps the record at least one
// lease length past the claim's end, whatever the ttl.
SeenStep DecideSeen(const std::optional<MessageRecord>& current, const SeenRequest& request,
                    const SeenRequest::Message& message, int64_t ttl_ms, int64_t now_ms);

struct MessageDoneStep {
  Status status;       // kOk, kLeaseLost or kInvalidState
  bool write = false;  // the record changes
  MessageRecord record;
};

// `done` on a live record with the caller's lease token:
//   processing, token == current -> done (an expired claim not taken over is
//                                   still the caller's)
//   processing, token <  current -> kLeaseLost (a newer claim took over)
//   processing, token >  current -> kInvalidState (never granted)
//   done, token == current       -> kOk, nothing changes
//   done under another token, a plain sighting -> kInvalidState
MessageDoneStep DecideMessageDone(const MessageRecord& current, int64_t lease_token,
                                  int64_t now_ms);

// `release` (its holder gives a claim back, e.g. after a provider's 503):
//   processing, token == current -> the claim ends now (lease_until = now):
//                                   the next claimed sighting takes the
//                                   message over at once (first, token + 1);
//                                   a repeat changes nothing
//   processing, token <  current -> kLeaseLost; token > current -> kInvalidState
//   done, a plain sighting       -> kInvalidState (nothing to give back)
MessageDoneStep DecideMessageRelease(const MessageRecord& current, int64_t lease_token,
                                     int64_t now_ms);

}  // namespace intentd::store
