// The protocol operations: lock, read, decide (decision.h), one write.
#include <rocksdb/snapshot.h>

#include <algorithm>
#include <utility>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"

namespace intentd::store {
namespace {

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// An operation's batch buffer, reserved at once: a begin writes ~600 bytes
// (intent, action, lease entry), which grown from RocksDB's 12-byte default
// took six reallocations.
constexpr size_t kBatchBytes = 1024;

// The key of the action a request's intent is expected to point at, locked
// before the intent is read: the key the caller read, else the one it would
// freeze (a redelivery of the same payload under the same secret: the
// stored one). nullptr when the request has neither.
const std::string* RequestKey(const IntentCandidate& request) {
  if (request.expected_key) return &*request.expected_key;
  if (request.candidate) return &request.candidate->key;
  return nullptr;
}

}  // namespace

Status RocksStoreImpl::ReadRequestIntent(const IntentCandidate& request, const std::string& ikey,
                                         LockSet* locks, std::string* akey, int64_t* now,
                                         std::optional<StoredIntent>* stored) {
  for (;;) {
    *now = clock_->NowMs();
    Status s = ReadIntent(ikey, *now, stored);
    if (!s.ok()) return s;
    s = CheckIntentCandidate(*stored ? &(*stored)->intent : nullptr, request);
    if (!s.ok() || !*stored || akey == nullptr) return s;
    std::string frozen = codec::ActionKey(request.tenant_id, (*stored)->intent.key);
    if (frozen == *akey) return s;
    *akey = std::move(frozen);
    if (locks->Extend(*akey)) return s;
    // The locks were re-taken in order: read again.
  }
}

Status RocksStoreImpl::ReadIntent(const std::string& encoded_key, int64_t now_ms,
                                  std::optional<StoredIntent>* out,
                                  const rocksdb::Snapshot* snapshot) {
  out->reset();
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::PinnableSlice value;
  rocksdb::Status rs = h_.db->Get(ro, h_.intents, encoded_key, &value);
  if (rs.IsNotFound()) return Status::Ok();
  if (!rs.ok()) return FromRocks(rs, "read intent");
  StoredIntent stored;
  if (!codec::DecodeIntentKey(encoded_key, &stored.intent)) {
    return Status::Corruption("intent key malformed");
  }
  Status s = codec::DecodeIntentValue(View(value), &stored.intent, &stored.retain_until_ms);
  if (!s.ok()) return s;
  // Past its own deadline, the intent lives on with its action (IntentLive).
  std::optional<Action> action;
  if (!IntentLive(stored.retain_until_ms, nullptr, now_ms)) {
    s = ReadAction(codec::ActionKey(stored.intent.tenant_id, stored.intent.key), now_ms, &action,
                   snapshot);
    if (!s.ok()) return s;
  }
  if (IntentLive(stored.retain_until_ms, action ? &*action : nullptr, now_ms)) {
    *out = std::move(stored);
  }
  return Status::Ok();
}

Status GetActionRecord(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* actions,
                       const rocksdb::ReadOptions& ro, const std::string& encoded_key,
                       Action* action, int64_t* retain_until_ms, bool* found) {
  *found = false;
  rocksdb::PinnableSlice value;
  rocksdb::Status rs = db->Get(ro, actions, encoded_key, &value);
  if (rs.IsNotFound()) return Status::Ok();
  if (!rs.ok()) return FromRocks(rs, "read action");
  if (!codec::DecodeActionKey(encoded_key, action)) {
    return Status::Corruption("action key malformed");
  }
  Status s = codec::DecodeActionValue(View(value), action, retain_until_ms);
  *found = s.ok();
  return s;
}

Status RocksStoreImpl::ReadAction(const std::string& encoded_key, int64_t now_ms,
                                  std::optional<Action>* out, const rocksdb::Snapshot* snapshot) {
  out->reset();
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  Action action;
  int64_t retain_until_ms = 0;
  bool found = false;
  Status s = GetActionRecord(h_.db, h_.actions, ro, encoded_key, &action, &retain_until_ms, &found);
  if (!s.ok()) return s;
  if (found && !RetentionExpired(retain_until_ms, now_ms)) *out = std::move(action);
  return Status::Ok();
}

void RocksStoreImpl::PutAction(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                               const std::optional<Action>& before, const Action& after,
                               int64_t now_ms) {
  batch->Put(h_.actions, encoded_key,
             codec::EncodeActionValue(
                 after, ActionRetainUntil(after.status, now_ms, options_.retention_ms)));
  // The lease index holds exactly the started actions, at their lease_until.
  const bool was_started = before && before->status == ActionStatus::kStarted;
  const bool is_started = after.status == ActionStatus::kStarted;
  if (was_started && is_started && before->lease_until_ms == after.lease_until_ms) return;
  if (was_started) {
    batch->Delete(h_.leases,
                  codec::LeaseKeyAll(before->lease_until_ms, after.tenant_id, after.key));
  }
  if (is_started) {
    batch->Put(h_.leases, codec::LeaseKeyAll(after.lease_until_ms, after.tenant_id, after.key),
               rocksdb::Slice());
  }
}

void RocksStoreImpl::PutIntent(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                               const Intent& intent, int64_t now_ms, ApprovalState before) {
  const int64_t retain = SaturatingAdd(now_ms, options_.retention_ms);
  batch->Put(h_.intents, encoded_key, codec::EncodeIntentValue(intent, retain));
  const bool pending = intent.approval.state == ApprovalState::kPending;
  if (pending || before == ApprovalState::kPending) {
    const std::string pkey =
        codec::PendingKey(intent.tenant_id, intent.intent_ref, intent.action_type);
    if (pending) {
      batch->Put(h_.policy, pkey, codec::EncodePendingValue(intent.created_at_ms, retain));
    } else {
      batch->Delete(h_.policy, pkey);
    }
  }
}

namespace {

// The calling thread's durability ticket (RocksStoreImpl::NoteTicket): one
// store's at a time, the store named so that another store's ops on the same
// thread cannot hand theirs over.
struct ThreadTicket {
  const void* store = nullptr;
  uint64_t ticket = 0;
  uint64_t own_commit = 0;  // the commit the operation in progress wrote
};
thread_local ThreadTicket tls_ticket;

}  // namespace

RocksStoreImpl::Entered::~Entered() {
  if (!lock_.owns_lock()) return;
  // An operation that wrote is judged by its own commit: everything it read
  // (under the stripe locks of what it wrote) was committed before it. One
  // that only read takes the newest commit it may have seen: a later
  // writer's, perhaps, which can only make a read fail, never a write.
  const uint64_t own = tls_ticket.store == store_ ? tls_ticket.own_commit : 0;
  store_->NoteTicket(own != 0 ? own : store_->visible_commit_.load(std::memory_order_acquire));
}

void RocksStoreImpl::NoteTicket(uint64_t ticket) {
  if (tls_ticket.store != this) tls_ticket = ThreadTicket{this, 0, 0};
  tls_ticket.ticket = std::max(tls_ticket.ticket, ticket);
}

void RocksStoreImpl::NoteOwnCommit(uint64_t commit) {
  if (tls_ticket.store != this) tls_ticket = ThreadTicket{this, 0, 0};
  tls_ticket.own_commit = commit;
}

uint64_t RocksStoreImpl::TakeTicket() {
  if (tls_ticket.store != this) return 0;
  tls_ticket.own_commit = 0;
  return std::exchange(tls_ticket.ticket, 0);
}

Status RocksStoreImpl::Settle(Status s) {
  if (!options_.sync || options_.defer_sync) return s;
  return SettleAlways(std::move(s));
}

Status RocksStoreImpl::SettleAlways(Status s) {
  const uint64_t ticket = TakeTicket();
  if (ticket == 0) return s;
  Status durable = commit_->WaitDurable(ticket);
  return durable.ok() ? s : durable;
}

void RocksStoreImpl::MarkFailedLocked(const std::string& why) {
  if (!failed_) {
    failed_ = true;
    failure_ = why;
    failed_flag_.store(true, std::memory_order_release);
  }
  commit_->RequestRecovery();
}

Status RocksStoreImpl::Commit(rocksdb::WriteBatch* batch) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!failed_) {
    if (errors_->raised.load(std::memory_order_acquire)) {
      MarkFailedLocked("RocksDB reported a background error (a flush or compaction failed)");
    } else if (std::string wal = wal_->failure(); !wal.empty()) {
      MarkFailedLocked(wal);
    }
  }
  if (failed_) {
    return Status::StorageError(
        "nothing was written or granted: the store is recovering from a "
        "storage error (" +
        failure_ + ")");
  }
  const uint64_t commit = last_commit_ + 1;
  rocksdb::Status rs =
      batch->PutLogData(EncodeCommitStamp(CommitStamp{commit, commit_->durable()}));
  next_commit_.store(commit, std::memory_order_release);  // a WAL file it creates starts here
  if (rs.ok()) rs = h_.db->Write(write_options_, batch);
  last_commit_ = commit;
  next_commit_.store(commit + 1, std::memory_order_release);
  NoteOwnCommit(commit);
  if (!rs.ok()) {
    MarkFailedLocked("a write failed: " + rs.ToString());
    // Unsynced, a write acknowledges itself: refused now, voided by the
    // recovery. Synced, it waits for its verdict like every other write.
    if (!options_.sync) {
      return Status::StorageError("write not made durable; nothing was granted: " + rs.ToString());
    }
    visible_commit_.store(commit, std::memory_order_release);
    return Status::Ok();
  }
  visible_commit_.store(commit, std::memory_order_release);
  writes_.fetch_add(1, std::memory_order_relaxed);
  if (!options_.sync) commit_->MarkDurable(commit);
  return Status::Ok();
}

