// The store: intents and actions, each protocol operation one atomic step.
//
// Keys, payloads, responses and errors are opaque bytes to the store (the
// agent passes compact JSON text). Every read and write is scoped by tenant.
// Thread safety: a Store is safe to use from many threads at once.
//
// Errors common to every call: kStorageError when a write could not be made
// durable (nothing was granted or acknowledged, and the write never takes
// effect: a later read or replay does not find it) or a read failed;
// kCorruption when a record cannot be decoded. Records past their retention
// read as absent.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/admin.h"
#include "store/clock.h"
#include "store/status.h"

namespace intentd::store {

enum class ActionStatus { kStarted, kCompleted, kFailed, kReleased };
const char* ActionStatusName(ActionStatus status);  // "started", "completed", ...

// An intent that the policy holds for a person's decision before any attempt
// (the policy at freeze's approval threshold): pending from its freeze until
// approved (then begin grants as usual) or denied (then its action is failed,
// terminal). kNone for every other intent.
enum class ApprovalState { kNone, kPending, kApproved, kDenied };
const char* ApprovalStateName(ApprovalState state);  // "none", "pending", ...

struct Approval {
  ApprovalState state = ApprovalState::kNone;
  std::string reason;      // why it waits (opaque; the agent's words at freeze)
  std::string decided_by;  // approved or denied: who (opaque; the agent names the peer)
  std::string note;        // the decider's note, "" when none
  int64_t decided_at_ms = 0;
};

struct Intent {
  std::string tenant_id;
  std::string intent_ref;
  std::string action_type;
  std::string payload;  // frozen normalized payload (opaque; compact JSON object)
  std::string key;      // idempotency key derived from payload
  int rules_version = 0;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;  // changes only on amend
  // The id of the keyring secret the key was derived with (common/keyring.h).
  // Records written before keyrings existed read as "0".
  std::string key_id = "0";
  // The payload as the caller sent it when the intent was frozen (or last
  // amended): every member, key fields or not (opaque; compact JSON object),
  // so that every later attempt acts on the first extraction in full. ""
  // for intents frozen before it was kept.
  std::string input;
  Approval approval;
};

struct Action {
  std::string tenant_id;
  std::string key;
  std::string action_type;
  std::string intent_ref;
  ActionStatus status = ActionStatus::kStarted;
  int64_t attempt = 0;      // number of grants (execute or recover)
  int64_t lease_token = 0;  // 1 at the first grant, +1 at each grant
  int64_t lease_until_ms = 0;
  std::string response;  // completed: the stored response (opaque JSON)
  std::string error;     // failed, or released by a retriable fail: the error
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
};

// kPendingApproval: the intent waits for a person's approval (Approval);
// nothing was granted.
enum class Decision { kExecute, kInFlight, kRecover, kReplay, kPendingApproval };
const char* DecisionName(Decision decision);  // "execute", "in_flight", ...

// A daily allowance that freezing an intent draws on (the policy at freeze,
// common/policy.h). The store keeps one counter per (tenant, name, day): the
// total of the amounts and the count of the intents counted on that day, the
// calendar day in Brazil time (UTC-03:00, CounterDay) of the write. The call
// that writes an intent's payload (a new intent, an amend) adds `amount` and
// one to each of its allowances' counters in the same atomic write, after
// checking under the counters' locks that neither maximum would be passed:
// so concurrent calls never pass a maximum, and a refused call writes
// nothing at all (kRefused). Nothing is ever given back: a counter holds
// what was frozen that day, whatever became of the actions. Counters are
// kept `retention` past their day's end.
struct Allowance {
  std::string name;       // the counter within the tenant (opaque bytes, not empty)
  int64_t amount = 0;     // added to the total, >= 0
  int64_t max_total = 0;  // the day's total may not pass it; 0: no maximum
  int64_t max_count = 0;  // nor the day's count; 0: no maximum
};

// Why a call answered kRefused: allowances[index] would have been passed.
// total and count are the counter's before this call.
struct AllowanceRefusal {
  size_t index = 0;
  int64_t total = 0;
  int64_t count = 0;
};

// A counter as stored (admin listings and tests).
struct Counter {
  std::string tenant_id;
  std::string name;
  int64_t day = 0;  // CounterDay
  int64_t total = 0;
  int64_t count = 0;
};

// What a freeze, begin or amend asks of one intent, decided by the store in
// one call under its own locks, so that a redelivery is one step:
//  - absent: the candidate is written (kNotFound when there is none), with
//    its allowances counted;
//  - present: the call acts on the intent as frozen (a redelivery reads it
//    back; the candidate is ignored), unless
//      expected_key is set and the intent's key is another, or
//      require_same_payload is set, expected_key is not, and the frozen
//      payload is not the candidate's (SameFrozenPayload, decision.h);
//    then the call answers kConflict and writes nothing.
// On kConflict the result's `intent` is the intent as stored (key "" when
// it is absent): the caller compares the new payload with it field by field
// and, to act on it after all, comes back with expected_key set to its key.
struct IntentCandidate {
  std::string tenant_id;
  std::string intent_ref;
  std::string action_type;
  // Set: the intent must be present with this key (the one the caller
  // compared against); absent, or another key: kConflict.
  std::optional<std::string> expected_key;
  // Written when the intent is absent (required then; ignored otherwise).
  // Only payload, key, rules_version, key_id and input are read from it.
  std::optional<Intent> candidate;
  // Counted when this call writes the candidate (Allowance); ignored when it
  // finds the intent frozen already.
  std::vector<Allowance> allowances;
  // Not empty: the candidate, when written, waits for approval (kPending,
  // with this reason). An amend sets the approval afresh from it: pending
  // again, or none.
  std::string approval_reason;
  // begin's on_divergence "reject": act on a frozen intent only when its
  // payload is the candidate's, byte for byte (see above).
  bool require_same_payload = false;
};

// Whether the frozen intent holds the request's candidate payload byte for
// byte under the same rules version: then no listed field diverged, and the
// caller need not normalize the new payload again under the intent's rules.
bool SameFrozenPayload(const Intent& stored, const IntentCandidate& request);

struct FreezeResult {
  bool created = false;
  Intent intent;             // the stored (frozen) intent
  AllowanceRefusal refusal;  // kRefused: the allowance refused
};

struct BeginResult {
  bool created = false;  // this call wrote the intent
  Intent intent;
  Decision decision = Decision::kExecute;
  Action action;                     // the action record after the call
  int64_t previous_lease_token = 0;  // kRecover: the token that expired
  int64_t retry_after_ms = 0;        // kInFlight: lease_until_ms - now (>= 0)
  AllowanceRefusal refusal;          // kRefused: the allowance refused
};

struct LookupResult {
  Intent intent;
  std::optional<Action> action;  // nullopt when the intent has no action yet
};

struct AmendResult {
  std::string previous_key;
  Intent intent;             // after the amendment
  AllowanceRefusal refusal;  // kRefused: the allowance refused
};

// An inbound message sighting (the `seen` op): one record per (tenant_id,
// channel, message_id), kept until `retain_until_ms`, which every sighting
// moves to at least now + its ttl.
enum class MessageState { kSeen, kProcessing, kDone };
const char* MessageStateName(MessageState state);  // "seen", "processing", "done"

struct MessageRecord {
  std::string tenant_id;
  std::string channel;
  std::string message_id;
  MessageState state = MessageState::kSeen;
  std::string meta;   // the first sighting's (opaque compact JSON); "" when none
  int64_t count = 0;  // sightings, the first included
  int64_t first_seen_at_ms = 0;
  int64_t last_seen_at_ms = 0;
  int64_t retain_until_ms = 0;
  // The claim (kProcessing, kDone): 1 at the first claim, +1 at each takeover
  // of an expired one; 0 for a plain sighting.
  int64_t lease_token = 0;
  int64_t lease_until_ms = 0;
};

struct SeenRequest {
  std::string tenant_id;
  std::string channel;
  struct Message {
    std::string message_id;
    std::string meta;  // "" when none
  };
  std::vector<Message> messages;  // answered in this order; ids may repeat
  // Kept at least this long after each sighting; 0: the store's default
  // (DefaultMessageTtlMs of its retention). Already validated when positive.
  int64_t ttl_ms = 0;
  // > 0: the claim variant (DecideSeen, decision.h).
  int64_t lease_ms = 0;
};

struct SeenAnswer {
  bool first = false;
  MessageRecord record;        // after the call
  int64_t retry_after_ms = 0;  // a duplicate of a live claim: until it expires
};

class Store {
 public:
  virtual ~Store() = default;

