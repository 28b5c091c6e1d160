#include "store/rocks/options.h"

#include <fcntl.h>
#include <pthread.h>
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/table_properties_collectors.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"
#include "store/rocks/rocks_store.h"

namespace intentd::store {
namespace {

// Hash memtables (RocksOptions::hash_memtables), see CfOptionsFactory::For.
constexpr size_t kHashPrefixBytes = 256;
constexpr size_t kHashBuckets = 1 << 20;

// Drops records whose header's retention deadline has passed: actions, and
// message records (each its own filter, named apart in RocksDB's log). The
// clock is read once per compaction; values it cannot read (short, unknown
// format) are kept.
class HeaderRetentionFilter : public rocksdb::CompactionFilter {
 public:
  HeaderRetentionFilter(int64_t now_ms, const char* name) : now_ms_(now_ms), name_(name) {}
  bool Filter(int /*level*/, const rocksdb::Slice& /*key*/, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    codec::ValueHeader header;
    if (!codec::ReadValueHeader(std::string_view(value.data(), value.size()), &header) ||
        header.format != codec::kValueFormat) {
      return false;
    }
    return RetentionExpired(header.retain_until_ms, now_ms_);
  }
  const char* Name() const override { return name_; }

 private:
  int64_t now_ms_;
  const char* name_;
};

// Drops intents that are no longer live (IntentLive): past their own
// deadline, and their action is gone or came after it. Only those past their
// own deadline (a month old by default) cost a read of the actions column
// family; anything it cannot read or decide is kept.
class IntentRetentionFilter : public rocksdb::CompactionFilter {
 public:
  IntentRetentionFilter(int64_t now_ms, std::shared_ptr<const ActionReader> actions)
      : now_ms_(now_ms), actions_(std::move(actions)) {}
  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    const std::string_view v(value.data(), value.size());
    codec::ValueHeader header;
    if (!codec::ReadValueHeader(v, &header) || header.format != codec::kValueFormat) return false;
    if (IntentLive(header.retain_until_ms, nullptr, now_ms_) || actions_ == nullptr) return false;
    Intent intent;
    int64_t retain_until_ms = 0;
    if (!codec::DecodeIntentKey(std::string_view(key.data(), key.size()), &intent) ||
        !codec::DecodeIntentValue(v, &intent, &retain_until_ms).ok()) {
      return false;
    }
    Action action;
    switch (actions_->Read(intent.tenant_id, intent.key, now_ms_, &action)) {
      case ActionReader::Result::kLive:
        return !IntentLive(retain_until_ms, &action, now_ms_);
      case ActionReader::Result::kAbsent:
        return !IntentLive(retain_until_ms, nullptr, now_ms_);
      case ActionReader::Result::kUnknown:
        break;
    }
    return false;
  }
  const char* Name() const override { return "intentd.IntentRetentionFilter"; }

 private:
  int64_t now_ms_;
  std::shared_ptr<const ActionReader> actions_;
};

class RetentionFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  enum class Records { kIntents, kActions, kMessages, kCounters };
  RetentionFilterFactory(const Clock* clock, Records records,
                         std::shared_ptr<const ActionReader> actions)
      : clock_(clock), records_(records), actions_(std::move(actions)) {}
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context& /*context*/) override {
    switch (records_) {
      case Records::kIntents:
        return std::make_unique<IntentRetentionFilter>(clock_->NowMs(), actions_);
      case Records::kActions:
        return std::make_unique<HeaderRetentionFilter>(clock_->NowMs(), "intentd.RetentionFilter");
      case Records::kMessages:
        break;
      case Records::kCounters:
        return std::make_unique<HeaderRetentionFilter>(clock_->NowMs(),
                                                       "intentd.CounterRetentionFilter");
    }
    return std::make_unique<HeaderRetentionFilter>(clock_->NowMs(),
                                                   "intentd.MessageRetentionFilter");
  }
  const char* Name() const override { return "intentd.RetentionFilterFactory"; }

 private:
  const Clock* clock_;
  Records records_;
  std::shared_ptr<const ActionReader> actions_;
};

class NullLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

class FileLogger : public rocksdb::Logger {
 public:
  explicit FileLogger(int fd) : fd_(fd) {}
  ~FileLogger() override { close(fd_); }
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[4096];
    timeval now;
    gettimeofday(&now, nullptr);
    tm local;
    localtime_r(&now.tv_sec, &local);
    int n = std::snprintf(line, sizeof(line), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %lx ",
                          local.tm_year + 1900, local.tm_mon + 1, local.tm_mday, local.tm_hour,
                          local.tm_min, local.tm_sec, static_cast<long>(now.tv_usec),
                          static_cast<unsigned long>(pthread_self()));
    va_list copy;
    va_copy(copy, ap);
    const int body = std::vsnprintf(line + n, sizeof(line) - n - 1, format, copy);
    va_end(copy);
    if (body < 0) return;
    n = std::min<int>(n + body, sizeof(line) - 2);  // truncated: long lines are cut
    if (line[n - 1] != '\n') line[n++] = '\n';
    // One write per line (O_APPEND); a failure loses this line only.
    (void)!write(fd_, line, static_cast<size_t>(n));
  }

 private:
  int fd_;
};

bool Supported(rocksdb::CompressionType type) {
  for (auto t : rocksdb::GetSupportedCompressions()) {
    if (t == type) return true;
  }
  return false;
}

}  // namespace

void ActionReader::Attach(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* actions) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  db_ = db;
  actions_ = actions;
}

void ActionReader::Detach() {
  std::unique_lock<std::shared_mutex> lock(mu_);
  db_ = nullptr;
  actions_ = nullptr;
}

ActionReader::Result ActionReader::Read(std::string_view tenant_id, std::string_view key,
                                        int64_t now_ms, Action* action) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (db_ == nullptr) return Result::kUnknown;
  int64_t retain_until_ms = 0;
  bool found = false;
  if (!GetActionRecord(db_, actions_, rocksdb::ReadOptions(), codec::ActionKey(tenant_id, key),
                       action, &retain_until_ms, &found)
           .ok()) {
    return Result::kUnknown;
  }
  return found && !RetentionExpired(retain_until_ms, now_ms) ? Result::kLive : Result::kAbsent;
}

rocksdb::ReadOptions TotalOrderRead() {
  rocksdb::ReadOptions ro;
  ro.total_order_seek = true;
  return ro;
}

CfOptionsFactory::CfOptionsFactory(size_t block_cache_bytes, const Clock* clock,
                                   bool hash_memtables, std::shared_ptr<const ActionReader> actions)
    : hash_memtables_(hash_memtables),
      cache_(rocksdb::NewLRUCache(block_cache_bytes)),
      action_retention_(std::make_shared<RetentionFilterFactory>(
          clock, RetentionFilterFactory::Records::kActions, nullptr)),
      intent_retention_(std::make_shared<RetentionFilterFactory>(
          clock, RetentionFilterFactory::Records::kIntents, std::move(actions))),
      message_retention_(std::make_shared<RetentionFilterFactory>(
          clock, RetentionFilterFactory::Records::kMessages, nullptr)),
      counter_retention_(std::make_shared<RetentionFilterFactory>(
          clock, RetentionFilterFactory::Records::kCounters, nullptr)) {}

