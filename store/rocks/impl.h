// RocksStore's implementation class (internal: includes RocksDB).
//
// Atomicity: a plain rocksdb::DB plus a striped lock table (lock_table.h),
// rather than a TransactionDB. Every operation locks the stripes of the
// records it reads and writes, reads them, takes the pure decision
// (decision.h) and applies it as ONE WriteBatch. Because every writer of a
// record holds its stripe, nothing changes between the read and the write,
// which is exactly the put-if-absent / compare-and-set the protocol needs.
// Compared with TransactionDB + GetForUpdate this skips the transaction's
// lock manager, its write-batch-with-index and the per-key lock bookkeeping,
// keeps write groups (shared fsyncs) intact, and never reports a deadlock or
// timeout that callers would have to retry. The price is that the lock table
// covers only this process, which RocksDB's LOCK file already guarantees.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/listener.h>
#include <rocksdb/write_batch.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "store/decision.h"
#include "store/rocks/commit_stamp.h"
#include "store/rocks/fault_injection.h"
#include "store/rocks/group_commit.h"
#include "store/rocks/lock_table.h"
#include "store/rocks/options.h"
#include "store/rocks/rocks_store.h"
#include "store/rocks/wal_files.h"
#include "store/rocks/wal_guard.h"

namespace intentd::store {

// The on-disk format written by this version (meta "format_version").
// 2: the lease index holds one entry per started action (format 1: two, see
// codec.h); a format 1 store is upgraded when opened for writing.
// 3: an intent's retain_until_ms is its own deadline and it lives on with its
// action (IntentLive, decision.h); format 2 moved the intent's deadline with
// every change of its action, and its intents read the same way under the
// format 3 rule, so opening one for writing only records the new version. An
// older intentd must not open a format 3 store: it would drop the intents of
// long-started actions.
// 4: the messages column family (the `seen` op), created when a format 3
// store is opened for writing, intent values that end with their key_id
// (older ones read as "0"), and the registry of key ids in meta ("key_id/"
// ID; opening an older store that holds intents registers "0"). An older
// intentd must not open a format 4 store: it would refuse the longer intent
// values as malformed.
// 5: intent values that end with their input (the payload as sent; older
// ones read as none), and message claims that can be released. Opening a
// format 4 store only records the new version; an older intentd must not
// open a format 5 store (it would refuse the intent values as malformed).
// 6: the "policy" column family (allowance counters, pending approvals) and
// intent values that end with an approval; opening a format 5 store creates
// the family and records the new version.
inline constexpr int kFormatVersion = 6;
// The meta column family's registry of key ids: one key per id.
inline constexpr char kKeyIdPrefix[] = "key_id/";

// Raised by RocksDB's background errors (failed flush, compaction, WAL
// write): the store generation has failed (RocksStoreImpl::Recover). RocksDB's
// own automatic recovery is turned off: it resumes writing through a WAL
// writer that saw an error, which the store must never do (wal_files.h).
class StorageErrorListener : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "intentd.StorageErrorListener"; }
  void OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                         rocksdb::Status* /*error*/) override {
    raised.store(true, std::memory_order_release);
  }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status /*error*/,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
  std::atomic<bool> raised{false};
};

// An open DB and its column families.
struct DbHandles {
  rocksdb::DB* db = nullptr;
  rocksdb::ColumnFamilyHandle* intents = nullptr;
  rocksdb::ColumnFamilyHandle* actions = nullptr;
  rocksdb::ColumnFamilyHandle* leases = nullptr;
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* messages = nullptr;  // nullptr: read-only, format < 4
  rocksdb::ColumnFamilyHandle* policy = nullptr;    // nullptr: read-only, format < 6
  std::vector<rocksdb::ColumnFamilyHandle*> all;    // every handle, to destroy
  bool read_only = false;                           // opened read-only after a failed reopen
  // What the intents' retention filter reads; detached by CloseDb.
  std::shared_ptr<ActionReader> action_reader;
  // The replay filter of this open (DBOptions::wal_filter points at it).
  std::shared_ptr<ReplayFilter> replay;
};

