// Group commit for a synced RocksDB store.
//
// Writes go to RocksDB unsynced. Each caller then takes a ticket (the DB's
// latest sequence number after its write or read) and asks to be told when
// everything up to it is durable. One thread runs WAL syncs back to back
// while anyone waits, so that each sync covers every write made during the
// previous one: throughput grows with concurrency while the CPUs make the
// next writes. Why not RocksDB's synced write groups (WriteOptions::sync):
// there the group's leader appends the WAL, fsyncs it and inserts the
// memtables while every other writer waits, so the disk and the CPUs take
// turns.
//
// Contract:
// - WhenDurable(ticket, done) calls done(Ok) once a sync that read its target
//   after `ticket` was taken has succeeded, and done(kStorageError) when that
//   sync failed (nothing the caller wrote may be reported as granted). `done`
//   runs on the sync thread (or inline when the ticket is already durable, or
//   when the group commit has stopped); it must be quick.
// - WaitDurable is the same wait for a caller that blocks.
// - Stop() answers every waiter, then joins the thread; later calls answer
//   kStorageError at once.
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

#include "store/rocks/rocks_store.h"
#include "store/status.h"

namespace intentd::store {

class GroupCommit {
 public:
  // Makes the WAL durable. *target holds the highest ticket of the round;
  // the function raises it to the sequence number the sync covers (read
  // before syncing). Called on the sync thread only.
  using SyncFn = std::function<Status(uint64_t* target)>;

  // Starts the sync thread; everything up to `durable_seq` is durable.
  GroupCommit(SyncFn sync, uint64_t durable_seq);
  ~GroupCommit();  // Stop()
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done);
  Status WaitDurable(uint64_t ticket);
  void Stop();

  // Whether everything up to `ticket` is durable.
  bool Durable(uint64_t ticket) const {
    return durable_seq_.load(std::memory_order_acquire) >= ticket;
  }
  // After the DB was (re)opened or resumed with a synced write: everything in
  // it up to `seq` is durable.
  void MarkDurable(uint64_t seq);
  // A failed sync covered writes that no later sync made durable.
  bool UndurableVisible() const {
    return failed_through_.load(std::memory_order_acquire) >
           durable_seq_.load(std::memory_order_acquire);
  }

  // Successful syncs, by duration (RocksStore::GroupCommitCounts).
  void ReadCounts(RocksStore::GroupCommitCounts* counts) const;

 private:
  struct Waiter {
    uint64_t ticket;
    std::function<void(const Status&)> done;
  };
  void Loop();
  // Runs sync_ for a round up to `target`, timed and counted.
  Status SyncRound(uint64_t target);

  const SyncFn sync_;
  std::atomic<uint64_t> durable_seq_;       // durable through this sequence
  std::atomic<uint64_t> failed_through_{0};  // a failed sync covered this

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Waiter> waiters_;  // guarded by mu_
  // Guarded by mu_: the sync thread waits on cv_ until waiters_ holds this
  // many (1 when idle, the last round's size while gathering); a new waiter
  // notifies only when it completes that count. Every notify_one while the
  // sync thread waits is a wake-up and a context switch, most of them for
  // nothing while it gathers.
  size_t wanted_ = 1;
  bool stopping_ = false;                     // guarded by mu_
  static constexpr std::chrono::microseconds kGatherMax{2000};

  std::atomic<uint64_t> syncs_{0};
  std::array<std::atomic<uint64_t>, RocksStore::kSyncBuckets + 1> rounds_{};
  std::atomic<uint64_t> sync_ns_{0};

  std::thread thread_;  // last: started once everything above is set
};

}  // namespace intentd::store
