// Striped key locks: the store's unit of atomicity (internal).
//
// Every operation locks the stripes of all the records it reads, decides on
// and writes, then does its reads, its pure decision and ONE WriteBatch write
// while holding them. Stripes are taken in ascending order; a stripe
// discovered late (from a record read under the locks) is added with
// try_lock, or by releasing and re-taking the whole set in order, after which
// the caller must read again. So there is no deadlock.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace intentd::store {

class LockTable {
 public:
  explicit LockTable(size_t stripes);
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  size_t StripeOf(std::string_view encoded_key) const;
  std::mutex& Stripe(size_t index) { return stripes_[index].mu; }

 private:
  struct alignas(64) PaddedMutex {
    std::mutex mu;
  };
  size_t count_;
  std::unique_ptr<PaddedMutex[]> stripes_;
};

// The stripes held by one operation; releases them on destruction.
class LockSet {
 public:
  explicit LockSet(LockTable* table) : table_(table) {}
  ~LockSet() { UnlockAll(); }
  LockSet(const LockSet&) = delete;
  LockSet& operator=(const LockSet&) = delete;

  // Before Lock(): the keys to lock.
  void Add(std::string_view encoded_key);
  // Locks every added stripe in ascending order.
  void Lock();
  // After Lock(): also hold `encoded_key`'s stripe. true: held without
  // releasing anything. false: the whole set was released and re-taken in
  // order, so everything read under the locks must be read again.
  bool Extend(std::string_view encoded_key);

 private:
  void UnlockAll();
  LockTable* table_;
  std::vector<size_t> stripes_;  // sorted, unique once locked
  bool locked_ = false;
};

}  // namespace intentd::store
