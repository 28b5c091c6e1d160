#include "store/postgres/batch.h"

#include <algorithm>
#include <chrono>

namespace intentd::store::pg {

Batcher::Batcher(std::string kind, size_t max_batch, size_t max_leaders)
    : max_batch_(std::max<size_t>(1, max_batch)), max_leaders_(std::max<size_t>(1, max_leaders)) {
  counts_.kind = std::move(kind);
}

void Batcher::TakeLocked(std::vector<Member*>* batch) {
  batch->clear();
  if (leaders_ >= max_leaders_ || queue_.empty()) return;
  const size_t n = std::min(max_batch_, queue_.size());
  batch->assign(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  ++leaders_;
}

void Batcher::Join(Member* member, const RunFn& run) {
  std::vector<Member*> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(member);
    ++counts_.requests;
    TakeLocked(&batch);  // the oldest, this member among them
  }
  for (;;) {
    while (!batch.empty()) {
      const auto started = std::chrono::steady_clock::now();
      run(batch);
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const bool own_done = std::find(batch.begin(), batch.end(), member) != batch.end();
      std::vector<Member*> next;
      {
        std::lock_guard<std::mutex> lock(mu_);
        --leaders_;
        ++counts_.rounds[SyncBucket(took)];
        counts_.seconds += took;
        TakeLocked(&next);  // more wait: the place goes straight to them
      }
      // Members of `next` stay alive until it runs: none of them is done.
      // A member of `batch` may return and be gone as soon as its mutex is
      // released, so it is touched last under that mutex.
      for (Member* m : batch) {
        if (m == member) continue;
        std::lock_guard<std::mutex> lock(m->mu_);
        m->done_ = true;
        m->cv_.notify_one();
      }
      if (!own_done) {
        batch.swap(next);  // still waiting: this thread runs the next batch
        continue;
      }
      if (!next.empty()) {
        Member* successor = next.front();  // the oldest leads its own batch
        std::lock_guard<std::mutex> lock(successor->mu_);
        successor->lead_ = std::move(next);
        successor->cv_.notify_one();
      }
      return;
    }
    std::unique_lock<std::mutex> lock(member->mu_);
    member->cv_.wait(lock, [member] { return member->done_ || !member->lead_.empty(); });
    if (member->done_) return;
    batch.swap(member->lead_);
  }
}

StatementBatchCounts Batcher::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace intentd::store::pg
