// The WAL's integrity across storage faults: commit stamps and their gaps,
// the guard file, a damaged WAL refusing the open, a vanished directory.
#include "store/rocks/wal_guard.h"

#include <gtest/gtest.h>
#include <rocksdb/file_system.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "store/rocks/commit_stamp.h"
#include "store/rocks/fault_injection.h"
#include "store/rocks/group_commit.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

namespace fs = std::filesystem;
using Code = Status::Code;

std::vector<CommitStamp> Chain(std::initializer_list<std::pair<uint64_t, uint64_t>> stamps) {
  std::vector<CommitStamp> out;
  for (const auto& [c, d] : stamps) out.push_back({c, d});
  return out;
}

TEST(CommitStamp, RoundTripsAndIgnoresOtherBlobs) {
  CommitStamp in{123456789, 123456700}, out;
  ASSERT_TRUE(DecodeCommitStamp(EncodeCommitStamp(in), &out));
  EXPECT_EQ(out.commit, in.commit);
  EXPECT_EQ(out.durable, in.durable);
  EXPECT_FALSE(DecodeCommitStamp("not a stamp", &out));
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(batch.Put("k", "v").ok());
  ASSERT_TRUE(batch.PutLogData(EncodeCommitStamp({7, 5})).ok());
  const std::vector<CommitStamp> stamps = ReadCommitStamps(batch);
  ASSERT_EQ(stamps.size(), 1u);
  EXPECT_EQ(stamps[0].commit, 7u);
}

TEST(FindGaps, AContiguousChainHasNone) {
  const GapReport r = FindGaps(Chain({{1, 0}, {2, 0}, {3, 1}, {4, 3}}), {});
  EXPECT_EQ(r.damaged_after, 0u);
  EXPECT_FALSE(r.torn);
}

TEST(FindGaps, AGapOnlyUnsyncedRecordsFollowIsATornTail) {
  // 4 and 5 lost; 6 and 7 were written while durable was 3 at most: the
  // pages of one unfinished sync, persisted out of order.
  const GapReport r = FindGaps(Chain({{1, 0}, {2, 0}, {3, 1}, {6, 3}, {7, 3}}), {});
  EXPECT_EQ(r.damaged_after, 0u);
  EXPECT_TRUE(r.torn);
  EXPECT_EQ(r.torn_after, 3u);
  EXPECT_EQ(r.records_after_torn, 2u);
}

TEST(FindGaps, AGapALaterRecordSaysWasDurableIsDamage) {
  // 7 was written once 5 was durable: 4 and 5 had been synced, then lost.
  const GapReport r = FindGaps(Chain({{1, 0}, {2, 0}, {3, 1}, {6, 3}, {7, 5}, {8, 5}}), {});
  EXPECT_EQ(r.damaged_after, 3u);
  EXPECT_EQ(r.damaged_next, 6u);
  EXPECT_EQ(r.records_after_damage, 3u);
}

TEST(FindGaps, AVoidedRangeIsNoGap) {
  const GapReport r = FindGaps(Chain({{1, 0}, {2, 1}, {9, 2}, {10, 9}}), {{2, 8}});
  EXPECT_EQ(r.damaged_after, 0u);
  EXPECT_FALSE(r.torn);
}

TEST(WalGuard, WritesLoadsAndSurvivesATornSlot) {
  TempDir dir;
  auto fs = rocksdb::FileSystem::Default();
  WalGuard::State state;
  state.identity = "id-1";
  state.acked_seq = 10;
  state.next_commit = 5;
  std::unique_ptr<WalGuard> guard;
  ASSERT_TRUE(WalGuard::Open(fs, dir.path(), state, &guard).ok());
  ASSERT_TRUE(guard->SetVoids({{3, 9}}, 10).ok());
  guard->Acked(42);
  ASSERT_TRUE(guard->FlushAcked().ok());
  guard.reset();

  WalGuard::State read;
  bool found = false;
  ASSERT_TRUE(WalGuard::Load(fs.get(), dir.path(), &read, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(read.identity, "id-1");
  EXPECT_EQ(read.acked_seq, 42u);
  EXPECT_EQ(read.next_commit, 10u);
  ASSERT_EQ(read.voids.size(), 1u);
  EXPECT_EQ(read.voids[0], (CommitRange{3, 9}));

  // A torn write damages one slot: the other one is read.
  const std::string path = dir.Sub(kWalGuardFile);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    for (std::streamoff slot = 0; slot < 1024; slot += 512) {
      f.seekg(slot + 40);
      char c = 0;
      f.get(c);
      if (slot == 512) {
        f.seekp(slot + 40);
        f.put(static_cast<char>(c ^ 0x20));
      }
    }
  }
  ASSERT_TRUE(WalGuard::Load(fs.get(), dir.path(), &read, &found).ok());
  EXPECT_TRUE(found);
  // Both damaged: unreadable, said so.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('#');
  }
  EXPECT_EQ(WalGuard::Load(fs.get(), dir.path(), &read, &found).code(), Code::kCorruption);
}

