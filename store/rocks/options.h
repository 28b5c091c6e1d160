// How the store configures RocksDB (internal): column families, tables,
// compression, the retention compaction filters.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>

#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include "store/clock.h"
#include "store/store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
}  // namespace rocksdb

namespace intentd::store {

inline constexpr char kIntentsCf[] = "intents";
inline constexpr char kActionsCf[] = "actions";
inline constexpr char kLeasesCf[] = "leases";
inline constexpr char kMetaCf[] = "meta";
// Inbound message records (the `seen` op); format 4 on.
inline constexpr char kMessagesCf[] = "messages";
// The policy's records: allowance counters and the pending approvals' index
// (codec.h); format 6 on, created by the first writable open of an older
// store.
inline constexpr char kPolicyCf[] = "policy";
inline constexpr char kFormatVersionKey[] = "format_version";

// The actions column family of an open DB, for the intents' retention filter
// (an intent past its own deadline lives on with its action, IntentLive):
// attached once the DB is open, detached before it is closed. Thread-safe.
class ActionReader {
 public:
  enum class Result { kLive, kAbsent, kUnknown };
  void Attach(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* actions);
  void Detach();
  // The action (tenant_id, key) if live at now_ms. kUnknown when detached,
  // unreadable or undecodable: the caller keeps what depends on it.
  Result Read(std::string_view tenant_id, std::string_view key, int64_t now_ms,
              Action* action) const;

 private:
  mutable std::shared_mutex mu_;
  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* actions_ = nullptr;
};

// Iterations over the intents and actions column families must set
// ReadOptions::total_order_seek: they have a prefix extractor (with
// RocksOptions::hash_memtables), and a prefix-mode iterator may skip records
// outside the seek key's prefix (RocksDB's hash skip-list memtables, used
// before, skipped every record still in a memtable).
rocksdb::ReadOptions TotalOrderRead();

// Options of each column family by name; unknown names get defaults.
// `actions`: read by the intents' retention filter; nullptr for opens that
// never compact (read-only), whose filter then keeps every intent past its
// own deadline.
class CfOptionsFactory {
 public:
  CfOptionsFactory(size_t block_cache_bytes, const Clock* clock, bool hash_memtables,
                   std::shared_ptr<const ActionReader> actions = nullptr);
  rocksdb::ColumnFamilyOptions For(const std::string& name) const;

 private:
  const bool hash_memtables_;  // RocksOptions::hash_memtables
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::CompactionFilterFactory> action_retention_;
  std::shared_ptr<rocksdb::CompactionFilterFactory> intent_retention_;
  std::shared_ptr<rocksdb::CompactionFilterFactory> message_retention_;
  std::shared_ptr<rocksdb::CompactionFilterFactory> counter_retention_;
};

struct RocksOptions;

// A synced store whose callers take durability tickets (defer_sync, the
// agent): its WAL records stay in RocksDB's buffer until the sync thread
// writes them out just before its fdatasync (RocksStoreImpl::SyncWalNow),
// and its writes are ordered (options.cc). One answer for the options
// and the sync thread: a buffer nobody writes out would be synced empty.
bool BufferedWal(const RocksOptions& options);

rocksdb::DBOptions StoreDbOptions(rocksdb::Env* env, const RocksOptions& options);

// The file system holding `path` (statvfs): its size, and the space left to
// writers that are not root. false when it cannot be read.
struct DiskSpace {
  uint64_t total = 0;
  uint64_t free = 0;
};
bool ReadDiskSpace(const std::string& path, DiskSpace* space);
// The free space the store keeps for RocksDB's flushes and compactions:
// RocksOptions::min_free_bytes, or with -1 min(64 MiB, a tenth of
// `total_bytes`). Writes are refused under it (RocksStoreImpl::
// CheckFreeSpace), and WAL spares are not made into it (wal_spares.h).
uint64_t FreeSpaceReserve(int64_t min_free_bytes, uint64_t total_bytes);

// A logger that writes nothing, for opens that must not touch the directory.
std::shared_ptr<rocksdb::Logger> NewNullLogger();

// RocksDB's info log for a read-write open of the store in `dir`: the LOG
// file, the previous one renamed LOG.old.<microseconds> as RocksDB names
// them (RocksDB deletes the oldest, StoreDbOptions' keep_log_file_num).
// Written with plain write(2), and a line that cannot be written (full disk)
// is dropped: RocksDB 7.8's own file logger, built with assertions on as
// Debian ships it, aborts the process on the line after a failed one. A
// NullLogger when LOG cannot be created.
std::shared_ptr<rocksdb::Logger> NewStoreLogger(const std::string& dir);

}  // namespace intentd::store
