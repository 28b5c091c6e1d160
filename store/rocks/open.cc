// Opening a store: directory checks, format probe, read-write and read-only
// opens. Nothing is written to a directory until every check passed.
#include <rocksdb/file_system.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "store/rocks/codec.h"
#include "store/rocks/impl.h"
#include "store/rocks/options.h"

namespace intentd::store {
namespace {

// RocksDB reports a held LOCK file as an I/O error: "While lock file: ..."
// (another process) or "lock hold by current process" (this one).
bool IsLockError(const rocksdb::Status& s) {
  const std::string text = s.ToString();
  return s.IsIOError() && (text.find("While lock file") != std::string::npos ||
                           text.find("lock hold by current process") != std::string::npos);
}

// A directory may receive a new store when it is absent, empty, or holds only
// what an interrupted creation leaves before CURRENT is written. Anything
// else (tables, WAL, foreign files) is refused: creating over it would delete
// or mix with data that cannot be read.
Status CheckFreshDirectory(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) {
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return Status::StorageError("cannot create store directory " + path + ": " + ec.message());
    }
    return Status::Ok();
  }
  if (!std::filesystem::is_directory(st)) {
    return Status::InvalidArgument("store path " + path + " is not a directory");
  }
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    const bool leftover = name == "LOCK" || name == "IDENTITY" || name == "LOG" ||
                          name.rfind("LOG.old.", 0) == 0;
    if (!leftover) {
      return Status::Corruption("store directory " + path + " holds '" + name +
                                "' but no CURRENT file: not a store, or a damaged one; refusing "
                                "to create a store over it");
    }
  }
  if (ec) return Status::StorageError("cannot list store directory " + path + ": " + ec.message());
  return Status::Ok();
}

Status Unreadable(const rocksdb::Status& rs, const std::string& path) {
  if (rs.IsIOError() && !rs.IsPathNotFound()) return FromRocks(rs, "read store " + path);
  return Status::Corruption("store " + path + " is unreadable: " + rs.ToString());
}

// Fills the column family pointers from h->all.
Status AssignHandles(const std::string& path, DbHandles* h) {
  for (auto* handle : h->all) {
    const std::string& name = handle->GetName();
    if (name == kIntentsCf) h->intents = handle;
    if (name == kActionsCf) h->actions = handle;
    if (name == kLeasesCf) h->leases = handle;
    if (name == kMetaCf) h->meta = handle;
    if (name == kMessagesCf) h->messages = handle;
  }
  // A store older than format 4 has no messages column family until it is
  // opened for writing (OpenDb creates it); read-only it has none.
  if (h->intents == nullptr || h->actions == nullptr || h->leases == nullptr ||
      h->meta == nullptr || (h->messages == nullptr && !h->read_only)) {
    CloseDb(h);
    return Status::Corruption("store " + path + " lacks a column family");
  }
  return Status::Ok();
}

// Opens an existing store read-only with a silent logger: writes nothing.
Status OpenReadOnly(const std::string& path, const rocksdb::DBOptions& base,
                    const CfOptionsFactory& cfs, DbHandles* h) {
  std::vector<std::string> names;
  rocksdb::Status rs = rocksdb::DB::ListColumnFamilies(base, path, &names);
  if (!rs.ok()) return Unreadable(rs, path);
  bool has_meta = false;
  for (const auto& n : names) has_meta |= n == kMetaCf;
  if (!has_meta) {
    return Status::Corruption(path + " is a RocksDB database but not an intentd store "
                              "(no meta column family)");
  }
  rocksdb::DBOptions ro = base;
  ro.info_log = NewNullLogger();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, cfs.For(n));
  DbHandles opened;
  rs = rocksdb::DB::OpenForReadOnly(ro, path, descriptors, &opened.all, &opened.db);
  if (!rs.ok()) return Unreadable(rs, path);
  opened.read_only = true;
  Status s = AssignHandles(path, &opened);
  if (!s.ok()) return s;
  *h = std::move(opened);
  return Status::Ok();
}

bool IsEmpty(const DbHandles& h) {
  for (auto* handle : h.all) {
    std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(TotalOrderRead(), handle));
    it->SeekToFirst();
    if (it->Valid() || !it->status().ok()) return false;
  }
  return true;
}