// The action stored under `encoded_key` (codec::ActionKey) and its retention
// deadline, past it or not; *found false when there is none. kCorruption when
// it cannot be decoded. For the store, the intents' compaction filter and
// export.
Status GetActionRecord(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* actions,
                       const rocksdb::ReadOptions& ro, const std::string& encoded_key,
                       Action* action, int64_t* retain_until_ms, bool* found);

// One opening of the DB for writing (OpenDb).
struct OpenRequest {
  // A first start may create a store where there is none; a reopen never
  // does (a data directory that vanished stays vanished).
  bool create = false;
  // Commit ranges the replay skips (RocksStoreImpl::Recover), besides the
  // guard file's.
  std::vector<CommitRange> voids;
};
struct OpenOutcome {
  std::string identity;      // RocksDB's DB identity
  uint64_t next_commit = 1;  // commit numbers continue from here
  // Logged by the caller: a torn tail dropped, a guard ignored, a loss
  // accepted (RocksOptions::accept_wal_loss). "" when nothing happened.
  std::string notice;
  // With accept_wal_loss: the RocksDB sequence numbers dropped (0: none).
  uint64_t accepted_loss = 0;
};

// Opens the DB at options.path for writing after the checks RocksStore::Open
// promises (busy, format, corruption, foreign directory, a WAL that would
// drop acknowledged writes: open.cc), creating it when absent and
// request.create. `guard` (the store's guard file, wal_guard.h) is opened
// when null and rewritten (voids dropped) once the open replayed them.
Status OpenDb(const RocksOptions& options, rocksdb::Env* env,
              std::shared_ptr<StorageErrorListener> listener, const OpenRequest& request,
              std::unique_ptr<WalGuard>* guard, DbHandles* handles, OpenOutcome* outcome);
// Opens an existing store read-only, writing nothing to its directory, its
// replay skipping `voids` and the guard file's.
Status OpenDbReadOnly(const RocksOptions& options, rocksdb::Env* env,
                      const std::vector<CommitRange>& voids, DbHandles* handles);
// Closes and clears `handles` (no-op when closed).
void CloseDb(DbHandles* handles);

class RocksStoreImpl final : public RocksStore {
 public:
  RocksStoreImpl(const RocksOptions& options, std::unique_ptr<WalFiles> wal,
                 std::unique_ptr<rocksdb::Env> env, std::shared_ptr<FaultInjection> faults,
                 std::shared_ptr<StorageErrorListener> errors, std::unique_ptr<WalGuard> guard,
                 DbHandles handles, const OpenOutcome& opened);
  ~RocksStoreImpl() override;

