// The writing operations of the PostgreSQL store: lock, read, decide
// (decision.h), write, in one transaction each.
//
// Lock order: intents before actions, two intents in (intent_ref,
// action_type) byte order, two actions in key order, allowance counters
// last in name order. An intent found only after its action was locked (the
// action's owner in Begin) is taken with NOWAIT; when busy, the transaction
// starts over taking it in order.
//
// Round trips: the general transaction (Transact) sends BEGIN, each
// statement and COMMIT on their own, as the decision in C++ needs each read
// before the next write. The hot pair's common cases, a fresh intent's
// begin and the complete of a started action under its token, are one
// autocommit statement each instead (OneTrip; rows.cc, kBeginFresh and
// kCompleteStarted): their outcome is known before any read, so C++ decides
// it up front with the same decision functions, and the statement writes it
// only when the rows are in the state decided on (in the same lock order),
// else nothing; every other case then runs the general transaction, except
// a redelivered begin and a complete not applied whose decisions write
// nothing, decided from one read (BeginRedelivered, FinishUnapplied). Under
// concurrency those statements are group-committed (batch.h): the requests
// of one kind that gathered while one such statement ran go as the next,
// several rows in one statement (kBeginFreshBatch, kCompleteStartedBatch),
// several intents locked in (tenant, intent_ref, action_type) order.
#include <set>

#include "store/postgres/impl.h"