TEST(GroupCommitVerdicts, ALostRangeStaysLostAfterLaterCommitsAreDurable) {
  GroupCommit commit(
      nullptr, [] { return true; }, 10);
  EXPECT_EQ(commit.Check(10), GroupCommit::Verdict::kDurable);
  EXPECT_EQ(commit.Check(11), GroupCommit::Verdict::kPending);
  std::promise<Status> p12;
  commit.WhenDurable(12, [&p12](const Status& s) { p12.set_value(s); });
  commit.MarkDurable(11);
  commit.Fail({11, 14});  // 12..14 of a failed generation
  EXPECT_EQ(p12.get_future().get().code(), Code::kStorageError);
  commit.MarkDurable(20);  // the next generation
  EXPECT_EQ(commit.Check(11), GroupCommit::Verdict::kDurable);
  EXPECT_EQ(commit.Check(13), GroupCommit::Verdict::kLost);
  EXPECT_EQ(commit.Check(15), GroupCommit::Verdict::kDurable);
  EXPECT_EQ(commit.Check(21), GroupCommit::Verdict::kPending);
}

// Copies the store's directory as a SIGKILL would leave it (the store still
// open, its WAL synced): what a restart finds.
void CopyAsCrashed(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  fs::remove(fs::path(to) / "LOCK");
}

std::string LiveWal(const std::string& dir) {
  std::string wal;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".log" && e.file_size() >= size) {
      wal = e.path().string();
      size = e.file_size();
    }
  }
  return wal;
}

class DamagedWal : public ::testing::Test {
 protected:
  // 200 writes of 10 sightings each acknowledged (synced): a WAL of several
  // 32 KiB blocks; then the directory as a crash leaves it in `crashed_`.
  void SetUp() override {
    RocksOptions o = TestOptions(dir_.Sub("live"), &SystemClock());
    o.sync = true;
    ASSERT_TRUE(RocksStore::Open(o, &live_).ok());
    for (int i = 0; i < 200; ++i) {
      SeenRequest r;
      r.tenant_id = "acme";
      r.channel = "wa";
      r.messages.push_back({"m-" + std::to_string(i), ""});
      for (int j = 0; j < 9; ++j) {
        r.messages.push_back({"x-" + std::to_string(i) + "-" + std::to_string(j), ""});
      }
      std::vector<SeenAnswer> answers;
      ASSERT_TRUE(live_->Seen(r, &answers).ok());
    }
    // The guard's acknowledged watermark is written behind the syncs, at
    // most every WalGuard::kAckedInterval: a real crash comes later than
    // that after most acknowledged writes.
    std::this_thread::sleep_for(WalGuard::kAckedInterval * 5);
    crashed_ = dir_.Sub("crashed");
    CopyAsCrashed(dir_.Sub("live"), crashed_);
  }

  Status OpenCrashed(bool accept, std::unique_ptr<RocksStore>* store) {
    RocksOptions o = TestOptions(crashed_, &SystemClock());
    o.sync = true;
    o.accept_wal_loss = accept;
    return RocksStore::Open(o, store);
  }

  static void Flip(const std::string& file, uintmax_t at) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x5a));
  }

  int Recorded(RocksStore* store) {
    int n = 0;
    for (int i = 0; i < 200; ++i) {
      SeenRequest r;
      r.tenant_id = "acme";
      r.channel = "wa";
      r.messages.push_back({"m-" + std::to_string(i), ""});
      std::vector<SeenAnswer> answers;
      EXPECT_TRUE(store->Seen(r, &answers).ok());
      n += !answers[0].first;
    }
    return n;
  }

  TempDir dir_;
  std::unique_ptr<RocksStore> live_;
  std::string crashed_;
};

TEST_F(DamagedWal, AnIntactWalOpensWithEveryAcknowledgedWrite) {
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(OpenCrashed(false, &store).ok());
  EXPECT_EQ(Recorded(store.get()), 200);
}

