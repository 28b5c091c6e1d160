// RocksStoreImpl lifetime and the operator-facing calls: size, flush,
// checkpoint, compaction, bulk load.

#include <rocksdb/utilities/checkpoint.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"

namespace intentd::store {

RocksStoreImpl::RocksStoreImpl(const RocksOptions& options, std::unique_ptr<WalFiles> wal,
                               std::unique_ptr<rocksdb::Env> env,
                               std::shared_ptr<FaultInjection> faults,
                               std::shared_ptr<StorageErrorListener> errors,
                               std::unique_ptr<WalGuard> guard, DbHandles handles,
                               const OpenOutcome& opened)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock()),
      faults_(std::move(faults)),
      wal_(std::move(wal)),
      env_(std::move(env)),
      errors_(std::move(errors)),
      guard_(std::move(guard)),
      identity_(opened.identity),
      h_(std::move(handles)) {
  struct stat st {};
  if (stat(options_.path.c_str(), &st) == 0) {
    dir_dev_ = st.st_dev;
    dir_ino_ = st.st_ino;
  }
  // A loss is accepted once, by the start that was told to: a reopen that
  // finds the WAL damaged leaves the store failed.
  options_.accept_wal_loss = false;
  // Synced stores wait for the group commit (group_commit.h), not in Write.
  write_options_.sync = false;
  last_commit_ = opened.next_commit - 1;
  next_commit_.store(opened.next_commit);
  visible_commit_.store(last_commit_);
  durable_seq_.store(h_.db != nullptr ? h_.db->GetLatestSequenceNumber() : 0);
  wal_loss_accepted_ = opened.accepted_loss;
  GroupCommit::SyncFn sync;
  if (options_.sync) sync = [this](uint64_t* target) { return SyncWal(target); };
  commit_ = std::make_unique<GroupCommit>(
      std::move(sync), [this] { return Recover(); }, last_commit_);
  wal_->SetCommitHooks([this] { return next_commit_.load(std::memory_order_acquire); },
                       [this](uint64_t through) { commit_->MarkDurable(through); });
}

RocksStoreImpl::~RocksStoreImpl() {
  commit_->Stop();  // answers every WhenDurable still waiting
  wal_->SetCommitHooks(nullptr, nullptr);
  CloseDb(&h_);
  if (guard_) {
    guard_->Acked(durable_seq_.load());
    (void)guard_->FlushAcked();
  }
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

Status RocksStoreImpl::Enter(Access access, Entered* entered) {
  TakeTicket();  // an earlier operation's, never taken
  if (access == Access::kWrite) {
    if (Status space = CheckFreeSpace(); !space.ok()) return space;
  }
  if (failed_flag_.load(std::memory_order_acquire)) {
    // A write (or a read finding no DB) asks the sync thread to recover now.
    // A caller that may block waits for that attempt, a bounded time, so
    // that the store reopens under it as soon as the fault is gone; one that
    // answers asynchronously (defer_sync: the agent's io threads, whose
    // other connections must not wait) is refused at once. Reads otherwise
    // go on from the DB as it is meanwhile.
    bool wanted = access == Access::kWrite;
    if (!wanted) {
      std::shared_lock<std::shared_mutex> peek(db_mu_);
      wanted = h_.db == nullptr;
    }
    if (wanted && options_.defer_sync) {
      commit_->RequestRecovery();
    } else if (wanted) {
      std::unique_lock<std::mutex> lock(recovery_mu_);
      // An attempt already under way may have opened before the fault
      // cleared: wait for one that starts after this request.
      const uint64_t wanted_attempt = recovery_started_ + 1;
      lock.unlock();
      commit_->RequestRecovery();
      lock.lock();
      recovered_cv_.wait_for(lock, kRecoveryWait, [&] {
        return recovery_attempts_ >= wanted_attempt ||
               !failed_flag_.load(std::memory_order_acquire);
      });
    }
  }
  entered->lock_ = std::shared_lock<std::shared_mutex>(db_mu_);
  if (h_.db == nullptr) {
    entered->lock_ = {};
    return Status::StorageError("the store is closed after a storage error: " + reopen_error_);
  }
  if (access == Access::kWrite && failed_flag_.load(std::memory_order_acquire)) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      why = failure_;
    }
    entered->lock_ = {};
    return Status::StorageError(
        "nothing was written or granted: the store is recovering from a "
        "storage error (" +
        why + (reopen_error_.empty() ? "" : "; reopen: " + reopen_error_) + ")");
  }
  return Status::Ok();
}

bool RocksStoreImpl::SameDirectory(std::string* why) const {
  struct stat st {};
  if (stat(options_.path.c_str(), &st) != 0) {
    *why = "the data directory " + options_.path + " is gone (" + std::strerror(errno) +
           "): it was moved or removed while the agent ran; nothing is written until it is "
           "back, and no new store is created in its place";
    return false;
  }
  if (st.st_dev != dir_dev_ || st.st_ino != dir_ino_) {
    *why = "the data directory " + options_.path +
           " was replaced while the agent ran (another directory is at its path now); "
           "nothing is written until the one it opened is back, and the store at the path "
           "is not opened in its place";
    return false;
  }
  return true;
}

