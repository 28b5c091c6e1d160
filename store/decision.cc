#include "store/decision.h"

#include <algorithm>
#include <functional>
#include <string_view>

namespace intentd::store {
namespace {

std::string TokenText(int64_t token) { return std::to_string(token); }

bool IsRepeatOfCompletion(const Action& current, const FinishRequest& request) {
  if (request.lease_token != current.lease_token) return false;
  switch (current.status) {
    case ActionStatus::kCompleted:
      return request.kind == FinishKind::kComplete;
    case ActionStatus::kFailed:
      return request.kind == FinishKind::kFail;
    case ActionStatus::kReleased:
      return request.kind == FinishKind::kRelease;
    case ActionStatus::kStarted:
      return false;
  }
  return false;
}

}  // namespace

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

int64_t ActionRetainUntil(ActionStatus status, int64_t now_ms, int64_t retention_ms) {
  if (status == ActionStatus::kStarted) return kRetainForever;
  return SaturatingAdd(now_ms, retention_ms);
}

bool IntentLive(int64_t retain_until_ms, const Action* action, int64_t now_ms) {
  if (retain_until_ms != kRetainForever && !RetentionExpired(retain_until_ms, now_ms)) return true;
  return action != nullptr && ActionKeepsIntent(retain_until_ms, *action);
}

std::optional<int64_t> IntentRetainAfter(int64_t current_ms, ActionStatus action_status,
                                         bool action_changed, int64_t now_ms,
                                         int64_t retention_ms) {
  const int64_t target = ActionRetainUntil(action_status, now_ms, retention_ms);
  if (action_changed) {
    if (target == current_ms) return std::nullopt;
    return target;
  }
  if (action_status == ActionStatus::kStarted) {
    if (current_ms == kRetainForever) return std::nullopt;
    return kRetainForever;
  }
  if (current_ms == kRetainForever) return target;
  return std::nullopt;
}

Status CheckIntentCandidate(const Intent* stored, const IntentCandidate& request) {
  if (!stored) {
    if (request.expected_key) {
      return Status::Conflict("the intent is no longer stored (expected key " +
                              *request.expected_key + "); read it again");
    }
    if (!request.candidate) return Status::NotFound("no such intent and no payload to freeze");
    if (request.candidate->key.empty()) {
      return Status::InvalidArgument("the intent to freeze has an empty key");
    }
    return Status::Ok();
  }
  if (request.expected_key) {
    if (*request.expected_key != stored->key) {
      return Status::Conflict("the intent's key is now " + stored->key + ", not " +
                              *request.expected_key + "; read it again");
    }
    return Status::Ok();
  }
  if (request.require_same_payload && !SameFrozenPayload(*stored, request)) {
    return Status::Conflict("the frozen payload (key " + stored->key +
                            ") is not the candidate's; compare them field by field");
  }
  return Status::Ok();
}

bool SameFrozenPayload(const Intent& stored, const IntentCandidate& request) {
  return request.candidate && request.candidate->rules_version == stored.rules_version &&
         request.candidate->payload == stored.payload;
}

void SetBeginResult(bool created, Intent intent, BeginStep step, BeginResult* result) {
  result->created = created;
  result->intent = std::move(intent);
  result->decision = step.decision;
  result->action = std::move(step.action);
  result->previous_lease_token = step.previous_lease_token;
  result->retry_after_ms = step.retry_after_ms;
}

Intent NewIntent(const IntentCandidate& request, int64_t now_ms) {
  Intent intent;
  intent.tenant_id = request.tenant_id;
  intent.intent_ref = request.intent_ref;
  intent.action_type = request.action_type;
  intent.payload = request.candidate->payload;
  intent.key = request.candidate->key;
  intent.rules_version = request.candidate->rules_version;
  intent.key_id = request.candidate->key_id;
  intent.input = request.candidate->input;
  intent.created_at_ms = now_ms;
  intent.updated_at_ms = now_ms;
  intent.approval = RequestedApproval(request);
  return intent;
}

Approval RequestedApproval(const IntentCandidate& request) {
  Approval a;
  if (!request.approval_reason.empty()) {
    a.state = ApprovalState::kPending;
    a.reason = request.approval_reason;
  }
  return a;
}

BeginStep DecideBegin(const std::optional<Action>& current, const Intent& intent, int64_t lease_ms,
                      int64_t now_ms) {
  BeginStep step;
  if (intent.approval.state == ApprovalState::kPending) {
    // Nothing is granted before a person decides (a redelivery included).
    step.decision = Decision::kPendingApproval;
    if (current) step.action = *current;
    return step;
  }
  if (intent.approval.state == ApprovalState::kDenied &&
      (!current || current->status == ActionStatus::kReleased ||
       current->status == ActionStatus::kStarted)) {
    // A denial leaves the key's action terminal (DecideApprovalStep); should
    // that record be gone, a denied intent still never executes.
    step.decision = Decision::kPendingApproval;
    if (current) step.action = *current;
    return step;
  }
  if (!current || current->status == ActionStatus::kReleased) {
    Action action;
    if (current) {
      action = *current;
    } else {
      action.tenant_id = intent.tenant_id;
      action.key = intent.key;
      action.action_type = intent.action_type;
      action.intent_ref = intent.intent_ref;
      action.created_at_ms = now_ms;
    }
    action.status = ActionStatus::kStarted;
    action.attempt += 1;
    action.lease_token += 1;
    action.lease_until_ms = SaturatingAdd(now_ms, lease_ms);
    action.response.clear();
    action.error.clear();
    action.updated_at_ms = now_ms;
    step.decision = Decision::kExecute;
    step.write = true;
    step.action = std::move(action);
    return step;
  }
  step.action = *current;
  switch (current->status) {
    case ActionStatus::kStarted:
      if (LeaseLive(*current, now_ms)) {
        step.decision = Decision::kInFlight;
        step.retry_after_ms = current->lease_until_ms - now_ms;
      } else {
        step.decision = Decision::kRecover;
        step.write = true;
        step.previous_lease_token = current->lease_token;
        step.action.attempt += 1;
        step.action.lease_token += 1;
        step.action.lease_until_ms = SaturatingAdd(now_ms, lease_ms);
        step.action.updated_at_ms = now_ms;
      }
      break;
    case ActionStatus::kCompleted:
    case ActionStatus::kFailed:
    case ActionStatus::kReleased:  // handled above
      step.decision = Decision::kReplay;
      break;
  }
  return step;
}

FinishStep DecideFinish(const Action& current, const FinishRequest& request, int64_t now_ms) {
  FinishStep step;
  step.action = current;
  if (current.status != ActionStatus::kStarted) {
    if (!IsRepeatOfCompletion(current, request)) {
      step.status =
          Status::InvalidState(std::string("the action is ") + ActionStatusName(current.status) +
                               " (lease token " + TokenText(current.lease_token) + ")");
    }
    return step;
  }
  if (request.lease_token < current.lease_token) {
    step.status = Status::LeaseLost("lease token " + TokenText(request.lease_token) +
                                    " was taken over; the current token is " +
                                    TokenText(current.lease_token));
    return step;
  }
  if (request.lease_token > current.lease_token) {
    step.status = Status::InvalidState("lease token " + TokenText(request.lease_token) +
                                       " was never granted; the current token is " +
                                       TokenText(current.lease_token));
    return step;
  }
  Action& next = step.action;
  switch (request.kind) {
    case FinishKind::kComplete:
      next.status = ActionStatus::kCompleted;
      next.response = *request.payload;
      next.error.clear();
      break;
    case FinishKind::kFail:
      next.status = ActionStatus::kFailed;
      next.error = *request.payload;
      break;
    case FinishKind::kRelease:
      next.status = ActionStatus::kReleased;
      next.error = *request.payload;
      break;
    case FinishKind::kRenew:
      next.lease_until_ms = SaturatingAdd(now_ms, request.lease_ms);
      break;
  }
  next.updated_at_ms = now_ms;
  step.write = true;
  return step;
}

Status DecideAmend(const std::optional<Action>& current_key_action, bool force) {
  if (force || !current_key_action) return Status::Ok();
  const ActionStatus status = current_key_action->status;
  if (status == ActionStatus::kStarted || status == ActionStatus::kCompleted) {
    return Status::InvalidState(std::string("the current key's action is ") +
                                ActionStatusName(status) + "; amend needs force");
  }
  return Status::Ok();
}

int64_t DefaultMessageTtlMs(int64_t retention_ms) {
  return std::max(retention_ms, kMinMessageTtlMs);
}

namespace {

// A claimed record is kept one more lease length past its claim's end, however
// short its ttl: while the claim lives and a while after, its holder's done
// meets its own claim, or lease_lost after a takeover; never a later claim
// that a new first sighting restarted at token 1.
void KeepThroughClaim(MessageRecord* r, int64_t lease_ms) {
  r->retain_until_ms = std::max(r->retain_until_ms, SaturatingAdd(r->lease_until_ms, lease_ms));
}

}  // namespace

SeenStep DecideSeen(const std::optional<MessageRecord>& current, const SeenRequest& request,
                    const SeenRequest::Message& message, int64_t ttl_ms, int64_t now_ms) {
  SeenStep step;
  const int64_t deadline = SaturatingAdd(now_ms, ttl_ms);
  if (!current) {
    step.first = true;
    MessageRecord& r = step.record;
    r.tenant_id = request.tenant_id;
    r.channel = request.channel;
    r.message_id = message.message_id;
    r.meta = message.meta;
    r.count = 1;
    r.first_seen_at_ms = now_ms;
    r.last_seen_at_ms = now_ms;
    r.retain_until_ms = deadline;
    if (request.lease_ms > 0) {
      r.state = MessageState::kProcessing;
      r.lease_token = 1;
      r.lease_until_ms = SaturatingAdd(now_ms, request.lease_ms);
      KeepThroughClaim(&r, request.lease_ms);
    }
    return step;
  }
  MessageRecord& r = step.record = *current;
  r.count = SaturatingAdd(r.count, 1);
  r.last_seen_at_ms = now_ms;
  r.retain_until_ms = std::max(r.retain_until_ms, deadline);
  if (request.lease_ms > 0 && r.state == MessageState::kProcessing) {
    if (now_ms < r.lease_until_ms) {
      step.retry_after_ms = r.lease_until_ms - now_ms;
    } else {  // its processor died: the claim is taken over
      step.first = true;
      r.lease_token += 1;
      r.lease_until_ms = SaturatingAdd(now_ms, request.lease_ms);
      KeepThroughClaim(&r, request.lease_ms);
    }
  }
  return step;
}

namespace {

// done and release: the claim's fencing, then `end` on the caller's claim.
MessageDoneStep EndClaim(const MessageRecord& current, int64_t lease_token, const char* what,
                         const std::function<bool(MessageRecord*)>& end) {
  MessageDoneStep step;
  step.record = current;
  const std::string token = TokenText(lease_token);
  const std::string holder = TokenText(current.lease_token);
  switch (current.state) {
    case MessageState::kSeen:
      step.status = Status::InvalidState(
          std::string("the message was seen without a claim (no lease_ms), so there is nothing "
                      "to ") +
          what);
      break;
    case MessageState::kDone:
      if (lease_token != current.lease_token) {
        step.status = Status::InvalidState("the message is done under lease token " + holder +
                                           ", not " + token);
      } else if (std::string_view(what) != "mark done") {
        step.status = Status::InvalidState("the message is done: its claim cannot be given back");
      }
      break;
    case MessageState::kProcessing:
      if (lease_token < current.lease_token) {
        step.status =
            Status::LeaseLost("a newer claim (lease token " + holder + ") took the message over");
      } else if (lease_token > current.lease_token) {
        step.status = Status::InvalidState(
            "lease token " + token + " was never granted (the current one is " + holder + ")");
      } else {
        step.write = end(&step.record);
      }
      break;
  }
  return step;
}

}  // namespace

MessageDoneStep DecideMessageDone(const MessageRecord& current, int64_t lease_token,
                                  int64_t /*now_ms*/) {
  return EndClaim(current, lease_token, "mark done", [](MessageRecord* r) {
    r->state = MessageState::kDone;
    return true;
  });
}

MessageDoneStep DecideMessageRelease(const MessageRecord& current, int64_t lease_token,
                                     int64_t now_ms) {
  return EndClaim(current, lease_token, "release", [now_ms](MessageRecord* r) {
    if (r->lease_until_ms <= now_ms) return false;  // over already
    r->lease_until_ms = now_ms;
    return true;
  });
}

const char* MessageStateName(MessageState state) {
  switch (state) {
    case MessageState::kSeen:
      return "seen";
    case MessageState::kProcessing:
      return "processing";
    case MessageState::kDone:
      return "done";
  }
  return "unknown";
}

const char* ActionStatusName(ActionStatus status) {
  switch (status) {
    case ActionStatus::kStarted:
      return "started";
    case ActionStatus::kCompleted:
      return "completed";
    case ActionStatus::kFailed:
      return "failed";
    case ActionStatus::kReleased:
      return "released";
  }
  return "unknown";
}

Status DecideApprovalStep(const Intent& intent, const std::optional<Action>& current, bool approve,
                          const std::string& by, const std::string& note, const std::string& error,
                          int64_t now_ms, ApprovalStep* step) {
  if (intent.approval.state != ApprovalState::kPending) {
    return Status::InvalidState(std::string("the intent's approval is ") +
                                ApprovalStateName(intent.approval.state) + ", not pending");
  }
  step->after = intent;
  step->after.approval.state = approve ? ApprovalState::kApproved : ApprovalState::kDenied;
  step->after.approval.decided_by = by;
  step->after.approval.note = note;
  step->after.approval.decided_at_ms = now_ms;
  step->failed.reset();
  if (!approve && current && current->status == ActionStatus::kStarted) {
    return Status::InvalidState(
        "the intent's key has an action in flight (another intent with the same payload); deny "
        "it once that action has ended");
  }
  if (!approve && (!current || current->status == ActionStatus::kReleased)) {
    Action a;
    if (current) {
      a = *current;
    } else {
      a.tenant_id = intent.tenant_id;
      a.key = intent.key;
      a.action_type = intent.action_type;
      a.intent_ref = intent.intent_ref;
      a.created_at_ms = now_ms;
    }
    a.status = ActionStatus::kFailed;
    a.error = error;
    a.updated_at_ms = now_ms;
    step->failed = std::move(a);
  }
  return Status::Ok();
}

const char* ApprovalStateName(ApprovalState state) {
  switch (state) {
    case ApprovalState::kNone:
      return "none";
    case ApprovalState::kPending:
      return "pending";
    case ApprovalState::kApproved:
      return "approved";
    case ApprovalState::kDenied:
      return "denied";
  }
  return "unknown";
}

const char* DecisionName(Decision decision) {
  const auto i = static_cast<size_t>(decision);
  return i < kDecisionCount ? kDecisions[i].name : "unknown";
}

}  // namespace intentd::store
