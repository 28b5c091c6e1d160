#include "store/hash_memtable.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <vector>

namespace intentd::store {
namespace {

using rocksdb::KeyHandle;
using rocksdb::MemTableRep;
using rocksdb::Slice;

// An inserted entry: RocksDB's encoded record (varint32 length, internal key
// = user key + 8-byte sequence/type tag, then the value) lives in the
// memtable's arena; the node links it into its bucket's chain.
struct Node {
  std::atomic<const Node*> next{nullptr};
  const char* entry = nullptr;
};

// Nodes live in fixed blocks that never move, appended in insertion order.
constexpr size_t kNodesPerBlock = 4096;

// The user key of an internal key (without its 8-byte sequence/type tag).
Slice UserKeyOf(const Slice& internal) { return Slice(internal.data(), internal.size() - 8); }

// The internal key a lookup seeks. rocksdb::LookupKey is not in RocksDB's
// public headers; its first member is `const char* start_`, the lookup key
// in memtable form (varint32 length, internal key) — the library's own
// MemTableRep::Get reads it at offset 0 of the object (objdump of the
// linked librocksdb 7.8). RocksDB's default Get cannot be used instead: it
// never deletes the iterator it creates (one leak per read).
Slice LookupInternalKey(const rocksdb::LookupKey& k) {
  const char* start;
  std::memcpy(&start, &k, sizeof(start));
  return rocksdb::GetLengthPrefixedSlice(start);
}

// Sorted entries an iterator walks; shared by iterators of a read-only
// memtable.
using Sorted = std::vector<const char*>;

class SortedIterator final : public MemTableRep::Iterator {
 public:
  SortedIterator(std::shared_ptr<const Sorted> entries, const MemTableRep::KeyComparator& cmp)
      : entries_(std::move(entries)), cmp_(cmp), pos_(entries_->size()) {}

  bool Valid() const override { return pos_ < entries_->size(); }
  const char* key() const override { return (*entries_)[pos_]; }
  void Next() override { ++pos_; }
  void Prev() override { pos_ = pos_ == 0 ? entries_->size() : pos_ - 1; }
  void Seek(const Slice& internal_key, const char* /*memtable_key*/) override {
    // The first entry >= internal_key.
    pos_ = static_cast<size_t>(
        std::lower_bound(entries_->begin(), entries_->end(), internal_key,
                         [this](const char* e, const Slice& k) { return cmp_(e, k) < 0; }) -
        entries_->begin());
  }
  void SeekForPrev(const Slice& internal_key, const char* /*memtable_key*/) override {
    // The last entry <= internal_key.
    const size_t after = static_cast<size_t>(
        std::upper_bound(entries_->begin(), entries_->end(), internal_key,
                         [this](const Slice& k, const char* e) { return cmp_(e, k) > 0; }) -
        entries_->begin());
    pos_ = after == 0 ? entries_->size() : after - 1;
  }
  void SeekToFirst() override { pos_ = 0; }
  void SeekToLast() override { pos_ = entries_->empty() ? 0 : entries_->size() - 1; }

 private:
  std::shared_ptr<const Sorted> entries_;
  const MemTableRep::KeyComparator& cmp_;
  size_t pos_;
};

class HashSortRep final : public MemTableRep {
 public:
  HashSortRep(const KeyComparator& cmp, rocksdb::Allocator* allocator, size_t buckets)
      : MemTableRep(allocator), cmp_(cmp), mask_(MapBuckets(buckets) ? buckets - 1 : 0) {}
  ~HashSortRep() override {
    if (buckets_ != &fallback_bucket_) munmap(buckets_, (mask_ + 1) * sizeof(buckets_[0]));
  }

  void Insert(KeyHandle handle) override {
    const char* entry = static_cast<const char*>(handle);
    Node* node = NewNode();
    node->entry = entry;
    // Keep the chain sorted (one bucket may hold several user keys): a new
    // version of a key usually goes in front of its older ones.
    // UserKey: MemTableRep's, from the entry's length-prefixed internal key.
    std::atomic<const Node*>* link = &buckets_[Bucket(UserKey(entry))];
    const Node* next = link->load(std::memory_order_relaxed);
    while (next != nullptr && cmp_(next->entry, entry) < 0) {
      link = const_cast<std::atomic<const Node*>*>(&next->next);
      next = link->load(std::memory_order_relaxed);
    }
    node->next.store(next, std::memory_order_relaxed);
    link->store(node, std::memory_order_release);  // readers see it whole
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  bool Contains(const char* key) const override {
    const Slice internal = rocksdb::GetLengthPrefixedSlice(key);
    for (const Node* n = First(UserKeyOf(internal)); n != nullptr;
         n = n->next.load(std::memory_order_acquire)) {
      const int c = cmp_(n->entry, internal);
      if (c == 0) return true;
      if (c > 0) return false;
    }
    return false;
  }

  void MarkReadOnly() override { read_only_.store(true, std::memory_order_release); }

  void Get(const rocksdb::LookupKey& k, void* arg,
           bool (*callback)(void* arg, const char* entry)) override {
    const Slice internal = LookupInternalKey(k);
    const Node* n = First(UserKeyOf(internal));
    // As a sorted iterator's Seek: the first entry >= the lookup key (the
    // key's versions not newer than the lookup), then on while the callback
    // wants more (it stops at another user key).
    while (n != nullptr && cmp_(n->entry, internal) < 0)
      n = n->next.load(std::memory_order_acquire);
    for (; n != nullptr && callback(arg, n->entry); n = n->next.load(std::memory_order_acquire)) {
    }
  }

  size_t ApproximateMemoryUsage() override {
    const size_t blocks =
        (count_.load(std::memory_order_relaxed) + kNodesPerBlock - 1) / kNodesPerBlock;
    return (mask_ + 1) * sizeof(std::atomic<const Node*>) + blocks * kNodesPerBlock * sizeof(Node);
  }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    if (arena == nullptr) return new SortedIterator(SortedEntries(), cmp_);
    // RocksDB destroys an iterator placed in its arena (a flush's, a DB
    // iterator's) by calling only its destructor, and frees the arena
    // later; rocksdb::Arena is not a public type, and this memtable's own
    // arena must not grow once it is immutable (RocksDB asserts its size).
    // So the iterator goes in storage owned here, freed with the memtable,
    // which outlives its iterators (they pin it). Never reused: a slot may
    // only be reused once its iterator's destructor has wholly returned,
    // which nothing tells us. sizeof(SortedIterator), 40 bytes on x86-64,
    // per iterator over this memtable's life; and each DB iterator over a
    // mutable one sorts it whole anyway, so such iterators stay rare (the
    // store's scans read other families).
    std::lock_guard<std::mutex> lock(slots_mu_);
    slots_.push_back(std::make_unique<IteratorSlot>());
    return new (slots_.back()->bytes) SortedIterator(SortedEntries(), cmp_);
  }

