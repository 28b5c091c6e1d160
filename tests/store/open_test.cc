// Opening: create, reopen, and refusing what cannot be used without
// touching it (newer format, corruption, foreign directory, a lock held).
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"
#include "store/rocks/options.h"
#include "store/rocks/rocks_store.h"
#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
constexpr int64_t kRetention = 30 * kDay;  // TestOptions'

class OpenTest : public ::testing::Test {
 protected:
  OpenTest() : clock_(kT0) {}

  Status Open(std::unique_ptr<RocksStore>* store, const std::string& path) {
    return RocksStore::Open(TestOptions(path, &clock_), store);
  }

  // A store with one completed action, closed.
  void MakeStore(const std::string& path) {
    std::unique_ptr<RocksStore> store;
    ASSERT_TRUE(Open(&store, path).ok());
    BeginResult r;
    ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "R1", "k1"), kLeaseMs, &r).ok());
    Action a;
    ASSERT_TRUE(store->Complete("acme", "k1", 1, "\"done\"", &a).ok());
  }

  // Runs `edit` on the store's column families (by name), opened directly
  // with RocksDB: what another version of intentd would have written.
  void EditRaw(
      const std::string& path,
      const std::function<void(rocksdb::DB*, std::map<std::string, rocksdb::ColumnFamilyHandle*>&)>&
          edit) {
    rocksdb::DBOptions options;
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(options, path, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const auto& n : names) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, path, cfs, &handles, &db).ok());
    std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name;
    for (auto* h : handles) by_name[h->GetName()] = h;
    edit(db, by_name);
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }

  TempDir dir_;
  ManualClock clock_;
};

TEST_F(OpenTest, CreatesMissingDirectoriesAndReopens) {
  const std::string path = dir_.Sub("a/b/store");
  MakeStore(path);
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(Open(&store, path).ok());
  Action a;
  ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.response, "\"done\"");
}

// RocksDB's info log is intentd's own logger (options.h says why):
// the LOG file, with the previous ones rotated and the oldest dropped.
TEST_F(OpenTest, InfoLogIsRotatedOnEachOpenAndOldOnesArePruned) {
  const std::string path = dir_.Sub("store");
  for (int i = 0; i < 7; ++i) {
    std::unique_ptr<RocksStore> store;
    ASSERT_TRUE(Open(&store, path).ok());
  }
  int old = 0;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    old += e.path().filename().string().rfind("LOG.old.", 0) == 0;
  }
  EXPECT_GE(old, 1);
  EXPECT_LE(old, 4);
  std::ifstream log(path + "/LOG");
  std::string first;
  std::getline(log, first);
  // "2026/11/30-10:53:58.933616 7eff56a4e240 RocksDB version: 7.8.3"
  EXPECT_NE(first.find("RocksDB version:"), std::string::npos) << first;
  EXPECT_EQ(first[4], '/') << first;
}

TEST_F(OpenTest, EmptyPathIsInvalidArgument) {
  std::unique_ptr<RocksStore> store;
  EXPECT_EQ(Open(&store, "").code(), Code::kInvalidArgument);
}

TEST_F(OpenTest, PathThatIsAFileIsRefused) {
  const std::string path = dir_.Sub("file");
  std::ofstream(path) << "hello";
  std::unique_ptr<RocksStore> store;
  EXPECT_EQ(Open(&store, path).code(), Code::kInvalidArgument);
}

TEST_F(OpenTest, NewerFormatIsIncompatibleAndLeftUntouched) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);
  // Pretend a future intentd wrote this store.
  EditRaw(path, [](rocksdb::DB* db, auto& cf) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["meta"], "format_version",
                        std::to_string(kFormatVersion + 1))
                    .ok());
  });
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kIncompatible) << s.message();
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  EXPECT_EQ(store, nullptr);
  EXPECT_EQ(DirectoryFingerprint(path), before);
}

