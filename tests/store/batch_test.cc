// The PostgreSQL store's group commit queue (store/postgres/batch.h), on its
// own: every member is settled exactly once, by a batch of at most
// max_batch members, with at most max_leaders batches running at once, and
// members that wait while a batch runs share the next one.
#include "store/postgres/batch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace intentd::store::pg {
namespace {

struct Counted : Batcher::Member {
  int settled = 0;  // written by the batch that ran it
};

void Race(size_t max_batch, size_t max_leaders, int threads, int per_thread) {
  Batcher batcher("test", max_batch, max_leaders);
  std::atomic<int> running{0}, most_running{0};
  std::mutex mu;
  size_t largest = 0, batches = 0;
  const Batcher::RunFn run = [&](const std::vector<Batcher::Member*>& batch) {
    const int now = ++running;
    int seen = most_running.load();
    while (now > seen && !most_running.compare_exchange_weak(seen, now)) {
    }
    // A round trip's worth of time, so that others gather meanwhile.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (Batcher::Member* m : batch) ++static_cast<Counted*>(m)->settled;
    {
      std::lock_guard<std::mutex> lock(mu);
      largest = std::max(largest, batch.size());
      ++batches;
    }
    --running;
  };
  std::latch together(threads);
  std::vector<std::thread> pool;
  std::atomic<int> wrong{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      together.arrive_and_wait();
      for (int i = 0; i < per_thread; ++i) {
        Counted m;
        batcher.Join(&m, run);
        if (m.settled != 1) ++wrong;
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(largest, max_batch);
  EXPECT_GT(largest, 1u) << "no batch gathered more than one member";
  EXPECT_LE(static_cast<size_t>(most_running.load()), max_leaders);
  const StatementBatchCounts counts = batcher.counts();
  EXPECT_EQ(counts.kind, "test");
  EXPECT_EQ(counts.requests, static_cast<uint64_t>(threads * per_thread));
  EXPECT_EQ(counts.statements(), batches);
  EXPECT_LT(counts.statements(), counts.requests);
  EXPECT_GE(counts.seconds, 200e-6 * static_cast<double>(batches));  // each run sleeps 200 µs
}

TEST(PostgresBatcher, OneLeaderSettlesEveryMemberOnce) { Race(64, 1, 16, 200); }

TEST(PostgresBatcher, BatchesAndLeadersStayWithinTheirBounds) { Race(4, 2, 16, 200); }

TEST(PostgresBatcher, ALoneMemberRunsAtOnceOnItsOwnThread) {
  Batcher batcher("test", 64, 1);
  Counted m;
  std::thread::id ran_on;
  size_t size = 0;
  batcher.Join(&m, [&](const std::vector<Batcher::Member*>& batch) {
    ran_on = std::this_thread::get_id();
    size = batch.size();
    for (Batcher::Member* b : batch) ++static_cast<Counted*>(b)->settled;
  });
  EXPECT_EQ(m.settled, 1);
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

}  // namespace
}  // namespace intentd::store::pg
