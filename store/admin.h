// What a store may report or do beyond the protocol's operations: the
// backend-neutral values of Store's optional methods (store.h, at the end of
// class Store). A backend without the feature answers "not supported": an
// absent value, or Status kNotSupported.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace intentd::store {

// Upper bounds of the group commit's sync duration buckets, in seconds.
inline constexpr size_t kSyncBuckets = 13;
inline constexpr std::array<double, kSyncBuckets> kSyncBoundsSeconds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
// The bucket of a duration in seconds: i for one over kSyncBoundsSeconds[i - 1]
// and at most kSyncBoundsSeconds[i], kSyncBuckets for one over the last bound.
inline size_t SyncBucket(double seconds) {
  return static_cast<size_t>(
      std::lower_bound(kSyncBoundsSeconds.begin(), kSyncBoundsSeconds.end(), seconds) -
      kSyncBoundsSeconds.begin());
}

// A store that syncs its log itself (group commit): since it opened, the
// writes committed and the log syncs made for them.
struct GroupCommitCounts {
  uint64_t writes = 0;
  uint64_t wal_syncs = 0;
  // WAL files made from a spare (RocksOptions::wal_spares), and created
  // empty while none was ready.
  uint64_t wal_spares_taken = 0;
  uint64_t wal_spares_missed = 0;
  // The successful syncs by how long each took to write out the log buffer
  // and fdatasync (what every held reply waits for): sync_rounds[i] counts
  // those over kSyncBoundsSeconds[i - 1] and at most kSyncBoundsSeconds[i];
  // the last element, those over the last bound. Their total time in
  // sync_seconds.
  std::array<uint64_t, kSyncBuckets + 1> sync_rounds{};
  double sync_seconds = 0;
};

// A store that sends the writes of concurrent requests together, one
// statement and one commit per batch (PostgreSQL: store/postgres/batch.h).
// Since it opened, for one kind of write: the requests sent in batches, and
// the batches by how long each took from sending its statement to the
// commit's answer (what the reply of every member waits for): rounds[i]
// counts those over kSyncBoundsSeconds[i - 1] and at most
// kSyncBoundsSeconds[i]; the last element, those over the last bound. Their
// total time in seconds.
struct StatementBatchCounts {
  std::string kind;  // "begin" (a fresh intent's), "complete" (a started action's)
  uint64_t requests = 0;
  std::array<uint64_t, kSyncBuckets + 1> rounds{};
  double seconds = 0;

  uint64_t statements() const {
    uint64_t n = 0;
    for (uint64_t r : rounds) n += r;
    return n;
  }
};

// The file system holding a store on the local disk: the bytes free to
// writers that are not root, and the reserve under which the store refuses
// writes (0: none).
struct StoreSpace {
  uint64_t free_bytes = 0;
  uint64_t reserve_bytes = 0;
};

// A store's own account of its faults, for metrics and `stats`.
struct StoreHealth {
  bool writable = true;      // false: a store generation failed, not recovered yet
  uint64_t generations = 1;  // databases opened for writing since Open (1 + recoveries)
  uint64_t lost_writes = 0;  // writes made, then voided (answered storage_error)
  std::string failure;       // why the last generation failed ("" none)
  // Log sequence numbers dropped at Open with accept_wal_loss (0: none).
  uint64_t wal_loss_accepted = 0;
};

// A schema migration (`intentd migrate`): the schema version before and
// after.
struct MigrateResult {
  int from_version = 0;  // 0: the schema did not exist
  int to_version = 0;
};

}  // namespace intentd::store