bool RocksStoreImpl::Recover() {
  std::string why;
  {
    std::shared_lock<std::shared_mutex> peek(db_mu_);
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!failed_) {
      if (errors_->raised.load(std::memory_order_acquire)) {
        MarkFailedLocked("RocksDB reported a background error (a flush or compaction failed)");
      } else if (std::string wal = wal_->failure(); !wal.empty()) {
        MarkFailedLocked(wal);
      } else if (h_.db != nullptr && !h_.read_only) {
        return true;  // nothing failed
      } else {
        MarkFailedLocked(reopen_error_);
      }
    }
    why = failure_;
  }
  std::unique_lock<std::shared_mutex> exclusive(db_mu_);
  // Closed first: a flush running until then may have synced closed WAL
  // files and written their records into tables, which makes them durable
  // (WalFiles reports it); once closed, nothing of this generation changes.
  CloseDb(&h_);
  CommitRange range;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    // No sync is in flight (this is the sync thread) and nothing writes:
    // what is durable now is all that will ever be of this generation.
    range = CommitRange{commit_->durable(), last_commit_};
  }
  std::unique_lock<std::mutex> recovery(recovery_mu_);
  if (failed_attempts_ == 0) {
    failed_at_ = std::chrono::steady_clock::now();
    Log(true, "store: writes stopped after a storage error (" + why +
                  "); reopening the store; writes made since the last sync (commits " +
                  std::to_string(range.after + 1) + " to " + std::to_string(range.through) + ", " +
                  std::to_string(range.through - range.after) +
                  ") are voided and answered storage_error");
  }
  last_failure_ = why;
  if (range.through > range.after &&
      std::find(voids_.begin(), voids_.end(), range) == voids_.end()) {
    voids_.push_back(range);
    voids_durable_ = false;
    lost_writes_ += range.through - range.after;
  }
  // The writes that were not durable are voided before anyone is told so:
  // once the guard holds the void, no replay (this reopen, or the next
  // start if the process dies first) brings them back.
  if (!voids_.empty() && !voids_durable_ && guard_) {
    if (guard_->SetVoids(voids_, range.through + 1).ok()) {
      voids_durable_ = true;
      recovery.unlock();
      for (const CommitRange& v : voids_) commit_->Fail(v);
      recovery.lock();
    }
  }
  const std::vector<CommitRange> voids = voids_;
  ++recovery_started_;
  recovery.unlock();

  bool recovered = false;
  wal_->Reset();  // the reopen writes fresh WAL files
  next_commit_.store(last_commit_ + 1);
  std::string moved;
  OpenOutcome outcome;
  Status s;
  if (!SameDirectory(&moved)) {
    s = Status::StorageError(moved);
  } else {
    OpenRequest request;
    request.voids = voids;
    s = OpenDb(options_, env_.get(), errors_, request, &guard_, &h_, &outcome);
    if (s.ok() && outcome.identity != identity_) {
      CloseDb(&h_);
      s = Status::StorageError("the store at " + options_.path +
                               " is not the one this agent opened (RocksDB identity " +
                               outcome.identity + ", not " + identity_ + "): not using it");
    }
  }
  if (s.ok()) {
    // Everything the reopen replayed is durable (recovery flushed it), and
    // the voided writes are gone for good with the WAL that held them.
    for (const CommitRange& v : voids) commit_->Fail(v);
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      last_commit_ = std::max(last_commit_, outcome.next_commit - 1);
      next_commit_.store(last_commit_ + 1);
      commit_->MarkDurable(last_commit_);
      visible_commit_.store(range.through > range.after ? range.after : last_commit_);
      failed_ = false;
      failure_.clear();
      failed_flag_.store(false, std::memory_order_release);
    }
    errors_->raised.store(false, std::memory_order_release);
    durable_seq_.store(h_.db->GetLatestSequenceNumber());
    if (guard_) guard_->Acked(durable_seq_.load());
    reopen_error_.clear();
    recovered = true;
    if (!outcome.notice.empty()) Log(outcome.accepted_loss > 0, "store: " + outcome.notice);
  } else {
    reopen_error_ = s.message();
    // Reads go on from what is durable (the voids skipped), when the
    // directory is still this store's.
    if (moved.empty()) OpenDbReadOnly(options_, env_.get(), voids, &h_);
    visible_commit_.store(range.after);
  }
  const std::string reopen_error = reopen_error_;
  const bool readable = h_.db != nullptr;
  exclusive.unlock();

  recovery.lock();
  ++recovery_attempts_;
  ++failed_attempts_;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - failed_at_);
  if (recovered) {
    ++generations_;
    voids_.clear();
    voids_durable_ = false;
    Log(false, "store: reopened, writes resume (" + std::to_string(took.count()) + " ms after " +
                   "the storage error, " + std::to_string(failed_attempts_) + " attempts)");
    failed_attempts_ = 0;
  } else if (failed_attempts_ == 1 || failed_attempts_ % 50 == 0) {
    Log(true, "store: reopen failed (attempt " + std::to_string(failed_attempts_) + ", " +
                  std::to_string(took.count()) + " ms after the error; retrying): " + reopen_error +
                  (readable ? "; reads go on, read-only" : ""));
  }
  recovery.unlock();
  recovered_cv_.notify_all();
  return recovered;
}

