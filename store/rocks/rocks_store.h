// The embedded RocksDB backend of Store.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace intentd::store {

struct RocksOptions {
  std::string path;  // data directory; created when absent
  // true: an acknowledged write is in the synced WAL before the call returns
  // (concurrent writers share one sync). false: WAL written, not synced.
  bool sync = true;
  // With sync: operations return before their writes are synced, and the
  // caller waits for Store::DurabilityTicket / WhenDurable (one sync thread
  // serves everyone). For callers that answer asynchronously (the agent).
  bool defer_sync = false;
  // Records are kept at least this long after their last change. A started
  // action (and its intent) never expires. Must be positive.
  int64_t retention_ms = 30LL * 24 * 3600 * 1000;
  const Clock* clock = nullptr;  // nullptr: SystemClock()
  // Block cache shared by the intents and actions column families.
  size_t block_cache_bytes = 64u << 20;
  // Writes are refused (kStorageError) while the file system holding `path`
  // has less free space than this. -1: min(64 MiB, a tenth of the file
  // system); 0: no reserve (RocksDB writes until the disk is full).
  int64_t min_free_bytes = -1;
  // true: the intents' and actions' memtables are RocksDB's hash skip lists
  // over the whole key, so that an insert or a point read touches a short
  // bucket instead of a search down a list of ~10^5 records; the lease
  // index's memtable is RocksDB's vector (appends; its scans sort a copy).
  // Writers then insert one at a time (no concurrent memtable writes),
  // which costs nothing where most writes come from one thread anyway (the
  // agent's io thread). false: skip lists with concurrent inserts.
  // Iterations see everything either way (TotalOrderRead).
  bool hash_memtables = true;
  // With sync: new WAL files are renamed from zero-filled files that a
  // background thread writes beforehand, so that the group commit's
  // fdatasync rewrites written blocks instead of growing the file (on ext4
  // growing costs a second synchronous write per sync, of the new size).
  // Costs one WAL file's size of extra disk writes per WAL file. What it
  // changes after a power loss: store/rocks/wal_spares.h. Measured with
  // bench_store --threads=64 and bench/run.sh, each with it on and off.
  bool wal_spares = false;
  // An open whose WAL lost acknowledged writes (damage that is not the torn
  // tail of a power cut: open.cc) is refused with kCorruption, changing
  // nothing. true: it goes on, dropping them, once the damaged WAL files are
  // copied aside (wal-damaged-<ms>/ in the data directory); the loss is
  // reported by ReadHealth. For an operator who decided to.
  bool accept_wal_loss = false;
  // Told what the store does about faults, one line each, from any thread
  // (a generation failed, the store reopened or could not, the directory
  // vanished, what an open dropped or accepted): for the agent's log. May be
  // empty.
  std::function<void(bool error, const std::string& line)> log;
};

// An intent and, optionally, its action (tenant_id and key taken from the
// intent), for BulkLoad.
struct IntentRecord {
  Intent intent;
  std::optional<Action> action;
};

class RocksStore : public Store {
 public:
  // Opens (or creates) the store. kBusy: locked by another process.
  // kIncompatible: written by a newer format. kCorruption: unreadable, a
  // non-empty directory that holds no store, or a WAL whose replay would drop
  // acknowledged writes (unless accept_wal_loss). kStorageError: I/O failure
  // (e.g. permission denied). Nothing on disk is changed when Open fails.
  static Status Open(const RocksOptions& options, std::unique_ptr<RocksStore>* store);

  // Approximate live size of the store on disk (tables and WAL), in bytes.
  virtual uint64_t ApproximateSizeBytes() = 0;
  // Flushes and syncs everything (used at shutdown).
  virtual Status Flush() = 0;
  // Writes a consistent, openable copy of the store into `dir`, which must not
  // exist (hard links where possible), synced with the directory holding it
  // (durable when Ok). Safe while the store is in use.
  virtual Status Checkpoint(const std::string& dir) = 0;
  // RocksDB's own statistics ("rocksdb.dbstats": writes, WAL syncs, writes
  // per sync, stalls) and the group commit's line (GroupCommit), as text for
  // operators and benchmarks.
  virtual std::string EngineStats() = 0;
  // Upper bounds of the group commit's duration buckets, in seconds.
  static constexpr size_t kSyncBuckets = 13;
  static constexpr std::array<double, kSyncBuckets> kSyncBoundsSeconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
  // Since Open: writes committed, and the WAL syncs the group commit made
  // for them (RocksDB counts only its own syncs; 0 without sync).
  struct GroupCommitCounts {
    uint64_t writes = 0;
    uint64_t wal_syncs = 0;
    // WAL files made from a spare (RocksOptions::wal_spares), and created
    // empty while none was ready.
    uint64_t wal_spares_taken = 0;
    uint64_t wal_spares_missed = 0;
    // The successful WAL syncs by how long each took to write out the WAL
    // buffer and fdatasync (what every held reply waits for): sync_rounds[i]
    // counts those over kSyncBoundsSeconds[i - 1] and at most
    // kSyncBoundsSeconds[i]; the last element, those over the last bound.
    // Their total time in sync_seconds.
    std::array<uint64_t, kSyncBuckets + 1> sync_rounds{};
    double sync_seconds = 0;
  };
  virtual GroupCommitCounts CommitCounts() const = 0;
  // The file system holding the store: the bytes free to writers that are
  // not root, and the reserve under which writes are refused
  // (RocksOptions::min_free_bytes; 0: none). false when it cannot be read.
  struct Space {
    uint64_t free_bytes = 0;
    uint64_t reserve_bytes = 0;
  };
  virtual bool ReadSpace(Space* space) const = 0;
  // Flushes and compacts everything, dropping records past retention.
  virtual Status CompactAll() = 0;
  // Writes the records as given, without the protocol's checks and unsynced
  // (each action's retention from its status, each intent's from now). The
  // records must be new (a replaced started action would leave its old lease
  // index entry). For benchmarks and offline imports into a store that
  // nothing else is using.
  virtual Status BulkLoad(const std::vector<IntentRecord>& records) = 0;
  // The store's own account of its faults, for metrics and `stats`.
  struct Health {
    bool writable = true;       // false: a store generation failed, not recovered yet
    uint64_t generations = 1;   // DBs opened for writing since Open (1 + recoveries)
    uint64_t lost_writes = 0;   // writes made, then voided (answered storage_error)
    std::string failure;        // why the last generation failed ("" none)
    // RocksDB sequence numbers dropped at Open with accept_wal_loss (0: none).
    uint64_t wal_loss_accepted = 0;
  };
  virtual Health ReadHealth() const = 0;
};

}  // namespace intentd::store
