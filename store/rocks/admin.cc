// RocksStoreImpl lifetime and the operator-facing calls: size, flush,
// checkpoint, compaction, bulk load.

#include <rocksdb/utilities/checkpoint.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "store/rocks/codec.h"
#include "store/decision.h"
#include "store/rocks/impl.h"

namespace intentd::store {

RocksStoreImpl::RocksStoreImpl(const RocksOptions& options, std::unique_ptr<WalFiles> wal,
                               std::unique_ptr<rocksdb::Env> env,
                               std::shared_ptr<FaultInjection> faults,
                               std::shared_ptr<StorageErrorListener> errors, DbHandles handles)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock()),
      faults_(std::move(faults)),
      wal_(std::move(wal)),
      env_(std::move(env)),
      errors_(std::move(errors)),
      h_(std::move(handles)) {
  // Synced stores wait for the group commit (group_commit.h), not in Write.
  write_options_.sync = false;
  if (options_.sync) {
    commit_ = std::make_unique<GroupCommit>([this](uint64_t* target) { return SyncWal(target); },
                                            h_.db != nullptr ? h_.db->GetLatestSequenceNumber() : 0);
  }
}

RocksStoreImpl::~RocksStoreImpl() {
  if (commit_ != nullptr) commit_->Stop();  // answers every WhenDurable still waiting
  CloseDb(&h_);
}

Status RocksStoreImpl::CheckFreeSpace() {
  using std::chrono::steady_clock;
  const int64_t now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now().time_since_epoch())
          .count();
  // statvfs at most every 10 ms while space is plentiful, on every write
  // while it is short (so writes resume as soon as space is freed).
  if (options_.min_free_bytes == 0) return Status::Ok();
  if (!space_low_.load(std::memory_order_acquire) &&
      now_us < space_next_check_us_.load(std::memory_order_acquire)) {
    return Status::Ok();
  }
  DiskSpace space;
  if (!ReadDiskSpace(options_.path, &space)) return Status::Ok();  // cannot tell: let RocksDB
  const uint64_t free = space.free;
  const uint64_t reserve = FreeSpaceReserve(options_.min_free_bytes, space.total);
  const bool low = free < reserve;
  space_low_.store(low, std::memory_order_release);
  space_next_check_us_.store(now_us + 10'000, std::memory_order_release);
  if (!low) return Status::Ok();
  return Status::StorageError(
      "the disk holding " + options_.path + " is full: " + std::to_string(free >> 10) +
      " KiB free, under the " + std::to_string(reserve >> 10) +
      " KiB intentd keeps free (--min-free-space) so that RocksDB can flush and compact; "
      "nothing was written or granted, reads go on, and writes resume by themselves once "
      "space is freed");
}

Status RocksStoreImpl::Enter(Access access, std::shared_lock<std::shared_mutex>* guard) {
  if (access == Access::kWrite) {
    if (Status space = CheckFreeSpace(); !space.ok()) return space;
  }
  if (errors_->raised.load(std::memory_order_acquire)) {
    // Readers recover too when a failed WAL sync left writes in the DB that
    // may not be durable: they must not be read as if they were.
    bool recover = access == Access::kWrite || UndurableVisible();
    if (!recover) {
      std::shared_lock<std::shared_mutex> peek(db_mu_);
      recover = h_.db == nullptr;
    }
    if (recover) {
      std::lock_guard<std::mutex> gate(recovery_mu_);
      if (errors_->raised.load(std::memory_order_acquire)) Recover();
    }
  }
  *guard = std::shared_lock<std::shared_mutex>(db_mu_);
  if (h_.db == nullptr) {
    return Status::StorageError("the store is closed after a storage error: " + reopen_error_);
  }
  if (access == Access::kWrite && h_.read_only) {
    return Status::StorageError("the store is read-only after a storage error: " +
                                reopen_error_);
  }
  return Status::Ok();
}