uint64_t RocksStoreImpl::DurabilityTicket() {
  const uint64_t ticket = TakeTicket();
  if (ticket == 0 || commit_->Check(ticket) == GroupCommit::Verdict::kDurable) return 0;
  return ticket;
}

void RocksStoreImpl::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) {
  commit_->WhenDurable(ticket, std::move(done));
}

Store::TicketState RocksStoreImpl::CheckTicket(uint64_t ticket) {
  switch (commit_->Check(ticket)) {
    case GroupCommit::Verdict::kDurable:
      return TicketState::kDurable;
    case GroupCommit::Verdict::kLost:
      return TicketState::kLost;
    case GroupCommit::Verdict::kPending:
      break;
  }
  return TicketState::kPending;
}

Status RocksStoreImpl::SyncWal(uint64_t* target) {
  // h_ is replaced only by Recover, on this thread: no lock needed to use it.
  const auto failed = [this](const std::string& why) {
    std::lock_guard<std::mutex> lock(write_mu_);
    MarkFailedLocked(why);
    return Status::StorageError("write not made durable (" + why + "); nothing was granted");
  };
  if (const auto now = std::chrono::steady_clock::now(); now >= next_dir_check_) {
    next_dir_check_ = now + kDirectoryCheckInterval;
    if (std::string why; !SameDirectory(&why)) return failed(why);
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (failed_ || h_.db == nullptr || h_.read_only) {
      return Status::StorageError("the store is not writable (" + failure_ + ")");
    }
    // Every commit up to `target` is in the WAL, or in RocksDB's WAL buffer,
    // written out here (BufferedWal) with no write in between.
    *target = last_commit_;
    seq = h_.db->GetLatestSequenceNumber();
    if (BufferedWal(options_)) {
      const rocksdb::Status written = h_.db->FlushWAL(/*sync=*/false);
      if (!written.ok()) {
        MarkFailedLocked("writing the WAL buffer: " + written.ToString());
        return Status::StorageError("write not made durable (writing the WAL failed: " +
                                    written.ToString() + "); nothing was granted");
      }
    }
  }
  // SyncAll fails from a failed append on, which may have torn the WAL.
  if (std::string error = wal_->SyncAll(); !error.empty()) return failed(error);
  durable_seq_.store(seq, std::memory_order_release);
  if (guard_) guard_->Acked(seq);
  return Status::Ok();
}

