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
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/decision.h"
#include "store/fault_injection.h"
#include "store/lock_table.h"
#include "store/rocks_options.h"
#include "store/rocks_store.h"
#include "store/wal_files.h"

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
inline constexpr int kFormatVersion = 3;

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
  uint64_t DurabilityTicket() override;
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) override;

  // RocksStore
  uint64_t ApproximateSizeBytes() override;
  Status Flush() override;
  Status Checkpoint(const std::string& dir) override;
  Status CompactAll() override;
  std::string EngineStats() override;
  GroupCommitCounts GroupCommit() const override;
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
  // options_.sync, returns once the write is in the synced WAL (group
  // commit, below; under load written by the writer thread, CommitQueued);
  // the caller still holds the records' stripes then, so nobody decides on
  // a write that is not yet durable.
  Status Commit(rocksdb::WriteBatch* batch);
  // For reads that take no stripe locks (GetAction, Lookup, Uncertain): waits
  // until everything they may have seen is durable. Immediate when nothing
  // is waiting for a sync.
  Status AwaitReadDurable();

  // Group commit (rocks_sync.cc): blocks until the sync thread has made
  // everything up to `seq` durable (Ok at once unless options_.sync, and with
  // defer_sync, where callers use WhenDurable). kStorageError when the sync
  // covering `seq` failed.
  Status WaitDurable(uint64_t seq);
  // One sync of the WAL files (WalFiles::SyncAll, not DB::SyncWAL: see
  // wal_files.h); *target: every write up to it is covered when Ok.
  Status SyncWalNow(uint64_t* target);
  // Writes RocksDB's WAL buffer out (BufferedWal) and syncs every WAL file
  // appended to; "" or what failed. h_.db must be open for writing.
  std::string WriteOutAndSyncWal();
  // Adds one successful WAL write-out and sync to GroupCommitCounts.
  void CountSync(std::chrono::steady_clock::duration took);
  void InitSynced();
  // A failed WAL sync covered writes that no later sync made durable.
  bool UndurableVisible() const {
    return sync_failed_through_.load(std::memory_order_acquire) >
           synced_seq_.load(std::memory_order_acquire);
  }
  // Synced stores: the thread that serves WaitDurable and WhenDurable, one
  // WAL sync per round for every ticket registered so far.
  void StartSyncer();
  void StopSyncer();
  void SyncerLoop();
  // After the DB was (re)opened or resumed with a synced write: everything in
  // it up to `seq` is durable.
  void ResetSyncedTo(uint64_t seq);

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

  std::atomic<uint64_t> synced_seq_{0};           // durable through this sequence
  std::atomic<uint64_t> sync_failed_through_{0};  // a failed sync covered this
  // A thread blocked in WaitDurable: answered in place, woken with the rest
  // of its round on round_words_ (WakeWord).
  struct BlockedWaiter {
    std::atomic<uint32_t> answered{0};
    Status result;
  };
  // What blocked callers sleep on (a futex word). Answering a round bumps
  // its word and sets the word's bit in relay_words_; the answering thread
  // then wakes ONE sleeper of all the words it answered, and whichever
  // thread returns from its sleep first takes every bit and wakes all the
  // sleepers of those words (RelayWakeUps). Waking a round's ~30-50 callers
  // costs ~8 us of CPU each here, and the woken callers preempt the waker:
  // done by the sync thread, that was 0.7-0.9 ms per round, as long as the
  // fdatasync itself, before it could start the next sync (bench_store, 64
  // threads, timed in a throwaway build: answering 859 / 700 / 922 us per
  // round before, 192 / 202 / 211 us with one wake-up per word). One
  // wake-up per sync rather than one per word (the writer's ~6-9 rounds of
  // a sync each have their own word): bench_store --threads=64, `perf stat`
  // over 3 s of two alternated pairs, futex calls per write 1.61 / 1.53 ->
  // 1.29 / 1.40; pairs/s, two sets of runs alternated in the same minutes,
  // medians 18,499 -> 20,349 and 17,376 -> 17,916.
  struct WakeWord {
    std::atomic<uint32_t> value{0};
  };
  // Blocked callers whose batches the writer thread wrote as one.
  // Also the WaitDurable callers of a sync round (on round_words_).
  struct WriteRound {
    std::vector<BlockedWaiter*> callers;
    WakeWord* word = nullptr;  // they sleep on it (one of queue_words_)
  };
  struct DurableWaiter {
    uint64_t ticket;
    std::function<void(const Status&)> done;  // WhenDurable
    BlockedWaiter* blocked = nullptr;         // WaitDurable
    std::unique_ptr<WriteRound> written;      // CommitQueued
  };
  // Under waiters_mu_: queues `w` for the sync thread and wakes it if `w`
  // completes the count it waits for (syncer_wants_).
  void AddWaiterLocked(DurableWaiter w);
  // Synced stores without deferred sync (in-process callers that block),
  // under load (kQueueFromCommitters): Commit hands the caller's batch to one
  // writer thread, which writes every batch queued meanwhile as one
  // WriteBatch (unsynced) and passes the round to the sync thread; the
  // caller sleeps once, until that round is durable. Callers writing
  // themselves sleep twice per operation (RocksDB's write group, then the
  // sync) on a machine where each wake-up costs 5-15 us; and the writer
  // writes while the sync thread syncs the previous round. bench_store, 64
  // threads: +7-42% pairs/s per alternated pair in four of five windows, no
  // difference in the fifth.
  struct QueuedWrite {
    rocksdb::WriteBatch* batch;
    BlockedWaiter* me;
  };
  Status CommitQueued(rocksdb::WriteBatch* batch);
  // Synced, and callers wait for their syncs (no defer_sync): the writer
  // thread runs.
  bool BlockingSync() const { return options_.sync && !options_.defer_sync; }
  void WriterLoop();
  // Answers every caller of `round` and bumps its word; returns the word's
  // bit, for WakeAnswered (WakeWord).
  uint32_t AnswerRound(WriteRound& round, const Status& status);
  // Publishes `bits` (answered words) and wakes one sleeper among them.
  void WakeAnswered(uint32_t bits);
  // Wakes every sleeper of the words published by WakeAnswered.
  void RelayWakeUps();
  // A caller sleeping on `word` until answered.
  Status Await(BlockedWaiter& me, WakeWord* word);
  uint32_t WordBit(const WakeWord* word) const;
  WakeWord* WordOfBit(int bit);
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::vector<QueuedWrite> queue_;  // guarded by queue_mu_
  uint64_t queue_round_ = 0;        // guarded by queue_mu_
  bool writer_stop_ = false;        // guarded by queue_mu_
  // RocksDB's write, then WaitDurable (deferred: the caller's ticket).
  Status CommitDirect(rocksdb::WriteBatch* batch);
  // Callers inside Commit. A caller queues its batch when this many others
  // are committing: with fewer, the hop to the writer thread costs more than
  // it saves (always queued, 1 and 8 threads: 8-27% fewer pairs/s in two
  // alternated pairs).
  static constexpr int kQueueFromCommitters = 8;
  std::atomic<int> committing_{0};
  // Rounds use the words in turn, so that a caller is rarely woken for a
  // round that is not its own (it then sleeps again). 16: at 64 threads the
  // writer makes ~6 rounds per WAL sync, so with 4 words (before) rounds in
  // flight shared them: bench_store --threads=64, `perf stat -a` over 4 s,
  // futex calls per write 2.33 -> 1.98, context switches 2.08 -> 1.71;
  // pairs/s alternated 15,523 / 17,317 / 17,280 / 17,811 -> 17,151 /
  // 18,056 / 17,848 / 17,607.
  static constexpr size_t kQueueWords = 16;
  WakeWord queue_words_[kQueueWords];
  std::thread writer_;
  // Bumped (and woken) when a round ends; rounds alternate between the two
  // words so that the waiters of the round being gathered sleep on.
  WakeWord round_words_[2];
  // Words answered and not yet relayed: bit i is queue_words_[i], bit
  // kQueueWords + j round_words_[j].
  std::atomic<uint32_t> relay_words_{0};
  static_assert(kQueueWords + 2 <= 32);
  uint64_t gathering_round_ = 0;  // guarded by waiters_mu_
  std::mutex waiters_mu_;
  std::condition_variable waiters_cv_;
  std::vector<DurableWaiter> waiters_;  // guarded by waiters_mu_
  // Guarded by waiters_mu_: the sync thread waits on waiters_cv_ until
  // waiters_ holds this many (1 when idle, the last round's size while
  // gathering); a new waiter notifies only when it completes that count.
  // Every notify_one while the sync thread waits is a futex wake-up and a
  // context switch, most of them for nothing while it gathers.
  size_t syncer_wants_ = 1;
  std::atomic<size_t> waiters_pending_{0};  // waiters_.size(), read without the lock
  static constexpr std::chrono::microseconds kSyncerSpin{200};
  static constexpr std::chrono::microseconds kGatherMax{2000};
  // For GroupCommit: WAL syncs made by the group commit, writes committed.
  std::atomic<uint64_t> wal_syncs_{0};
  std::atomic<uint64_t> writes_{0};
  // GroupCommitCounts::sync_rounds and sync_seconds (in ns); written by
  // whichever thread syncs, once per sync.
  std::array<std::atomic<uint64_t>, kSyncBuckets + 1> sync_rounds_{};
  std::atomic<uint64_t> sync_ns_{0};
  bool syncer_stop_ = false;            // guarded by waiters_mu_
  std::thread syncer_;
  // Held while a sync uses h_.db; Recover() takes it to swap h_.
  std::mutex sync_db_mu_;

  RocksOptions options_;
  const Clock* clock_;
  std::shared_ptr<FaultInjection> faults_;  // before env_: the file system reads it
  std::unique_ptr<WalFiles> wal_;           // before env_: its file system reports here
  std::unique_ptr<rocksdb::Env> env_;       // outlives the DB
  std::shared_ptr<StorageErrorListener> errors_;
  rocksdb::WriteOptions write_options_;
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
