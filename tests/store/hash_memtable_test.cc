// The store's hash memtable (store/hash_memtable.h) behind a real RocksDB:
// point reads, snapshots and iterators must answer exactly as a skip list
// would, whatever shares a hash bucket, and readers racing the one writer
// must only ever see whole, ordered data.
#include "store/hash_memtable.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/store/store_test_util.h"

namespace intentd::store::testing {
namespace {

class Db {
 public:
  Db(const std::string& dir, size_t buckets) {
    options_.create_if_missing = true;
    options_.memtable_factory.reset(NewHashSortMemTableFactory(buckets));
    options_.allow_concurrent_memtable_write = false;  // the rep's contract
    options_.disable_auto_compactions = true;
    options_.write_buffer_size = 64 << 20;  // flushes only when asked
    dir_ = dir;
    Open();
  }
  void Open() {
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(options_, dir_, &db);
    ASSERT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
  }
  void Reopen() {
    db_.reset();
    Open();
  }
  rocksdb::DB* operator->() { return db_.get(); }
  rocksdb::DB* get() { return db_.get(); }

 private:
  rocksdb::Options options_;
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

// Every version of every key, by sequence number; nullopt: a deletion.
using Versions = std::map<std::string, std::map<uint64_t, std::optional<std::string>>>;

std::optional<std::string> ModelAt(const Versions& model, const std::string& key, uint64_t seq) {
  auto it = model.find(key);
  if (it == model.end()) return std::nullopt;
  auto v = it->second.upper_bound(seq);
  if (v == it->second.begin()) return std::nullopt;
  return std::prev(v)->second;
}

std::map<std::string, std::string> LiveAt(const Versions& model, uint64_t seq) {
  std::map<std::string, std::string> live;
  for (const auto& [key, versions] : model) {
    if (auto value = ModelAt(model, key, seq)) live[key] = *value;
  }
  return live;
}

struct Snapshot {
  const rocksdb::Snapshot* snapshot;
  uint64_t seq;
};

// Every key read at `seq` (through `snapshot`, or the latest state) and a
// full scan forwards and backwards, plus seeks between keys.
void ExpectMatchesModel(rocksdb::DB* db, const Versions& model,
                        const std::vector<std::string>& keys, const rocksdb::Snapshot* snapshot,
                        uint64_t seq, const std::string& when) {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  for (const std::string& key : keys) {
    std::string value;
    const rocksdb::Status s = db->Get(ro, key, &value);
    const std::optional<std::string> want = ModelAt(model, key, seq);
    if (want) {
      ASSERT_TRUE(s.ok()) << when << ": key " << key << " at seq " << seq << ": " << s.ToString();
      ASSERT_EQ(value, *want) << when << ": key " << key << " at seq " << seq;
    } else {
      ASSERT_TRUE(s.IsNotFound()) << when << ": key " << key << " at seq " << seq
                                  << " should be absent, got " << s.ToString() << " " << value;
    }
  }
  const std::map<std::string, std::string> live = LiveAt(model, seq);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  auto want = live.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++want) {
    ASSERT_NE(want, live.end()) << when << ": scan returned extra " << it->key().ToString();
    ASSERT_EQ(it->key().ToString(), want->first) << when;
    ASSERT_EQ(it->value().ToString(), want->second) << when;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  ASSERT_EQ(want, live.end()) << when << ": scan stopped before " << want->first;
  auto back = live.rbegin();
  for (it->SeekToLast(); it->Valid(); it->Prev(), ++back) {
    ASSERT_NE(back, live.rend()) << when;
    ASSERT_EQ(it->key().ToString(), back->first) << when << " (backwards)";
  }
  ASSERT_EQ(back, live.rend()) << when << " (backwards)";
  for (const std::string& key : keys) {
    const std::string probe = key + '\x01';  // between key and its successors
    it->Seek(probe);
    auto lb = live.lower_bound(probe);
    ASSERT_EQ(it->Valid(), lb != live.end()) << when << ": Seek(" << key << "+1)";
    if (lb != live.end()) {
      ASSERT_EQ(it->key().ToString(), lb->first) << when;
    }
    it->SeekForPrev(key);
    auto ub = live.upper_bound(key);
    const bool has_prev = ub != live.begin();
    ASSERT_EQ(it->Valid(), has_prev) << when << ": SeekForPrev(" << key << ")";
    if (has_prev) {
      ASSERT_EQ(it->key().ToString(), std::prev(ub)->first) << when;
    }
  }
}

class HashMemtable : public ::testing::TestWithParam<size_t> {};

// Random puts and deletes over 60 keys (some a prefix of another, some with
// NUL and high bytes), snapshots along the way, checked against a model in
// the mutable memtable, after a flush (immutable memtable and table), and
// after a reopen (the WAL replayed into new memtables). One bucket puts every
// key in one chain; 1,024 spreads them.
TEST_P(HashMemtable, ReadsMatchAModelAcrossVersionsSnapshotsFlushesAndReopen) {
  TempDir dir;
  Db db(dir.path(), GetParam());
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) {
    keys.push_back("k" + std::to_string(i));
    keys.push_back("k" + std::to_string(i) + "x");
    keys.push_back(std::string("b\0", 2) + std::to_string(i) + "\xff");
  }
  std::mt19937 rng(20261201);
  Versions model;
  std::vector<Snapshot> snapshots;
  auto check_all = [&](const std::string& when) {
    ExpectMatchesModel(db.get(), model, keys, nullptr, db->GetLatestSequenceNumber(), when);
    for (const Snapshot& s : snapshots) {
      ExpectMatchesModel(db.get(), model, keys, s.snapshot, s.seq, when + ", snapshot");
    }
  };
  for (int round = 0; round < 3; ++round) {
    for (int op = 0; op < 1500; ++op) {
      const std::string& key = keys[rng() % keys.size()];
      if (rng() % 4 == 0) {
        ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), key).ok());
        model[key][db->GetLatestSequenceNumber()] = std::nullopt;
      } else {
        const std::string value =
            "v" + std::to_string(round) + "." + std::to_string(op) + std::string(rng() % 40, 'z');
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key, value).ok());
        model[key][db->GetLatestSequenceNumber()] = value;
      }
      if (op % 300 == 299) {
        snapshots.push_back(Snapshot{db->GetSnapshot(), db->GetLatestSequenceNumber()});
      }
    }
    check_all("round " + std::to_string(round) + " in the memtable");
    if (round == 1) {
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
      check_all("round 1 flushed");
    }
  }
  for (const Snapshot& s : snapshots) db->ReleaseSnapshot(s.snapshot);
  snapshots.clear();
  db.Reopen();
  check_all("reopened");
}