// Format 1 (intentd before the lease index lost its per-tenant copy) is
// upgraded on the first writable open: the 'T' entries go, every record
// stays, and Uncertain lists each tenant's expired leases from the one index.
TEST_F(OpenTest, Format1StoreIsUpgradedWhenOpenedAndKeepsEveryRecord) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);  // acme/k1 completed
  {
    std::unique_ptr<RocksStore> store;
    ASSERT_TRUE(Open(&store, path).ok());
    BeginResult r;
    ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "R2", "k2"), kLeaseMs, &r).ok());
    ASSERT_TRUE(store->Begin(NewIntentRequest("other", "R3", "k3"), kLeaseMs, &r).ok());
  }
  int format1_entries = 0;
  EditRaw(path, [&](rocksdb::DB* db, auto& cf) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["meta"], "format_version", "1").ok());
    // Format 1's second copy of each entry, tenant first (its exact layout
    // does not matter: the upgrade drops every key from 'T' to 'U').
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf["leases"]));
    std::vector<std::string> copies;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      int64_t until;
      std::string tenant, key;
      ASSERT_TRUE(codec::DecodeLeaseKey(it->key().ToString(), &until, &tenant, &key));
      copies.push_back("T" + tenant + '\0' + std::to_string(until) + '\0' + key);
    }
    for (const auto& c : copies)
      ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["leases"], c, "").ok());
    format1_entries = static_cast<int>(copies.size());
  });
  ASSERT_EQ(format1_entries, 2);

  clock_.Advance(kLeaseMs + 1);  // both leases expired
  {
    std::unique_ptr<RocksStore> store;
    Status s = Open(&store, path);
    ASSERT_TRUE(s.ok()) << s.message();
    Action a;
    ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
    EXPECT_EQ(a.response, "\"done\"");
    std::vector<Action> listed;
    ASSERT_TRUE(store->Uncertain(std::string("acme"), 10, &listed).ok());
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].key, "k2");
    ASSERT_TRUE(store->Uncertain(std::string("other"), 10, &listed).ok());
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].key, "k3");
    ASSERT_TRUE(store->Uncertain(std::nullopt, 10, &listed).ok());
    EXPECT_EQ(listed.size(), 2u);
    ASSERT_TRUE(store->Complete("acme", "k2", 1, "{}", &a).ok());
    ASSERT_TRUE(store->Uncertain(std::nullopt, 10, &listed).ok());
    EXPECT_EQ(listed.size(), 1u);
  }
  EditRaw(path, [](rocksdb::DB* db, auto& cf) {
    std::string format;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cf["meta"], "format_version", &format).ok());
    EXPECT_EQ(format, std::to_string(kFormatVersion));
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf["leases"]));
    int left = 0;
    for (it->Seek("T"); it->Valid() && it->key().ToString() < "U"; it->Next()) ++left;
    EXPECT_EQ(left, 0);
  });
}

// Format 2 wrote "forever" on the intent of a started action and moved the
// intent's deadline whenever its action changed; format 3 never rewrites an
// intent for its action (IntentLive). Opened for writing, a format 2 store
// only records the new version, and such an intent then lives exactly as long
// as its action: through the completion (which no longer touches it) and
// retention after it, then it reads as absent and compaction drops it.
TEST_F(OpenTest, Format2StoreIsUpgradedAndItsStartedIntentsFollowTheirActions) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);  // acme/R1 -> k1 completed
  {
    std::unique_ptr<RocksStore> store;
    ASSERT_TRUE(Open(&store, path).ok());
    BeginResult r;
    ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "R2", "k2"), kLeaseMs, &r).ok());
  }
  const std::string r2 = codec::IntentKey("acme", "R2", "pix.cobranca");
  auto r2_stored = [&](bool* stored) {
    EditRaw(path, [&](rocksdb::DB* db, auto& cf) {
      std::string value;
      const rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), cf["intents"], r2, &value);
      ASSERT_TRUE(rs.ok() || rs.IsNotFound()) << rs.ToString();
      *stored = rs.ok();
    });
  };
  EditRaw(path, [&](rocksdb::DB* db, auto& cf) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["meta"], "format_version", "2").ok());
    std::string value;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cf["intents"], r2, &value).ok());
    Intent intent;
    int64_t until = 0;
    ASSERT_TRUE(codec::DecodeIntentValue(value, &intent, &until).ok());
    ASSERT_EQ(until, kT0 + kRetention);  // format 3: its own deadline
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["intents"], r2,
                        codec::EncodeIntentValue(intent, kRetainForever))
                    .ok());
  });
  clock_.Advance(2 * kRetention);  // past every own deadline; k2 still started
  {
    std::unique_ptr<RocksStore> store;
    Status s = Open(&store, path);
    ASSERT_TRUE(s.ok()) << s.message();
    LookupResult l;
    ASSERT_TRUE(store->Lookup("acme", "R2", "pix.cobranca", &l).ok());
    EXPECT_EQ(store->Lookup("acme", "R1", "pix.cobranca", &l).code(), Code::kNotFound);
    ASSERT_TRUE(store->CompactAll().ok());
    ASSERT_TRUE(store->Lookup("acme", "R2", "pix.cobranca", &l).ok());
    Action a;
    ASSERT_TRUE(store->Complete("acme", "k2", 1, "\"ok\"", &a).ok());
    clock_.Advance(kRetention - 1);
    ASSERT_TRUE(store->Lookup("acme", "R2", "pix.cobranca", &l).ok());
    ASSERT_TRUE(l.action.has_value());
    EXPECT_EQ(l.action->response, "\"ok\"");
    clock_.Advance(1);
    EXPECT_EQ(store->Lookup("acme", "R2", "pix.cobranca", &l).code(), Code::kNotFound);
    bool stored = false;
    store.reset();
    r2_stored(&stored);
    EXPECT_TRUE(stored);  // not compacted yet: reads alone hid it
    ASSERT_TRUE(Open(&store, path).ok());
    ASSERT_TRUE(store->CompactAll().ok());
  }
  bool stored = true;
  r2_stored(&stored);
  EXPECT_FALSE(stored);
  EditRaw(path, [](rocksdb::DB* db, auto& cf) {
    std::string format;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cf["meta"], "format_version", &format).ok());
    EXPECT_EQ(format, std::to_string(kFormatVersion));
  });
}

