// The embedded RocksDB backend of Store.
#pragma once

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

  // Besides the protocol's operations it has every optional feature of
  // Store (store/admin.h): ApproximateSizeBytes, Checkpoint (hard links
  // where possible), Flush, CommitCounts (opened with sync), ReadSpace (the
  // reserve is RocksOptions::min_free_bytes) and ReadHealth; not
  // AgreeCurrentKeyId (one agent per store).

  // RocksDB's own statistics ("rocksdb.dbstats": writes, WAL syncs, writes
  // per sync, stalls) and the group commit's line (GroupCommit), as text for
  // operators and benchmarks.
  virtual std::string EngineStats() = 0;
  // Flushes and compacts everything, dropping records past retention.
  virtual Status CompactAll() = 0;
  // Writes the records as given, without the protocol's checks and unsynced
  // (each action's retention from its status, each intent's from now). The
  // records must be new (a replaced started action would leave its old lease
  // index entry). For benchmarks and offline imports into a store that
  // nothing else is using.
  virtual Status BulkLoad(const std::vector<IntentRecord>& records) = 0;
};

}  // namespace intentd::store