 private:
  // Zeroed pages from the kernel, each touched when first used, rather than
  // 8 MiB zeroed at once by the writing thread when RocksDB switches to a
  // new memtable (~5 ms here, a stall for every request behind it). If the
  // mapping fails, one bucket: slow, still correct (no exception may cross
  // into RocksDB).
  bool MapBuckets(size_t n) {
    void* p = mmap(nullptr, n * sizeof(std::atomic<const Node*>), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    // A null pointer is all zero bits on this platform.
    buckets_ = static_cast<std::atomic<const Node*>*>(p);
    return true;
  }
  size_t Bucket(const Slice& user_key) const {
    return std::hash<std::string_view>()(std::string_view(user_key.data(), user_key.size())) &
           mask_;
  }
  const Node* First(const Slice& user_key) const {
    return buckets_[Bucket(user_key)].load(std::memory_order_acquire);
  }

  // Only the inserting thread calls this (and only it uses current_).
  Node* NewNode() {
    const size_t i = count_.load(std::memory_order_relaxed);
    if (i % kNodesPerBlock == 0) {
      auto block = std::make_unique<Node[]>(kNodesPerBlock);
      current_ = block.get();
      std::lock_guard<std::mutex> lock(blocks_mu_);
      blocks_.push_back(std::move(block));
    }
    return &current_[i % kNodesPerBlock];
  }

  // Every entry inserted so far, sorted. Read-only memtables (flushes) sort
  // once; a mutable one sorts a copy per iterator.
  std::shared_ptr<const Sorted> SortedEntries() {
    const bool read_only = read_only_.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> lock(sorted_mu_);
    if (read_only && sorted_ != nullptr) return sorted_;
    auto sorted = std::make_shared<Sorted>();
    {
      std::lock_guard<std::mutex> blocks_lock(blocks_mu_);
      const size_t n = count_.load(std::memory_order_acquire);
      sorted->reserve(n);
      for (size_t i = 0; i < n; ++i) {
        sorted->push_back(blocks_[i / kNodesPerBlock][i % kNodesPerBlock].entry);
      }
    }
    std::sort(sorted->begin(), sorted->end(),
              [this](const char* a, const char* b) { return cmp_(a, b) < 0; });
    if (read_only) sorted_ = sorted;
    return sorted;
  }

  const KeyComparator& cmp_;
  std::atomic<const Node*> fallback_bucket_{nullptr};
  std::atomic<const Node*>* buckets_ = &fallback_bucket_;  // mask_ + 1 of them
  const size_t mask_;                                      // after buckets_: MapBuckets sets it
  std::atomic<size_t> count_{0};  // nodes inserted, published after each is linked
  std::mutex blocks_mu_;
  std::vector<std::unique_ptr<Node[]>> blocks_;  // guarded by blocks_mu_
  Node* current_ = nullptr;                      // the last block (inserting thread)
  std::atomic<bool> read_only_{false};
  std::mutex sorted_mu_;
  std::shared_ptr<const Sorted> sorted_;  // guarded by sorted_mu_; read-only only
  struct IteratorSlot {
    alignas(SortedIterator) unsigned char bytes[sizeof(SortedIterator)];
  };
  std::mutex slots_mu_;
  std::vector<std::unique_ptr<IteratorSlot>> slots_;  // guarded by slots_mu_
};

class HashSortFactory final : public rocksdb::MemTableRepFactory {
 public:
  explicit HashSortFactory(size_t buckets) : buckets_(buckets) {}
  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  MemTableRep* CreateMemTableRep(const MemTableRep::KeyComparator& cmp,
                                 rocksdb::Allocator* allocator, const rocksdb::SliceTransform*,
                                 rocksdb::Logger*) override {
    return new HashSortRep(cmp, allocator, buckets_);
  }
  const char* Name() const override { return "IntentdHashSortRepFactory"; }

 private:
  size_t buckets_;
};

}  // namespace

rocksdb::MemTableRepFactory* NewHashSortMemTableFactory(size_t buckets) {
  size_t n = 1;
  while (n < buckets) n <<= 1;
  return new HashSortFactory(n);
}

}  // namespace intentd::store