TEST_F(DamagedWal, AFlippedByteRefusesTheOpenAndChangesNothing) {
  const std::string wal = LiveWal(crashed_);
  ASSERT_FALSE(wal.empty());
  Flip(wal, fs::file_size(wal) / 4);
  const uintmax_t wal_size = fs::file_size(wal);
  std::unique_ptr<RocksStore> store;
  Status s = OpenCrashed(false, &store);
  ASSERT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("WAL is damaged"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("were damaged"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--accept-wal-loss"), std::string::npos) << s.message();
  // Nothing was replayed into tables or dropped: the WAL is as it was.
  EXPECT_TRUE(fs::exists(wal));
  EXPECT_EQ(fs::file_size(wal), wal_size);
  EXPECT_EQ(OpenCrashed(false, &store).code(), Code::kCorruption);

  // Told to, it opens without the damaged part, the WAL kept aside.
  ASSERT_TRUE(OpenCrashed(true, &store).ok());
  EXPECT_GT(store->ReadHealth()->wal_loss_accepted, 0u);
  const int kept = Recorded(store.get());
  EXPECT_LT(kept, 200);
  EXPECT_GT(kept, 0);
  bool copied = false;
  for (const auto& e : fs::directory_iterator(crashed_)) {
    copied |= e.path().filename().string().rfind("wal-damaged-", 0) == 0;
  }
  EXPECT_TRUE(copied);
}

TEST_F(DamagedWal, AShortenedWalThatLostAcknowledgedWritesIsRefused) {
  // Damage at the very end, which no later record can reveal: the guard's
  // acknowledged watermark does.
  const std::string wal = LiveWal(crashed_);
  ASSERT_FALSE(wal.empty());
  fs::resize_file(wal, fs::file_size(wal) / 2);
  std::unique_ptr<RocksStore> store;
  Status s = OpenCrashed(false, &store);
  ASSERT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("were acknowledged"), std::string::npos) << s.message();
  ASSERT_TRUE(OpenCrashed(true, &store).ok());
  EXPECT_GT(store->ReadHealth()->wal_loss_accepted, 0u);
}

TEST_F(DamagedWal, ATornTailOfUnacknowledgedWritesIsDropped) {
  // What a power cut leaves: a record cut short at the end of the WAL, past
  // everything acknowledged.
  std::unique_ptr<RocksStore> writer;
  live_.reset();
  fs::remove_all(crashed_);
  RocksOptions o = TestOptions(dir_.Sub("live"), &SystemClock());
  o.sync = false;  // written, never acknowledged as durable
  ASSERT_TRUE(RocksStore::Open(o, &writer).ok());
  SeenRequest r;
  r.tenant_id = "acme";
  r.channel = "wa";
  r.messages.push_back({"unacknowledged", std::string(3000, 'x').insert(0, "\"").append("\"")});
  std::vector<SeenAnswer> answers;
  ASSERT_TRUE(writer->Seen(r, &answers).ok());
  CopyAsCrashed(dir_.Sub("live"), crashed_);
  const std::string wal = LiveWal(crashed_);
  fs::resize_file(wal, fs::file_size(wal) - 1000);
  std::unique_ptr<RocksStore> store;
  Status s = OpenCrashed(false, &store);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Recorded(store.get()), 200);
}

TEST(VanishedDirectory, WritesStopUntilItIsBackAndNoStoreIsCreatedInItsPlace) {
  TempDir dir;
  RocksOptions o = TestOptions(dir.Sub("data"), &SystemClock());
  o.sync = true;
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(RocksStore::Open(o, &store).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "R1", KeyFor(1)), kLeaseMs, &r).ok());
  fs::rename(dir.Sub("data"), dir.Sub("moved"));
  // The next writes fail (at the latest at the directory check) and none
  // reports success meanwhile.
  int refused = 0;
  for (int i = 2; i < 40 && refused == 0; ++i) {
    Status s =
        store->Begin(NewIntentRequest("acme", "R" + std::to_string(i), KeyFor(i)), kLeaseMs, &r);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), Code::kStorageError) << s.message();
      ++refused;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_FALSE(fs::exists(dir.Sub("data"))) << "a store was created where the directory was";
  EXPECT_FALSE(store->ReadHealth()->writable);
  // Another directory at the path is not taken for it.
  fs::create_directories(dir.Sub("data"));
  EXPECT_EQ(store->Begin(NewIntentRequest("acme", "X", KeyFor(99)), kLeaseMs, &r).code(),
            Code::kStorageError);
  EXPECT_TRUE(fs::is_empty(dir.Sub("data")));
  // The directory back: the store reopens, with R1.
  fs::remove(dir.Sub("data"));
  fs::rename(dir.Sub("moved"), dir.Sub("data"));
  Status s;
  for (int i = 0; i < 50; ++i) {
    s = store->Begin(NewIntentRequest("acme", "R100", KeyFor(100)), kLeaseMs, &r);
    if (s.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(s.ok()) << s.message();
  LookupResult l;
  ASSERT_TRUE(store->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  EXPECT_GE(store->ReadHealth()->generations, 2u);
}

}  // namespace
}  // namespace intentd::store::testing