Status RocksStoreImpl::DoFreeze(const IntentCandidate& request, FreezeResult* result) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  const std::string ikey =
      codec::IntentKey(request.tenant_id, request.intent_ref, request.action_type);
  // The day is read before the locks: a freeze that waits across midnight
  // counts on the day it arrived.
  const int64_t day = CounterDay(clock_->NowMs());
  const std::vector<std::string> ckeys = CounterKeys(request.tenant_id, day, request.allowances);
  LockSet locks(&locks_);
  locks.Add(ikey);
  for (const std::string& k : ckeys) locks.Add(k);
  locks.Lock();

  int64_t now = 0;
  std::optional<StoredIntent> stored;
  Status s = ReadRequestIntent(request, ikey, &locks, nullptr, &now, &stored);
  if (stored && (s.ok() || s.code() == Status::Code::kConflict)) {
    result->created = false;
    result->intent = std::move(stored->intent);
  }
  if (!s.ok() || stored) return s;
  // A started action of the same key (another intent with the same payload)
  // keeps this intent too (IntentLive): nothing about it is written here.
  Intent intent = NewIntent(request, now);
  rocksdb::WriteBatch batch(kBatchBytes);
  s = CountAllowances(request.allowances, ckeys, day, &batch, &result->refusal);
  if (!s.ok()) return s;
  PutIntent(&batch, ikey, intent, now);
  s = Commit(&batch);
  if (!s.ok()) return s;
  result->created = true;
  result->intent = std::move(intent);
  return Status::Ok();
}