  // Store. Each op runs under the DB (Entered) and then, in a synced store
  // whose callers take no tickets, waits for its ticket (Settle).
  Status Freeze(const IntentCandidate& request, FreezeResult* result) override;
  Status Begin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result) override;
  Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                  const std::string& response, Action* action) override;
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
  Status MessageDone(const std::string& tenant_id, const std::string& channel,
                     const std::string& message_id, int64_t lease_token,
                     MessageRecord* record) override;
  Status ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                        const std::string& message_id, int64_t lease_token,
                        MessageRecord* record) override;
  Status ForgetMessage(const std::string& tenant_id, const std::string& channel,
                       const std::string& message_id, bool* forgotten) override;
  Status RegisterKeyId(const std::string& key_id) override;
  Status RegisteredKeyIds(std::vector<std::string>* key_ids) override;
  Status UnregisterKeyId(const std::string& key_id) override;
  Status CountKeyIdUsage(const std::vector<std::string>& only,
                         std::vector<KeyIdUsage>* usage) override;
  Status DayCounters(const std::string& tenant_id, int64_t day,
                     std::vector<Counter>* counters) override;
  Status DecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                        const std::string& action_type, bool approve, const std::string& by,
                        const std::string& note, const std::string& error,
                        LookupResult* result) override;
  Status PendingApprovals(const std::optional<std::string>& tenant_id, size_t limit,
                          std::vector<Intent>* intents) override;
  uint64_t DurabilityTicket() override;
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) override;
  TicketState CheckTicket(uint64_t ticket) override;

  // Store's optional features (admin.cc)
  std::optional<uint64_t> ApproximateSizeBytes() override;
  Status Flush() override;
  Status Checkpoint(const std::string& dir) override;
  std::optional<GroupCommitCounts> CommitCounts() const override;
  std::optional<StoreSpace> ReadSpace() const override;
  std::optional<StoreHealth> ReadHealth() const override;

  // RocksStore
  Status CompactAll() override;
  std::string EngineStats() override;
  Status BulkLoad(const std::vector<IntentRecord>& records) override;

 private:
  struct StoredIntent {
    Intent intent;
    int64_t retain_until_ms = 0;
  };

  // An operation's hold on the DB (db_mu_ shared), from Enter until it
  // returns. At its end it records the operation's durability ticket: the
  // commit it wrote, else the highest commit a reader of this DB may have
  // seen, which covers whatever it read (a generation change needs db_mu_
  // exclusive, so the ticket belongs to the DB the operation used).
  class Entered {
   public:
    explicit Entered(RocksStoreImpl* store) : store_(store) {}
    ~Entered();
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    friend class RocksStoreImpl;
    RocksStoreImpl* store_;
    std::shared_lock<std::shared_mutex> lock_;
  };
  enum class Access { kRead, kWrite };
  // Every operation starts here. Writes are refused (kStorageError, nothing
  // written) while the disk is short of space or the store generation has
  // failed and is not recovered yet (a write waits up to kRecoveryWait for a
  // recovery it triggers); reads go on from the DB as it is.
  Status Enter(Access access, Entered* entered);
  // The calling thread's ticket for this store: recorded by Entered, taken
  // (and cleared) by DurabilityTicket and Settle.
  void NoteTicket(uint64_t ticket);
  void NoteOwnCommit(uint64_t commit);  // Commit: the ticket of the operation's write
  uint64_t TakeTicket();
  // In a synced store without defer_sync, waits (no lock held) until the
  // operation's ticket is decided: kStorageError when it was lost, else `s`.
  // Otherwise returns `s`.
  Status Settle(Status s);
  // Waits for the operation's ticket whatever the mode (writes made outside
  // the request path, whose callers take no ticket: the key id registry).
  Status SettleAlways(Status s);

  // The operations, run under Entered (rocks_store.cc, messages.cc).
  Status DoFreeze(const IntentCandidate& request, FreezeResult* result);
  Status DoBegin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result);
  Status DoGetAction(const std::string& tenant_id, const std::string& key, Action* action);
  Status DoLookup(const std::string& tenant_id, const std::string& intent_ref,
                  const std::string& action_type, LookupResult* result);
  Status DoAmend(const IntentCandidate& request, bool force, AmendResult* result);
  Status DoDecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                          const std::string& action_type, bool approve, const std::string& by,
                          const std::string& note, const std::string& error, LookupResult* result);
  Status DoUncertain(const std::optional<std::string>& tenant_id, size_t limit,
                     std::vector<Action>* actions);
  Status DoSeen(const SeenRequest& request, std::vector<SeenAnswer>* answers);
  // done (release false) and release of a claim.
  Status DoEndClaim(const std::string& tenant_id, const std::string& channel,
                    const std::string& message_id, int64_t lease_token, bool release,
                    MessageRecord* record);
  Status DoForgetMessage(const std::string& tenant_id, const std::string& channel,
                         const std::string& message_id, bool* forgotten);
  Status Finish(const std::string& tenant_id, const std::string& key, const FinishRequest& request,
                Action* action);

  // Reads a request's intent under `locks` (which hold `ikey` and, when
  // `akey` is not null, *akey) and checks it (CheckIntentCandidate). With
  // `akey`: when the stored intent points at another action, that action's
  // stripe is taken too and *akey names it, so the call acts on the action
  // of the key frozen whatever key the candidate derived. *now: the clock
  // read for this (last) read.
  Status ReadRequestIntent(const IntentCandidate& request, const std::string& ikey, LockSet* locks,
                           std::string* akey, int64_t* now, std::optional<StoredIntent>* stored);
  // Reads a record; nullopt when absent or past retention.
  Status ReadIntent(const std::string& encoded_key, int64_t now_ms,
                    std::optional<StoredIntent>* out, const rocksdb::Snapshot* snapshot = nullptr);
  Status ReadAction(const std::string& encoded_key, int64_t now_ms, std::optional<Action>* out,
                    const rocksdb::Snapshot* snapshot = nullptr);
  // A message record (messages.cc); nullopt when absent or past retention.
  Status ReadMessage(const std::string& encoded_key, int64_t now_ms,
                     std::optional<MessageRecord>* out);

  // The counter keys of `allowances` on `day`, to lock before reading.
  static std::vector<std::string> CounterKeys(const std::string& tenant_id, int64_t day,
                                              const std::vector<Allowance>& allowances);
  // Counts an intent's allowances (store.h, Allowance) under their locks:
  // adds the counters' new values to `batch`, or answers kRefused with
  // *refusal and adds nothing.
  Status CountAllowances(const std::vector<Allowance>& allowances,
                         const std::vector<std::string>& keys, int64_t day,
                         rocksdb::WriteBatch* batch, AllowanceRefusal* refusal);

  // Adds to `batch` the new action record and the lease index changes from
  // `before` (nullopt: absent) to `after`.
  void PutAction(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                 const std::optional<Action>& before, const Action& after, int64_t now_ms);
  // Adds to `batch` the intent, kept retention after now_ms (and beyond
  // that with its action, IntentLive).
  // Keeps the pending approvals' index: an entry while the intent's approval
  // is pending; `before` its approval state as stored (kNone: new).
  void PutIntent(rocksdb::WriteBatch* batch, const std::string& encoded_key, const Intent& intent,
                 int64_t now_ms, ApprovalState before = ApprovalState::kNone);

  // The one write of an operation: stamped with the next commit number
  // (commit_stamp.h) and written, both under write_mu_, so that commit
  // numbers follow the WAL's order and nothing writes through a WAL writer
  // after one of its writes failed (RocksDB 7.8 as Debian builds it asserts
  // then, aborting the process). kStorageError, with nothing written, when
  // the store generation has failed. A write RocksDB refuses fails the
  // generation; in a synced store it still returns Ok: the record may be in
  // the WAL, and its ticket's verdict (lost, once Recover voided it) is the
  // answer. Never waits for a sync.
  Status Commit(rocksdb::WriteBatch* batch);
  // With write_mu_ held: the generation has failed; the sync thread recovers.
  void MarkFailedLocked(const std::string& why);
  // One sync of the WAL for the group commit (GroupCommit::SyncFn): writes
  // RocksDB's WAL buffer out (BufferedWal) and syncs the WAL files
  // (WalFiles::SyncAll, not DB::SyncWAL: see wal_files.h).
  Status SyncWal(uint64_t* target);
  // GroupCommit::RecoverFn, on the sync thread only: voids the writes of the
  // failed generation that were not durable, durably (the guard file), and
  // declares their tickets lost; then closes and reopens the DB, which
  // replays the WAL without them. true once writes go on. A reopen never
  // creates a store, and never opens another store than the one this
  // process opened (the data directory was moved away or replaced): the
  // store then stays failed (reads too) until the directory is back.
  // When the reopen fails (the fault persists), opens read-only so that
  // reads go on.
  bool Recover();
  // options_.log, when set.
  void Log(bool error, const std::string& line) const {
    if (options_.log) options_.log(error, line);
  }
  // The data directory is the one this process opened (device and inode).
  bool SameDirectory(std::string* why) const;
  Status FlushLocked();
  // The group commit's counts, with sync or without (EngineStats).
  GroupCommitCounts AllCommitCounts() const;

  // Writes are refused (kStorageError) while the data directory's file
  // system has less free space than its reserve (FreeSpaceReserve). A WAL
  // append that fails with ENOSPC costs a reopen of the DB (Recover) and a
  // database that fills its disk cannot flush or compact either; so the
  // store stops before the disk is full, the way databases keep a
  // flood-stage watermark. The check is cached for 10 ms: a disk filled
  // faster than that still ends in failed appends, which are survived
  // (storage_error for what was not durable, nothing of it granted, reopen
  // once space is back).
  Status CheckFreeSpace();
  std::atomic<bool> space_low_{false};
  std::atomic<int64_t> space_next_check_us_{0};

  // Uncertain: a lease index entry whose action did not match in the scan's
  // snapshot, read again under the action's stripe lock. *listed: the entry
  // is still there and its action started with that lease (else Ok and not
  // listed: it changed meanwhile); kCorruption if the entry stays unmatched.
  Status RecheckLeaseEntry(std::string_view entry, const std::string& akey, int64_t lease_until_ms,
                           int64_t now, bool* listed, std::optional<Action>* action);

  static constexpr std::chrono::milliseconds kRecoveryWait{1000};
  static constexpr std::chrono::seconds kDirectoryCheckInterval{1};

  // Writes committed (GroupCommitCounts::writes).
  std::atomic<uint64_t> writes_{0};

  RocksOptions options_;
  const Clock* clock_;
  std::shared_ptr<FaultInjection> faults_;  // before env_: the file system reads it
  std::unique_ptr<WalFiles> wal_;           // before env_: its file system reports here
  std::unique_ptr<rocksdb::Env> env_;       // outlives the DB
  std::shared_ptr<StorageErrorListener> errors_;
  std::unique_ptr<WalGuard> guard_;  // the guard file (wal_guard.h)
  const std::string identity_;       // RocksDB's DB identity, from the first open
  dev_t dir_dev_ = 0;                // the data directory of the first open
  ino_t dir_ino_ = 0;
  rocksdb::WriteOptions write_options_;
  // Every store has one: it syncs (synced stores) and recovers (all).
  std::unique_ptr<GroupCommit> commit_;
  LockTable locks_{4096};

  // Serializes commits: the commit numbers, the writes, the WAL buffer's
  // write-out, and the DB calls that may switch the memtable (and so write
  // the WAL writer's buffer): flush, checkpoint, compaction.
  std::mutex write_mu_;
  uint64_t last_commit_ = 0;  // guarded by write_mu_: the last commit number given
  bool failed_ = false;       // guarded by write_mu_: the generation failed
  std::string failure_;       // guarded by write_mu_: why
  // The highest commit number a reader of the current DB may see: the last
  // one written, or after a failure the last durable one.
  std::atomic<uint64_t> visible_commit_{0};
  std::atomic<bool> failed_flag_{false};  // failed_, read without write_mu_
  std::atomic<uint64_t> durable_seq_{0};  // the sequence the last sync covered
  // The commit number the next WAL record carries (WalFiles' commit hook):
  // the write in progress's, else last_commit_ + 1.
  std::atomic<uint64_t> next_commit_{1};
  std::chrono::steady_clock::time_point next_dir_check_;  // sync thread only

  // Recovery (sync thread only, but read by ReadHealth under recovery_mu_).
  mutable std::mutex recovery_mu_;
  std::condition_variable recovered_cv_;
  uint64_t recovery_attempts_ = 0;  // guarded by recovery_mu_: reopens tried and ended
  uint64_t recovery_started_ = 0;   // guarded by recovery_mu_: reopens begun
  std::vector<CommitRange> voids_;  // guarded by recovery_mu_: to skip until a reopen
  bool voids_durable_ = false;      // guarded by recovery_mu_: in the guard file
  uint64_t generations_ = 1;        // guarded by recovery_mu_: DBs opened for writing
  uint64_t lost_writes_ = 0;        // guarded by recovery_mu_: commits voided
  uint64_t wal_loss_accepted_ = 0;  // set by the constructor
  std::string last_failure_;        // guarded by recovery_mu_
  uint64_t failed_attempts_ = 0;    // guarded by recovery_mu_: since the failure
  std::chrono::steady_clock::time_point failed_at_;  // guarded by recovery_mu_

  // Shared by every operation, exclusive to Recover(), which replaces h_.
  std::shared_mutex db_mu_;
  DbHandles h_;               // guarded by db_mu_; h_.db == nullptr: reopen failed
  std::string reopen_error_;  // guarded by db_mu_
};

// Translates a RocksDB status (never kOk) into the store's status.
Status FromRocks(const rocksdb::Status& s, const std::string& context);

}  // namespace intentd::store

namespace intentd::store {

// RocksStore::Open, optionally on a file system with injected faults.
Status OpenRocksStore(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                      std::unique_ptr<RocksStore>* store);

}  // namespace intentd::store
