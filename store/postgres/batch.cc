#include "store/postgres/batch.h"

#include <algorithm>

namespace intentd::store::pg {

Batcher::Batcher(size_t max_batch, size_t max_leaders)
    : max_batch_(std::max<size_t>(1, max_batch)), max_leaders_(std::max<size_t>(1, max_leaders)) {}

void Batcher::Join(Member* member, const RunFn& run) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(member);
  ++counts_.members;
  for (;;) {
    if (member->done_) return;
    if (leaders_ < max_leaders_ && !queue_.empty()) {
      // Lead: take the oldest, this member among them or not (then it waits
      // for the next batch, which this thread may lead too).
      const size_t n = std::min(max_batch_, queue_.size());
      std::vector<Member*> batch(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      ++leaders_;
      ++counts_.batches;
      lock.unlock();
      run(batch);
      lock.lock();
      --leaders_;
      for (Member* m : batch) {
        m->done_ = true;
        if (m != member) m->cv_.notify_one();
      }
      // More wait and a leader's place is free: the oldest leads next.
      if (!queue_.empty() && queue_.front() != member) queue_.front()->cv_.notify_one();
      continue;
    }
    member->cv_.wait(lock);
  }
}

Batcher::Counts Batcher::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace intentd::store::pg