void RocksStoreImpl::Recover() {
  std::unique_lock<std::shared_mutex> exclusive(db_mu_);
  std::lock_guard<std::mutex> syncer_out(sync_db_mu_);
  errors_->raised.store(false, std::memory_order_release);
  // After a failed WAL sync only a reopen (which replays the WAL, and
  // flushes what it replays) says what is on disk.
  // A failed WAL append may have left a torn record that later records
  // would follow: only a reopen (which stops replaying there) is safe.
  if (h_.db != nullptr && !h_.read_only && !UndurableVisible() && wal_->failure().empty()) {
    rocksdb::WriteOptions sync;
    sync.sync = true;
    if (h_.db->Resume().ok() &&
        h_.db->Put(sync, h_.meta, "recovered_at_ms", std::to_string(clock_->NowMs())).ok() &&
        !errors_->raised.load(std::memory_order_acquire)) {
      reopen_error_.clear();
      MarkAllDurable();  // the synced probe covers the WAL
      return;
    }
  }
  CloseDb(&h_);
  rocksdb::Env* env = env_.get();
  wal_->Reset();  // the reopen replays the WAL up to any torn record
  Status s = OpenDb(options_, env, errors_, &h_);
  if (s.ok()) {
    errors_->raised.store(false, std::memory_order_release);
    reopen_error_.clear();
    MarkAllDurable();  // recovery flushed the replayed WAL
    return;
  }
  reopen_error_ = s.message();
  OpenDbReadOnly(options_, env, &h_);  // best effort: keeps reads going
  errors_->raised.store(true, std::memory_order_release);
}

uint64_t RocksStoreImpl::ApproximateSizeBytes() {
  std::shared_lock<std::shared_mutex> guard;
  if (!Enter(Access::kRead, &guard).ok()) return 0;
  uint64_t total = 0;
  for (auto* handle : h_.all) {
    uint64_t bytes = 0;
    if (h_.db->GetIntProperty(handle, "rocksdb.live-sst-files-size", &bytes)) total += bytes;
  }
  rocksdb::VectorLogPtr wal_files;
  if (h_.db->GetSortedWalFiles(wal_files).ok()) {
    for (const auto& f : wal_files) total += f->SizeFileBytes();
  }
  return total;
}

Status RocksStoreImpl::Flush() {
  std::shared_lock<std::shared_mutex> guard;
  Status s = Enter(Access::kWrite, &guard);
  if (!s.ok()) return s;
  return FlushLocked();
}

Status RocksStoreImpl::FlushLocked() {
  // The WAL first (as the group commit does it, its buffer written out),
  // so that nothing in the memtables is less durable than the tables being
  // written: a flush of several column families is not atomic.
  std::string error = WriteOutAndSyncWal();
  if (error.empty()) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    rocksdb::Status rs = h_.db->Flush(fo, h_.all);
    if (!rs.ok()) error = rs.ToString();
  }
  if (!error.empty()) {
    errors_->raised.store(true, std::memory_order_release);
    return Status::StorageError("flush: " + error);
  }
  return Status::Ok();
}