namespace intentd::store {

Status PostgresStoreImpl::OneTrip(const char* what, const OneTripBody& body, bool* general) {
  *general = false;
  // Once on a fresh session when the server ended the first one (a restart,
  // pg_terminate_backend) before running the statement.
  for (int attempt = 0;; ++attempt) {
    pg::Pool::Handle conn;
    Status s = pool_.Acquire(&conn);
    if (!s.ok()) return s;
    pg::Connection& c = *conn;
    if (!c.LooksAlive()) {  // ended while idle in the pool: nothing sent yet
      conn.Discard();
      if (attempt == 0) continue;
      return Status::StorageError(std::string(what) + ": the PostgreSQL session was ended; " +
                                  "nothing was granted");
    }
    c.ClearWarning();
    if (body(c)) {
      return CommitWarning(what, &c);
    }
    const std::string message = c.error_message();
    switch (c.error_kind()) {
      case pg::ErrorKind::kConnection:
        conn.Discard();
        if (!c.not_run()) {
          // The statement may have committed: never report it as granted
          // (a later begin sees whatever was committed), as a COMMIT lost.
          return Status::StorageError(
              std::string(what) + ": the PostgreSQL connection was lost during the statement (" +
              message + "); the outcome is unknown, nothing is reported as granted");
        }
        if (attempt == 0) continue;
        return Status::StorageError(std::string(what) + ": lost the PostgreSQL connection (" +
                                    message + "); nothing was granted");
      case pg::ErrorKind::kRetry:  // rolled back: the general transaction retries
        *general = true;
        return Status::Ok();
      default:
        if (c.sqlstate() == "23505") {  // unique_violation: rolled back (kBeginFresh)
          *general = true;
          return Status::Ok();
        }
        return Status::StorageError(std::string(what) + ": " + message);
    }
  }
}

bool PostgresStoreImpl::FreshCase(const IntentCandidate& request) {
  return request.candidate && !request.expected_key && !request.candidate->key.empty() &&
         request.allowances.empty() && request.approval_reason.empty();
}

bool PostgresStoreImpl::PrepareFreshBegin(const IntentCandidate& request, int64_t lease_ms,
                                          OwnFreshBegin* m) {
  const int64_t now = clock_->NowMs();
  m->own_intent = NewIntent(request, now);
  // Begin's decision for a new intent (no action for its key): what the
  // statement writes when the intent is indeed new and its key has no action.
  m->step = DecideBegin(std::nullopt, m->own_intent, lease_ms, now);
  if (!m->step.write) return false;  // e.g. waiting for approval: not this path's case
  m->intent = &m->own_intent;
  m->action = &m->step.action;
  // Both rows follow the action (ActionRetainUntil), as in Begin.
  m->retain_ms = ActionRetainUntil(m->step.action.status, now, options_.retention_ms);
  return true;
}

Status PostgresStoreImpl::FreshBegun(OwnFreshBegin* m, BeginResult* result, bool* general) {
  if (m->alone) {  // left out of its batch: its own statement, a batch of one
    m->alone = false;
    RunFreshBegins({m});
  }
  // Not inserted: the intent is there (a redelivery), nothing was written.
  *general = m->general;
  if (!m->status.ok() || m->general) return m->status;
  SetBeginResult(true, std::move(m->own_intent), std::move(m->step), result);
  return Status::Ok();
}

Status PostgresStoreImpl::BeginFresh(const IntentCandidate& request, int64_t lease_ms,
                                     BeginResult* result, bool* general) {
  OwnFreshBegin m;
  if (!PrepareFreshBegin(request, lease_ms, &m)) {
    *general = true;
    return Status::Ok();
  }
  fresh_begins_.Join(&m);
  return FreshBegun(&m, result, general);
}

bool PostgresStoreImpl::BeginAsync(const IntentCandidate& request, int64_t lease_ms,
                                   BeginResult* result, WriteDone done) {
  if (lease_ms <= 0 || !FreshCase(request)) return false;
  auto m = std::make_unique<OwnFreshBegin>();
  if (!PrepareFreshBegin(request, lease_ms, m.get())) return false;
  OwnFreshBegin* posted = m.release();
  // The caller keeps `request` until `done` returns or its `rest` did.
  fresh_begins_.Post(
      posted, [this, posted, req = &request, lease_ms, result, done = std::move(done)] {
        std::unique_ptr<OwnFreshBegin> owned(posted);
        bool general = false;
        const Status s = FreshBegun(posted, result, &general);
        owned.reset();
        if (!general) return done(s, nullptr);
        done(s, [this, req, lease_ms, result] { return BeginRedelivered(*req, lease_ms, result); });
      });
  return true;
}

bool PostgresStoreImpl::PrepareStartedComplete(const std::string& tenant_id, const std::string& key,
                                               const FinishRequest& request,
                                               OwnStartedComplete* m) {
  const int64_t now = clock_->NowMs();
  // Finish's decision on a started action holding the caller's token: what
  // the statement writes when the action is in that state (it checks), with
  // the intent's retention following it (IntentRetainAfter of a changed
  // action: the action's own deadline).
  Action started;
  started.tenant_id = tenant_id;
  started.key = key;
  started.status = ActionStatus::kStarted;
  started.lease_token = request.lease_token;
  m->step = DecideFinish(started, request, now);
  if (!m->step.status.ok() || !m->step.write) return false;
  m->own_tenant = tenant_id;
  m->own_key = key;
  m->tenant = &m->own_tenant;
  m->key = &m->own_key;
  m->lease_token = request.lease_token;
  m->next = &m->step.action;
  m->retain_ms = ActionRetainUntil(m->step.action.status, now, options_.retention_ms);
  m->now_ms = now;
  return true;
}

Status PostgresStoreImpl::StartedCompleted(OwnStartedComplete* m, Action* action, bool* general) {
  if (m->alone) {  // left out of its batch: its own statement, a batch of one
    m->alone = false;
    RunStartedCompletes({m});
  }
  *general = false;
  if (!m->status.ok()) return m->status;
  if (m->general || !m->applied) {  // another state, or no such action: nothing was written
    *general = true;
    return Status::Ok();
  }
  *action = std::move(*m->applied);
  return Status::Ok();
}

Status PostgresStoreImpl::CompleteStarted(const std::string& tenant_id, const std::string& key,
                                          const FinishRequest& request, Action* action,
                                          bool* general) {
  OwnStartedComplete m;
  if (!PrepareStartedComplete(tenant_id, key, request, &m)) {
    *general = true;
    return Status::Ok();
  }
  started_completes_.Join(&m);
  return StartedCompleted(&m, action, general);
}

bool PostgresStoreImpl::CompleteAsync(const std::string& tenant_id, const std::string& key,
                                      int64_t lease_token, const std::string& response,
                                      Action* action, WriteDone done) {
  const FinishRequest request{FinishKind::kComplete, lease_token, &response, 0};
  auto m = std::make_unique<OwnStartedComplete>();
  if (!PrepareStartedComplete(tenant_id, key, request, m.get())) return false;
  OwnStartedComplete* posted = m.release();
  // The caller keeps `response` until `done` returns or its `rest` did.
  started_completes_.Post(
      posted, [this, posted, response = &response, action, done = std::move(done)] {
        std::unique_ptr<OwnStartedComplete> owned(posted);
        bool general = false;
        const Status s = StartedCompleted(posted, action, &general);
        if (!general) {
          owned.reset();
          return done(s, nullptr);
        }
        done(s, [this, tenant = std::move(posted->own_tenant), key = std::move(posted->own_key),
                 token = posted->lease_token, response, action] {
          return FinishUnapplied(tenant, key,
                                 FinishRequest{FinishKind::kComplete, token, response, 0}, action);
        });
      });
  return true;
}

namespace {

// The members of `batch` as their kind, and the ones that must go alone:
// a second request for the same rows (its coordinates or key) would make
// the batch's statement touch a row twice.
template <typename T, typename KeyFn>
std::vector<T*> Distinct(const std::vector<pg::Batcher::Member*>& batch, KeyFn key) {
  std::vector<T*> out;
  out.reserve(batch.size());
  std::set<std::string> seen;
  for (pg::Batcher::Member* member : batch) {
    T* m = static_cast<T*>(member);
    bool fresh = true;
    for (std::string& k : key(*m)) fresh = seen.insert(std::move(k)).second && fresh;
    if (fresh) {
      out.push_back(m);
    } else {
      m->alone = true;
    }
  }
  return out;
}

// Length-prefixed, so that no two tuples share an encoding.
std::string Tuple(std::initializer_list<const std::string*> parts, char tag) {
  std::string out(1, tag);
  for (const std::string* p : parts) {
    out += std::to_string(p->size());
    out += ':';
    out += *p;
  }
  return out;
}

}  // namespace

std::vector<StatementBatchCounts> PostgresStoreImpl::StatementBatches() const {
  return {fresh_begins_.counts(), started_completes_.counts()};
}

void PostgresStoreImpl::Settle(const Status& s, bool general, size_t size, Batched* m) {
  m->status = s;
  if (s.ok() && general) (size > 1 ? m->alone : m->general) = true;
}

void PostgresStoreImpl::RunFreshBegins(const std::vector<pg::Batcher::Member*>& batch) {
  std::vector<FreshBegin*> members = Distinct<FreshBegin>(batch, [](const FreshBegin& m) {
    const Intent& i = *m.intent;
    return std::vector<std::string>{Tuple({&i.tenant_id, &i.intent_ref, &i.action_type}, 'i'),
                                    Tuple({&i.tenant_id, &i.key}, 'k')};
  });
  if (members.empty()) return;
  bool general = false;
  Status s = OneTrip(
      "begin",
      [&](pg::Connection& c) {
        if (members.size() > 1) return InsertFreshBatch(c, members);
        FreshBegin& m = *members.front();  // alone: the single statement
        bool inserted = false;
        if (!InsertFresh(c, *m.intent, m.retain_ms, *m.action, m.retain_ms, &inserted)) {
          return false;
        }
        m.general = !inserted;
        return true;
      },
      &general);
  for (FreshBegin* m : members) Settle(s, general, members.size(), m);
}

void PostgresStoreImpl::RunStartedCompletes(const std::vector<pg::Batcher::Member*>& batch) {
  std::vector<StartedComplete*> members =
      Distinct<StartedComplete>(batch, [](const StartedComplete& m) {
        return std::vector<std::string>{Tuple({m.tenant, m.key}, 'k')};
      });
  if (members.empty()) return;
  bool general = false;
  Status s = OneTrip(
      "complete",
      [&](pg::Connection& c) {
        if (members.size() > 1) return ApplyCompleteBatch(c, members);
        StartedComplete& m = *members.front();  // alone: the single statement
        return ApplyComplete(c, *m.tenant, *m.key, m.lease_token, *m.next, m.retain_ms, m.now_ms,
                             &m.applied);
      },
      &general);
  for (StartedComplete* m : members) Settle(s, general, members.size(), m);
}

Status PostgresStoreImpl::Freeze(const IntentCandidate& request, FreezeResult* result) {
  return Transact("freeze", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    std::optional<StoredIntent> row;
    Status s = LockIntent(c, request.tenant_id, request.intent_ref, request.action_type,
                          /*nowait=*/false, &row);
    if (!s.ok()) return s;
    const bool alive = row && !RetentionExpired(row->retain_until_ms, now);
    s = CheckIntentCandidate(alive ? &row->intent : nullptr, request);
    if (alive && (s.ok() || s.code() == Status::Code::kConflict)) {
      result->created = false;
      result->intent = std::move(row->intent);
    }
    if (!s.ok() || alive) return s;  // nothing written: rolled back
    Intent intent = NewIntent(request, now);
    if (!row) {
      // Put-if-absent; "never expires" until the action is read below.
      bool inserted = false;
      s = InsertIntent(c, intent, kRetainForever, &inserted);
      if (!s.ok()) return s;
      if (!inserted) {  // frozen concurrently: read it again
        *end = TxEnd::kRetry;
        return Status::Ok();
      }
    }
    // A new intent whose key already has a started action (another intent
    // with the same payload) must not expire before that action.
    std::optional<Action> action;
    int64_t action_retain = 0;
    s = ReadAction(c, request.tenant_id, intent.key, /*exclusive=*/false, &action, &action_retain);
    if (!s.ok()) return s;
    const bool action_alive = action && !RetentionExpired(action_retain, now);
    const int64_t retain = ActionRetainUntil(
        action_alive ? action->status : ActionStatus::kCompleted, now, options_.retention_ms);
    s = row ? ReplaceIntent(c, intent, retain)
            : (retain == kRetainForever ? Status::Ok() : SetIntentRetention(c, intent, retain));
    if (!s.ok()) return s;
    s = CountAllowances(c, request, now, &result->refusal);
    if (!s.ok()) return s;
    result->created = true;
    result->intent = std::move(intent);
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::Begin(const IntentCandidate& request, int64_t lease_ms,
                                BeginResult* result) {
  if (lease_ms <= 0) return Status::InvalidArgument("lease_ms must be positive");
  if (FreshCase(request)) {
    // Most begins freeze a new intent: one round trip when it is.
    bool general = false;
    Status s = BeginFresh(request, lease_ms, result, &general);
    if (!s.ok() || !general) return s;
    return BeginRedelivered(request, lease_ms, result);
  }
  return BeginGeneral(request, lease_ms, result);
}

namespace {

// The action status a begin's intent keeps its retention by (the intent's
// row follows its action): an intent waiting for approval without an
// action, as if its action had ended.
ActionStatus IntentFollows(const BeginStep& step, const std::optional<Action>& current) {
  return step.decision == Decision::kPendingApproval && !current ? ActionStatus::kCompleted
                                                                 : step.action.status;
}

}  // namespace

// Most redeliveries' decisions write nothing: a completed action replays, a
// live lease is in flight. Such a decision is made from one autocommit read
// of the intent and its action, as of one snapshot taken after the request
// arrived: the answer the general transaction gives at that moment, without
// its row locks, its round trips and its commit (a redelivery costs one read
// where it cost BEGIN, three statements and COMMIT; bench/RESULTS.md, "A
// redelivery decided from one read"). A decision that writes (a recovery, a
// new attempt, a retention to repair), an action its key's other intent
// owns, and a read that failed, go to the general transaction, which reads
// again under its locks and decides.
Status PostgresStoreImpl::BeginRedelivered(const IntentCandidate& request, int64_t lease_ms,
                                           BeginResult* result) {
  const int64_t now = clock_->NowMs();
  std::optional<StoredIntent> row;
  std::optional<Action> current;
  const Status read =
      ReadLive(request.tenant_id, request.intent_ref, request.action_type, now, &row, &current);
  if (!read.ok() || !row) return BeginGeneral(request, lease_ms, result);
  // As BeginGeneral on a live intent it did not create.
  const Status s = CheckIntentCandidate(&row->intent, request);
  if (!s.ok()) {
    if (s.code() == Status::Code::kConflict) result->intent = row->intent;
    return s;
  }
  if (current && Coords::Of(*current) != Coords{request.intent_ref, request.action_type}) {
    return BeginGeneral(request, lease_ms, result);  // another intent's action
  }
  BeginStep step = DecideBegin(current, row->intent, lease_ms, now);
  if (step.write || IntentRetainAfter(row->retain_until_ms, IntentFollows(step, current),
                                      /*action_changed=*/false, now, options_.retention_ms)) {
    return BeginGeneral(request, lease_ms, result);
  }
  SetBeginResult(false, std::move(row->intent), std::move(step), result);
  return Status::Ok();
}

Status PostgresStoreImpl::BeginGeneral(const IntentCandidate& request, int64_t lease_ms,
                                       BeginResult* result) {
  const Coords mine{request.intent_ref, request.action_type};
  // The intent owning the action, once a NOWAIT on it failed: then it is
  // locked together with the request's intent, in order.
  std::optional<Coords> owner_first;

  return Transact("begin", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    const std::string& tenant = request.tenant_id;
    Status s;
    // 1. The intents.
    std::optional<StoredIntent> owner_row;
    auto lock_owner = [&]() {
      return LockIntent(c, tenant, owner_first->intent_ref, owner_first->action_type, false,
                        &owner_row);
    };
    if (owner_first && *owner_first < mine && !(s = lock_owner()).ok()) return s;
    bool created = false;
    Intent intent;
    std::optional<StoredIntent> row;
    if (request.candidate && !request.expected_key && !request.candidate->key.empty()) {
      // The common case, a fresh intent: put-if-absent first. "Never
      // expires" until the action's state is known.
      intent = NewIntent(request, now);
      s = InsertIntent(c, intent, kRetainForever, &created);
      if (!s.ok()) return s;
    }
    if (!created) {
      s = LockIntent(c, tenant, request.intent_ref, request.action_type, false, &row);
      if (!s.ok()) return s;
      const bool alive = row && !RetentionExpired(row->retain_until_ms, now);
      s = CheckIntentCandidate(alive ? &row->intent : nullptr, request);
      if (!s.ok()) {
        if (alive && s.code() == Status::Code::kConflict) result->intent = row->intent;
        return s;
      }
      if (!alive && !row && request.candidate && !request.expected_key) {
        *end = TxEnd::kRetry;  // the insert above lost to one that was rolled back since
        return Status::Ok();
      }
      created = !alive;
      intent = created ? NewIntent(request, now) : row->intent;
    }
    if (owner_first && mine < *owner_first && !(s = lock_owner()).ok()) return s;

    // 2. The action: insert when absent (a fresh key), else lock and decide.
    BeginStep step;
    bool written = false;
    std::optional<Action> current;
    bool decided = false;  // a new intent that waits for approval: no action
    if (created) {
      step = DecideBegin(std::nullopt, intent, lease_ms, now);
      decided = !step.write;
      if (step.write) {
        s = InsertAction(c, step.action, now, &written);
        if (!s.ok()) return s;
      }
    }
    if (!written && !decided) {
      std::optional<Action> stored;
      int64_t retain = 0;
      // The action of the key frozen (a redelivery's candidate may have
      // derived another key: a rotated secret, a diverged payload).
      s = ReadAction(c, tenant, intent.key, /*exclusive=*/true, &stored, &retain);
      if (!s.ok()) return s;
      if (stored && !RetentionExpired(retain, now)) current = stored;
      // 3. Another intent with the same key may own the action; its
      // retention follows the action too.
      if (current && Coords::Of(*current) != mine) {
        const Coords owner = Coords::Of(*current);
        if (!owner_first || !(*owner_first == owner)) {
          s = LockIntent(c, tenant, owner.intent_ref, owner.action_type, /*nowait=*/true,
                         &owner_row);
          if (!s.ok()) {
            owner_first = owner;  // lock_not_available: start over, in order
            return s;
          }
        }
      } else {
        owner_row.reset();
      }
      step = DecideBegin(current, intent, lease_ms, now);
      if (step.write) {
        if (stored) {
          s = UpdateAction(c, step.action, now);
        } else {
          s = InsertAction(c, step.action, now, &written);
          if (s.ok() && !written) {  // inserted concurrently: decide again
            *end = TxEnd::kRetry;
            return Status::Ok();
          }
        }
        if (!s.ok()) return s;
      }
    }

    // 4. Retention of the intents that point at the action.
    const ActionStatus followed = IntentFollows(step, current);
    if (created) {
      const int64_t retain = ActionRetainUntil(followed, now, options_.retention_ms);
      if (row) {
        s = ReplaceIntent(c, intent, retain);  // over an expired row
      } else if (retain != kRetainForever) {
        s = SetIntentRetention(c, intent, retain);
      }
    } else if (auto retain = IntentRetainAfter(row->retain_until_ms, followed, step.write, now,
                                               options_.retention_ms)) {
      s = SetIntentRetention(c, intent, *retain);
    }
    if (!s.ok()) return s;
    if (owner_row && !RetentionExpired(owner_row->retain_until_ms, now) &&
        owner_row->intent.key == intent.key) {
      if (auto retain = IntentRetainAfter(owner_row->retain_until_ms, step.action.status,
                                          step.write, now, options_.retention_ms)) {
        s = SetIntentRetention(c, owner_row->intent, *retain);
        if (!s.ok()) return s;
      }
    }
    // 5. The allowances a new intent draws on, last (their lock order).
    if (created) {
      s = CountAllowances(c, request, now, &result->refusal);
      if (!s.ok()) return s;
    }
    SetBeginResult(created, std::move(intent), std::move(step), result);
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::Finish(const std::string& tenant_id, const std::string& key,
                                 const FinishRequest& request, Action* action) {
  return Transact("finish", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    // The action's intent is locked before the action (lock order): find
    // where it lives, lock both, and check that it did not move meanwhile.
    std::optional<Coords> coords;
    Status s = ReadActionCoords(c, tenant_id, key, &coords);
    if (!s.ok()) return s;
    if (!coords) return NoSuchAction();
    std::optional<StoredIntent> owner;
    s = LockIntent(c, tenant_id, coords->intent_ref, coords->action_type, false, &owner);
    if (!s.ok()) return s;
    std::optional<Action> current;
    int64_t retain = 0;
    s = ReadAction(c, tenant_id, key, /*exclusive=*/true, &current, &retain);
    if (!s.ok()) return s;
    if (current && Coords::Of(*current) != *coords) {
      *end = TxEnd::kRetry;  // replaced by another intent's action meanwhile
      return Status::Ok();
    }
    if (!current || RetentionExpired(retain, now)) {
      return NoSuchAction();
    }
    FinishStep step = DecideFinish(*current, request, now);
    *action = step.action;
    if (!step.status.ok() || !step.write) return step.status;  // rolled back
    s = UpdateAction(c, step.action, now);
    if (!s.ok()) return s;
    if (owner && !RetentionExpired(owner->retain_until_ms, now) && owner->intent.key == key) {
      if (auto r = IntentRetainAfter(owner->retain_until_ms, step.action.status,
                                     /*action_changed=*/true, now, options_.retention_ms)) {
        s = SetIntentRetention(c, owner->intent, *r);
        if (!s.ok()) return s;
      }
    }
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::Complete(const std::string& tenant_id, const std::string& key,
                                   int64_t lease_token, const std::string& response,
                                   Action* action) {
  FinishRequest request{FinishKind::kComplete, lease_token, &response, 0};
  bool general = false;
  Status s = CompleteStarted(tenant_id, key, request, action, &general);
  if (!s.ok() || !general) return s;
  return FinishUnapplied(tenant_id, key, request, action);
}

// As BeginRedelivered: a complete its statement did not apply is mostly a
// bot's retry of a completion already made, or a token no longer current,
// and those answers write nothing (DecideFinish); they are decided from one
// read of the action, as of a snapshot taken after the request arrived.
// A decision that writes goes on to Finish, which decides again under its
// locks.
Status PostgresStoreImpl::FinishUnapplied(const std::string& tenant_id, const std::string& key,
                                          const FinishRequest& request, Action* action) {
  const int64_t now = clock_->NowMs();
  std::optional<Action> current;
  if (ReadLiveAction(tenant_id, key, now, &current).ok()) {
    if (!current) return NoSuchAction();
    FinishStep step = DecideFinish(*current, request, now);
    if (!step.write) {
      *action = std::move(step.action);
      return step.status;
    }
  }
  return Finish(tenant_id, key, request, action);
}

Status PostgresStoreImpl::Fail(const std::string& tenant_id, const std::string& key,
                               int64_t lease_token, const std::string& error, bool retriable,
                               Action* action) {
  FinishRequest request{retriable ? FinishKind::kRelease : FinishKind::kFail, lease_token, &error,
                        0};
  return Finish(tenant_id, key, request, action);
}

Status PostgresStoreImpl::Renew(const std::string& tenant_id, const std::string& key,
                                int64_t lease_token, int64_t lease_ms, Action* action) {
  if (lease_ms <= 0) return Status::InvalidArgument("lease_ms must be positive");
  FinishRequest request{FinishKind::kRenew, lease_token, nullptr, lease_ms};
  return Finish(tenant_id, key, request, action);
}

Status PostgresStoreImpl::Amend(const IntentCandidate& request, bool force, AmendResult* result) {
  if (!request.candidate || request.candidate->key.empty()) {
    return Status::InvalidArgument("amend needs the new payload and its key");
  }
  return Transact("amend", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    std::optional<StoredIntent> row;
    Status s =
        LockIntent(c, request.tenant_id, request.intent_ref, request.action_type, false, &row);
    if (!s.ok()) return s;
    if (!row || RetentionExpired(row->retain_until_ms, now)) {
      return NoSuchIntent();
    }
    s = CheckIntentCandidate(&row->intent, request);
    if (!s.ok()) {
      if (s.code() == Status::Code::kConflict) result->intent = row->intent;
      return s;
    }
    // Both actions, in key order.
    const std::string& old_key = row->intent.key;
    const std::string& new_key = request.candidate->key;
    std::optional<Action> old_action, new_action;
    int64_t old_retain = 0, new_retain = 0;
    const bool old_first = old_key <= new_key;
    for (int i = 0; i < 2; ++i) {
      const bool is_old = (i == 0) == old_first;
      s = ReadAction(c, request.tenant_id, is_old ? old_key : new_key, /*exclusive=*/false,
                     is_old ? &old_action : &new_action, is_old ? &old_retain : &new_retain);
      if (!s.ok()) return s;
    }
    if (old_action && RetentionExpired(old_retain, now)) old_action.reset();
    if (new_action && RetentionExpired(new_retain, now)) new_action.reset();
    s = DecideAmend(old_action, force);
    if (!s.ok()) return s;
    Intent intent = row->intent;
    intent.payload = request.candidate->payload;
    intent.key = new_key;
    intent.rules_version = request.candidate->rules_version;
    intent.key_id = request.candidate->key_id;
    intent.input = request.candidate->input;
    intent.updated_at_ms = now;
    intent.approval = RequestedApproval(request);
    s = ReplaceIntent(c, intent,
                      ActionRetainUntil(new_action ? new_action->status : ActionStatus::kCompleted,
                                        now, options_.retention_ms));
    if (!s.ok()) return s;
    s = CountAllowances(c, request, now, &result->refusal);
    if (!s.ok()) return s;
    result->previous_key = row->intent.key;
    result->intent = std::move(intent);
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::DecideApproval(const std::string& tenant_id,
                                         const std::string& intent_ref,
                                         const std::string& action_type, bool approve,
                                         const std::string& by, const std::string& note,
                                         const std::string& error, LookupResult* result) {
  return Transact("decide approval", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    std::optional<StoredIntent> row;
    Status s = LockIntent(c, tenant_id, intent_ref, action_type, /*nowait=*/false, &row);
    if (!s.ok()) return s;
    if (!row || RetentionExpired(row->retain_until_ms, now)) {
      return NoSuchIntent();
    }
    std::optional<Action> action;
    int64_t action_retain = 0;
    s = ReadAction(c, tenant_id, row->intent.key, /*exclusive=*/true, &action, &action_retain);
    if (!s.ok()) return s;
    const bool stored = action.has_value();
    if (action && RetentionExpired(action_retain, now)) action.reset();
    ApprovalStep step;
    s = DecideApprovalStep(row->intent, action, approve, by, note, error, now, &step);
    if (!s.ok()) return s;
    if (step.failed) {
      bool written = true;
      s = stored ? UpdateAction(c, *step.failed, now)
                 : InsertAction(c, *step.failed, now, &written);
      if (!s.ok()) return s;
      if (!written) {  // inserted concurrently: decide again
        *end = TxEnd::kRetry;
        return Status::Ok();
      }
    }
    // The intent's row carries its action's deadline (IntentRetainAfter).
    const ActionStatus status =
        step.failed ? ActionStatus::kFailed : (action ? action->status : ActionStatus::kCompleted);
    const int64_t retain = step.failed || !action
                               ? ActionRetainUntil(status, now, options_.retention_ms)
                               : row->retain_until_ms;
    s = ReplaceIntent(c, step.after, retain);
    if (!s.ok()) return s;
    result->intent = std::move(step.after);
    result->action = step.failed ? std::move(step.failed) : std::move(action);
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

}  // namespace intentd::store
