// Zero-filled spare WAL files (store/rocks/wal_spares.h): made one at a time, sized
// to the recent WAL files, not made without space or on failed writes,
// leftovers removed; and a store's WAL made from a spare, replayed from a
// copy taken while it was written (a crash's image: the file ends in zeros).
// The SIGKILL rounds with spares are in crash_test.cc.
#include "store/rocks/wal_spares.h"

#include <gtest/gtest.h>
#include <rocksdb/file_system.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "store/clock.h"
#include "store/rocks/fault_injection.h"
#include "store/rocks/options.h"
#include "store/rocks/rocks_store.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = 1u << 20;

// The names in `dir` that are spares, ready ones and half-written ones.
std::vector<std::string> Spares(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (WalSpares::IsSpareName(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Polls `done` for up to 20 s.
bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(WalSpares, SizesSparesToTheLargestRecentWalFile) {
  TempDir dir;
  WalSpares spares(rocksdb::FileSystem::Default(), dir.path(), 0);  // not started
  EXPECT_EQ(spares.next_bytes(), 0u);                               // none before a WAL file closed
  spares.WalClosed(10 * kMiB);                                      // an eighth more, in whole MiB
  EXPECT_EQ(spares.next_bytes(), 12 * kMiB);
  spares.WalClosed(1000);
  EXPECT_EQ(spares.next_bytes(), 12 * kMiB);  // the largest of the last four
  for (int i = 0; i < 3; ++i) spares.WalClosed(1000);
  EXPECT_EQ(spares.next_bytes(), 1 * kMiB);  // the 10 MiB one is out
  spares.WalClosed(10'000 * kMiB);
  EXPECT_EQ(spares.next_bytes(), WalSpares::kMaxBytes);
}

TEST(WalSpares, KeepsOneZeroFilledSpareReadyAndDeletesItWhenDone) {
  TempDir dir;
  std::string taken;
  {
    WalSpares spares(rocksdb::FileSystem::Default(), dir.path(), 0);
    spares.WalClosed(1 * kMiB + 1);  // spares of 2 MiB
    spares.Start();
    ASSERT_TRUE(WaitFor([&] { return spares.counts().made == 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(spares.counts().made, 1u) << "a second spare while the first was not taken";
    ASSERT_EQ(Spares(dir.path()).size(), 1u);
    taken = spares.Take();
    ASSERT_FALSE(taken.empty());
    ASSERT_TRUE(fs::exists(taken)) << taken;
    EXPECT_EQ(fs::path(taken).parent_path(), fs::path(dir.path()));
    const std::string bytes = ReadFile(taken);
    EXPECT_EQ(bytes.size(), 2 * kMiB);
    EXPECT_EQ(bytes.find_first_not_of('\0'), std::string::npos) << "a spare holds only zeros";
    EXPECT_EQ(spares.counts().taken, 1u);
    // The taken one is the caller's; the next is made.
    ASSERT_TRUE(WaitFor([&] { return spares.counts().made == 2; }));
    EXPECT_EQ(Spares(dir.path()).size(), 2u);
  }
  // Destroyed: the spare not taken is deleted, the taken one is not ours.
  EXPECT_EQ(Spares(dir.path()), std::vector<std::string>{fs::path(taken).filename().string()});
}

// The reserve both the store's writes and the spares respect.
TEST(WalSpares, FreeSpaceReserveIsTheOptionOrATenthUpTo64MiB) {
  EXPECT_EQ(FreeSpaceReserve(-1, 100 * kMiB), 10 * kMiB);
  EXPECT_EQ(FreeSpaceReserve(-1, 10'000 * kMiB), 64 * kMiB);
  EXPECT_EQ(FreeSpaceReserve(0, 10'000 * kMiB), 0u);
  EXPECT_EQ(FreeSpaceReserve(5 * kMiB, 1 * kMiB), 5 * kMiB);
}

TEST(WalSpares, MakesNoneWithoutTheSpaceTheStoreReserves) {
  TempDir dir;
  WalSpares spares(rocksdb::FileSystem::Default(), dir.path(), int64_t{1} << 60);
  spares.WalClosed(1);
  spares.Start();
  ASSERT_TRUE(WaitFor([&] { return spares.counts().failed >= 1; }));
  EXPECT_EQ(spares.counts().made, 0u);
  EXPECT_TRUE(Spares(dir.path()).empty());
  EXPECT_EQ(spares.Take(), "");
  EXPECT_EQ(spares.counts().missed, 1u);
}

TEST(WalSpares, AFailedWriteLeavesNoFileAndIsRetried) {
  TempDir dir;
  auto faults = std::make_shared<FaultInjection>();
  faults->SetWriteFault(FaultInjection::Fault::kNoSpace);
  WalSpares spares(NewFaultInjectionFileSystem(rocksdb::FileSystem::Default(), faults), dir.path(),
                   0);
  spares.WalClosed(1);  // spares of 1 MiB
  spares.Start();
  ASSERT_TRUE(WaitFor([&] { return spares.counts().failed >= 1; }));
  EXPECT_GE(faults->injected(), 1);
  EXPECT_TRUE(Spares(dir.path()).empty()) << "the half-written spare was left";
  EXPECT_EQ(spares.Take(), "");
  faults->Clear();
  ASSERT_TRUE(WaitFor([&] { return spares.counts().made == 1; }));
  EXPECT_EQ(Spares(dir.path()).size(), 1u);
}

TEST(WalSpares, RemovesLeftoversAndNothingElse) {
  TempDir dir;
  for (const char* name : {"intentd-wal-spare.3", "intentd-wal-spare.4.tmp", "000007.log",
                           "CURRENT", "intentd-wal-sparse"}) {
    std::ofstream(dir.Sub(name)) << "x";
  }
  WalSpares::RemoveLeftovers(rocksdb::FileSystem::Default().get(), dir.path());
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"000007.log", "CURRENT", "intentd-wal-sparse"}));
}

// The store: the WAL file after a flush is made from the spare, every write
// into it is replayed from a copy of the directory taken while it was the
// live WAL (as a crash leaves it: written records, then zeros) and from a
// checkpoint, without the replay reporting corruption; closing deletes the
// ready spare.
TEST(RocksStoreWalSpares, AWalMadeFromASpareIsReplayedUpToItsZeros) {
  TempDir dir;
  const std::string path = dir.Sub("store"), copy = dir.Sub("copy");
  ManualClock clock(kT0);
  RocksOptions options = TestOptions(path, &clock);
  options.sync = true;
  options.wal_spares = true;
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(RocksStore::Open(options, &store).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(Spares(path).empty()) << "a spare before any WAL file closed";
  BeginExpectingOk(store.get(), NewIntentRequest("acme", "first", KeyFor(1000)));
  ASSERT_TRUE(store->Flush().ok());  // the first WAL file closes: a 1 MiB spare
  ASSERT_TRUE(WaitFor([&] {
    const auto names = Spares(path);
    return names.size() == 1 && names[0].find(".tmp") == std::string::npos;
  }));
  for (int i = 0; i < 50; ++i) {
    BeginExpectingOk(store.get(), NewIntentRequest("acme", "a-" + std::to_string(i), KeyFor(i)));
  }
  ASSERT_TRUE(store->Flush().ok());  // a new WAL file: from the spare
  EXPECT_EQ(store->CommitCounts()->wal_spares_taken, 1u);
  EXPECT_EQ(store->CommitCounts()->wal_spares_missed, 1u);  // the first flush's
  for (int i = 50; i < 100; ++i) {
    BeginExpectingOk(store.get(), NewIntentRequest("acme", "a-" + std::to_string(i), KeyFor(i)));
  }
  // The crash's image, the live WAL included.
  fs::create_directory(copy);
  std::string live_wal;
  for (const auto& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (name == "LOCK") continue;
    fs::copy_file(entry.path(), fs::path(copy) / name);
    if (entry.path().extension() == ".log" && name > live_wal) live_wal = name;
  }
  const std::string wal = ReadFile(copy + "/" + live_wal);
  ASSERT_EQ(wal.size(), kMiB) << "the live WAL is not the spare";
  ASSERT_GT(wal.find_last_not_of('\0'), 50u * 64) << "the records are not in it";
  EXPECT_EQ(wal.back(), '\0');

  // And a checkpoint (the agent's backup) taken now: RocksDB copies the live
  // WAL, which may be the next spare, at its file size.
  const std::string checkpoint = dir.Sub("checkpoint");
  ASSERT_TRUE(store->Checkpoint(checkpoint).ok());
  for (const std::string& image : {copy, checkpoint}) {
    {
      RocksOptions reopen = TestOptions(image, &clock);  // no spares
      std::unique_ptr<RocksStore> copied;
      ASSERT_TRUE(RocksStore::Open(reopen, &copied).ok()) << image;
      for (int i = 0; i < 100; ++i) {
        LookupResult l;
        ASSERT_TRUE(copied->Lookup("acme", "a-" + std::to_string(i), "pix.cobranca", &l).ok())
            << image << " " << i;
        EXPECT_EQ(l.intent.key, KeyFor(i));
      }
      EXPECT_TRUE(Spares(image).empty()) << "a copied spare outlived the open of " << image;
    }
    const std::string log = ReadFile(image + "/LOG");
    EXPECT_EQ(log.find("Point in time recovered"), std::string::npos) << log;
    EXPECT_EQ(log.find("orrupt"), std::string::npos) << log;
  }

  store.reset();
  EXPECT_TRUE(Spares(path).empty()) << "the ready spare was left behind";
  // A WAL written to is trimmed to its records when closed; one made from a
  // spare and never written to (the checkpoint's flush switched to it) keeps
  // its zeros, which the next open reads as an empty WAL.
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() != ".log") continue;
    const std::string bytes = ReadFile(entry.path().string());
    if (bytes.size() >= kMiB) {
      EXPECT_EQ(bytes.find_first_not_of('\0'), std::string::npos) << entry.path();
    }
  }
  std::unique_ptr<RocksStore> reopened;
  ASSERT_TRUE(RocksStore::Open(options, &reopened).ok());
  LookupResult l;
  EXPECT_TRUE(reopened->Lookup("acme", "a-99", "pix.cobranca", &l).ok());
}

}  // namespace
}  // namespace intentd::store::testing
