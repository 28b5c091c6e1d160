// PostgresStore's implementation class (internal).
#pragma once

#include <compare>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "store/decision.h"
#include "store/postgres/batch.h"
#include "store/postgres/conn.h"
#include "store/postgres/postgres_store.h"

namespace intentd::store {

namespace pg {

// Checks that the database holds schema version kPostgresSchemaVersion.
// kIncompatible otherwise, saying what to do.
Status CheckSchema(Connection* conn, const std::string& redacted_url);

}  // namespace pg

// A commit (COMMIT, or an autocommit statement) that succeeded answers
// nothing but success or an error, except when its wait for a synchronous
// standby was cancelled (statement_timeout, pg_cancel_backend): committed
// here, perhaps not on the standby, so a failover may lose it. kStorageError
// then, answered like a commit whose connection was lost (and the warning
// cleared); Ok when `c` holds no warning.
Status CommitWarning(const char* what, pg::Connection* c);

class PostgresStoreImpl final : public PostgresStore {
 public:
  PostgresStoreImpl(const PostgresOptions& options);
  ~PostgresStoreImpl() override;

  Status Connect();  // first connection and schema check (Open)

  Status Freeze(const IntentCandidate& request, FreezeResult* result) override;
  Status Begin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result) override;
  Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                  const std::string& response, Action* action) override;
  bool SupportsAsyncWrites() const override { return true; }
  bool BeginAsync(const IntentCandidate& request, int64_t lease_ms, BeginResult* result,
                  WriteDone done) override;
  bool CompleteAsync(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                     const std::string& response, Action* action, WriteDone done) override;
  Status Fail(const std::string& tenant_id, const std::string& key, int64_t lease_token,
              const std::string& error, bool retriable, Action* action) override;
  Status Renew(const std::string& tenant_id, const std::string& key, int64_t lease_token,
               int64_t lease_ms, Action* action) override;
  Status GetAction(const std::string& tenant_id, const std::string& key, Action* action) override;
  Status Lookup(const std::string& tenant_id, const std::string& intent_ref,
                const std::string& action_type, LookupResult* result) override;
  Status Amend(const IntentCandidate& request, bool force, AmendResult* result) override;
  Status Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                   std::vector<Action>* actions) override;
  Status Seen(const SeenRequest& request, std::vector<SeenAnswer>* answers) override;
  Status ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                        const std::string& message_id, int64_t lease_token,
                        MessageRecord* record) override;
  Status MessageDone(const std::string& tenant_id, const std::string& channel,
                     const std::string& message_id, int64_t lease_token,
                     MessageRecord* record) override;
  // done (release false) and release, in one transaction each.
  Status EndClaim(const std::string& tenant_id, const std::string& channel,
                  const std::string& message_id, int64_t lease_token, bool release,
                  MessageRecord* record);
  Status ForgetMessage(const std::string& tenant_id, const std::string& channel,
                       const std::string& message_id, bool* forgotten) override;
  Status PurgeExpired(size_t limit, size_t* deleted) override;
  std::vector<StatementBatchCounts> StatementBatches() const override;
  Status DayCounters(const std::string& tenant_id, int64_t day,
                     std::vector<Counter>* counters) override;
  Status DecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                        const std::string& action_type, bool approve, const std::string& by,
                        const std::string& note, const std::string& error,
                        LookupResult* result) override;
  Status PendingApprovals(const std::optional<std::string>& tenant_id, size_t limit,
                          std::vector<Intent>* intents) override;
  Status RegisterKeyId(const std::string& key_id) override;
  Status RegisteredKeyIds(std::vector<std::string>* key_ids) override;
  Status UnregisterKeyId(const std::string& key_id) override;
  Status CountKeyIdUsage(const std::vector<std::string>& only,
                         std::vector<KeyIdUsage>* usage) override;
  Status AgreeCurrentKeyId(const std::string& key_id, bool switch_to,
                           std::string* recorded) override;

 private:
  // How a transaction body wants its transaction to end.
  enum class TxEnd {
    kCommit,    // commit, then return the body's status
    kRollback,  // roll back, return the body's status (a refusal or a read)
    kRetry,     // lost a race (a concurrent insert): roll back and run again
  };
  using TxBody = std::function<Status(pg::Connection& conn, TxEnd* end)>;
  using QueryBody = std::function<Status(pg::Connection& conn)>;

  // One transaction: BEGIN, body, COMMIT or ROLLBACK; retried on lost races,
  // deadlocks and lost connections before COMMIT, never after an unknown
  // COMMIT outcome. A body returns conn.Failure() as soon as a statement fails.
  Status Transact(const char* what, const TxBody& body);
  // One autocommit read, retried once on a lost connection.
  Status Query(const char* what, const QueryBody& body);
  // The common case of an operation as one autocommit statement: one round
  // trip and one commit (postgres_store.cc). `body` runs it with
  // Connection::ExecAutocommit and returns its result. *general: the
  // statement committed nothing and the caller runs the general transaction
  // instead (it was rolled back on a lock conflict, deadlock, serialization
  // failure or unique violation, or the body found its case did not apply).
  using OneTripBody = std::function<bool(pg::Connection& conn)>;
  Status OneTrip(const char* what, const OneTripBody& body, bool* general);
  // begin of a fresh intent without allowances or approval: the intent and
  // its started action in one statement.
  Status BeginFresh(const IntentCandidate& request, int64_t lease_ms, BeginResult* result,
                    bool* general);
  // Begin's general transaction: any case (Begin when the request is not
  // BeginFresh's case; BeginRedelivered when its decision writes).
  Status BeginGeneral(const IntentCandidate& request, int64_t lease_ms, BeginResult* result);
  // Begin of an intent that BeginFresh or the posted fresh begin found
  // already frozen (a redelivery): decided from one read (ReadLive) when the
  // decision writes nothing, else BeginGeneral (postgres_store.cc).
  Status BeginRedelivered(const IntentCandidate& request, int64_t lease_ms, BeginResult* result);
  // complete of a started action under the caller's token, in one statement.
  Status CompleteStarted(const std::string& tenant_id, const std::string& key,
                         const FinishRequest& request, Action* action, bool* general);

  struct StoredIntent {
    Intent intent;
    int64_t retain_until_ms = 0;
  };
  // (intent_ref, action_type): where an action's intent lives.
  struct Coords {
    std::string intent_ref;
    std::string action_type;
    bool operator==(const Coords&) const = default;
    auto operator<=>(const Coords&) const = default;
    // The intent that owns `action`.
    static Coords Of(const Action& action) { return {action.intent_ref, action.action_type}; }
  };

  // Row reads and writes inside a transaction. A read leaves nullopt when the
  // row is physically absent (expiry is the caller's decision). A database
  // error returns conn.Failure(). ReplaceIntent, SetIntentRetention and
  // UpdateAction only defer their statement (Connection::Defer): it goes out
  // with the next statement or COMMIT, which report its error.
  // The live intent at (tenant, intent_ref, action_type) and its key's live
  // action, as of one snapshot, in one autocommit statement (no locks);
  // nullopt when absent or expired at now_ms.
  Status ReadLive(const std::string& tenant_id, const std::string& intent_ref,
                  const std::string& action_type, int64_t now_ms,
                  std::optional<StoredIntent>* intent, std::optional<Action>* action);
  // The live action at (tenant, key), in one autocommit statement (no
  // locks); nullopt when absent or expired at now_ms.
  Status ReadLiveAction(const std::string& tenant_id, const std::string& key, int64_t now_ms,
                        std::optional<Action>* action);
  Status LockIntent(pg::Connection& c, const std::string& tenant, const std::string& ref,
                    const std::string& type, bool nowait, std::optional<StoredIntent>* row);
  Status ReadAction(pg::Connection& c, const std::string& tenant, const std::string& key,
                    bool exclusive, std::optional<Action>* row, int64_t* retain_until_ms);
  Status ReadActionCoords(pg::Connection& c, const std::string& tenant, const std::string& key,
                          std::optional<Coords>* out);
  Status InsertIntent(pg::Connection& c, const Intent& intent, int64_t retain_until_ms,
                      bool* inserted);
  Status ReplaceIntent(pg::Connection& c, const Intent& intent, int64_t retain_until_ms);
  Status SetIntentRetention(pg::Connection& c, const Intent& intent, int64_t retain_until_ms);
  // The message record's row, locked (messages.cc); nullopt when absent.
  Status LockMessage(pg::Connection& c, const std::string& tenant, const std::string& channel,
                     const std::string& message_id, std::optional<MessageRecord>* row);
  Status InsertAction(pg::Connection& c, const Action& action, int64_t now_ms, bool* inserted);
  // The one-statement writes (rows.cc, kBeginFresh and kCompleteStarted),
  // autocommit. False on error (see c.failed()). InsertFresh: *inserted
  // false when the intent was there (nothing written). ApplyComplete:
  // *applied, the action after the update, nullopt when it did not apply
  // (nothing written).
  bool InsertFresh(pg::Connection& c, const Intent& intent, int64_t intent_retain_ms,
                   const Action& action, int64_t action_retain_ms, bool* inserted);
  bool ApplyComplete(pg::Connection& c, const std::string& tenant, const std::string& key,
                     int64_t lease_token, const Action& next, int64_t retain_ms, int64_t now_ms,
                     std::optional<Action>* applied);

  // The one-statement writes of many requests at once (batch.h, rows.cc's
  // kBeginFreshBatch and kCompleteStartedBatch; a batch of one sends the
  // single statement). A member's outcome: `alone`, the caller runs it again
  // as a batch of one (a duplicate within the batch, or a batch the server
  // refused as a whole: nothing written);
  // else `status` (an error for every member: the batch's), then `general`
  // (nothing written for it: the general transaction decides) or the write
  // applied.
  struct Batched : pg::Batcher::Member {
    bool alone = false;
    Status status;
    bool general = false;
  };
  struct FreshBegin : Batched {
    const Intent* intent = nullptr;
    const Action* action = nullptr;
    int64_t retain_ms = 0;  // both rows'
  };
  struct StartedComplete : Batched {
    const std::string* tenant = nullptr;
    const std::string* key = nullptr;
    int64_t lease_token = 0;
    const Action* next = nullptr;
    int64_t retain_ms = 0;
    int64_t now_ms = 0;
    std::optional<Action> applied;
  };
  // The members with what they point to: a synchronous call's on its
  // stack, an asynchronous one's on the heap until its `then`.
  struct OwnFreshBegin : FreshBegin {
    Intent own_intent;
    BeginStep step;
  };
  struct OwnStartedComplete : StartedComplete {
    std::string own_tenant, own_key;
    FinishStep step;
  };
  // The begin and complete cases of one statement (Begin's and Complete's
  // first try): false when the request is not that case.
  static bool FreshCase(const IntentCandidate& request);
  bool PrepareFreshBegin(const IntentCandidate& request, int64_t lease_ms, OwnFreshBegin* m);
  bool PrepareStartedComplete(const std::string& tenant_id, const std::string& key,
                              const FinishRequest& request, OwnStartedComplete* m);
  // After its batch: runs a member left out of it alone, then its outcome
  // (*general: nothing written for it).
  Status FreshBegun(OwnFreshBegin* m, BeginResult* result, bool* general);
  Status StartedCompleted(OwnStartedComplete* m, Action* action, bool* general);
  // A member's outcome from its batch's statement (OneTrip's status and
  // `general`): a batch the server refused as a whole wrote nothing, and
  // each of its members goes alone; a single statement refused goes to the
  // general transaction.
  static void Settle(const Status& s, bool general, size_t size, Batched* m);
  void RunFreshBegins(const std::vector<pg::Batcher::Member*>& batch);
  void RunStartedCompletes(const std::vector<pg::Batcher::Member*>& batch);
  // Sends the batch's statement; false on error (see c.failed()). Sets each
  // member's `general` (InsertFreshBatch: its intent was there) or
  // `applied`.
  bool InsertFreshBatch(pg::Connection& c, const std::vector<FreshBegin*>& batch);
  bool ApplyCompleteBatch(pg::Connection& c, const std::vector<StartedComplete*>& batch);
  Status UpdateAction(pg::Connection& c, const Action& action, int64_t now_ms);
  // Counts request.allowances (store.h, Allowance) on now_ms's day, in the
  // caller's transaction; kRefused with *refusal when one would be passed
  // (the caller rolls back).
  Status CountAllowances(pg::Connection& c, const IntentCandidate& request, int64_t now_ms,
                         AllowanceRefusal* refusal);

  Status Finish(const std::string& tenant_id, const std::string& key, const FinishRequest& request,
                Action* action);
  // A complete its one statement did not apply (a repeated completion, a
  // stale token, no such action): decided from one read (ReadLiveAction)
  // when the decision writes nothing, else Finish (postgres_store.cc).
  Status FinishUnapplied(const std::string& tenant_id, const std::string& key,
                         const FinishRequest& request, Action* action);
  void PurgeLoop();

  const PostgresOptions options_;
  const Clock* clock_;
  pg::Pool pool_;
  // Group commit of the one-statement writes (batch.h): up to 64 requests a
  // statement, one such statement of each kind with the server at a time
  // (while it runs the next batch gathers). Two at a time made smaller
  // batches and more server CPU per request: bench/RESULTS.md, "Group
  // commit on PostgreSQL".
  pg::Batcher fresh_begins_{"begin", 64, 1, [this](const auto& batch) { RunFreshBegins(batch); }};
  pg::Batcher started_completes_{"complete", 64, 1,
                                 [this](const auto& batch) { RunStartedCompletes(batch); }};

  std::mutex purge_mu_;
  std::condition_variable purge_cv_;
  bool stopping_ = false;
  std::thread purge_thread_;
};

}  // namespace intentd::store
