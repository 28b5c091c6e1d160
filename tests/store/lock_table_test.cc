#include "store/rocks/lock_table.h"

#include <gtest/gtest.h>

#include <latch>
#include <string>
#include <thread>

namespace intentd::store {
namespace {

// Keys whose stripes are ordered low < high.
struct OrderedKeys {
  std::string low, high;
};
OrderedKeys FindOrdered(const LockTable& table) {
  std::string a = "key-0";
  for (int i = 1;; ++i) {
    std::string b = "key-" + std::to_string(i);
    if (table.StripeOf(a) < table.StripeOf(b)) return {a, b};
    if (table.StripeOf(a) > table.StripeOf(b)) return {b, a};
  }
}

TEST(LockSet, ExtendAboveOrOnHeldStripeKeepsTheLocks) {
  LockTable table(64);
  OrderedKeys k = FindOrdered(table);
  LockSet set(&table);
  set.Add(k.low);
  set.Lock();
  EXPECT_TRUE(set.Extend(k.high));
  EXPECT_TRUE(set.Extend(k.low));
  EXPECT_FALSE(table.Stripe(table.StripeOf(k.high)).try_lock());
}

TEST(LockSet, ExtendBelowAFreeStripeTakesItWithoutReleasing) {
  LockTable table(64);
  OrderedKeys k = FindOrdered(table);
  LockSet set(&table);
  set.Add(k.high);
  set.Lock();
  EXPECT_TRUE(set.Extend(k.low));
}

TEST(LockSet, ExtendBelowABusyStripeRetakesEverythingInOrder) {
  LockTable table(64);
  OrderedKeys k = FindOrdered(table);
  std::mutex& low = table.Stripe(table.StripeOf(k.low));
  std::mutex& high = table.Stripe(table.StripeOf(k.high));
  std::latch other_has_low(1), set_has_high(1);
  // Another operation holds the lower stripe and then wants the higher one,
  // which the set holds: blocking on `low` while holding `high` would deadlock.
  std::thread other([&] {
    low.lock();
    other_has_low.count_down();
    set_has_high.wait();
    high.lock();
    high.unlock();
    low.unlock();
  });
  other_has_low.wait();
  LockSet set(&table);
  set.Add(k.high);
  set.Lock();
  set_has_high.count_down();
  EXPECT_FALSE(set.Extend(k.low));  // released `high`, then took both in order
  other.join();
  EXPECT_TRUE(set.Extend(k.low));  // held now
  EXPECT_TRUE(set.Extend(k.high));
}

TEST(LockSet, ReleasesOnDestruction) {
  LockTable table(8);
  {
    LockSet set(&table);
    set.Add("a");
    set.Add("a");  // duplicates are fine
    set.Lock();
  }
  std::mutex& m = table.Stripe(table.StripeOf("a"));
  ASSERT_TRUE(m.try_lock());
  m.unlock();
}

}  // namespace
}  // namespace intentd::store