INSTANTIATE_TEST_SUITE_P(Buckets, HashMemtable, ::testing::Values(size_t{1}, size_t{1024}));

// One writer (RocksDB serializes inserts) racing readers: each key's value
// only grows, a read never sees a torn or reordered chain, scans are sorted
// and complete, also while memtables turn immutable and are flushed.
TEST(HashMemtableConcurrency, ReadersRacingTheWriterSeeWholeOrderedData) {
  TempDir dir;
  Db db(dir.path(), 64);
  constexpr int kKeys = 200, kWrites = 40000;
  auto key_of = [](int k) { return "key" + std::to_string(1000 + k); };
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), key_of(k), "00000000").ok());
  }
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::thread writer([&] {
    for (int i = 1; i <= kWrites; ++i) {
      char value[16];
      std::snprintf(value, sizeof(value), "%08d", i);
      if (!db->Put(rocksdb::WriteOptions(), key_of(i % kKeys), value).ok()) ++failures;
      if (i % 10000 == 0 && !db->Flush(rocksdb::FlushOptions()).ok()) ++failures;
    }
    done = true;
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::vector<int> seen(kKeys, 0);
      std::mt19937 rng(r);
      int scans = 0;
      while (!done || scans < 2) {
        for (int n = 0; n < 200; ++n) {
          const int k = static_cast<int>(rng() % kKeys);
          std::string value;
          if (!db->Get(rocksdb::ReadOptions(), key_of(k), &value).ok() || value.size() != 8) {
            ++failures;
            continue;
          }
          const int v = std::stoi(value);
          if (v < seen[k] || (v != 0 && v % kKeys != k)) ++failures;
          seen[k] = v;
        }
        std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
        int count = 0;
        std::string last;
        for (it->SeekToFirst(); it->Valid(); it->Next(), ++count) {
          if (count > 0 && it->key().ToString() <= last) ++failures;
          last = it->key().ToString();
        }
        if (count != kKeys) ++failures;
        ++scans;
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::string value;
  ASSERT_TRUE(db->Get(rocksdb::ReadOptions(), key_of(kWrites % kKeys), &value).ok());
  EXPECT_EQ(value, "00040000");
}

}  // namespace
}  // namespace intentd::store::testing