Status RocksStoreImpl::DoBegin(const IntentCandidate& request, int64_t lease_ms,
                               BeginResult* result) {
  if (lease_ms <= 0) return Status::InvalidArgument("lease_ms must be positive");
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  const std::string ikey =
      codec::IntentKey(request.tenant_id, request.intent_ref, request.action_type);
  // The candidate check below pins the intent's key to RequestKey, so both
  // records are known before anything is read and locked together.
  const std::string* key = RequestKey(request);
  std::string akey = key ? codec::ActionKey(request.tenant_id, *key) : std::string();
  const int64_t day = CounterDay(clock_->NowMs());  // as in DoFreeze
  const std::vector<std::string> ckeys = CounterKeys(request.tenant_id, day, request.allowances);
  LockSet locks(&locks_);
  locks.Add(ikey);
  if (key) locks.Add(akey);
  for (const std::string& k : ckeys) locks.Add(k);
  locks.Lock();

  int64_t now = 0;
  std::optional<StoredIntent> stored;
  Status s = ReadRequestIntent(request, ikey, &locks, &akey, &now, &stored);
  if (!s.ok()) {
    if (stored && s.code() == Status::Code::kConflict) result->intent = std::move(stored->intent);
    return s;
  }
  const bool created = !stored;
  Intent intent = created ? NewIntent(request, now) : stored->intent;

  std::optional<Action> current;
  s = ReadAction(akey, now, &current);
  if (!s.ok()) return s;

  // The intents pointing at the action live as long as it does (IntentLive):
  // its changes rewrite none of them.
  BeginStep step = DecideBegin(current, intent, lease_ms, now);
  rocksdb::WriteBatch batch(kBatchBytes);
  if (created) {
    s = CountAllowances(request.allowances, ckeys, day, &batch, &result->refusal);
    if (!s.ok()) return s;
  }
  if (step.write) PutAction(&batch, akey, current, step.action, now);
  if (created) PutIntent(&batch, ikey, intent, now);
  if (batch.Count() > 0) {
    s = Commit(&batch);
    if (!s.ok()) return s;
  }
  SetBeginResult(created, std::move(intent), std::move(step), result);
  return Status::Ok();
}

Status RocksStoreImpl::Finish(const std::string& tenant_id, const std::string& key,
                              const FinishRequest& request, Action* action) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  const std::string akey = codec::ActionKey(tenant_id, key);
  LockSet locks(&locks_);
  locks.Add(akey);
  locks.Lock();
  const int64_t now = clock_->NowMs();
  std::optional<Action> current;
  Status s = ReadAction(akey, now, &current);
  if (!s.ok()) return s;
  if (!current) return NoSuchAction();
  FinishStep step = DecideFinish(*current, request, now);
  if (!step.status.ok() || !step.write) {
    *action = std::move(step.action);
    return step.status;
  }
  // The action's intents follow it without being rewritten (IntentLive).
  rocksdb::WriteBatch batch(kBatchBytes);
  PutAction(&batch, akey, current, step.action, now);
  s = Commit(&batch);
  if (!s.ok()) return s;
  *action = std::move(step.action);
  return Status::Ok();
}

