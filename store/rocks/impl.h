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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "store/decision.h"
#include "store/rocks/fault_injection.h"
#include "store/rocks/group_commit.h"
#include "store/rocks/lock_table.h"
#include "store/rocks/options.h"
#include "store/rocks/rocks_store.h"
#include "store/rocks/wal_files.h"

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
inline constexpr int kFormatVersion = 4;
// The meta column family's registry of key ids: one key per id.
inline constexpr char kKeyIdPrefix[] = "key_id/";

// Raised by RocksDB's background errors (failed flush, compaction, WAL
// write) and by failed writes: the store must recover before writing again.
class StorageErrorListener : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "intentd.StorageErrorListener"; }
  void OnBackgroundError(rocksdb::BackgroundErrorReason /*reason*/,
                         rocksdb::Status* /*error*/) override {
    raised.store(true, std::memory_order_release);
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
  std::vector<rocksdb::ColumnFamilyHandle*> all;  // every handle, to destroy
  bool read_only = false;  // opened read-only after a failed reopen
  // What the intents' retention filter reads; detached by CloseDb.
  std::shared_ptr<ActionReader> action_reader;
};

// The action stored under `encoded_key` (codec::ActionKey) and its retention
// deadline, past it or not; *found false when there is none. kCorruption when
// it cannot be decoded. For the store, the intents' compaction filter and
// export.
Status GetActionRecord(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* actions,
                       const rocksdb::ReadOptions& ro, const std::string& encoded_key,
                       Action* action, int64_t* retain_until_ms, bool* found);

// Opens the DB at options.path after the checks RocksStore::Open promises
// (busy, format, corruption, foreign directory), creating it when absent.
Status OpenDb(const RocksOptions& options, rocksdb::Env* env,
              std::shared_ptr<StorageErrorListener> listener, DbHandles* handles);
// Opens an existing store read-only, writing nothing to its directory.
Status OpenDbReadOnly(const RocksOptions& options, rocksdb::Env* env, DbHandles* handles);
// Closes and clears `handles` (no-op when closed).
void CloseDb(DbHandles* handles);

class RocksStoreImpl final : public RocksStore {
 public:
  RocksStoreImpl(const RocksOptions& options, std::unique_ptr<WalFiles> wal,
                 std::unique_ptr<rocksdb::Env> env, std::shared_ptr<FaultInjection> faults,
                 std::shared_ptr<StorageErrorListener> errors, DbHandles handles);
  ~RocksStoreImpl() override;