  // Writes the intent if absent, else reads it back (IntentCandidate).
  // kNotFound: absent and no candidate given. kInvalidArgument: candidate
  // with empty key.
  virtual Status Freeze(const IntentCandidate& request, FreezeResult* result) = 0;

  // Writes the intent if absent (IntentCandidate) and takes the begin
  // decision of the protocol on the intent as stored, in one atomic step.
  // `lease_ms` is already validated.
  // kNotFound when the intent is absent and no candidate was given;
  // kInvalidArgument when lease_ms <= 0.
  virtual Status Begin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result) = 0;

  // complete / fail / renew with the caller's lease token.
  // kNotFound: no such action. kLeaseLost: a lower token on a started action.
  // kInvalidState: any token on a terminal or released action, other than the
  // repeat of the same completion (which returns kOk and changes nothing),
  // and a token higher than the current one (never granted). A lease that
  // expired and was not taken over is still current.
  // *action is the record after the call (also on kLeaseLost/kInvalidState).
  // Renew: lease_until_ms = now + lease_ms (kInvalidArgument when <= 0).
  virtual Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                          const std::string& response, Action* action) = 0;
  // retriable: the action becomes kReleased (the next begin executes), else kFailed.
  virtual Status Fail(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                      const std::string& error, bool retriable, Action* action) = 0;
  virtual Status Renew(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                       int64_t lease_ms, Action* action) = 0;

  // kNotFound when absent (or expired by retention).
  virtual Status GetAction(const std::string& tenant_id, const std::string& key,
                           Action* action) = 0;
  virtual Status Lookup(const std::string& tenant_id, const std::string& intent_ref,
                        const std::string& action_type, LookupResult* result) = 0;

  // Replaces the frozen payload and key of an existing intent (candidate
  // required; expected_key, when set, the key the caller read). kNotFound: no
  // intent. kInvalidState: the current key's action is started or completed
  // and !force. kConflict: see IntentCandidate. kInvalidArgument: no
  // candidate, or one with an empty key. The old action stays.
  virtual Status Amend(const IntentCandidate& request, bool force, AmendResult* result) = 0;

  // Decides an intent's pending approval. Approved: begin grants as usual
  // from then on. Denied: the action of the intent's key is written failed
  // with `error` (terminal; every begin replays it), unless that key already
  // has a live action. `by` and `note` are kept with the intent.
  // kNotFound: no intent. kInvalidState: its approval is not pending.
  // *result: the intent and its action after the call.
  virtual Status DecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                                const std::string& action_type, bool approve, const std::string& by,
                                const std::string& note, const std::string& error,
                                LookupResult* result) = 0;
  // Intents whose approval is pending, for one tenant or (nullopt) every
  // tenant, oldest first (by created_at_ms); at most `limit`.
  virtual Status PendingApprovals(const std::optional<std::string>& tenant_id, size_t limit,
                                  std::vector<Intent>* intents) = 0;

  // Started actions whose lease expired, ordered by lease_until_ms (oldest
  // first), for one tenant or (tenant nullopt) every tenant. At most `limit`.
  virtual Status Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                           std::vector<Action>* actions) = 0;

  // Records sightings of inbound messages in one atomic step (put-if-absent
  // per message, DecideSeen), durable like every write: answers[i] for
  // request.messages[i]. kInvalidArgument: no messages, or ttl_ms/lease_ms
  // negative.
  virtual Status Seen(const SeenRequest& request, std::vector<SeenAnswer>* answers) = 0;
  // Marks a claimed message done (DecideMessageDone). kNotFound: no live
  // record. kLeaseLost / kInvalidState as DecideMessageDone says. *record is
  // the record after the call (also on kLeaseLost/kInvalidState).
  virtual Status MessageDone(const std::string& tenant_id, const std::string& channel,
                             const std::string& message_id, int64_t lease_token,
                             MessageRecord* record) = 0;
  // Gives a claim back (DecideMessageRelease): the next claimed sighting
  // takes the message over at once. Errors as MessageDone.
  virtual Status ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                                const std::string& message_id, int64_t lease_token,
                                MessageRecord* record) = 0;
  // Drops a message's record; *forgotten: a live one was there.
  virtual Status ForgetMessage(const std::string& tenant_id, const std::string& channel,
                               const std::string& message_id, bool* forgotten) = 0;

  // The keyring ids that may key live intents: each id the agent derived
  // new intents with (registered at its start) or an import wrote. An id
  // leaves the list only by UnregisterKeyId. Stores from before keyrings
  // list "0" when they hold intents.
  virtual Status RegisterKeyId(const std::string& key_id) = 0;
  virtual Status RegisteredKeyIds(std::vector<std::string>* key_ids) = 0;
  virtual Status UnregisterKeyId(const std::string& key_id) = 0;
  // Counts the live intents of each key id (a scan of every intent: for
  // admin tools and for a start whose keyring lost a registered id).
  // `only`: just these ids (empty: every id). Ids without live intents are
  // not listed; `tenants` holds up to kUsageTenants of each id's tenants.
  static constexpr size_t kUsageTenants = 20;
  struct KeyIdUsage {
    std::string key_id;
    uint64_t live_intents = 0;
    std::vector<std::string> tenants;  // sorted
    uint64_t tenant_count = 0;
  };
  virtual Status CountKeyIdUsage(const std::vector<std::string>& only,
                                 std::vector<KeyIdUsage>* usage) = 0;

  // The tenant's counters of `day` (CounterDay), in name order; none when
  // nothing was counted that day or the day is past retention.
  virtual Status DayCounters(const std::string& tenant_id, int64_t day,
                             std::vector<Counter>* counters) = 0;

  // Deferred durability: group commit done by the caller, so that no thread
  // blocks on the disk per request. A store opened with deferred sync
  // (RocksOptions::defer_sync) returns from an operation once its writes are
  // made, before they are durable. The caller then must not reveal anything
  // about the result until the ticket taken right after the operation is
  // durable:
  //   s = store->Begin(...);  ticket = store->DurabilityTicket();
  //   store->WhenDurable(ticket, [](const Status& d) { reply if d.ok(), else
  //                                                     storage_error });
  // A ticket covers every write the operation made and every write it may
  // have read. 0: nothing to wait for (stores that sync in each operation,
  // or everything already durable).
  virtual uint64_t DurabilityTicket() { return 0; }
  // Calls done(Ok) once everything up to `ticket` is durable, or
  // done(kStorageError) when it could not be made durable (then nothing must
  // be granted: the caller answers storage_error). Called inline when
  // already durable, else from the store's sync thread: `done` must be quick
  // and must not call into the store. Every registered `done` is called
  // before the store is destroyed.
  virtual void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) {
    (void)ticket;
    done(Status::Ok());
  }
  // The verdict on a ticket, without waiting: pending, durable, or lost
  // (what WhenDurable answers kStorageError). A verdict never changes once
  // reached; a ticket is judged alone (an earlier ticket may be lost while a
  // later one is durable: its write went to a store generation that
  // replaced a failed one).
  enum class TicketState { kPending, kDurable, kLost };
  virtual TicketState CheckTicket(uint64_t ticket) {
    (void)ticket;
    return TicketState::kDurable;
  }

  // ---- Writes without a waiting thread (optional) ----
  // A store whose writes wait on the network (PostgreSQL) may take the
  // commonest begin (a new intent, no allowances, no approval) and complete
  // (a started action under the caller's token) without a thread blocked
  // per request: the caller (the agent's io thread) starts the write, and
  // `done` is called once, when it ran, from the store's own thread:
  //   done(status, rest): `rest` set: not this path's case (a redelivered
  //   intent, an action in another state), nothing was written; call
  //   rest() on a thread that may block: it runs what Begin or Complete
  //   would, without trying this path again, and returns their status with
  //   *result or *action. Else status not Ok: the write failed, as Begin's
  //   or Complete's error; Ok: *result or *action holds what Begin or
  //   Complete would have returned.
  // Returns false, without calling `done`, when the store has no such path
  // or the request is not its case: call Begin or Complete. `request` and
  // `response` are read, and *result or *action written, until `done`
  // returns or, when it got a `rest`, until `rest` returns. `done` must not
  // call into the store (it may hand `rest` to a thread that does). A store
  // calls every `done` before it is destroyed; the caller calls or drops a
  // `rest` before it destroys the store.
  using Rest = std::function<Status()>;
  using WriteDone = std::function<void(const Status& status, Rest rest)>;
  virtual bool SupportsAsyncWrites() const { return false; }
  virtual bool BeginAsync(const IntentCandidate& request, int64_t lease_ms, BeginResult* result,
                          WriteDone done) {
    (void)request, (void)lease_ms, (void)result, (void)done;
    return false;
  }
  virtual bool CompleteAsync(const std::string& tenant_id, const std::string& key,
                             int64_t lease_token, const std::string& response, Action* action,
                             WriteDone done) {
    (void)tenant_id, (void)key, (void)lease_token, (void)response, (void)action, (void)done;
    return false;
  }

  // ---- Optional features (store/admin.h) ----
  // What only some backends can do. Each default answers "not supported by
  // this store" (an absent value, or kNotSupported), so that callers use any
  // store through this interface without knowing its backend.

  // Approximate size of the store on disk (tables and log), in bytes.
  virtual std::optional<uint64_t> ApproximateSizeBytes() { return std::nullopt; }
  // Writes a consistent, openable copy of the store into `dir`, which must
  // not exist, durable when Ok; safe while the store is in use.
  // kInvalidArgument: `dir` is empty or exists.
  virtual Status Checkpoint(const std::string& dir) {
    (void)dir;
    return Status::NotSupported("online backups are not supported by this store");
  }
  // Flushes and syncs everything the store buffers (at shutdown). Ok when it
  // buffers nothing (every operation committed when it returned).
  virtual Status Flush() { return Status::Ok(); }
  // The group commit's counts, for a store that syncs its own log.
  virtual std::optional<GroupCommitCounts> CommitCounts() const { return std::nullopt; }
  // Per kind of write, for a store that batches concurrent requests' writes
  // into one statement; empty for the others.
  virtual std::vector<StatementBatchCounts> StatementBatches() const { return {}; }
  // The local file system holding the store; absent when it cannot be read.
  virtual std::optional<StoreSpace> ReadSpace() const { return std::nullopt; }
  // The store's account of its own faults.
  virtual std::optional<StoreHealth> ReadHealth() const { return std::nullopt; }
  // A store that the agents of several hosts share records the keyring id
  // they all derive new intents with: `key_id` when none is recorded yet, or
  // when `switch_to`; kConflict (naming both) when another is recorded.
  // *recorded: the id recorded before the call ("" when none).
  // kNotSupported: a store of one agent, with nothing to agree on.
  virtual Status AgreeCurrentKeyId(const std::string& key_id, bool switch_to,
                                   std::string* recorded) {
    (void)key_id, (void)switch_to, (void)recorded;
    return Status::NotSupported("this store is not shared by several agents");
  }
};

}  // namespace intentd::store
