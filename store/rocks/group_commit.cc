#include "store/rocks/group_commit.h"

#include <pthread.h>

#include <algorithm>
#include <future>

namespace intentd::store {

GroupCommit::GroupCommit(SyncFn sync, uint64_t durable_seq)
    : sync_(std::move(sync)), durable_seq_(durable_seq) {
  thread_ = std::thread([this] {
    // Named like RocksDB's own threads ("rocksdb:high"), for top -H and ps -L.
    pthread_setname_np(pthread_self(), "intentd-sync");
    Loop();
  });
}

GroupCommit::~GroupCommit() { Stop(); }

void GroupCommit::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void GroupCommit::MarkDurable(uint64_t seq) {
  uint64_t durable = durable_seq_.load();
  while (durable < seq && !durable_seq_.compare_exchange_weak(durable, seq)) {
  }
}

void GroupCommit::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) {
  if (Durable(ticket)) {
    done(Status::Ok());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      waiters_.push_back(Waiter{ticket, std::move(done)});
      // One push at a time: the count passes through wanted_.
      if (waiters_.size() == wanted_) cv_.notify_one();
      return;
    }
  }
  done(Status::StorageError("the store is closing; nothing was granted"));
}

Status GroupCommit::WaitDurable(uint64_t ticket) {
  if (Durable(ticket)) return Status::Ok();
  std::promise<Status> result;
  WhenDurable(ticket, [&result](const Status& s) { result.set_value(s); });
  return result.get_future().get();
}

Status GroupCommit::SyncRound(uint64_t target) {
  const auto start = std::chrono::steady_clock::now();
  const Status synced = sync_(&target);
  if (!synced.ok()) {
    uint64_t failed = failed_through_.load();
    while (failed < target && !failed_through_.compare_exchange_weak(failed, target)) {
    }
    return synced;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  const double seconds = std::chrono::duration<double>(took).count();
  size_t bucket = 0;
  while (bucket < RocksStore::kSyncBuckets && seconds > RocksStore::kSyncBoundsSeconds[bucket]) {
    ++bucket;
  }
  rounds_[bucket].fetch_add(1, std::memory_order_relaxed);
  sync_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(),
                     std::memory_order_relaxed);
  syncs_.fetch_add(1, std::memory_order_relaxed);
  MarkDurable(target);
  return synced;
}

void GroupCommit::ReadCounts(RocksStore::GroupCommitCounts* counts) const {
  counts->wal_syncs = syncs_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < counts->sync_rounds.size(); ++i) {
    counts->sync_rounds[i] = rounds_[i].load(std::memory_order_relaxed);
  }
  counts->sync_seconds = static_cast<double>(sync_ns_.load(std::memory_order_relaxed)) / 1e9;
}

void GroupCommit::Loop() {
  std::vector<Waiter> round;
  size_t last_round = 0;
  std::chrono::steady_clock::duration last_sync{};
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wanted_ = 1;
      cv_.wait(lock, [&] { return stopping_ || !waiters_.empty(); });
      if (waiters_.empty()) return;  // stopping, and every waiter was answered
      // Gather: the connections the last sync answered are usually about to
      // send their next requests; starting the next sync with the first of
      // them only would make the others wait two syncs. Wait for as many as
      // last time, for at most half the last sync's duration.
      if (last_round > 1 && waiters_.size() < last_round) {
        const auto until = std::chrono::steady_clock::now() +
                           std::min<std::chrono::steady_clock::duration>(last_sync / 2, kGatherMax);
        wanted_ = last_round;
        cv_.wait_until(lock, until, [&] { return stopping_ || waiters_.size() >= last_round; });
      }
      round.swap(waiters_);
    }
    last_round = round.size();
    // Every ticket in the round was taken before the sync reads its target.
    uint64_t target = 0;
    for (const Waiter& w : round) target = std::max(target, w.ticket);
    const auto sync_start = std::chrono::steady_clock::now();
    const Status synced = SyncRound(target);
    last_sync = std::chrono::steady_clock::now() - sync_start;
    for (Waiter& w : round) w.done(synced);
    round.clear();
  }
}

}  // namespace intentd::store
