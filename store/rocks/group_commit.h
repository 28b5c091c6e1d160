// Group commit for a synced RocksDB store, and the verdict on every write.
//
// Writes go to RocksDB unsynced, each with a commit number (commit_stamp.h)
// that grows by one per write and is never reused, also across a reopen of
// the store. A caller's ticket is the highest commit number its operation
// wrote or may have read. One thread runs WAL syncs back to back while anyone
// waits, so that each sync covers every write made during the previous one:
// throughput grows with concurrency while the CPUs make the next writes. Why
// not RocksDB's synced write groups (WriteOptions::sync): there the group's
// leader appends the WAL, fsyncs it and inserts the memtables while every
// other writer waits, so the disk and the CPUs take turns.
//
// A ticket ends in one of two verdicts, never changed afterwards:
//  - durable: a sync that covered it succeeded (MarkDurable);
//  - lost: the store generation that made it failed before it was durable,
//    and the store voided its writes (Fail): they will never take effect.
// A failed sync decides nothing by itself: the store's recovery, run on the
// sync thread (RecoverFn), first makes the void durable and only then
// declares the tickets lost, so that `storage_error` ("nothing was granted")
// is never said of a write a later replay could bring back.
//
// Contract:
// - WhenDurable(ticket, done) calls done(Ok) once durable and
//   done(kStorageError) once lost: inline when the verdict is known, else on
//   the sync thread. `done` must be quick and must not call into the store.
// - WaitDurable is the same wait for a caller that blocks.
// - Check(ticket) reads the verdict without waiting.
// - Stop() answers every waiter (a waiter still undecided then gets
//   kStorageError), then joins the thread; later calls answer at once.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "store/admin.h"
#include "store/rocks/commit_stamp.h"
#include "store/rocks/rocks_store.h"
#include "store/status.h"

namespace intentd::store {

class GroupCommit {
 public:
  // Makes the WAL durable; *target is set to the commit number the sync
  // covers (read before syncing). Called on the sync thread only. An error
  // means the store generation failed: RecoverFn is called next.
  using SyncFn = std::function<Status(uint64_t* target)>;
  // Recovers a failed store (RocksStoreImpl::Recover), calling Fail and
  // MarkDurable as it decides; returns true once the store writes again.
  // Called on the sync thread only, again after a pause while it returns
  // false.
  using RecoverFn = std::function<bool()>;

  // With `sync` empty, nothing is synced: writes are durable (acknowledged)
  // when made, MarkDurable is called by the writer, and the thread only
  // recovers. Everything up to `durable` is durable.
  GroupCommit(SyncFn sync, RecoverFn recover, uint64_t durable);
  ~GroupCommit();  // Stop()
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  enum class Verdict { kPending, kDurable, kLost };
  Verdict Check(uint64_t ticket) const;
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done);
  Status WaitDurable(uint64_t ticket);
  void Stop();

  // Everything up to `commit` that is not lost is durable; answers waiters.
  void MarkDurable(uint64_t commit);
  // Commits in `range` are lost; answers their waiters.
  void Fail(CommitRange range);
  // The store failed: the sync thread calls RecoverFn until it succeeds.
  void RequestRecovery();
  uint64_t durable() const { return durable_.load(std::memory_order_acquire); }

  // Successful syncs, by duration (store/admin.h, GroupCommitCounts).
  void ReadCounts(GroupCommitCounts* counts) const;

 private:
  struct Waiter {
    uint64_t ticket;
    std::function<void(const Status&)> done;
  };
  void Loop();
  // Runs sync_ for a round, timed and counted; *target as SyncFn.
  Status SyncRound(uint64_t* target);
  Verdict CheckLocked(uint64_t ticket) const;  // lost_mu_ held
  // Answers the waiters whose verdict is known; keeps the others.
  void AnswerDecided();

  const SyncFn sync_;
  const RecoverFn recover_;
  std::atomic<uint64_t> durable_;  // durable (or lost) through this commit

  mutable std::mutex lost_mu_;
  std::vector<CommitRange> lost_;  // guarded by lost_mu_; sorted, disjoint

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Waiter> waiters_;  // guarded by mu_
  // Guarded by mu_: the sync thread waits on cv_ until waiters_ holds this
  // many (1 when idle, the last round's size while gathering); a new waiter
  // notifies only when it completes that count. Every notify_one while the
  // sync thread waits is a wake-up and a context switch, most of them for
  // nothing while it gathers.
  size_t wanted_ = 1;
  bool recovery_wanted_ = false;  // guarded by mu_
  bool recovery_kick_ = false;    // guarded by mu_: RequestRecovery ends a pause
  bool stopping_ = false;         // guarded by mu_
  static constexpr std::chrono::microseconds kGatherMax{2000};
  // Pauses between recovery attempts while they fail.
  static constexpr std::chrono::milliseconds kRecoveryPauseMin{20};
  static constexpr std::chrono::milliseconds kRecoveryPauseMax{1000};
  static constexpr std::chrono::milliseconds kRecoveryPauseKicked{100};

  std::atomic<uint64_t> syncs_{0};
  std::array<std::atomic<uint64_t>, kSyncBuckets + 1> rounds_{};
  std::atomic<uint64_t> sync_ns_{0};

  std::thread thread_;  // last: started once everything above is set
};

}  // namespace intentd::store
