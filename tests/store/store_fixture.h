// A store in a temporary directory with a manual clock.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "store/rocks/rocks_store.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {

class StoreTest : public ::testing::Test {
 protected:
  StoreTest() : clock_(kT0) { Reopen(); }

  void Reopen() {
    store_.reset();
    Status s = RocksStore::Open(TestOptions(dir_.path(), &clock_), &store_);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // Begin on a new intent (tenant "acme" unless given) and expect execute.
  BeginResult BeginNew(const std::string& ref, const std::string& key,
                       const std::string& tenant = "acme") {
    return BeginExpectingOk(store_.get(), NewIntentRequest(tenant, ref, key));
  }
  BeginResult BeginAgain(const std::string& ref, const std::string& key,
                         const std::string& tenant = "acme") {
    return BeginExpectingOk(store_.get(), ExistingIntentRequest(tenant, ref, key));
  }

  TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<RocksStore> store_;
};

}  // namespace intentd::store::testing
