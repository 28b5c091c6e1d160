// The store contract, parameterized over the backends: every TEST_P runs
// against RocksDB (temporary directory) twice, with the default hash
// memtables and with skip-list memtables (RocksOptions::hash_memtables), and
// PostgreSQL (a fresh schema; skipped when the run has no PostgreSQL), with
// a manual clock.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/postgres/postgres_store.h"
#include "store/rocks/rocks_store.h"
#include "tests/store/postgres_test_util.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {

enum class Backend { kRocksDb, kRocksDbSkipLists, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kRocksDb:
      return "rocksdb";
    case Backend::kRocksDbSkipLists:
      return "rocksdb_skip_lists";
    case Backend::kPostgres:
      break;
  }
  return "postgresql";
}

class StoreContract : public ::testing::TestWithParam<Backend> {
 protected:
  // rocks_sync: RocksDB with sync on, so that blocking callers wait for the
  // group commit's sync thread.
  explicit StoreContract(bool rocks_sync = false) : clock_(kT0), rocks_sync_(rocks_sync) {}

  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      if (TestPostgresUrl().empty()) GTEST_SKIP() << kNoPostgres;
      schema_ = std::make_unique<PostgresSchema>();
      ASSERT_TRUE(schema_->ok()) << schema_->error();
    }
    Reopen();
  }

  // Closes the store and opens it again on the same data.
  void Reopen() {
    store_.reset();
    rocks_ = nullptr;
    postgres_ = nullptr;
    if (GetParam() != Backend::kPostgres) {
      RocksOptions options = TestOptions(dir_.path(), &clock_);
      options.hash_memtables = GetParam() != Backend::kRocksDbSkipLists;
      options.sync = rocks_sync_;
      std::unique_ptr<RocksStore> rocks;
      Status s = RocksStore::Open(options, &rocks);
      ASSERT_TRUE(s.ok()) << s.message();
      rocks_ = rocks.get();
      store_ = std::move(rocks);
    } else {
      PostgresOptions options;
      options.url = schema_->url();
      options.sync = false;  // unit tests; durability is PostgreSQL's
      options.clock = &clock_;
      options.retention_ms = 30 * kDay;
      options.purge_interval_ms = 0;  // Compact() purges, deterministically
      std::unique_ptr<PostgresStore> postgres;
      Status s = PostgresStore::Open(options, &postgres);
      ASSERT_TRUE(s.ok()) << s.message();
      postgres_ = postgres.get();
      store_ = std::move(postgres);
    }
  }

  // Physically drops what retention expired (RocksDB: compaction;
  // PostgreSQL: the purge, until it finds nothing).
  Status Compact() {
    if (rocks_ != nullptr) return rocks_->CompactAll();
    for (;;) {
      size_t deleted = 0;
      Status s = postgres_->PurgeExpired(1000, &deleted);
      if (!s.ok() || deleted == 0) return s;
    }
  }

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
  const bool rocks_sync_ = false;
  std::unique_ptr<PostgresSchema> schema_;
  std::unique_ptr<Store> store_;
  RocksStore* rocks_ = nullptr;
  PostgresStore* postgres_ = nullptr;
};

#define INSTANTIATE_STORE_CONTRACT(suite)                                                   \
  INSTANTIATE_TEST_SUITE_P(                                                                 \
      Backends, suite,                                                                      \
      ::testing::Values(Backend::kRocksDb, Backend::kRocksDbSkipLists, Backend::kPostgres), \
      BackendName)

}  // namespace intentd::store::testing
