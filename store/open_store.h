// Opening the agent's store from one setting: the embedded RocksDB store
// (the default) or PostgreSQL shared by the agents of several hosts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "store/clock.h"
#include "store/status.h"
#include "store/store.h"

namespace intentd::store {

enum class StoreKind { kRocksDb, kPostgres };

struct StoreSpec {
  // "rocksdb:DIR", a libpq connection URI ("postgresql://..." or
  // "postgres://..."), or empty: RocksDB in `dir`.
  std::string url;
  std::string dir;  // the RocksDB directory when `url` is empty
  // true: an acknowledged write is durable (RocksDB: synced WAL; PostgreSQL:
  // synchronous_commit=on). false: written, not synced.
  bool sync = true;
  // RocksDB with sync: see RocksOptions::defer_sync. PostgreSQL ignores it
  // (its commits are durable when they return).
  bool defer_sync = false;
  // RocksDB: see RocksOptions::hash_memtables. PostgreSQL ignores it.
  bool hash_memtables = true;
  // RocksDB with sync: see RocksOptions::wal_spares. PostgreSQL ignores it.
  bool wal_spares = false;
  // Records are kept at least this long after their last change.
  int64_t retention_ms = 30LL * 24 * 3600 * 1000;
  const Clock* clock = nullptr;  // nullptr: SystemClock()
  int pool_size = 16;            // PostgreSQL connections (at least 1)
  int64_t min_free_bytes = -1;   // RocksDB: see RocksOptions::min_free_bytes
  bool accept_wal_loss = false;  // RocksDB: see RocksOptions::accept_wal_loss
  // RocksDB: see RocksOptions::log. PostgreSQL ignores it.
  std::function<void(bool error, const std::string& line)> log;
};

// Which backend `spec` names and, for RocksDB, its directory.
// kInvalidArgument (saying what is accepted) for anything else.
Status ResolveStore(const StoreSpec& spec, StoreKind* kind, std::string* rocks_dir);

// The store for logs and messages: "rocksdb:DIR", or the URL with any
// password replaced by "***".
std::string DescribeStore(const StoreSpec& spec);

// Opens the store `spec` names. Errors are those of RocksStore::Open or
// PostgresStore::Open (kIncompatible: "run intentd migrate"), or
// kInvalidArgument from ResolveStore. RocksStore stays usable directly.
Status OpenStore(const StoreSpec& spec, std::unique_ptr<Store>* store);

// Creates or upgrades the schema of the store `spec` names (`intentd
// migrate`): PostgreSQL's, as MigratePostgres does. kNotSupported for
// RocksDB, whose stores are upgraded when opened; kInvalidArgument from
// ResolveStore.
Status MigrateStore(const StoreSpec& spec, MigrateResult* result);

// Whether the store `spec` names keeps every acknowledged write on a
// synchronous standby (`serve --require-sync-replication`): PostgreSQL's
// CheckSyncReplication (store/postgres/replication.h), with *summary saying
// what was found. kNotSupported for RocksDB, which has no replication;
// kInvalidArgument from ResolveStore.
Status CheckSyncReplication(const StoreSpec& spec, std::string* summary);

}  // namespace intentd::store