std::optional<StoreHealth> RocksStoreImpl::ReadHealth() const {
  StoreHealth health;
  health.writable = !failed_flag_.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(recovery_mu_);
  health.generations = generations_;
  health.lost_writes = lost_writes_;
  health.failure = last_failure_;
  health.wal_loss_accepted = wal_loss_accepted_;
  return health;
}

std::optional<uint64_t> RocksStoreImpl::ApproximateSizeBytes() {
  Entered entered(this);
  if (!Enter(Access::kRead, &entered).ok()) return 0;
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
  Entered entered(this);
  Status s = Enter(Access::kWrite, &entered);
  if (!s.ok()) return s;
  return FlushLocked();
}

Status RocksStoreImpl::FlushLocked() {
  // Under write_mu_: a flush switches the memtable, which writes the WAL
  // writer's buffer (Commit says why nothing else may then write).
  std::lock_guard<std::mutex> lock(write_mu_);
  if (failed_) return Status::StorageError("flush: the store is recovering (" + failure_ + ")");
  // The WAL first (as the group commit does it, its buffer written out),
  // so that nothing in the memtables is less durable than the tables being
  // written: a flush of several column families is not atomic.
  std::string error;
  if (BufferedWal(options_)) {
    const rocksdb::Status written = h_.db->FlushWAL(/*sync=*/false);
    if (!written.ok()) error = "writing the WAL buffer: " + written.ToString();
  }
  if (error.empty()) error = wal_->SyncAll();
  if (error.empty()) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    rocksdb::Status rs = h_.db->Flush(fo, h_.all);
    if (!rs.ok()) error = rs.ToString();
  }
  if (!error.empty()) {
    MarkFailedLocked("flush: " + error);
    return Status::StorageError("flush: " + error);
  }
  return Status::Ok();
}

Status RocksStoreImpl::Checkpoint(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("checkpoint directory is empty");
  Entered entered(this);
  Status s = Enter(Access::kRead, &entered);
  if (!s.ok()) return s;
  if (h_.db->GetEnv()->FileExists(dir).ok()) {
    return Status::InvalidArgument("checkpoint directory " + dir + " already exists");
  }
  {
    // A checkpoint flushes the memtables: under write_mu_ like every write
    // of the WAL writer's buffer.
    std::lock_guard<std::mutex> lock(write_mu_);
    if (failed_) {
      return Status::StorageError("checkpoint: the store is recovering (" + failure_ + ")");
    }
    rocksdb::Checkpoint* raw = nullptr;
    rocksdb::Status rs = rocksdb::Checkpoint::Create(h_.db, &raw);
    if (!rs.ok()) return FromRocks(rs, "checkpoint");
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    rs = checkpoint->CreateCheckpoint(dir);
    if (!rs.ok()) {
      if (errors_->raised.load(std::memory_order_acquire) || !wal_->failure().empty()) {
        MarkFailedLocked("checkpoint: " + rs.ToString());
      }
      return FromRocks(rs, "checkpoint into " + dir);
    }
  }
  rocksdb::Status rs;
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
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s.message();
  std::string text;
  h_.db->GetProperty("rocksdb.dbstats", &text);
  const GroupCommitCounts c = AllCommitCounts();
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

std::optional<GroupCommitCounts> RocksStoreImpl::CommitCounts() const {
  // Without sync there is no group commit to report.
  if (!options_.sync) return std::nullopt;
  return AllCommitCounts();
}

GroupCommitCounts RocksStoreImpl::AllCommitCounts() const {
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

std::optional<StoreSpace> RocksStoreImpl::ReadSpace() const {
  DiskSpace space;
  if (!ReadDiskSpace(options_.path, &space)) return std::nullopt;
  StoreSpace out;
  out.free_bytes = space.free;
  out.reserve_bytes =
      options_.min_free_bytes == 0 ? 0 : FreeSpaceReserve(options_.min_free_bytes, space.total);
  return out;
}

Status RocksStoreImpl::CompactAll() {
  Entered entered(this);
  Status s = Enter(Access::kWrite, &entered);
  if (!s.ok()) return s;
  s = FlushLocked();
  if (!s.ok()) return s;
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  std::lock_guard<std::mutex> lock(write_mu_);  // may flush memtables first
  for (auto* handle : h_.all) {
    rocksdb::Status rs = h_.db->CompactRange(co, handle, nullptr, nullptr);
    if (!rs.ok()) {
      MarkFailedLocked("compact " + handle->GetName() + ": " + rs.ToString());
      return Status::StorageError("compact " + handle->GetName() + ": " + rs.ToString());
    }
  }
  return Status::Ok();
}

Status RocksStoreImpl::BulkLoad(const std::vector<IntentRecord>& records) {
  Entered entered(this);
  Status s = Enter(Access::kWrite, &entered);
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
  return Commit(&batch);  // unsynced: the group commit syncs it with the next writes
}

}  // namespace intentd::store
