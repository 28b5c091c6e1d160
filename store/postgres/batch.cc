#include "store/postgres/batch.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

namespace intentd::store::pg {

Batcher::Batcher(std::string kind, size_t max_batch, size_t max_leaders, RunFn run)
    : max_batch_(std::max<size_t>(1, max_batch)),
      max_leaders_(std::max<size_t>(1, max_leaders)),
      run_(std::move(run)) {
  counts_.kind = std::move(kind);
  for (size_t i = 0; i < max_leaders_; ++i) runners_.emplace_back([this] { Runner(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  runner_cv_.notify_all();
  for (std::thread& runner : runners_) runner.join();
}

void Batcher::TakeLocked(std::vector<Member*>* batch) {
  batch->clear();
  if (leaders_ >= max_leaders_ || queue_.empty()) return;
  const size_t n = std::min(max_batch_, queue_.size());
  batch->assign(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  for (const Member* m : *batch) {
    if (m->then_) --posted_waiting_;
  }
  ++leaders_;
}

auto Batcher::Lead(const std::vector<Member*>& batch, Member* own) -> std::vector<Member*> {
  const auto started = std::chrono::steady_clock::now();
  run_(batch);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const bool own_done = own != nullptr && std::find(batch.begin(), batch.end(), own) != batch.end();
  std::vector<Member*> next;
  bool wake_runner = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --leaders_;
    ++counts_.rounds[SyncBucket(took)];
    counts_.seconds += took;
    TakeLocked(&next);  // more wait: the place goes straight to them
    if (!next.empty() && own_done &&
        std::none_of(next.begin(), next.end(), [](const Member* m) { return !m->then_; })) {
      // Only posted members: the Batcher's thread (behind any other batch
      // handed to it while it ran one, with several leaders).
      runner_leads_.push_back(std::move(next));
      next.clear();
      wake_runner = true;
    }
  }
  if (wake_runner) runner_cv_.notify_one();
  // Members of `next` stay alive until it runs: none of them is settled.
  if (!next.empty() && (own == nullptr || own_done)) {
    // The oldest joined member leads it; else (only posted ones) this
    // thread, the Batcher's.
    for (Member* successor : next) {
      if (successor->then_) continue;
      std::lock_guard<std::mutex> lock(successor->mu_);
      successor->lead_ = std::move(next);
      successor->cv_.notify_one();
      next.clear();
      break;
    }
  }
  // A joined member of `batch` may return and be gone as soon as its mutex
  // is released, so it is touched last under that mutex; a posted one may
  // be freed by its `then`, so that is taken out first.
  std::vector<std::function<void()>> thens;
  for (Member* m : batch) {
    if (m == own) continue;
    if (m->then_) {
      thens.push_back(std::move(m->then_));
      continue;
    }
    std::lock_guard<std::mutex> lock(m->mu_);
    m->done_ = true;
    m->cv_.notify_one();
  }
  for (std::function<void()>& then : thens) then();
  return next;
}

void Batcher::Join(Member* member) {
  std::vector<Member*> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(member);
    ++counts_.requests;
    TakeLocked(&batch);  // the oldest, this member among them
  }
  for (;;) {
    while (!batch.empty()) {
      const bool own = std::find(batch.begin(), batch.end(), member) != batch.end();
      batch = Lead(batch, member);  // empty when own: the next went to another
      if (own) return;
    }
    std::unique_lock<std::mutex> lock(member->mu_);
    member->cv_.wait(lock, [member] { return member->done_ || !member->lead_.empty(); });
    if (member->done_) return;
    batch.swap(member->lead_);
  }
}

void Batcher::Post(Member* member, std::function<void()> then) {
  member->then_ = std::move(then);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(member);
    ++counts_.requests;
    ++posted_waiting_;
    wake = leaders_ < max_leaders_;
  }
  if (wake) runner_cv_.notify_one();
}

void Batcher::Runner() {
  pthread_setname_np(pthread_self(), "intentd-batch");  // shown by top -H, ps -L
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    runner_cv_.wait(lock, [this] {
      return !runner_leads_.empty() || (posted_waiting_ > 0 && leaders_ < max_leaders_) ||
             (stop_ && posted_waiting_ == 0);
    });
    std::vector<Member*> batch;
    if (!runner_leads_.empty()) {
      batch = std::move(runner_leads_.front());
      runner_leads_.pop_front();
    } else if (posted_waiting_ > 0 && leaders_ < max_leaders_) {
      TakeLocked(&batch);
    } else {
      return;  // stopping, and no posted member waits
    }
    lock.unlock();
    while (!batch.empty()) batch = Lead(batch, nullptr);
    lock.lock();
  }
}

StatementBatchCounts Batcher::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace intentd::store::pg