  // Store
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
  Status ForgetMessage(const std::string& tenant_id, const std::string& channel,
                       const std::string& message_id, bool* forgotten) override;
  Status RegisterKeyId(const std::string& key_id) override;
  Status RegisteredKeyIds(std::vector<std::string>* key_ids) override;
  Status UnregisterKeyId(const std::string& key_id) override;
  Status CountKeyIdUsage(const std::vector<std::string>& only,
                         std::vector<KeyIdUsage>* usage) override;
  uint64_t DurabilityTicket() override;
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) override;

  // RocksStore
  uint64_t ApproximateSizeBytes() override;
  Status Flush() override;
  Status Checkpoint(const std::string& dir) override;
  Status CompactAll() override;
  std::string EngineStats() override;
  GroupCommitCounts CommitCounts() const override;
  bool ReadSpace(Space* space) const override;
  Status BulkLoad(const std::vector<IntentRecord>& records) override;

 private:
  struct StoredIntent {
    Intent intent;
    int64_t retain_until_ms = 0;
  };

  // Reads a record; nullopt when absent or past retention.
  Status ReadIntent(const std::string& encoded_key, int64_t now_ms,
                    std::optional<StoredIntent>* out, const rocksdb::Snapshot* snapshot = nullptr);
  Status ReadAction(const std::string& encoded_key, int64_t now_ms, std::optional<Action>* out,
                    const rocksdb::Snapshot* snapshot = nullptr);

  // A message record (messages.cc); nullopt when absent or past retention.
  Status ReadMessage(const std::string& encoded_key, int64_t now_ms,
                     std::optional<MessageRecord>* out);

  // Adds to `batch` the new action record and the lease index changes from
  // `before` (nullopt: absent) to `after`.
  void PutAction(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                 const std::optional<Action>& before, const Action& after, int64_t now_ms);
  // Adds to `batch` the intent, kept retention after now_ms (and beyond
  // that with its action, IntentLive).
  void PutIntent(rocksdb::WriteBatch* batch, const std::string& encoded_key, const Intent& intent,
                 int64_t now_ms);

  // The one write of an operation. A failure is kStorageError, nothing was
  // granted, and the store recovers before its next operation. With
  // options_.sync and without defer_sync, returns once the write is in the
  // synced WAL (the group commit); the caller still holds the records'
  // stripes then, so nobody decides on a write that is not yet durable.
  Status Commit(rocksdb::WriteBatch* batch);
  // For reads that take no stripe locks (GetAction, Lookup, Uncertain), in
  // the same mode: waits until everything they may have seen is durable.
  // Immediate when nothing is waiting for a sync.
  Status AwaitReadDurable();
  // Commit, then (defer_sync) wait for its sync: key_ids.cc.
  Status CommitDurably(rocksdb::WriteBatch* batch);
  // One sync of the WAL for the group commit (GroupCommit::SyncFn): writes
  // RocksDB's WAL buffer out (BufferedWal) and syncs the WAL files
  // (WalFiles::SyncAll, not DB::SyncWAL: see wal_files.h).
  Status SyncWal(uint64_t* target);
  // Writes RocksDB's WAL buffer out (BufferedWal) and syncs every WAL file
  // appended to; "" or what failed. h_.db must be open for writing.
  std::string WriteOutAndSyncWal();
  // A failed WAL sync covered writes that no later sync made durable.
  bool UndurableVisible() const { return commit_ != nullptr && commit_->UndurableVisible(); }
  // After the DB was (re)opened or resumed with a synced write: everything
  // in it is durable.
  void MarkAllDurable() {
    if (commit_ != nullptr && h_.db != nullptr) commit_->MarkDurable(h_.db->GetLatestSequenceNumber());
  }

  // Every operation starts here and holds db_mu_ shared until it returns.
  // Writers (and readers finding no open DB) first recover when a storage
  // error was seen; readers keep reading the DB as it is meanwhile.
  // kStorageError when the operation cannot proceed.
  enum class Access { kRead, kWrite };
  // Writes are refused (kStorageError) while the data directory's file
  // system has less free space than its reserve (FreeSpaceReserve). A WAL append that fails with
  // ENOSPC costs a reopen of the DB (wal_files.h) and a database that fills its disk cannot flush
  // or compact either; so the store stops before the disk is full, the way databases keep a
  // flood-stage watermark. The check is cached for 10 ms: a disk filled faster than that still ends
  // in failed appends, which are survived (storage_error, nothing granted, reopen once space is
  // back).
  Status CheckFreeSpace();
  std::atomic<bool> space_low_{false};
  std::atomic<int64_t> space_next_check_us_{0};
  Status Enter(Access access, std::shared_lock<std::shared_mutex>* guard);
  // With recovery_mu_ held: leaves RocksDB's background-error (read-only)
  // mode with Resume(), checked by a probe write; when that is not enough
  // (a WAL write error is fatal to a RocksDB instance), closes and reopens
  // the DB, which replays the WAL. If the reopen fails (the fault persists),
  // opens read-only so that reads go on, and leaves errors_->raised set.
  void Recover();

  Status FlushLocked();
  // Uncertain: a lease index entry whose action did not match in the scan's
  // snapshot, read again under the action's stripe lock. *listed: the entry
  // is still there and its action started with that lease (else Ok and not
  // listed: it changed meanwhile); kCorruption if the entry stays unmatched.
  Status RecheckLeaseEntry(std::string_view entry, const std::string& akey, int64_t lease_until_ms,
                           int64_t now, bool* listed, std::optional<Action>* action);
  Status Finish(const std::string& tenant_id, const std::string& key,
                const FinishRequest& request, Action* action);

  // Writes committed (GroupCommitCounts::writes).
  std::atomic<uint64_t> writes_{0};
  // Held while a sync uses h_.db; Recover() takes it to swap h_.
  std::mutex sync_db_mu_;

  RocksOptions options_;
  const Clock* clock_;
  std::shared_ptr<FaultInjection> faults_;  // before env_: the file system reads it
  std::unique_ptr<WalFiles> wal_;           // before env_: its file system reports here
  std::unique_ptr<rocksdb::Env> env_;       // outlives the DB
  std::shared_ptr<StorageErrorListener> errors_;
  rocksdb::WriteOptions write_options_;
  // Synced stores only; stopped before the DB closes.
  std::unique_ptr<GroupCommit> commit_;
  LockTable locks_{4096};

  // Recovery gate: operations that see errors_->raised queue here, so that
  // the exclusive lock below is not starved by a stream of shared ones.
  std::mutex recovery_mu_;
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