Status RocksStoreImpl::Checkpoint(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("checkpoint directory is empty");
  std::shared_lock<std::shared_mutex> guard;
  Status s = Enter(Access::kRead, &guard);
  if (!s.ok()) return s;
  if (h_.db->GetEnv()->FileExists(dir).ok()) {
    return Status::InvalidArgument("checkpoint directory " + dir + " already exists");
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status rs = rocksdb::Checkpoint::Create(h_.db, &raw);
  if (!rs.ok()) return FromRocks(rs, "checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  rs = checkpoint->CreateCheckpoint(dir);
  if (!rs.ok()) return FromRocks(rs, "checkpoint into " + dir);
  // RocksDB fills a temporary directory, renames it to `dir` and syncs `dir`
  // itself, but not the directory holding it: until that is synced, a power
  // loss can take the rename back and lose the whole backup
  // (tests/powerloss/backup_check.py finds exactly that without this).
  std::filesystem::path path(dir);
  if (!path.has_filename()) path = path.parent_path();  // "dir/" names dir
  std::string parent = path.parent_path().string();
  if (parent.empty()) parent = ".";
  std::unique_ptr<rocksdb::Directory> parent_dir;
  rs = h_.db->GetEnv()->NewDirectory(parent, &parent_dir);
  if (rs.ok()) rs = parent_dir->Fsync();
  if (!rs.ok()) return FromRocks(rs, "syncing " + parent + " after the checkpoint into " + dir);
  return Status::Ok();
}

std::string RocksStoreImpl::EngineStats() {
  std::shared_lock<std::shared_mutex> guard;
  if (Status s = Enter(Access::kRead, &guard); !s.ok()) return s.message();
  std::string text;
  h_.db->GetProperty("rocksdb.dbstats", &text);
  const GroupCommitCounts c = CommitCounts();
  char line[160];
  std::snprintf(
      line, sizeof(line), "Group commit: %llu writes, %llu WAL syncs, %.2f writes per sync\n",
      static_cast<unsigned long long>(c.writes), static_cast<unsigned long long>(c.wal_syncs),
      c.wal_syncs == 0 ? 0.0 : static_cast<double>(c.writes) / c.wal_syncs);
  text += line;
  if (c.wal_spares_taken + c.wal_spares_missed > 0) {
    std::snprintf(line, sizeof(line), "WAL files: %llu made from spares, %llu created empty\n",
                  static_cast<unsigned long long>(c.wal_spares_taken),
                  static_cast<unsigned long long>(c.wal_spares_missed));
    text += line;
  }
  return text;
}

RocksStore::GroupCommitCounts RocksStoreImpl::CommitCounts() const {
  // RocksDB counts only its own syncs; the group commit syncs the WAL files
  // itself (wal_files.h).
  const WalSpares::Counts spares = wal_->spare_counts();
  GroupCommitCounts counts;
  counts.writes = writes_.load(std::memory_order_relaxed);
  counts.wal_spares_taken = spares.taken;
  counts.wal_spares_missed = spares.missed;
  if (commit_ != nullptr) commit_->ReadCounts(&counts);
  return counts;
}

bool RocksStoreImpl::ReadSpace(Space* out) const {
  DiskSpace space;
  if (!ReadDiskSpace(options_.path, &space)) return false;
  out->free_bytes = space.free;
  out->reserve_bytes =
      options_.min_free_bytes == 0 ? 0 : FreeSpaceReserve(options_.min_free_bytes, space.total);
  return true;
}

Status RocksStoreImpl::CompactAll() {
  std::shared_lock<std::shared_mutex> guard;
  Status s = Enter(Access::kWrite, &guard);
  if (!s.ok()) return s;
  s = FlushLocked();
  if (!s.ok()) return s;
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* handle : h_.all) {
    rocksdb::Status rs = h_.db->CompactRange(co, handle, nullptr, nullptr);
    if (!rs.ok()) {
      errors_->raised.store(true, std::memory_order_release);
      return Status::StorageError("compact " + handle->GetName() + ": " + rs.ToString());
    }
  }
  return Status::Ok();
}

Status RocksStoreImpl::BulkLoad(const std::vector<IntentRecord>& records) {
  std::shared_lock<std::shared_mutex> guard;
  Status s = Enter(Access::kWrite, &guard);
  if (!s.ok()) return s;
  const int64_t now = clock_->NowMs();
  rocksdb::WriteBatch batch;
  for (const IntentRecord& record : records) {
    const Intent& intent = record.intent;
    if (intent.key.empty()) return Status::InvalidArgument("bulk load: intent with an empty key");
    if (record.action) {
      Action action = *record.action;
      action.tenant_id = intent.tenant_id;
      action.key = intent.key;
      PutAction(&batch, codec::ActionKey(action.tenant_id, action.key), std::nullopt, action, now);
    }
    PutIntent(&batch, codec::IntentKey(intent.tenant_id, intent.intent_ref, intent.action_type),
              intent, now);
  }
  rocksdb::WriteOptions unsynced;
  unsynced.sync = false;
  rocksdb::Status rs = h_.db->Write(unsynced, &batch);
  if (!rs.ok()) {
    errors_->raised.store(true, std::memory_order_release);
    return Status::StorageError("bulk load: " + rs.ToString());
  }
  return Status::Ok();
}

}  // namespace intentd::store
