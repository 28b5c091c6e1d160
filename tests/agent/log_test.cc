// LogThrottle: one line per interval for repeated events, counting the rest.
#include "common/log.h"

#include <gtest/gtest.h>

namespace intentd::agent {
namespace {

using std::chrono::milliseconds;

TEST(LogThrottle, WritesOneLinePerIntervalAndCountsTheSkippedOnes) {
  LogThrottle throttle(milliseconds(1000));
  const LogThrottle::Clock::time_point t0{std::chrono::hours(1)};
  uint64_t skipped = 99;
  ASSERT_TRUE(throttle.Admit(t0, &skipped));
  EXPECT_EQ(skipped, 0u);
  EXPECT_FALSE(throttle.Admit(t0, &skipped));
  EXPECT_FALSE(throttle.Admit(t0 + milliseconds(500), &skipped));
  EXPECT_FALSE(throttle.Admit(t0 + milliseconds(999), &skipped));
  ASSERT_TRUE(throttle.Admit(t0 + milliseconds(1000), &skipped));
  EXPECT_EQ(skipped, 3u);
  // The interval counts from the last line written, not from the last event.
  EXPECT_FALSE(throttle.Admit(t0 + milliseconds(1999), &skipped));
  ASSERT_TRUE(throttle.Admit(t0 + milliseconds(2000), &skipped));
  EXPECT_EQ(skipped, 1u);
  // A quiet spell: the next line comes at once, with nothing skipped.
  ASSERT_TRUE(throttle.Admit(t0 + milliseconds(60000), &skipped));
  EXPECT_EQ(skipped, 0u);
}

}  // namespace
}  // namespace intentd::agent