// Checks the format of an existing store. *unformatted: its creation stopped
// before the format version was written and it holds nothing (format it).
// *format: its format version otherwise (1 to kFormatVersion).
Status ProbeFormat(const std::string& path, const rocksdb::DBOptions& base,
                   const CfOptionsFactory& cfs, bool* unformatted, int* format) {
  DbHandles h;
  Status s = OpenReadOnly(path, base, cfs, &h);
  if (!s.ok()) return s;
  std::string text;
  rocksdb::Status rs = h.db->Get(rocksdb::ReadOptions(), h.meta, kFormatVersionKey, &text);
  if (rs.IsNotFound()) {
    *unformatted = IsEmpty(h);
    if (!*unformatted) s = Status::Corruption("store " + path + " has records but no format version");
  } else if (!rs.ok()) {
    s = FromRocks(rs, "read store format of " + path);
  } else if (text.empty() || text.size() > 9 ||
             text.find_first_not_of("0123456789") != std::string::npos || std::stoi(text) < 1) {
    s = Status::Corruption("store " + path + " has an unreadable format version '" + text + "'");
  } else if (std::stoi(text) > kFormatVersion) {
    s = Status::Incompatible("store " + path + " has format version " + text +
                             ", newer than this intentd's " + std::to_string(kFormatVersion) +
                             "; run a newer intentd (nothing was changed)");
  } else {
    *format = std::stoi(text);
  }
  CloseDb(&h);
  return s;
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, const std::string& context) {
  const std::string message = context + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(message);
  if (s.IsNotSupported()) return Status::Incompatible(message);
  if (IsLockError(s)) return Status::Busy(message);
  return Status::StorageError(message);
}

Status RocksStore::Open(const RocksOptions& options, std::unique_ptr<RocksStore>* store) {
  return OpenRocksStore(options, nullptr, store);
}

Status OpenRocksStore(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                      std::unique_ptr<RocksStore>* store) {
  // The group commit syncs the WAL files itself (wal_files.h says why).
  auto wal = std::make_unique<WalFiles>();
  std::shared_ptr<rocksdb::FileSystem> fs = rocksdb::FileSystem::Default();
  if (faults) fs = NewFaultInjectionFileSystem(std::move(fs), faults);
  // RocksDB writes the WAL in the store's directory (no wal_dir is set).
  std::unique_ptr<rocksdb::Env> env =
      rocksdb::NewCompositeEnv(wal->Track(std::move(fs), options.path));
  auto errors = std::make_shared<StorageErrorListener>();
  DbHandles h;
  Status s = OpenDb(options, env.get(), errors, &h);
  if (!s.ok()) return s;
  // RocksDB's flush and compaction threads run at a low CPU priority (nice
  // 19; process-wide, these pools are the default Env's): they use the CPU
  // the request path leaves, and when they fall behind RocksDB's write stall
  // slows the writers down until they catch up. The flush of a hash skip-list
  // memtable sorts every entry of it, ~7% of the agent's CPU at 64
  // connections (perf record -g -p PID under intentd_loadgen), which on two
  // cores the io threads need: bench/RESULTS.md, "One clean fast path".
  env->LowerThreadPoolCPUPriority(rocksdb::Env::Priority::HIGH, rocksdb::CpuPriority::kLow);
  env->LowerThreadPoolCPUPriority(rocksdb::Env::Priority::LOW, rocksdb::CpuPriority::kLow);
  if (!wal->TracksAny()) {
    CloseDb(&h);
    return Status::StorageError("store " + options.path +
                                ": RocksDB's WAL file was not seen where it was expected, so "
                                "acknowledged writes could not be made durable; not opening");
  }
  // After the checks: a refused open deletes no leftover spare.
  wal->SetUpSpares(options.sync && options.wal_spares, options.min_free_bytes);
  *store = std::make_unique<RocksStoreImpl>(options, std::move(wal), std::move(env),
                                            std::move(faults), std::move(errors), std::move(h));
  return Status::Ok();
}