// Format 3 (intentd before the `seen` op) has no messages column family:
// a read-only open reads it as it is, the first writable open adds the
// family and records format 4, and every record stays.
TEST_F(OpenTest, Format3StoreGainsTheMessagesFamilyWhenOpenedForWriting) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);  // acme/k1 completed
  EditRaw(path, [](rocksdb::DB* db, auto& cf) {
    ASSERT_TRUE(db->DropColumnFamily(cf["messages"]).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), cf["meta"], "format_version", "3").ok());
  });
  {
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
    ASSERT_EQ(std::count(names.begin(), names.end(), "messages"), 0);
  }
  {
    std::unique_ptr<RocksStore> store;
    Status s = Open(&store, path);
    ASSERT_TRUE(s.ok()) << s.message();
    Action a;
    ASSERT_TRUE(store->GetAction("acme", "k1", &a).ok());
    EXPECT_EQ(a.response, "\"done\"");
    SeenRequest request{"acme", "whatsapp", {{"wamid.1", ""}}, 0, 0};
    std::vector<SeenAnswer> answers;
    ASSERT_TRUE(store->Seen(request, &answers).ok());
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_TRUE(answers[0].first);
    // Its intents were keyed with the one secret of that time: id "0".
    std::vector<std::string> ids;
    ASSERT_TRUE(store->RegisteredKeyIds(&ids).ok());
    EXPECT_EQ(ids, std::vector<std::string>{"0"});
  }
  EditRaw(path, [](rocksdb::DB* db, auto& cf) {
    std::string format;
    ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), cf["meta"], "format_version", &format).ok());
    EXPECT_EQ(format, std::to_string(kFormatVersion));
    ASSERT_EQ(cf.count("messages"), 1u);
  });
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(Open(&store, path).ok());
  SeenRequest again{"acme", "whatsapp", {{"wamid.1", ""}}, 0, 0};
  std::vector<SeenAnswer> answers;
  ASSERT_TRUE(store->Seen(again, &answers).ok());
  EXPECT_FALSE(answers[0].first);
  EXPECT_EQ(answers[0].record.count, 2);
}

TEST_F(OpenTest, GarbledCurrentFileIsCorruptionAndLeftUntouched) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);
  std::ofstream(path + "/CURRENT", std::ios::trunc) << "garbage-without-newline";
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_EQ(DirectoryFingerprint(path), before);
}

TEST_F(OpenTest, MissingManifestIsCorruptionAndLeftUntouched) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    if (e.path().filename().string().rfind("MANIFEST-", 0) == 0) std::filesystem::remove(e.path());
  }
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_EQ(DirectoryFingerprint(path), before);
}

TEST_F(OpenTest, DirectoryWithForeignFilesIsNotTurnedIntoAStore) {
  const std::string path = dir_.Sub("photos");
  std::filesystem::create_directories(path);
  std::ofstream(path + "/cat.jpg") << "meow";
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_EQ(DirectoryFingerprint(path), before);
}

TEST_F(OpenTest, PlainRocksDbDatabaseIsNotAStore) {
  const std::string path = dir_.Sub("other");
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, path, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "x", "y").ok());
    delete db;
  }
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_EQ(DirectoryFingerprint(path), before);
}

