// Time is injected so that lease expiry and retention are testable without sleeps.
#pragma once

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

}  // namespace intentd::store
