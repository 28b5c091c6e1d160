#include "store/lock_table.h"

#include <gtest/gtest.h>

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
  low.lock();  // another operation holds the lower stripe
  LockSet set(&table);
  set.Add(k.high);
  set.Lock();
  std::thread other([&] {
    // The other operation now wants the higher stripe: it must get it once
    // the set releases it, then it finishes and frees the lower one.
    std::mutex& high = table.Stripe(table.StripeOf(k.high));
    high.lock();
    high.unlock();
    low.unlock();
  });
  EXPECT_FALSE(set.Extend(k.low));  // would deadlock if it blocked holding `high`
  other.join();
  // Both held now.
  EXPECT_FALSE(table.Stripe(table.StripeOf(k.low)).try_lock());
  EXPECT_FALSE(table.Stripe(table.StripeOf(k.high)).try_lock());
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
