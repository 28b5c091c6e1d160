// The embedded RocksDB backend of Store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "store/store.h"

namespace intentd::store {

struct RocksOptions {
  std::string path;  // data directory; created when absent
  // true: an acknowledged write is in the synced WAL before the call returns
  // (concurrent writers share one sync). false: WAL written, not synced.
  bool sync = true;
  // Records are kept at least this long after their last change. A started
  // action (and its intent) never expires.
  int64_t retention_ms = 30LL * 24 * 3600 * 1000;
  const Clock* clock = nullptr;  // nullptr: SystemClock()
};

class RocksStore : public Store {
 public:
  // Opens (or creates) the store. kBusy: locked by another process.
  // kIncompatible: written by a newer format. kCorruption: unreadable.
  // Nothing on disk is changed when Open fails.
  static Status Open(const RocksOptions& options, std::unique_ptr<RocksStore>* store);

  // Approximate live size of the store on disk, in bytes.
  virtual uint64_t ApproximateSizeBytes() = 0;
  // Flushes and syncs everything (used at shutdown).
  virtual Status Flush() = 0;
};

}  // namespace intentd::store