Status RocksStoreImpl::Complete(const std::string& tenant_id, const std::string& key,
                                int64_t lease_token, const std::string& response, Action* action) {
  FinishRequest request{FinishKind::kComplete, lease_token, &response, 0};
  return Settle(Finish(tenant_id, key, request, action));
}

Status RocksStoreImpl::Fail(const std::string& tenant_id, const std::string& key,
                            int64_t lease_token, const std::string& error, bool retriable,
                            Action* action) {
  FinishRequest request{retriable ? FinishKind::kRelease : FinishKind::kFail, lease_token, &error,
                        0};
  return Settle(Finish(tenant_id, key, request, action));
}

Status RocksStoreImpl::Renew(const std::string& tenant_id, const std::string& key,
                             int64_t lease_token, int64_t lease_ms, Action* action) {
  if (lease_ms <= 0) return Status::InvalidArgument("lease_ms must be positive");
  FinishRequest request{FinishKind::kRenew, lease_token, nullptr, lease_ms};
  return Settle(Finish(tenant_id, key, request, action));
}

Status RocksStoreImpl::DoGetAction(const std::string& tenant_id, const std::string& key,
                                   Action* action) {
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s;
  std::optional<Action> found;
  Status s = ReadAction(codec::ActionKey(tenant_id, key), clock_->NowMs(), &found);
  if (!s.ok()) return s;
  if (!found) return NoSuchAction();
  *action = std::move(*found);
  return Status::Ok();
}

Status RocksStoreImpl::DoLookup(const std::string& tenant_id, const std::string& intent_ref,
                                const std::string& action_type, LookupResult* result) {
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s;
  // The intent and its action as of the same instant: under their stripe
  // locks, as writers take them. (A snapshot would not do: with unordered
  // writes, options.cc, a batch can be half in the memtable.)
  const std::string ikey = codec::IntentKey(tenant_id, intent_ref, action_type);
  std::optional<StoredIntent> stored;
  std::optional<Action> action;
  {
    LockSet locks(&locks_);
    locks.Add(ikey);
    locks.Lock();
    for (;;) {
      const int64_t now = clock_->NowMs();
      Status s = ReadIntent(ikey, now, &stored);
      if (!s.ok()) return s;
      if (!stored) return NoSuchIntent();
      const std::string akey = codec::ActionKey(tenant_id, stored->intent.key);
      if (!locks.Extend(akey)) continue;  // locks re-taken in order: read again
      s = ReadAction(akey, now, &action);
      if (!s.ok()) return s;
      break;
    }
  }
  result->intent = std::move(stored->intent);
  result->action = std::move(action);
  return Status::Ok();
}

Status RocksStoreImpl::DoAmend(const IntentCandidate& request, bool force, AmendResult* result) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  if (!request.candidate || request.candidate->key.empty()) {
    return Status::InvalidArgument("amend needs the new payload and its key");
  }
  const std::string ikey =
      codec::IntentKey(request.tenant_id, request.intent_ref, request.action_type);
  // The action of the key frozen: the caller's expectation, locked first;
  // else found once the intent is read.
  std::string old_akey =
      request.expected_key ? codec::ActionKey(request.tenant_id, *request.expected_key) : "";
  const int64_t day = CounterDay(clock_->NowMs());  // as in DoFreeze
  const std::vector<std::string> ckeys = CounterKeys(request.tenant_id, day, request.allowances);
  LockSet locks(&locks_);
  locks.Add(ikey);
  if (request.expected_key) locks.Add(old_akey);
  for (const std::string& k : ckeys) locks.Add(k);
  locks.Lock();

  int64_t now = 0;
  std::optional<StoredIntent> stored;
  Status s = ReadRequestIntent(request, ikey, &locks, &old_akey, &now, &stored);
  if (!stored && (s.ok() || s.code() == Status::Code::kConflict)) {
    return NoSuchIntent();
  }
  if (!s.ok()) {
    if (s.code() == Status::Code::kConflict) result->intent = std::move(stored->intent);
    return s;
  }
  std::optional<Action> old_action;
  s = ReadAction(old_akey, now, &old_action);
  if (!s.ok()) return s;
  s = DecideAmend(old_action, force);
  if (!s.ok()) return s;

  Intent intent = stored->intent;
  intent.payload = request.candidate->payload;
  intent.key = request.candidate->key;
  intent.rules_version = request.candidate->rules_version;
  intent.key_id = request.candidate->key_id;
  intent.input = request.candidate->input;
  intent.updated_at_ms = now;
  intent.approval = RequestedApproval(request);
  rocksdb::WriteBatch batch(kBatchBytes);
  s = CountAllowances(request.allowances, ckeys, day, &batch, &result->refusal);
  if (!s.ok()) return s;
  PutIntent(&batch, ikey, intent, now, stored->intent.approval.state);
  s = Commit(&batch);
  if (!s.ok()) return s;
  result->previous_key = std::move(stored->intent.key);
  result->intent = std::move(intent);
  return Status::Ok();
}

