// Storage faults: a failed write is kStorageError and grants nothing; the
// store resumes writing once the fault is gone.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/transaction_log.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/rocks/fault_injection.h"
#include "store/rocks/wal_files.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
using Fault = FaultInjection::Fault;

// Every test on both memtables (the parameter: hash, the default, or skip
// lists with concurrent, unordered writes): their write paths differ.
class FaultTest : public ::testing::TestWithParam<bool> {
 protected:
  FaultTest() : clock_(kT0), faults_(std::make_shared<FaultInjection>()) {}

  void Open(bool sync, bool defer_sync = false) {
    store_.reset();
    RocksOptions o = TestOptions(dir_.path(), &clock_);
    o.sync = sync;
    o.defer_sync = defer_sync;
    o.hash_memtables = GetParam();
    Status s = OpenWithFaultInjection(o, faults_, &store_);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  Status Begin(const std::string& ref, const std::string& key, BeginResult* r) {
    return store_->Begin(NewIntentRequest("acme", ref, key), kLeaseMs, r);
  }

  TempDir dir_;
  ManualClock clock_;
  std::shared_ptr<FaultInjection> faults_;
  std::unique_ptr<RocksStore> store_;
};

TEST_P(FaultTest, FailedWalWriteGrantsNothingAndStoreResumes) {
  Open(/*sync=*/false);
  faults_->SetWriteFault(Fault::kIOError);
  BeginResult r;
  Status s = Begin("R1", "k1", &r);
  EXPECT_EQ(s.code(), Code::kStorageError) << s.message();
  EXPECT_GT(faults_->injected(), 0);
  Action a;
  EXPECT_EQ(store_->GetAction("acme", "k1", &a).code(), Code::kNotFound);
  LookupResult l;
  EXPECT_EQ(store_->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
  // Still failing: still an error, never a grant.
  EXPECT_EQ(Begin("R1", "k1", &r).code(), Code::kStorageError);

  faults_->Clear();
  s = Begin("R1", "k1", &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  Open(false);
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.lease_token, 1);
}

TEST_P(FaultTest, FailedSyncIsStorageErrorWhenSyncIsOn) {
  Open(/*sync=*/true);
  faults_->SetSyncFault(Fault::kIOError);
  BeginResult r;
  Status s = Begin("R1", "k1", &r);
  EXPECT_EQ(s.code(), Code::kStorageError) << s.message();
  Action a;
  faults_->Clear();
  // The record whose sync failed was voided before storage_error was
  // answered: no read or replay finds it, and the next begin executes.
  s = store_->GetAction("acme", "k1", &a);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.message();
  s = AgentBegin(store_.get(), "acme", "R1", "k1", &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  Open(/*sync=*/true);
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.lease_token, 1);
}

// Durability ticket for `store`'s last operation, answered (blocking).
Status AwaitTicket(Store* store, uint64_t ticket) {
  std::promise<Status> answered;
  store->WhenDurable(ticket, [&answered](const Status& s) { answered.set_value(s); });
  return answered.get_future().get();
}

TEST_P(FaultTest, DeferredSyncAnswersTicketsOnceSyncedAndFailsThemWhenTheSyncFails) {
  Open(/*sync=*/true);
  BeginResult r;
  ASSERT_TRUE(Begin("R0", "k0", &r).ok());
  EXPECT_EQ(store_->DurabilityTicket(), 0u);  // synced in Begin: nothing to wait for

  Open(/*sync=*/true, /*defer_sync=*/true);
  ASSERT_TRUE(Begin("R1", "k1", &r).ok());
  EXPECT_EQ(r.decision, Decision::kExecute);
  uint64_t ticket = store_->DurabilityTicket();
  EXPECT_NE(ticket, 0u);
  Status d = AwaitTicket(store_.get(), ticket);
  EXPECT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(store_->DurabilityTicket(), 0u);  // all synced now

  faults_->SetSyncFault(Fault::kIOError);
  ASSERT_TRUE(Begin("R2", "k2", &r).ok());  // made, not durable yet
  ticket = store_->DurabilityTicket();
  ASSERT_NE(ticket, 0u);
  d = AwaitTicket(store_.get(), ticket);
  EXPECT_EQ(d.code(), Code::kStorageError) << d.message();

  // The fault gone, the store recovers (reopen) and tickets are honoured again.
  faults_->Clear();
  ASSERT_TRUE(Begin("R3", "k3", &r).ok());
  EXPECT_EQ(r.decision, Decision::kExecute);
  d = AwaitTicket(store_.get(), store_->DurabilityTicket());
  EXPECT_TRUE(d.ok()) << d.message();
  Open(/*sync=*/true);
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k3", &a).ok());
  EXPECT_EQ(a.lease_token, 1);
}

// A WAL append that fails while earlier writes wait for their sync (the
// disk filled up between the free-space check and the write): the waiting
// writes are answered (durable or storage_error), the failed one grants
// nothing, and the store resumes once space is back. RocksDB 7.8 asserts
// when a WAL writer that saw an error is synced or appended to again.
// With defer_sync the records wait in RocksDB's WAL buffer and the sync
// thread appends them, so the call itself may succeed: then its ticket
// fails, and after the recovery the write is gone.
TEST_P(FaultTest, WalAppendFailureWhileWritesAwaitTheirSyncIsSurvived) {
  Open(/*sync=*/true, /*defer_sync=*/true);
  const auto granted = [this](const Status& s) {
    return s.ok() && AwaitTicket(store_.get(), store_->DurabilityTicket()).ok();
  };
  BeginResult r;
  ASSERT_TRUE(Begin("R1", "k1", &r).ok());
  const uint64_t pending = store_->DurabilityTicket();
  faults_->SetWriteFault(Fault::kNoSpace);
  Status s = Begin("R2", "k2", &r);
  EXPECT_TRUE(s.ok() || s.code() == Code::kStorageError) << s.message();
  Status d = AwaitTicket(store_.get(), pending);
  EXPECT_TRUE(d.ok() || d.code() == Code::kStorageError) << d.message();
  EXPECT_FALSE(granted(s));
  EXPECT_GT(faults_->injected(), 0);
  s = Begin("R3", "k3", &r);
  EXPECT_TRUE(s.ok() || s.code() == Code::kStorageError) << s.message();
  EXPECT_FALSE(granted(s));
  faults_->Clear();
  // A caller that answers asynchronously is refused at once while the store
  // recovers in the background (it never blocks an io thread): retried.
  for (int i = 0; i < 100; ++i) {
    s = Begin("R2", "k2", &r);
    if (s.code() != Code::kStorageError) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.decision, Decision::kExecute);
  EXPECT_EQ(r.action.lease_token, 1);
  d = AwaitTicket(store_.get(), store_->DurabilityTicket());
  EXPECT_TRUE(d.ok()) << d.message();
  Open(/*sync=*/true);
  Action a;
  ASSERT_TRUE(store_->GetAction("acme", "k2", &a).ok());
  EXPECT_EQ(a.lease_token, 1);
}

TEST_P(FaultTest, DiskFullDuringCompleteKeepsTheLeaseAndRetrySucceeds) {
  Open(/*sync=*/true);
  BeginResult r;
  ASSERT_TRUE(Begin("R1", "k1", &r).ok());
  faults_->SetWriteFault(Fault::kNoSpace);
  Action a;
  EXPECT_EQ(store_->Complete("acme", "k1", 1, "\"paid\"", &a).code(), Code::kStorageError);
  EXPECT_EQ(store_->Renew("acme", "k1", 1, kLeaseMs, &a).code(), Code::kStorageError);
  // Reads keep working during the fault and show the unchanged record.
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
  EXPECT_EQ(a.lease_token, 1);
  faults_->Clear();
  Status s = store_->Complete("acme", "k1", 1, "\"paid\"", &a);
  ASSERT_TRUE(s.ok()) << s.message();
  Open(true);
  ASSERT_TRUE(store_->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kCompleted);
  EXPECT_EQ(a.response, "\"paid\"");
}

TEST_P(FaultTest, FlushFailureIsReportedAndRecovered) {
  Open(/*sync=*/false);
  BeginResult r;
  ASSERT_TRUE(Begin("R1", "k1", &r).ok());
  faults_->SetWriteFault(Fault::kIOError);
  EXPECT_EQ(store_->Flush().code(), Code::kStorageError);
  faults_->Clear();
  Status s = Begin("R2", "k2", &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(store_->Flush().ok());
}

// WalFiles recognizes RocksDB's WAL files by their name (wal_files.h): this
// pins that assumption against the installed RocksDB, whose public
// DB::GetSortedWalFiles lists the live WAL files by name. (A store also
// refuses to open when the tracker sees no WAL file, WalFiles::TracksAny.)
TEST(WalFilesTest, TheInstalledRocksDbNamesItsWalFilesAsTheTrackerExpects) {
  TempDir dir;
  const std::string db_dir = dir.Sub("db");
  WalFiles wal;
  std::unique_ptr<rocksdb::Env> env =
      rocksdb::NewCompositeEnv(wal.Track(rocksdb::FileSystem::Default(), db_dir));
  rocksdb::Options options;
  options.create_if_missing = true;
  options.env = env.get();
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, db_dir, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k", "v").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());  // a second WAL file
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "k2", "v").ok());
  rocksdb::VectorLogPtr files;
  ASSERT_TRUE(db->GetSortedWalFiles(files).ok());
  int alive = 0;
  for (const auto& file : files) {
    if (file->Type() != rocksdb::kAliveLogFile) continue;
    ++alive;
    EXPECT_TRUE(wal.IsWal(db_dir + file->PathName())) << file->PathName();
  }
  ASSERT_GT(alive, 0) << "RocksDB listed no live WAL file: the names were not checked";
  EXPECT_TRUE(wal.TracksAny());
  EXPECT_EQ(wal.SyncAll(), "");
  EXPECT_FALSE(wal.IsWal(db_dir + "/LOG"));
  EXPECT_FALSE(wal.IsWal(db_dir + "/MANIFEST-000001"));
  db.reset();
}

// The tracker syncs the WAL files of its directory only: a file of the
// same name elsewhere (a checkpoint's copy of the WAL, in a directory that is
// renamed afterwards) is not its business, and a failed append is remembered
// until Reset.
TEST(WalFilesTest, TracksTheWalDirectoryOnlyAndRemembersAFailedAppend) {
  TempDir dir;
  const std::string wal_dir = dir.Sub("db");
  const std::string other = dir.Sub("db.tmp");
  std::filesystem::create_directories(wal_dir);
  std::filesystem::create_directories(other);
  auto faults = std::make_shared<FaultInjection>();
  WalFiles wal;
  std::shared_ptr<rocksdb::FileSystem> fs =
      wal.Track(NewFaultInjectionFileSystem(rocksdb::FileSystem::Default(), faults), wal_dir + "/");
  std::unique_ptr<rocksdb::FSWritableFile> copy, log, info;
  const rocksdb::IOOptions io;
  ASSERT_TRUE(fs->NewWritableFile(other + "/000007.log", {}, &copy, nullptr).ok());
  ASSERT_TRUE(copy->Append("x", io, nullptr).ok());
  EXPECT_FALSE(wal.TracksAny());
  ASSERT_TRUE(fs->NewWritableFile(wal_dir + "/LOG", {}, &info, nullptr).ok());
  EXPECT_FALSE(wal.TracksAny());
  ASSERT_TRUE(fs->NewWritableFile(wal_dir + "//000008.log", {}, &log, nullptr).ok());
  EXPECT_TRUE(wal.TracksAny());
  ASSERT_TRUE(log->Append("record", io, nullptr).ok());
  // The other directory goes away (the checkpoint renames it): no matter.
  std::filesystem::rename(other, dir.Sub("backup"));
  EXPECT_EQ(wal.SyncAll(), "");
  EXPECT_EQ(wal.failure(), "");

  // A sync of the tracked file goes to the disk (here: an injected fault).
  ASSERT_TRUE(log->Append("more", io, nullptr).ok());
  faults->SetSyncFault(FaultInjection::Fault::kIOError);
  EXPECT_NE(wal.SyncAll(), "");
  faults->Clear();
  EXPECT_NE(wal.failure(), "") << "a failed fsync is not forgotten by a later success";
  wal.Reset();

  faults->SetWriteFault(FaultInjection::Fault::kNoSpace);
  EXPECT_FALSE(log->Append("torn", io, nullptr).ok());
  faults->Clear();
  EXPECT_NE(wal.failure().find("No space"), std::string::npos) << wal.failure();
  wal.Reset();
  EXPECT_EQ(wal.failure(), "");
  ASSERT_TRUE(log->Close(io, nullptr).ok());
  EXPECT_EQ(wal.SyncAll(), "");
  EXPECT_FALSE(wal.TracksAny());  // closed files are dropped

  // A file whose last sync, at its close, fails: remembered too. (Under
  // TSan: the close reports it holding the file's lock, which SyncAll must
  // not take while it holds the tracker's: no lock-order inversion.)
  std::unique_ptr<rocksdb::FSWritableFile> next;
  ASSERT_TRUE(fs->NewWritableFile(wal_dir + "/000009.log", {}, &next, nullptr).ok());
  EXPECT_EQ(wal.SyncAll(), "");
  ASSERT_TRUE(next->Append("last", io, nullptr).ok());
  faults->SetSyncFault(FaultInjection::Fault::kIOError);
  EXPECT_FALSE(next->Close(io, nullptr).ok());
  faults->Clear();
  EXPECT_NE(wal.failure().find("WAL sync of"), std::string::npos) << wal.failure();
  EXPECT_NE(wal.SyncAll(), "");
}

INSTANTIATE_TEST_SUITE_P(Memtables, FaultTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "hash" : "skip_lists");
                         });

}  // namespace
}  // namespace intentd::store::testing

