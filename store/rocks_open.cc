// Opening a store: options, column families, format check, retention filter.
#include <cstdarg>
#include <filesystem>
#include <system_error>

#include <rocksdb/compaction_filter.h>
#include <rocksdb/convenience.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>

#include "store/codec.h"
#include "store/decision.h"
#include "store/rocks_impl.h"

namespace intentd::store {
namespace {

constexpr char kIntentsCf[] = "intents";
constexpr char kActionsCf[] = "actions";
constexpr char kLeasesCf[] = "leases";
constexpr char kMetaCf[] = "meta";
constexpr char kFormatVersionKey[] = "format_version";

// Drops intents and actions past their retention deadline. The clock is read
// once per compaction; values it cannot read (short, unknown format) are kept.
class RetentionFilter : public rocksdb::CompactionFilter {
 public:
  explicit RetentionFilter(int64_t now_ms) : now_ms_(now_ms) {}
  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    codec::ValueHeader header;
    if (!codec::ReadValueHeader(std::string_view(value.data(), value.size()), &header) ||
        header.format != codec::kValueFormat) {
      return false;
    }
    return RetentionExpired(header.retain_until_ms, now_ms_);
  }
  const char* Name() const override { return "intentd.RetentionFilter"; }

 private:
  int64_t now_ms_;
};

class RetentionFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  explicit RetentionFilterFactory(const Clock* clock) : clock_(clock) {}
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& /*context*/) override {
    return std::make_unique<RetentionFilter>(clock_->NowMs());
  }
  const char* Name() const override { return "intentd.RetentionFilterFactory"; }

 private:
  const Clock* clock_;
};

// The read-only format probe must not create or rotate the LOG file.
class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

bool Supported(rocksdb::CompressionType type) {
  for (auto t : rocksdb::GetSupportedCompressions()) {
    if (t == type) return true;
  }
  return false;
}

struct CfFactory {
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::CompactionFilterFactory> retention;

  rocksdb::ColumnFamilyOptions For(const std::string& name) const {
    rocksdb::ColumnFamilyOptions cf;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = cache;
    if (name == kIntentsCf || name == kActionsCf) {
      // Point reads: whole-key bloom filters on tables and memtable.
      table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      table.optimize_filters_for_memory = true;
      cf.memtable_prefix_bloom_size_ratio = 0.02;
      cf.memtable_whole_key_filtering = true;
      cf.compaction_filter_factory = retention;
      cf.level_compaction_dynamic_level_bytes = true;
      cf.compression =
          Supported(rocksdb::kLZ4Compression) ? rocksdb::kLZ4Compression : rocksdb::kNoCompression;
      if (Supported(rocksdb::kZSTD)) {
        cf.bottommost_compression = rocksdb::kZSTD;
      }
    } else if (name == kLeasesCf) {
      // Every finished action deletes its entries: compact tombstone runs
      // away so that Uncertain's scans stay short.
      cf.write_buffer_size = 16 << 20;
      cf.table_properties_collector_factories.push_back(
          rocksdb::NewCompactOnDeletionCollectorFactory(256, 128));
    } else {
      cf.write_buffer_size = 1 << 20;
    }
    cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    return cf;
  }
};

rocksdb::DBOptions DbOptions(rocksdb::Env* env) {
  rocksdb::DBOptions o;
  o.env = env;
  o.max_background_jobs = 2;
  o.bytes_per_sync = 1 << 20;
  o.keep_log_file_num = 4;
  o.max_manifest_file_size = 64 << 20;
  o.max_total_wal_size = 256 << 20;
  return o;
}

bool IsLockError(const rocksdb::Status& s) {
  return s.IsIOError() && (s.ToString().find("lock") != std::string::npos ||
                           s.ToString().find("Lock") != std::string::npos);
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
    if (ec) return Status::StorageError("cannot create store directory " + path + ": " + ec.message());
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

Status ParseFormatVersion(const std::string& text, int* version) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Corruption("store format version '" + text + "' is unreadable");
  }
  *version = std::stoi(text);
  return Status::Ok();
}

Status CloseHandles(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  for (auto* h : *handles) db->DestroyColumnFamilyHandle(h);
  handles->clear();
  rocksdb::Status s = db->Close();
  delete db;
  return s.ok() ? Status::Ok() : FromRocks(s, "close");
}