std::vector<std::string> RocksStoreImpl::CounterKeys(const std::string& tenant_id, int64_t day,
                                                     const std::vector<Allowance>& allowances) {
  std::vector<std::string> keys;
  keys.reserve(allowances.size());
  for (const Allowance& a : allowances) keys.push_back(codec::CounterKey(tenant_id, day, a.name));
  return keys;
}

Status RocksStoreImpl::CountAllowances(const std::vector<Allowance>& allowances,
                                       const std::vector<std::string>& keys, int64_t day,
                                       rocksdb::WriteBatch* batch, AllowanceRefusal* refusal) {
  if (allowances.empty()) return Status::Ok();
  if (h_.policy == nullptr) return Status::StorageError("the store is read-only");
  std::vector<Counter> after(allowances.size());
  for (size_t i = 0; i < allowances.size(); ++i) {
    const Allowance& a = allowances[i];
    if (a.name.empty() || a.amount < 0 || a.max_total < 0 || a.max_count < 0) {
      return Status::InvalidArgument("an allowance needs a name and no negative amount or maximum");
    }
    Counter& c = after[i];
    // The same counter named twice counts twice: what was added above.
    for (size_t j = 0; j < i; ++j) {
      if (keys[j] == keys[i]) c = after[j];
    }
    if (c.count == 0) {
      std::string value;
      const rocksdb::Status rs = h_.db->Get(rocksdb::ReadOptions(), h_.policy, keys[i], &value);
      if (rs.ok()) {
        int64_t retain = 0;
        Status s = codec::DecodeCounterValue(value, &c, &retain);
        if (!s.ok()) return s;
      } else if (!rs.IsNotFound()) {
        return FromRocks(rs, "read counter");
      }
    }
    if (!WithinAllowance(a, c.total, c.count)) {
      refusal->index = i;
      refusal->total = c.total;
      refusal->count = c.count;
      return Status::Refused("allowance " + a.name + " would be passed");
    }
    c.total += a.amount;
    c.count += 1;
  }
  const int64_t retain = CounterRetainUntil(day, options_.retention_ms);
  for (size_t i = 0; i < allowances.size(); ++i) {
    batch->Put(h_.policy, keys[i], codec::EncodeCounterValue(after[i], retain));
  }
  return Status::Ok();
}

Status RocksStoreImpl::DoDecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                                        const std::string& action_type, bool approve,
                                        const std::string& by, const std::string& note,
                                        const std::string& error, LookupResult* result) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  const std::string ikey = codec::IntentKey(tenant_id, intent_ref, action_type);
  LockSet locks(&locks_);
  locks.Add(ikey);
  locks.Lock();
  std::optional<StoredIntent> stored;
  std::optional<Action> action;
  std::string akey;
  int64_t now = 0;
  for (;;) {
    now = clock_->NowMs();
    Status s = ReadIntent(ikey, now, &stored);
    if (!s.ok()) return s;
    if (!stored) return NoSuchIntent();
    akey = codec::ActionKey(tenant_id, stored->intent.key);
    if (!locks.Extend(akey)) continue;  // locks re-taken in order: read again
    s = ReadAction(akey, now, &action);
    if (!s.ok()) return s;
    break;
  }
  ApprovalStep step;
  Status s = DecideApprovalStep(stored->intent, action, approve, by, note, error, now, &step);
  if (!s.ok()) return s;
  rocksdb::WriteBatch batch(kBatchBytes);
  PutIntent(&batch, ikey, step.after, now, ApprovalState::kPending);
  if (step.failed) PutAction(&batch, akey, action, *step.failed, now);
  s = Commit(&batch);
  if (!s.ok()) return s;
  result->intent = std::move(step.after);
  result->action = step.failed ? std::move(step.failed) : std::move(action);
  return Status::Ok();
}