namespace intentd::store::testing {
namespace {

using Fault = FaultInjection::Fault;

// Writers like the agent's io threads (defer_sync, tickets) while appends
// fail at random: every sighting answered lost (its ticket) must be absent
// after a reopen, every one answered durable present.
TEST(FaultChurn, NoLostWriteTakesEffectAndNoDurableOneIsLost) {
  TempDir dir;
  auto faults = std::make_shared<FaultInjection>();
  std::unique_ptr<RocksStore> store;
  RocksOptions o = TestOptions(dir.path(), &SystemClock());
  o.sync = true;
  o.defer_sync = true;
  ASSERT_TRUE(OpenWithFaultInjection(o, faults, &store).ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1500;
  constexpr int kDepth = 16;
  std::vector<std::vector<int>> verdicts(kThreads, std::vector<int>(kPerThread, -1));
  std::atomic<bool> done{false};
  std::atomic<int> written{0};
  // Flips on the writers' progress, not the clock, so that faults land
  // among the writes however the threads are scheduled: a fault for 1-30
  // writes out of four. The WAL is appended only when the sync thread
  // writes its buffer out, so the writers keep at most kDepth sightings
  // waiting each, as a connection's pipeline does: progress then waits on
  // syncs, and every sync meets whichever fault the flipper last set.
  // Unbounded, the writers can all finish inside the first few syncs and
  // no write fails.
  std::thread flipper([&] {
    std::mt19937 rng(7);
    while (!done.load()) {
      faults->SetWriteFault(rng() % 4 == 0 ? Fault::kNoSpace : Fault::kNone);
      const int until = written.load() + 1 + static_cast<int>(rng() % 30);
      while (!done.load() && written.load() < until) std::this_thread::yield();
    }
    faults->Clear();
  });
  std::vector<std::thread> writers;
  std::mutex answered_mu;
  std::condition_variable answered_cv;
  int pending = 0;
  std::vector<int> waiting(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        {
          std::unique_lock<std::mutex> lock(answered_mu);
          answered_cv.wait(lock, [&] { return waiting[t] < kDepth; });
        }
        SeenRequest r;
        r.tenant_id = "acme";
        r.channel = "wa";
        r.messages.push_back({"m-" + std::to_string(t) + "-" + std::to_string(i), ""});
        std::vector<SeenAnswer> answers;
        Status s = store->Seen(r, &answers);
        const uint64_t ticket = store->DurabilityTicket();
        written.fetch_add(1);
        if (!s.ok()) {
          // Refused at once (the store recovering from the fault): a
          // client backs off before its next request rather than spend
          // the run on refusals.
          verdicts[t][i] = 2;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        {
          std::lock_guard<std::mutex> lock(answered_mu);
          ++pending;
          ++waiting[t];
        }
        store->WhenDurable(ticket, [&, t, i](const Status& d) {
          verdicts[t][i] = d.ok() ? 1 : 0;
          std::lock_guard<std::mutex> lock(answered_mu);
          --pending;
          --waiting[t];
          answered_cv.notify_all();
        });
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  flipper.join();  // the faults cleared: the store recovers, every ticket is decided
  {
    std::unique_lock<std::mutex> lock(answered_mu);
    answered_cv.wait(lock, [&] { return pending == 0; });
  }
  store.reset();
  ASSERT_TRUE(OpenWithFaultInjection(o, faults, &store).ok());
  int lost = 0, durable = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      SeenRequest r;
      r.tenant_id = "acme";
      r.channel = "wa";
      r.messages.push_back({"m-" + std::to_string(t) + "-" + std::to_string(i), ""});
      std::vector<SeenAnswer> answers;
      ASSERT_TRUE(store->Seen(r, &answers).ok());
      const uint64_t ticket = store->DurabilityTicket();
      if (ticket != 0) {
        std::promise<Status> p;
        store->WhenDurable(ticket, [&p](const Status& d) { p.set_value(d); });
        ASSERT_TRUE(p.get_future().get().ok());
      }
      const bool was_there = !answers[0].first;
      if (verdicts[t][i] == 1) {
        ++durable;
        EXPECT_TRUE(was_there) << "m-" << t << "-" << i << " was acknowledged, then lost";
      } else {
        ++lost;
        EXPECT_FALSE(was_there) << "m-" << t << "-" << i << " was refused ("
                                << (verdicts[t][i] == 2 ? "at once" : "its ticket lost")
                                << "), yet recorded";
      }
    }
  }
  EXPECT_GT(durable, 0);
  EXPECT_GT(lost, 0);
  std::printf("churn: %d sightings acknowledged, %d refused\n", durable, lost);
}

}  // namespace
}  // namespace intentd::store::testing