// Reads an existing store's format without writing anything: a read-only
// open with a silent logger. Also lists the column families to open.
// *unformatted: a creation stopped before it wrote the format version, and
// no record was written since (the store may be formatted now).
Status ProbeExisting(const std::string& path, const rocksdb::DBOptions& base,
                     const CfFactory& cfs, std::vector<std::string>* cf_names,
                     bool* unformatted) {
  rocksdb::Status rs = rocksdb::DB::ListColumnFamilies(base, path, cf_names);
  if (!rs.ok()) {
    if (rs.IsIOError() && !rs.IsPathNotFound()) return FromRocks(rs, "read store " + path);
    return Status::Corruption("store " + path + " is unreadable: " + rs.ToString());
  }
  bool has_meta = false;
  for (const auto& n : *cf_names) has_meta |= n == kMetaCf;
  if (!has_meta) {
    return Status::Corruption(path + " is a RocksDB database but not an intentd store "
                              "(no meta column family)");
  }
  rocksdb::DBOptions ro = base;
  ro.info_log = std::make_shared<NullLogger>();
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : *cf_names) descriptors.emplace_back(n, cfs.For(n));
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rs = rocksdb::DB::OpenForReadOnly(ro, path, descriptors, &handles, &db);
  if (!rs.ok()) {
    if (rs.IsIOError() && !rs.IsPathNotFound()) return FromRocks(rs, "read store " + path);
    return Status::Corruption("store " + path + " is unreadable: " + rs.ToString());
  }
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  for (auto* h : handles) {
    if (h->GetName() == kMetaCf) meta = h;
  }
  std::string text;
  rs = db->Get(rocksdb::ReadOptions(), meta, kFormatVersionKey, &text);
  Status result;
  int version = 0;
  if (rs.IsNotFound()) {
    bool empty = true;
    for (auto* h : handles) {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), h));
      it->SeekToFirst();
      empty &= !it->Valid() && it->status().ok();
    }
    *unformatted = empty;
    if (!empty) result = Status::Corruption("store " + path + " has records but no format version");
  } else if (!rs.ok()) {
    result = FromRocks(rs, "read store format of " + path);
  } else {
    result = ParseFormatVersion(text, &version);
    if (result.ok() && version > kFormatVersion) {
      result = Status::Incompatible("store " + path + " has format version " + text +
                                    ", newer than this intentd's " +
                                    std::to_string(kFormatVersion) +
                                    "; run a newer intentd (nothing was changed)");
    } else if (result.ok() && version < 1) {
      result = Status::Corruption("store " + path + " has format version " + text);
    }
  }
  Status closed = CloseHandles(db, &handles);
  return result.ok() ? closed : result;
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
  if (options.path.empty()) return Status::InvalidArgument("store path is empty");
  if (options.retention_ms < 0) return Status::InvalidArgument("retention_ms is negative");
  std::unique_ptr<rocksdb::Env> owned_env;
  rocksdb::Env* env = rocksdb::Env::Default();
  if (faults) {
    owned_env = NewFaultInjectionEnv(faults);
    env = owned_env.get();
  }
  const Clock* clock = options.clock != nullptr ? options.clock : &SystemClock();
  CfFactory cfs{rocksdb::NewLRUCache(options.block_cache_bytes),
                std::make_shared<RetentionFilterFactory>(clock)};
  rocksdb::DBOptions db_options = DbOptions(env);

  std::vector<std::string> cf_names;
  bool unformatted = false;
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
    Status s = ProbeExisting(options.path, db_options, cfs, &cf_names, &unformatted);
    env->UnlockFile(lock);
    if (!s.ok()) return s;
  } else {
    Status s = CheckFreshDirectory(options.path);
    if (!s.ok()) return s;
    cf_names = {rocksdb::kDefaultColumnFamilyName, kIntentsCf, kActionsCf, kLeasesCf, kMetaCf};
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.error_if_exists = true;
  }

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : cf_names) descriptors.emplace_back(n, cfs.For(n));
  RocksStoreImpl::Handles h;
  rocksdb::Status rs =
      rocksdb::DB::Open(db_options, options.path, descriptors, &h.all, &h.db);
  if (!rs.ok()) return FromRocks(rs, "open store " + options.path);
  for (auto* handle : h.all) {
    const std::string& name = handle->GetName();
    if (name == kIntentsCf) h.intents = handle;
    if (name == kActionsCf) h.actions = handle;
    if (name == kLeasesCf) h.leases = handle;
    if (name == kMetaCf) h.meta = handle;
  }
  if (h.intents == nullptr || h.actions == nullptr || h.leases == nullptr || h.meta == nullptr) {
    CloseHandles(h.db, &h.all);
    return Status::Corruption("store " + options.path + " lacks a column family");
  }
  if (!exists || unformatted) {
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rs = h.db->Put(sync, h.meta, kFormatVersionKey, std::to_string(kFormatVersion));
    if (!rs.ok()) {
      CloseHandles(h.db, &h.all);
      return FromRocks(rs, "write format version of new store " + options.path);
    }
  }
  *store = std::make_unique<RocksStoreImpl>(options, std::move(owned_env), std::move(faults),
                                            std::move(h));
  return Status::Ok();
}

}  // namespace intentd::store
