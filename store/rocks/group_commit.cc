#include "store/rocks/group_commit.h"

#include <pthread.h>

#include <algorithm>
#include <future>

namespace intentd::store {
namespace {

Status Lost() {
  return Status::StorageError(
      "write not made durable (writing or syncing the WAL failed); nothing was granted");
}

}  // namespace

GroupCommit::GroupCommit(SyncFn sync, RecoverFn recover, uint64_t durable)
    : sync_(std::move(sync)), recover_(std::move(recover)), durable_(durable) {
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

GroupCommit::Verdict GroupCommit::Check(uint64_t ticket) const {
  if (ticket == 0) return Verdict::kDurable;
  // durable_ first: Fail records a range before MarkDurable moves past it.
  const uint64_t durable = durable_.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(lost_mu_);
  if (InRanges(lost_, ticket)) return Verdict::kLost;
  return ticket <= durable ? Verdict::kDurable : Verdict::kPending;
}

void GroupCommit::WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) {
  Verdict verdict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Decided under mu_: a verdict reached after this check finds the
    // waiter in waiters_ (AnswerDecided takes mu_).
    verdict = Check(ticket);
    if (verdict == Verdict::kPending && !stopping_) {
      waiters_.push_back(Waiter{ticket, std::move(done)});
      // One push at a time: the count passes through wanted_.
      if (waiters_.size() == wanted_) cv_.notify_one();
      return;
    }
  }
  switch (verdict) {
    case Verdict::kDurable:
      done(Status::Ok());
      return;
    case Verdict::kLost:
      done(Lost());
      return;
    case Verdict::kPending:
      break;
  }
  done(Status::StorageError("the store is closing; nothing was granted"));
}

Status GroupCommit::WaitDurable(uint64_t ticket) {
  if (Check(ticket) == Verdict::kDurable) return Status::Ok();
  std::promise<Status> result;
  WhenDurable(ticket, [&result](const Status& s) { result.set_value(s); });
  return result.get_future().get();
}

void GroupCommit::MarkDurable(uint64_t commit) {
  uint64_t durable = durable_.load();
  while (durable < commit && !durable_.compare_exchange_weak(durable, commit)) {
  }
  AnswerDecided();
}

void GroupCommit::Fail(CommitRange range) {
  if (range.through <= range.after) return;
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    lost_.push_back(range);
    std::sort(lost_.begin(), lost_.end(),
              [](const CommitRange& a, const CommitRange& b) { return a.after < b.after; });
    // Adjacent or overlapping ranges merge (a generation that failed again
    // before any write).
    std::vector<CommitRange> merged;
    for (const CommitRange& r : lost_) {
      if (!merged.empty() && r.after <= merged.back().through) {
        merged.back().through = std::max(merged.back().through, r.through);
      } else {
        merged.push_back(r);
      }
    }
    lost_.swap(merged);
  }
  AnswerDecided();
}

void GroupCommit::RequestRecovery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovery_wanted_ = true;
    recovery_kick_ = true;
  }
  cv_.notify_one();
}

void GroupCommit::AnswerDecided() {
  std::vector<Waiter> decided;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto keep = std::stable_partition(waiters_.begin(), waiters_.end(), [this](const Waiter& w) {
      return Check(w.ticket) == Verdict::kPending;
    });
    decided.assign(std::make_move_iterator(keep), std::make_move_iterator(waiters_.end()));
    waiters_.erase(keep, waiters_.end());
  }
  for (Waiter& w : decided) {
    w.done(Check(w.ticket) == Verdict::kDurable ? Status::Ok() : Lost());
  }
}

Status GroupCommit::SyncRound(uint64_t* target) {
  const auto start = std::chrono::steady_clock::now();
  const Status synced = sync_(target);
  if (!synced.ok()) return synced;
  const auto took = std::chrono::steady_clock::now() - start;
  const double seconds = std::chrono::duration<double>(took).count();
  rounds_[SyncBucket(seconds)].fetch_add(1, std::memory_order_relaxed);
  sync_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(),
                     std::memory_order_relaxed);
  syncs_.fetch_add(1, std::memory_order_relaxed);
  return synced;
}