// Records still in the WAL (never flushed) are in the memtables the open
// replays them into; hash memtables (the agent's) must be scanned in total
// order too, or the store would look empty and be formatted over.
TEST_F(OpenTest, RecordsWithoutAFormatVersionAreRefusedWhateverTheMemtables) {
  for (const bool hash : {false, true}) {
    SCOPED_TRACE(hash ? "hash memtables" : "skip lists");
    const std::string path = dir_.Sub(hash ? "hash" : "list");
    {
      rocksdb::DBOptions options;
      options.create_if_missing = true;
      options.create_missing_column_families = true;
      std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
      for (const std::string& n :
           {rocksdb::kDefaultColumnFamilyName, std::string(kIntentsCf), std::string(kActionsCf),
            std::string(kLeasesCf), std::string(kMetaCf)}) {
        cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
      }
      std::vector<rocksdb::ColumnFamilyHandle*> handles;
      rocksdb::DB* db = nullptr;
      ASSERT_TRUE(rocksdb::DB::Open(options, path, cfs, &handles, &db).ok());
      ASSERT_TRUE(
          db->Put(rocksdb::WriteOptions(), handles[1], "some intent", "x").ok());  // intents
      for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
      delete db;  // with a WAL, nothing is flushed: the record is in the WAL only
    }
    const std::string before = DirectoryFingerprint(path);
    RocksOptions options = TestOptions(path, &clock_);
    options.hash_memtables = hash;
    std::unique_ptr<RocksStore> store;
    Status s = RocksStore::Open(options, &store);
    EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
    EXPECT_NE(s.message().find("has records but no format version"), std::string::npos)
        << s.message();
    EXPECT_EQ(DirectoryFingerprint(path), before);
  }
}

TEST_F(OpenTest, SecondOpenInTheSameProcessIsBusy) {
  const std::string path = dir_.Sub("store");
  std::unique_ptr<RocksStore> first, second;
  ASSERT_TRUE(Open(&first, path).ok());
  EXPECT_EQ(Open(&second, path).code(), Code::kBusy);
  BeginResult r;
  EXPECT_TRUE(first->Begin(NewIntentRequest("acme", "R1", "k1"), kLeaseMs, &r).ok());
}

TEST_F(OpenTest, StoreLockedByAnotherProcessIsBusyAndLeftUntouched) {
  const std::string path = dir_.Sub("store");
  MakeStore(path);
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    close(done[1]);
    std::unique_ptr<RocksStore> store;
    char c = Open(&store, path).ok() ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (read(done[0], &c, 1) < 0) _exit(3);  // wait for the parent
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_EQ(c, 'y');
  const std::string before = DirectoryFingerprint(path);
  std::unique_ptr<RocksStore> store;
  Status s = Open(&store, path);
  EXPECT_EQ(s.code(), Code::kBusy) << s.message();
  EXPECT_EQ(DirectoryFingerprint(path), before);
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(Open(&store, path).ok());
}

TEST_F(OpenTest, CheckpointIsAnOpenableCopy) {
  const std::string path = dir_.Sub("store");
  std::unique_ptr<RocksStore> store;
  ASSERT_TRUE(Open(&store, path).ok());
  BeginResult r;
  ASSERT_TRUE(store->Begin(NewIntentRequest("acme", "R1", "k1"), kLeaseMs, &r).ok());
  const std::string copy = dir_.Sub("copy");
  ASSERT_TRUE(store->Checkpoint(copy).ok());
  EXPECT_EQ(store->Checkpoint(copy).code(), Code::kInvalidArgument);  // exists
  Action a;
  ASSERT_TRUE(store->Complete("acme", "k1", 1, "1", &a).ok());  // after the copy
  std::unique_ptr<RocksStore> restored;
  ASSERT_TRUE(Open(&restored, copy).ok());
  ASSERT_TRUE(restored->GetAction("acme", "k1", &a).ok());
  EXPECT_EQ(a.status, ActionStatus::kStarted);
}

// However the directory is spelled, the WAL is found (a store whose WAL the
// sync did not see would acknowledge writes that are not durable: it refuses
// to open instead).
TEST_F(OpenTest, SyncedStoreOpensWhateverTheDirectorySpelling) {
  ASSERT_EQ(mkdir(dir_.Sub("x").c_str(), 0700), 0);
  for (const std::string& path : {dir_.Sub("a") + "/", dir_.Sub("b") + "//", dir_.path() + "//c",
                                  dir_.Sub("x") + "/../d", dir_.path() + "/./e"}) {
    RocksOptions o = TestOptions(path, &clock_);
    o.sync = true;
    std::unique_ptr<RocksStore> store;
    Status s = RocksStore::Open(o, &store);
    ASSERT_TRUE(s.ok()) << path << ": " << s.message();
    BeginResult r;
    s = store->Begin(NewIntentRequest("acme", "R1", "k1"), kLeaseMs, &r);
    EXPECT_TRUE(s.ok()) << path << ": " << s.message();
  }
}

}  // namespace
}  // namespace intentd::store::testing
