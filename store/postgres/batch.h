// Group commit for the PostgreSQL store's one-statement writes (internal).
//
// Requests of one kind (a fresh intent's begin, a started action's complete)
// that arrive while others of their kind are with the server wait, and then
// go to PostgreSQL together as one statement: one round trip, one
// transaction and one WAL flush for all of them, where each alone would cost
// its own. The server's CPU per request and the number of commits it makes
// fall as concurrency grows; a lone request goes at once, alone, as before.
//
// Contract:
// - The Batcher is built with `run`, which gets a batch's members and must
//   settle each one (its result fields are the caller's); it runs with no
//   lock held and must not call Join or Post on the same Batcher.
// - Join(member) queues `member` and returns once a batch holding it has
//   run, on this thread (the caller became a leader) or another's.
// - Post(member, then) queues `member` without waiting: once a batch
//   holding it has run, `then` is called, on the thread that ran the batch
//   (a joined member's, or one of the Batcher's own threads, one per leader's
//   place, which lead when only posted members wait). `then` may block (e.g. run the member alone)
//   and may free the member; it must not call Join or Post on the same Batcher.
// - At most `max_leaders` batches of a Batcher run at once; a batch takes
//   up to `max_batch` members, oldest first, joined and posted alike.
// - Each waiting member sleeps on its own condition variable, under its own
//   mutex: a finished batch wakes its members one by one without the
//   Batcher's mutex, so a woken member never queues for the lock its waker
//   holds. When more wait, the finished leader takes the next batch, for
//   itself if its own member is still waiting, else for the oldest waiting
//   joined member, which it wakes to run it (no herd of wake-ups), else for
//   the Batcher's own thread. With the members asleep on the Batcher's
//   mutex, the agent's threads were put on a CPU 5.0-5.3 times per request,
//   now 4.2-4.5 (`switches` of `intentd_loadgen --spawn-store URL
//   --connections 16`, with the transport's idle job gone too;
//   bench/RESULTS.md). With the agent's begins and completes posted, and
//   answered by the Batcher's threads, 0.9 at 16 connections and 0.4 at 64
//   (the same figure; bench/RESULTS.md, "Begin and complete without a
//   worker").
// - The destructor waits for every posted member's `then`.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/admin.h"

namespace intentd::store::pg {

class Batcher {
 public:
  struct Member {
    virtual ~Member() = default;

   private:
    friend class Batcher;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;           // mu_: its batch has run
    std::vector<Member*> lead_;   // mu_: a batch handed to it to run
    std::function<void()> then_;  // set: posted (set before it is queued)
  };
  using RunFn = std::function<void(const std::vector<Member*>& batch)>;

  // `kind` names the writes it batches in its counts (StatementBatchCounts).
  Batcher(std::string kind, size_t max_batch, size_t max_leaders, RunFn run);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  void Join(Member* member);
  void Post(Member* member, std::function<void()> then);

  // Since construction: the members that joined (`requests`) and the
  // batches run, by how long each `run` took (store/admin.h).
  StatementBatchCounts counts() const;

 private:
  // Moves up to max_batch_ of the oldest members into *batch and takes a
  // leader's place, when one is free and any member waits. Needs mu_.
  void TakeLocked(std::vector<Member*>* batch);
  // Runs `batch` (a leader's place taken for it), settles its members and
  // passes the place on (Contract). `own`: the calling thread's joined
  // member, nullptr on the Batcher's thread. Returns the batch this thread
  // is to run next, if any.
  std::vector<Member*> Lead(const std::vector<Member*>& batch, Member* own);
  // One of the Batcher's own threads: leads while only posted members wait.
  void Runner();

  const size_t max_batch_;
  const size_t max_leaders_;
  const RunFn run_;
  mutable std::mutex mu_;
  std::condition_variable runner_cv_;  // mu_: runner_leads_, a free place, stop_
  std::deque<Member*> queue_;
  size_t leaders_ = 0;
  size_t posted_waiting_ = 0;                      // mu_: posted members in queue_
  std::deque<std::vector<Member*>> runner_leads_;  // mu_: batches handed to the Batcher's thread
  bool stop_ = false;                              // mu_
  StatementBatchCounts counts_;                    // mu_
  std::vector<std::thread> runners_;  // max_leaders_ of them; last: start once the rest is built
};

}  // namespace intentd::store::pg
