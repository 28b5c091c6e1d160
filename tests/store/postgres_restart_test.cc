// A PostgreSQL server that stops and comes back: kStorageError (never a
// grant) while it is down, and the store recovers by itself. The test runs
// a private server of its own (INTENTD_TEST_POSTGRES_CTL from
// scripts/with-postgres.sh), so that stopping it disturbs no other test.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "store/postgres/postgres_store.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
using std::chrono::steady_clock;

class PrivateServer {
 public:
  explicit PrivateServer(std::string ctl) : ctl_(std::move(ctl)) {
    std::string pattern = "/tmp/intentd-pgr-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    dir_ = pattern;
    ok_ = Run("init") && Run("start");
    running_ = ok_;
  }
  ~PrivateServer() {
    if (running_) Run("stop");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  bool Stop() { return !(running_ = !Run("stop")); }
  bool Start() { return running_ = Run("start"); }
  std::string url() const { return "postgresql:///intentd_test?host=" + dir_; }

 private:
  bool Run(const std::string& command) {
    return std::system((ctl_ + " " + command + " " + dir_).c_str()) == 0;
  }
  std::string ctl_, dir_;
  bool ok_ = false, running_ = false;
};

TEST(PostgresRestart, StorageErrorWhileDownThenRecoversByItself) {
  const char* ctl = std::getenv("INTENTD_TEST_POSTGRES_CTL");
  if (ctl == nullptr) {
    GTEST_SKIP() << "INTENTD_TEST_POSTGRES_CTL is unset: run the tests under "
                    "scripts/with-postgres.sh to include the PostgreSQL restart test";
  }
  PrivateServer server(ctl);
  ASSERT_TRUE(server.ok());
  MigrateResult m;
  ASSERT_TRUE(MigratePostgres(server.url(), &m).ok());
  ManualClock clock(kT0);
  PostgresOptions options;
  options.url = server.url();
  options.clock = &clock;
  options.pool_size = 4;
  std::unique_ptr<PostgresStore> store;
  ASSERT_TRUE(PostgresStore::Open(options, &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  ASSERT_EQ(r.decision, Decision::kExecute);

  ASSERT_TRUE(server.Stop());
  Action a;
  LookupResult l;
  std::vector<Action> uncertain;
  for (int i = 0; i < 20; ++i) {
    const auto started = steady_clock::now();
    Status s = store->Begin(NewIntentRequest("acme", "FAT-2", "k2"), kLeaseMs, &r);
    EXPECT_EQ(s.code(), Code::kStorageError) << s.message();
    EXPECT_EQ(store->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).code(),
              Code::kStorageError);
    EXPECT_EQ(store->Complete("acme", "k1", 1, "1", &a).code(), Code::kStorageError);
    EXPECT_EQ(store->GetAction("acme", "k1", &a).code(), Code::kStorageError);
    EXPECT_EQ(store->Lookup("acme", "FAT-1", "pix.cobranca", &l).code(), Code::kStorageError);
    EXPECT_EQ(store->Uncertain(std::nullopt, 10, &uncertain).code(), Code::kStorageError);
    // Answers at once: callers never queue behind a dead server.
    EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(2));
  }

  ASSERT_TRUE(server.Start());
  Status s;
  const auto deadline = steady_clock::now() + std::chrono::seconds(20);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s = store->GetAction("acme", "k1", &a);
  } while (!s.ok() && steady_clock::now() < deadline);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(a.lease_token, 1);
  // Nothing was granted or written while it was down.
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "FAT-2", "k2"), kLeaseMs, &r).ok());
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  ASSERT_TRUE(store->Begin(ExistingIntentRequest("acme", "FAT-1", "k1"), kLeaseMs, &r).ok());
  EXPECT_EQ(r.decision, Decision::kInFlight);
  EXPECT_TRUE(store->Complete("acme", "k1", 1, "1", &a).ok());
}

}  // namespace
}  // namespace intentd::store::testing