rocksdb::ColumnFamilyOptions CfOptionsFactory::For(const std::string& name) const {
  rocksdb::ColumnFamilyOptions cf;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  if (name == kIntentsCf || name == kActionsCf) {
    // Point reads: whole-key bloom filters on tables and memtables.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.optimize_filters_for_memory = true;
    cf.memtable_prefix_bloom_size_ratio = 0.02;
    cf.memtable_whole_key_filtering = true;
    if (hash_memtables_) {
      // RocksDB's hash skip list, its prefix the whole user key (keys are
      // shorter than kHashPrefixBytes): an insert or a point read searches a
      // bucket's short list instead of one skip list of ~10^5 records (a
      // full 64 MiB memtable holds ~127,000 intents or ~165,000 action
      // records). Against plain skip lists: intentd_loadgen --connections 64
      // --duration 20, alternated: median 10,664 -> 13,250 pairs/s, the io
      // thread 39.5 -> 30.2 us per request. The price is on the flush
      // thread, whose iterator builds one sorted list of every entry, and
      // inserts that RocksDB serializes (no concurrent memtable writes).
      cf.prefix_extractor.reset(rocksdb::NewCappedPrefixTransform(kHashPrefixBytes));
      cf.memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(kHashBuckets));
    }
    cf.compaction_filter_factory = name == kIntentsCf ? intent_retention_ : action_retention_;
    cf.level_compaction_dynamic_level_bytes = true;
    // LZ4 on every level, also the bottommost, which holds most records:
    // with ZSTD there (as before) libzstd was 40% of the samples of a
    // process doing cold point reads (perf). bench_store, one run each:
    // GetAction over 2 million bulk-loaded actions p50 23.4 -> 13.8 us, p99
    // 57.9 -> 43.0 us; the price is disk, 195.8 -> 314.2 bytes per completed
    // action after compaction (size phase, 100,000 actions). LZ4HC: 13.0 us
    // and 308.3 bytes, but that compaction took 166 s against LZ4's 21 s.
    cf.compression =
        Supported(rocksdb::kLZ4Compression) ? rocksdb::kLZ4Compression : rocksdb::kNoCompression;
  } else if (name == kMessagesCf) {
    // Point reads by (tenant, channel, message id), retention by the header's
    // deadline: the defaults' skip list, bloom filters, and its own filter.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.optimize_filters_for_memory = true;
    cf.write_buffer_size = 16 << 20;
    cf.compaction_filter_factory = message_retention_;
    cf.level_compaction_dynamic_level_bytes = true;
    cf.compression =
        Supported(rocksdb::kLZ4Compression) ? rocksdb::kLZ4Compression : rocksdb::kNoCompression;
  } else if (name == kPolicyCf) {
    // Counters (one per tenant and day, one per payer and day, each read and
    // rewritten by every freeze that counts on it) and pending approvals;
    // dropped by the header's deadline. Point reads: bloom filters, and a
    // write buffer that holds a day's rewrites of the hot counters instead
    // of flushing them into many small tables.
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.optimize_filters_for_memory = true;
    cf.memtable_prefix_bloom_size_ratio = 0.02;
    cf.memtable_whole_key_filtering = true;
    cf.write_buffer_size = 16 << 20;
    cf.level_compaction_dynamic_level_bytes = true;
    cf.compaction_filter_factory = counter_retention_;
  } else if (name == kLeasesCf) {
    // Every finished action deletes its entries: compact tombstone runs away
    // so that Uncertain's scans stay short.
    cf.write_buffer_size = 16 << 20;
    cf.table_properties_collector_factories.push_back(
        rocksdb::NewCompactOnDeletionCollectorFactory(256, 128));
    if (hash_memtables_) {
      // One writing thread (the agent's io thread): begin's entry and complete's tombstone are
      // appended to a vector instead of inserted into a skip list (7.1% of
      // the agent's io thread). A vector sorts a copy of itself for
      // each iterator (Uncertain's scan) and Get (only RecheckLeaseEntry,
      // which needs unordered writes): 4 MiB keeps that copy small.
      // uncertain under 64 loadgen connections (CLI round trip): 30-93 ms
      // with the skip list, 23-61 ms here (58-244 ms with 16 MiB); six
      // alternated 15 s runs, median 12,013 -> 12,589 pairs/s.
      cf.memtable_factory.reset(new rocksdb::VectorRepFactory);
      cf.write_buffer_size = 4 << 20;
    }
  } else {
    cf.write_buffer_size = 1 << 20;
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

bool BufferedWal(const RocksOptions& options) { return options.sync && options.defer_sync; }

rocksdb::DBOptions StoreDbOptions(rocksdb::Env* env, const RocksOptions& options) {
  rocksdb::DBOptions o;
  o.env = env;
  o.max_background_jobs = 2;
  o.bytes_per_sync = 1 << 20;
  o.keep_log_file_num = 4;  // RocksDB deletes older LOG.old.* (also ours)
  o.max_manifest_file_size = 64 << 20;
  o.max_total_wal_size = 256 << 20;
  // RocksDB's own resumption after a background error writes again through
  // the WAL writer that failed; the store recovers by reopening instead
  // (RocksStoreImpl::Recover), and StorageErrorListener turns the other
  // automatic recoveries off.
  o.max_bgerror_resume_count = 0;
  // Writes go to the WAL unsynced (the group commit syncs it, group_commit.h).
  // Unordered writes: the write group's leader only appends the WAL; every
  // writer then inserts its own batch into the memtable, concurrently, and
  // returns. bench_store, 64 threads, three alternated pairs: synced
  // 10,085 / 10,568 / 13,213 -> 11,476 / 15,865 / 14,048 begin+complete
  // pairs/s, unsynced 15,794 / 19,193 / 18,796 -> 19,697 / 26,200 / 26,335. The price
  // is RocksDB's snapshot immutability: a snapshot or iterator may see half
  // of a batch that is still being inserted. Every operation that decides
  // reads under its stripe locks, which a writer holds until its batch is
  // in; the multi-record reads (Lookup, Uncertain) do the same (rocks_store.cc).
  // With ordered writes the leader inserted every batch itself and the
  // others slept: parallel insertion *without* unordered writes wakes each
  // writer twice and measured worse (two pairs: unsynced 24,170 / 23,999
  // ordered vs 14,353 / 14,644, synced 15,726 / 13,707 vs 11,487 / 9,505).
  o.allow_concurrent_memtable_write = !options.hash_memtables;  // skip lists only
  o.unordered_write = !options.hash_memtables;                  // needs the former
  if (BufferedWal(options)) {
    // The agent writes from one io thread and waits for syncs with tickets,
    // so nobody gains from unordered writes there, while a write(2) of the
    // WAL per request is a large share of that thread's work. With
    // manual_wal_flush the records wait in RocksDB's buffer, and the sync
    // thread writes them all with one write(2) before each fdatasync.
    // intentd_loadgen --connections 64, three alternated runs each: io thread
    // 58.8 / 49.8 / 55.0 -> 40.9 / 45.0 / 45.5 us of CPU per request,
    // 8,087 / 9,766 / 8,620 -> 11,678 / 10,372 / 10,034 pairs/s. (Unordered
    // writes are off because RocksDB 7.8 cannot combine them with
    // manual_wal_flush: the WAL-only write path takes log_write_mutex_
    // and WriteToWAL takes it again, and the first write hangs.)
    o.manual_wal_flush = true;
    o.unordered_write = false;
  }
  return o;
}

bool ReadDiskSpace(const std::string& path, DiskSpace* space) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return false;
  space->total = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  space->free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  return true;
}

uint64_t FreeSpaceReserve(int64_t min_free_bytes, uint64_t total_bytes) {
  constexpr uint64_t kMaxReserve = 64ull << 20;
  if (min_free_bytes >= 0) return static_cast<uint64_t>(min_free_bytes);
  return std::min(kMaxReserve, total_bytes / 10);
}

std::shared_ptr<rocksdb::Logger> NewNullLogger() { return std::make_shared<NullLogger>(); }

std::shared_ptr<rocksdb::Logger> NewStoreLogger(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path log = fs::path(dir) / "LOG";
  if (fs::exists(log, ec)) {
    timeval now;
    gettimeofday(&now, nullptr);
    const long long micros = static_cast<long long>(now.tv_sec) * 1000000 + now.tv_usec;
    fs::rename(log, fs::path(dir) / ("LOG.old." + std::to_string(micros)), ec);
  }
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return NewNullLogger();
  return std::make_shared<FileLogger>(fd);
}

}  // namespace intentd::store