Status RocksStoreImpl::DecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                                      const std::string& action_type, bool approve,
                                      const std::string& by, const std::string& note,
                                      const std::string& error, LookupResult* result) {
  return Settle(
      DoDecideApproval(tenant_id, intent_ref, action_type, approve, by, note, error, result));
}

Status RocksStoreImpl::PendingApprovals(const std::optional<std::string>& tenant_id, size_t limit,
                                        std::vector<Intent>* intents) {
  intents->clear();
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return Settle(s);
  if (h_.policy == nullptr || limit == 0) return Settle(Status::Ok());
  const int64_t now = clock_->NowMs();
  // The index, ordered by the creation time each entry holds; then the
  // intents of the oldest `limit` read (a deciding write removes an entry
  // in the batch that rewrites its intent, so the check is a safeguard).
  std::vector<Intent> entries;
  const std::string prefix = codec::PendingPrefix(tenant_id);
  std::unique_ptr<rocksdb::Iterator> it(h_.db->NewIterator(rocksdb::ReadOptions(), h_.policy));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Intent coords;
    int64_t retain = 0;
    if (!codec::DecodePendingKey(std::string_view(it->key().data(), it->key().size()), &coords)) {
      return Settle(Status::Corruption("pending approval key malformed"));
    }
    Status s = codec::DecodePendingValue(std::string_view(it->value().data(), it->value().size()),
                                         &coords.created_at_ms, &retain);
    if (!s.ok()) return Settle(s);
    if (!RetentionExpired(retain, now)) entries.push_back(std::move(coords));
  }
  if (!it->status().ok()) return Settle(FromRocks(it->status(), "read pending approvals"));
  std::stable_sort(entries.begin(), entries.end(), [](const Intent& a, const Intent& b) {
    return a.created_at_ms < b.created_at_ms;
  });
  std::vector<Intent> found;
  for (const Intent& coords : entries) {
    if (found.size() == limit) break;
    std::optional<StoredIntent> stored;
    Status s = ReadIntent(codec::IntentKey(coords.tenant_id, coords.intent_ref, coords.action_type),
                          now, &stored);
    if (!s.ok()) return Settle(s);
    if (stored && stored->intent.approval.state == ApprovalState::kPending) {
      found.push_back(std::move(stored->intent));
    }
  }
  *intents = std::move(found);
  return Settle(Status::Ok());
}

Status RocksStoreImpl::DayCounters(const std::string& tenant_id, int64_t day,
                                   std::vector<Counter>* counters) {
  counters->clear();
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return Settle(s);
  if (h_.policy == nullptr) return Settle(Status::Ok());
  const std::string prefix = codec::CounterPrefix(tenant_id, day);
  const int64_t now = clock_->NowMs();
  std::unique_ptr<rocksdb::Iterator> it(h_.db->NewIterator(rocksdb::ReadOptions(), h_.policy));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    Counter c;
    int64_t retain = 0;
    if (!codec::DecodeCounterKey(std::string_view(it->key().data(), it->key().size()), &c)) {
      return Settle(Status::Corruption("counter key malformed"));
    }
    Status s = codec::DecodeCounterValue(std::string_view(it->value().data(), it->value().size()),
                                         &c, &retain);
    if (!s.ok()) return Settle(s);
    if (!RetentionExpired(retain, now)) counters->push_back(std::move(c));
  }
  if (!it->status().ok()) return Settle(FromRocks(it->status(), "read counters"));
  return Settle(Status::Ok());
}

