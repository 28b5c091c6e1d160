// OpenStore: one setting names the backend; passwords never reach the logs.
#include "store/open_store.h"

#include <gtest/gtest.h>

#include "store/postgres/postgres_store.h"
#include "tests/store/forwarding_store.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

TEST(OpenStore, ResolvesRocksDbDirectoriesAndPostgresUrls) {
  StoreKind kind;
  std::string dir;
  StoreSpec spec;
  spec.dir = "/var/lib/intentd";
  ASSERT_TRUE(ResolveStore(spec, &kind, &dir).ok());
  EXPECT_EQ(kind, StoreKind::kRocksDb);
  EXPECT_EQ(dir, "/var/lib/intentd");
  spec.url = "rocksdb:/srv/intentd";  // the URL wins over dir
  ASSERT_TRUE(ResolveStore(spec, &kind, &dir).ok());
  EXPECT_EQ(kind, StoreKind::kRocksDb);
  EXPECT_EQ(dir, "/srv/intentd");
  for (const char* url : {"postgresql://intentd@db.internal/intentd", "postgres:///intentd"}) {
    spec.url = url;
    ASSERT_TRUE(ResolveStore(spec, &kind, &dir).ok()) << url;
    EXPECT_EQ(kind, StoreKind::kPostgres);
    EXPECT_EQ(dir, "");
  }
}

TEST(OpenStore, RejectsUnknownOrEmptyStoresSayingWhatWorks) {
  StoreKind kind;
  std::string dir;
  StoreSpec spec;
  EXPECT_EQ(ResolveStore(spec, &kind, &dir).code(), Code::kInvalidArgument);
  spec.url = "rocksdb:";
  EXPECT_EQ(ResolveStore(spec, &kind, &dir).code(), Code::kInvalidArgument);
  spec.url = "mysql://u:hunter2@h/db";
  Status s = ResolveStore(spec, &kind, &dir);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("rocksdb:DIR or postgresql://"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("hunter2"), std::string::npos) << s.message();
  std::unique_ptr<Store> store;
  EXPECT_EQ(OpenStore(spec, &store).code(), Code::kInvalidArgument);
}

TEST(OpenStore, OpensRocksDbAndFlushes) {
  TempDir dir;
  ManualClock clock(kT0);
  StoreSpec spec;
  spec.url = "rocksdb:" + dir.Sub("db");
  spec.sync = false;
  spec.clock = &clock;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(OpenStore(spec, &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  EXPECT_EQ(r.action.lease_until_ms, kT0 + kLeaseMs);  // the spec's clock
  EXPECT_TRUE(store->Flush().ok());
  EXPECT_EQ(DescribeStore(spec), "rocksdb:" + dir.Sub("db"));
}

TEST(OpenStore, TheOptionalFeaturesOfRocksDb) {
  TempDir dir;
  StoreSpec spec;
  spec.dir = dir.Sub("db");
  spec.sync = false;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(OpenStore(spec, &store).ok());
  EXPECT_TRUE(store->ApproximateSizeBytes().has_value());
  EXPECT_TRUE(store->ReadSpace().has_value());
  ASSERT_TRUE(store->ReadHealth().has_value());
  EXPECT_TRUE(store->ReadHealth()->writable);
  EXPECT_FALSE(store->CommitCounts().has_value());  // no sync, no group commit
  EXPECT_TRUE(store->Checkpoint(dir.Sub("copy")).ok());
  std::string recorded;
  EXPECT_EQ(store->AgreeCurrentKeyId("1", false, &recorded).code(), Code::kNotSupported);
  MigrateResult migrated;
  EXPECT_EQ(MigrateStore(spec, &migrated).code(), Code::kNotSupported);
}

TEST(OpenStore, AStoreWithoutOptionalFeaturesSaysSo) {
  TempDir dir;
  StoreSpec spec;
  spec.dir = dir.Sub("db");
  spec.sync = false;
  std::unique_ptr<Store> rocks;
  ASSERT_TRUE(OpenStore(spec, &rocks).ok());
  ForwardingStore plain(rocks.get());
  EXPECT_FALSE(plain.ApproximateSizeBytes().has_value());
  EXPECT_FALSE(plain.ReadSpace().has_value());
  EXPECT_FALSE(plain.ReadHealth().has_value());
  EXPECT_FALSE(plain.CommitCounts().has_value());
  EXPECT_EQ(plain.Checkpoint(dir.Sub("copy")).code(), Code::kNotSupported);
  EXPECT_TRUE(plain.Flush().ok());  // nothing buffered
  std::string recorded;
  EXPECT_EQ(plain.AgreeCurrentKeyId("1", false, &recorded).code(), Code::kNotSupported);
}

TEST(OpenStore, DescriptionsHidePasswords) {
  StoreSpec spec;
  spec.url = "postgresql://intentd:s3cr%40t@db:5432/intentd?sslmode=require&password=other";
  EXPECT_EQ(DescribeStore(spec),
            "postgresql://intentd:***@db:5432/intentd?sslmode=require&password=***");
  spec.url = "postgresql://intentd@db/intentd?password=x";
  EXPECT_EQ(DescribeStore(spec), "postgresql://intentd@db/intentd?password=***");
  spec.url = "postgresql:///intentd?host=/run/postgresql";
  EXPECT_EQ(DescribeStore(spec), spec.url);
  spec.url = "";
  spec.dir = "/var/lib/intentd";
  EXPECT_EQ(DescribeStore(spec), "rocksdb:/var/lib/intentd");
}

}  // namespace
}  // namespace intentd::store::testing
