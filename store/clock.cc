#include "store/clock.h"

#include <chrono>

namespace intentd::store {
namespace {

class RealTimeClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const Clock& SystemClock() {
  static const RealTimeClock clock;
  return clock;
}

}  // namespace intentd::store
