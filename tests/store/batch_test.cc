// The PostgreSQL store's group commit queue (store/postgres/batch.h), on its
// own: every member is settled exactly once, by a batch of at most
// max_batch members, with at most max_leaders batches running at once, and
// members that wait while a batch runs share the next one; posted members
// (Post) alike, their `then` called once after their batch, joined or not.
#include "store/postgres/batch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace intentd::store::pg {
namespace {

struct Counted : Batcher::Member {
  int settled = 0;  // written by the batch that ran it
};

// `posting` of the `threads` post their members (and wait for their
// `then`) instead of joining.
void Race(size_t max_batch, size_t max_leaders, int threads, int per_thread, int posting = 0) {
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
  Batcher batcher("test", max_batch, max_leaders, run);
  std::latch together(threads);
  std::vector<std::thread> pool;
  std::atomic<int> wrong{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      together.arrive_and_wait();
      for (int i = 0; i < per_thread; ++i) {
        if (t >= posting) {
          Counted m;
          batcher.Join(&m);
          if (m.settled != 1) ++wrong;
          continue;
        }
        // Posted: freed by its `then`, which this thread waits for before
        // the next, so that a member's `then` counts exactly once.
        std::promise<void> called;
        auto* m = new Counted;
        batcher.Post(m, [&, m] {
          if (m->settled != 1) ++wrong;
          delete m;
          called.set_value();  // throws if called twice
        });
        called.get_future().wait();
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

TEST(PostgresBatcher, PostedMembersAloneAreSettledOnceByTheBatchersThread) {
  Race(64, 1, 16, 200, /*posting=*/16);
}

TEST(PostgresBatcher, PostedAndJoinedMembersShareBatchesAndLeaders) {
  Race(64, 1, 16, 200, /*posting=*/8);
  Race(4, 2, 16, 200, /*posting=*/8);
}

TEST(PostgresBatcher, ALoneMemberRunsAtOnceOnItsOwnThread) {
  std::thread::id ran_on;
  size_t size = 0;
  Batcher batcher("test", 64, 1, [&](const std::vector<Batcher::Member*>& batch) {
    ran_on = std::this_thread::get_id();
    size = batch.size();
    for (Batcher::Member* b : batch) ++static_cast<Counted*>(b)->settled;
  });
  Counted m;
  batcher.Join(&m);
  EXPECT_EQ(m.settled, 1);
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(PostgresBatcher, APostedMemberRunsOnTheBatchersThreadAndTheDestructorWaitsForIt) {
  std::thread::id ran_on, then_on;
  std::atomic<bool> then_called{false};
  Counted m;
  {
    Batcher batcher("test", 64, 1, [&](const std::vector<Batcher::Member*>& batch) {
      ran_on = std::this_thread::get_id();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (Batcher::Member* b : batch) ++static_cast<Counted*>(b)->settled;
    });
    batcher.Post(&m, [&] {
      then_on = std::this_thread::get_id();
      then_called = true;
    });
    EXPECT_FALSE(then_called.load()) << "Post waited for its batch";
  }  // the destructor returns once the posted member's batch ran
  EXPECT_TRUE(then_called.load());
  EXPECT_EQ(m.settled, 1);
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(then_on, ran_on);
}

}  // namespace
}  // namespace intentd::store::pg