Status RocksStoreImpl::RecheckLeaseEntry(std::string_view entry, const std::string& akey,
                                         int64_t lease_until_ms, int64_t now, bool* listed,
                                         std::optional<Action>* action) {
  LockSet locks(&locks_);
  locks.Add(akey);
  locks.Lock();
  std::string ignored;
  const rocksdb::Status rs = h_.db->Get(rocksdb::ReadOptions(), h_.leases,
                                        rocksdb::Slice(entry.data(), entry.size()), &ignored);
  if (rs.IsNotFound()) {
    *listed = false;
    return Status::Ok();
  }
  if (!rs.ok()) return FromRocks(rs, "read lease index");
  Status s = ReadAction(akey, now, action);
  if (!s.ok()) return s;
  if (!*action || (*action)->status != ActionStatus::kStarted ||
      (*action)->lease_until_ms != lease_until_ms) {
    return Status::Corruption("lease index entry without a matching started action");
  }
  *listed = true;
  return Status::Ok();
}

Status RocksStoreImpl::DoUncertain(const std::optional<std::string>& tenant_id, size_t limit,
                                   std::vector<Action>* actions) {
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s;
  actions->clear();
  if (limit == 0) return Status::Ok();
  rocksdb::ManagedSnapshot snapshot(h_.db);
  const int64_t now = clock_->NowMs();
  // One index for all tenants (one entry per started action, written with
  // it): a tenant's listing skips the other tenants' expired leases, which
  // are few unless their workers died in numbers.
  const std::string prefix = codec::LeasePrefixAll();
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot.snapshot();
  std::unique_ptr<rocksdb::Iterator> it(h_.db->NewIterator(ro, h_.leases));
  std::string tenant, key;
  for (it->Seek(prefix); it->Valid() && actions->size() < limit; it->Next()) {
    const std::string_view entry = View(it->key());
    if (entry.substr(0, prefix.size()) != prefix) break;
    int64_t lease_until_ms = 0;
    if (!codec::DecodeLeaseKey(entry, &lease_until_ms, &tenant, &key)) {
      return Status::Corruption("lease index entry malformed");
    }
    if (lease_until_ms > now) break;  // ordered by lease_until: the rest is live
    if (tenant_id && tenant != *tenant_id) continue;
    const std::string akey = codec::ActionKey(tenant, key);
    std::optional<Action> action;
    Status s = ReadAction(akey, now, &action, snapshot.snapshot());
    if (!s.ok()) return s;
    if (!action || action->status != ActionStatus::kStarted ||
        action->lease_until_ms != lease_until_ms) {
      // With unordered writes (options.cc) a snapshot can hold half of
      // a batch that is being written: look again under the action's stripe
      // lock, where no write to it is in progress.
      bool listed = false;
      s = RecheckLeaseEntry(entry, akey, lease_until_ms, now, &listed, &action);
      if (!s.ok()) return s;
      if (!listed) continue;  // finished or renewed meanwhile
    }
    actions->push_back(std::move(*action));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan lease index");
  return Status::Ok();
}

// The public operations: each runs under the DB, then settles its ticket.

Status RocksStoreImpl::Freeze(const IntentCandidate& request, FreezeResult* result) {
  return Settle(DoFreeze(request, result));
}

Status RocksStoreImpl::Begin(const IntentCandidate& request, int64_t lease_ms,
                             BeginResult* result) {
  return Settle(DoBegin(request, lease_ms, result));
}

Status RocksStoreImpl::GetAction(const std::string& tenant_id, const std::string& key,
                                 Action* action) {
  return Settle(DoGetAction(tenant_id, key, action));
}

Status RocksStoreImpl::Lookup(const std::string& tenant_id, const std::string& intent_ref,
                              const std::string& action_type, LookupResult* result) {
  return Settle(DoLookup(tenant_id, intent_ref, action_type, result));
}

Status RocksStoreImpl::Amend(const IntentCandidate& request, bool force, AmendResult* result) {
  return Settle(DoAmend(request, force, result));
}

Status RocksStoreImpl::Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                                 std::vector<Action>* actions) {
  return Settle(DoUncertain(tenant_id, limit, actions));
}

}  // namespace intentd::store