Status OpenDb(const RocksOptions& options, rocksdb::Env* env,
              std::shared_ptr<StorageErrorListener> listener, DbHandles* h) {
  if (options.path.empty()) return Status::InvalidArgument("store path is empty");
  // (IntentLive needs an intent to outlive the instant it was written in.)
  if (options.retention_ms <= 0) return Status::InvalidArgument("retention_ms must be positive");
  auto action_reader = std::make_shared<ActionReader>();
  const CfOptionsFactory cfs(options.block_cache_bytes,
                             options.clock != nullptr ? options.clock : &SystemClock(),
                             options.hash_memtables, action_reader);
  rocksdb::DBOptions db_options = StoreDbOptions(env, options);
  std::vector<std::string> cf_names = {rocksdb::kDefaultColumnFamilyName, kIntentsCf,
                                       kActionsCf, kLeasesCf, kMetaCf, kMessagesCf};
  bool unformatted = false;
  int format = kFormatVersion;
  const bool exists = env->FileExists(options.path + "/CURRENT").ok();
  if (exists) {
    // Busy first, while nothing was touched: RocksDB's own open rotates the
    // LOG file before it takes the lock.
    rocksdb::FileLock* lock = nullptr;
    rocksdb::Status rs = env->LockFile(options.path + "/LOCK", &lock);
    if (!rs.ok()) {
      return Status::Busy("store " + options.path + " is in use by another process (" +
                          rs.ToString() + ")");
    }
    Status s = ProbeFormat(options.path, db_options, cfs, &unformatted, &format);
    if (s.ok()) {
      rs = rocksdb::DB::ListColumnFamilies(db_options, options.path, &cf_names);
      if (!rs.ok()) s = Unreadable(rs, options.path);
    }
    env->UnlockFile(lock);
    if (!s.ok()) return s;
    // Format 3 and older have no messages column family: created here, in
    // the open (RocksDB writes the new family to its MANIFEST atomically).
    if (std::find(cf_names.begin(), cf_names.end(), kMessagesCf) == cf_names.end()) {
      cf_names.push_back(kMessagesCf);
      db_options.create_missing_column_families = true;
    }
  } else {
    Status s = CheckFreshDirectory(options.path);
    if (!s.ok()) return s;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.error_if_exists = true;
  }
  db_options.listeners.push_back(std::move(listener));
  db_options.info_log = NewStoreLogger(options.path);

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : cf_names) descriptors.emplace_back(n, cfs.For(n));
  DbHandles opened;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, options.path, descriptors, &opened.all, &opened.db);
  if (!rs.ok()) return FromRocks(rs, "open store " + options.path);
  Status s = AssignHandles(options.path, &opened);
  if (!s.ok()) return s;
  action_reader->Attach(opened.db, opened.actions);
  opened.action_reader = std::move(action_reader);
  if (!exists || unformatted) {
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rs = opened.db->Put(sync, opened.meta, kFormatVersionKey, std::to_string(kFormatVersion));
    if (!rs.ok()) {
      CloseDb(&opened);
      return FromRocks(rs, "write format version of new store " + options.path);
    }
  } else if (format < kFormatVersion) {
    // Format 1 kept a second, per-tenant copy of the lease index; format 2
    // drops it (codec.h). Format 3 reads format 2's records as they are
    // (kFormatVersion), and format 4 only adds the messages column family,
    // created by the open above. One synced batch, so a crash leaves either
    // format.
    rocksdb::WriteBatch upgrade;
    rocksdb::WriteOptions sync;
    sync.sync = true;
    if (format == 1) {
      rs = upgrade.DeleteRange(opened.leases, codec::kLeaseTenantOrderBegin,
                               codec::kLeaseTenantOrderEnd);
    }
    if (rs.ok() && format < 4) {
      // Every intent written before keyrings was keyed with the one secret,
      // id "0".
      std::unique_ptr<rocksdb::Iterator> it(opened.db->NewIterator(TotalOrderRead(), opened.intents));
      it->SeekToFirst();
      if (it->Valid()) rs = upgrade.Put(opened.meta, std::string(kKeyIdPrefix) + "0", "");
      if (rs.ok()) rs = it->status();
    }
    if (rs.ok()) rs = upgrade.Put(opened.meta, kFormatVersionKey, std::to_string(kFormatVersion));
    if (rs.ok()) rs = opened.db->Write(sync, &upgrade);
    if (!rs.ok()) {
      CloseDb(&opened);
      return FromRocks(rs, "upgrade store " + options.path + " from format " +
                               std::to_string(format) + " (nothing was lost)");
    }
  }
  *h = std::move(opened);
  return Status::Ok();
}

Status OpenDbReadOnly(const RocksOptions& options, rocksdb::Env* env, DbHandles* h) {
  const CfOptionsFactory cfs(options.block_cache_bytes,
                             options.clock != nullptr ? options.clock : &SystemClock(),
                             options.hash_memtables);
  return OpenReadOnly(options.path, StoreDbOptions(env, options), cfs, h);
}

void CloseDb(DbHandles* h) {
  if (h->db == nullptr) return;
  // No compaction reads the DB once it closes (the filter then keeps intents).
  if (h->action_reader) h->action_reader->Detach();
  for (auto* handle : h->all) h->db->DestroyColumnFamilyHandle(handle);
  h->db->Close();  // a store closed after a storage error may report it again
  delete h->db;
  *h = DbHandles();
}

}  // namespace intentd::store
