#include "store/rocks/lock_table.h"

#include <algorithm>
#include <functional>

namespace intentd::store {

LockTable::LockTable(size_t stripes)
    : count_(stripes), stripes_(std::make_unique<PaddedMutex[]>(stripes)) {}

size_t LockTable::StripeOf(std::string_view encoded_key) const {
  return std::hash<std::string_view>{}(encoded_key) % count_;
}

void LockSet::Add(std::string_view encoded_key) {
  stripes_.push_back(table_->StripeOf(encoded_key));
}

void LockSet::Lock() {
  std::sort(stripes_.begin(), stripes_.end());
  stripes_.erase(std::unique(stripes_.begin(), stripes_.end()), stripes_.end());
  for (size_t s : stripes_) table_->Stripe(s).lock();
  locked_ = true;
}

bool LockSet::Extend(std::string_view encoded_key) {
  const size_t stripe = table_->StripeOf(encoded_key);
  if (std::binary_search(stripes_.begin(), stripes_.end(), stripe)) return true;
  // Blocking is safe only on a stripe above every held one; below, try.
  std::mutex& mu = table_->Stripe(stripe);
  const bool above = stripes_.empty() || stripe > stripes_.back();
  if (above) mu.lock();
  if (above || mu.try_lock()) {
    stripes_.insert(std::upper_bound(stripes_.begin(), stripes_.end(), stripe), stripe);
    return true;
  }
  UnlockAll();
  stripes_.push_back(stripe);
  Lock();
  return false;
}

void LockSet::UnlockAll() {
  if (!locked_) return;
  for (auto it = stripes_.rbegin(); it != stripes_.rend(); ++it) table_->Stripe(*it).unlock();
  locked_ = false;
}

}  // namespace intentd::store