void GroupCommit::ReadCounts(GroupCommitCounts* counts) const {
  counts->wal_syncs = syncs_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < counts->sync_rounds.size(); ++i) {
    counts->sync_rounds[i] = rounds_[i].load(std::memory_order_relaxed);
  }
  counts->sync_seconds = static_cast<double>(sync_ns_.load(std::memory_order_relaxed)) / 1e9;
}

void GroupCommit::Loop() {
  size_t last_round = 0;
  std::chrono::steady_clock::duration last_sync{};
  std::chrono::milliseconds pause = kRecoveryPauseMin;
  for (;;) {
    bool recover = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wanted_ = 1;
      cv_.wait(lock, [&] { return stopping_ || recovery_wanted_ || (sync_ && !waiters_.empty()); });
      if (stopping_) break;
      recover = recovery_wanted_;
      // Gather: the connections the last sync answered are usually about to
      // send their next requests; starting the next sync with the first of
      // them only would make the others wait two syncs. Wait for as many as
      // last time, for at most half the last sync's duration.
      if (!recover && last_round > 1 && waiters_.size() < last_round) {
        const auto until = std::chrono::steady_clock::now() +
                           std::min<std::chrono::steady_clock::duration>(last_sync / 2, kGatherMax);
        wanted_ = last_round;
        cv_.wait_until(lock, until, [&] {
          return stopping_ || recovery_wanted_ || waiters_.size() >= last_round;
        });
      }
      last_round = waiters_.size();
    }
    if (recover) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        recovery_kick_ = false;
      }
      const bool recovered = recover_();
      AnswerDecided();
      std::unique_lock<std::mutex> lock(mu_);
      if (recovered) {
        recovery_wanted_ = false;
        pause = kRecoveryPauseMin;
      } else {
        // A kick (a write refused meanwhile) ends the pause early, but not
        // before kRecoveryPauseKicked: a reopen replays the WAL, and a disk
        // that stays full must not cost one per request.
        const auto paused = std::chrono::steady_clock::now();
        cv_.wait_until(lock, paused + std::min(pause, kRecoveryPauseKicked),
                       [this] { return stopping_; });
        cv_.wait_until(lock, paused + pause, [this] { return stopping_ || recovery_kick_; });
        pause = std::min(pause * 2, kRecoveryPauseMax);
      }
      continue;
    }
    // Every ticket waiting now was taken before the sync reads its target.
    const auto sync_start = std::chrono::steady_clock::now();
    uint64_t target = 0;
    const Status synced = SyncRound(&target);
    last_sync = std::chrono::steady_clock::now() - sync_start;
    if (synced.ok()) {
      MarkDurable(target);
    } else {
      // The waiters stay: the recovery decides what their writes became.
      RequestRecovery();
    }
  }
  // Stopping: settle what can be settled, so that a waiter's answer is the
  // truth about its write; whatever is still undecided after a few tries
  // (a disk that can neither sync nor take the guard's write) is answered
  // kStorageError.
  for (int attempt = 0; attempt < 3; ++attempt) {
    bool recover = false, any = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      any = !waiters_.empty();
      recover = recovery_wanted_;
    }
    if (!any) break;
    if (recover) {
      if (recover_()) {
        std::lock_guard<std::mutex> lock(mu_);
        recovery_wanted_ = false;
      }
      AnswerDecided();
    } else if (sync_) {
      uint64_t target = 0;
      if (SyncRound(&target).ok()) {
        MarkDurable(target);
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        recovery_wanted_ = true;
      }
    } else {
      break;
    }
  }
  std::vector<Waiter> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(waiters_);
  }
  for (Waiter& w : left) {
    w.done(Status::StorageError("the store is closing; nothing was granted"));
  }
}

}  // namespace intentd::store
