#include "store/open_store.h"

#include "store/postgres/postgres_store.h"
#include "store/postgres/replication.h"
#include "store/rocks/rocks_store.h"

namespace intentd::store {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Status ResolveStore(const StoreSpec& spec, StoreKind* kind, std::string* rocks_dir) {
  rocks_dir->clear();
  if (spec.url.empty()) {
    if (spec.dir.empty()) return Status::InvalidArgument("no store given (a directory or a URL)");
    *kind = StoreKind::kRocksDb;
    *rocks_dir = spec.dir;
    return Status::Ok();
  }
  if (StartsWith(spec.url, "rocksdb:")) {
    *rocks_dir = spec.url.substr(8);
    if (rocks_dir->empty()) {
      return Status::InvalidArgument("rocksdb: needs a directory, e.g. rocksdb:/var/lib/intentd");
    }
    *kind = StoreKind::kRocksDb;
    return Status::Ok();
  }
  if (StartsWith(spec.url, "postgresql://") || StartsWith(spec.url, "postgres://")) {
    *kind = StoreKind::kPostgres;
    return Status::Ok();
  }
  return Status::InvalidArgument("unknown store \"" + RedactPostgresUrl(spec.url) +
                                 "\": use rocksdb:DIR or postgresql://[USER@]HOST[:PORT]/DB "
                                 "(a libpq connection URI)");
}

std::string DescribeStore(const StoreSpec& spec) {
  StoreKind kind;
  std::string dir;
  if (!ResolveStore(spec, &kind, &dir).ok()) return RedactPostgresUrl(spec.url);
  if (kind == StoreKind::kRocksDb) return "rocksdb:" + dir;
  return RedactPostgresUrl(spec.url);
}

Status OpenStore(const StoreSpec& spec, std::unique_ptr<Store>* store) {
  StoreKind kind;
  std::string dir;
  Status s = ResolveStore(spec, &kind, &dir);
  if (!s.ok()) return s;
  if (kind == StoreKind::kRocksDb) {
    RocksOptions options;
    options.path = dir;
    options.sync = spec.sync;
    options.defer_sync = spec.defer_sync;
    options.hash_memtables = spec.hash_memtables;
    options.wal_spares = spec.wal_spares;
    options.retention_ms = spec.retention_ms;
    options.clock = spec.clock;
    options.min_free_bytes = spec.min_free_bytes;
    options.accept_wal_loss = spec.accept_wal_loss;
    options.log = spec.log;
    std::unique_ptr<RocksStore> rocks;
    s = RocksStore::Open(options, &rocks);
    if (s.ok()) *store = std::move(rocks);
    return s;
  }
  PostgresOptions options;
  options.url = spec.url;
  options.sync = spec.sync;
  options.retention_ms = spec.retention_ms;
  options.clock = spec.clock;
  options.pool_size = spec.pool_size;
  std::unique_ptr<PostgresStore> postgres;
  s = PostgresStore::Open(options, &postgres);
  if (s.ok()) *store = std::move(postgres);
  return s;
}

Status MigrateStore(const StoreSpec& spec, MigrateResult* result) {
  StoreKind kind;
  std::string dir;
  Status s = ResolveStore(spec, &kind, &dir);
  if (!s.ok()) return s;
  if (kind == StoreKind::kRocksDb) {
    return Status::NotSupported("RocksDB stores need no migration (upgraded when opened)");
  }
  return MigratePostgres(spec.url, result);
}

Status CheckSyncReplication(const StoreSpec& spec, std::string* summary) {
  StoreKind kind;
  std::string dir;
  Status s = ResolveStore(spec, &kind, &dir);
  if (!s.ok()) return s;
  if (kind == StoreKind::kRocksDb) {
    return Status::NotSupported("RocksDB stores have no replication");
  }
  return CheckSyncReplication(spec.url, spec.sync, summary);
}

}  // namespace intentd::store
