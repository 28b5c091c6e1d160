// Time is injected so that lease expiry and retention are testable without sleeps.
#pragma once

#include <atomic>
#include <cstdint>

namespace intentd::store {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowMs() const = 0;
};

// The system's real-time clock. A process-wide instance; thread safe.
const Clock& SystemClock();

// A clock that moves only when told to (tests, simulations). Thread safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t now_ms) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_.load(std::memory_order_acquire); }
  void Set(int64_t now_ms) { now_ms_.store(now_ms, std::memory_order_release); }
  void Advance(int64_t delta_ms) { now_ms_.fetch_add(delta_ms, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace intentd::store
