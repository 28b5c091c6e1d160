#include "store/rocks/wal_files.h"

#include <rocksdb/file_system.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <utility>

namespace intentd::store {
namespace {

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : WithoutTrailingSlashes(path.substr(0, slash));
}

// The same directory however it is spelled (relative, "a//b", "a/./b",
// symlinks). Only when a file is created, so the system calls do not matter.
bool SameDir(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec1, ec2;
  const auto ca = std::filesystem::weakly_canonical(a, ec1);
  const auto cb = std::filesystem::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && ca == cb;
}

// RocksDB names its WAL files NNNNNN.log (the info log is LOG).
bool IsWalName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  constexpr std::string_view kSuffix = ".log";
  if (name.size() <= kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return false;
  }
  return std::all_of(name.begin(), name.end() - kSuffix.size(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

// What the tracker and a tracked file share. The file's target is used by
// SyncAll only under `mu` and while `open`, which the file clears (under
// `mu`) before the target is closed or destroyed; `open` is also read
// without `mu`, to drop closed files from the list.
struct WalFiles::File {
  explicit File(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::mutex mu;
  rocksdb::FSWritableFile* target = nullptr;  // guarded by mu
  std::atomic<bool> open{true};               // written under mu
  std::atomic<bool> dirty{false};             // appended to since the last sync
  std::atomic<bool> failed{false};            // an append or sync of it failed
  uint64_t first_commit = 0;                  // the first commit number it holds (set at creation)
  // The last commit number it holds: set (under the tracker's mu_) when the
  // next WAL file is created; 0 while it is the newest.
  uint64_t last_commit = 0;
};

namespace {

class TrackedWal : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedWal(std::unique_ptr<rocksdb::FSWritableFile> file, std::shared_ptr<WalFiles::File> state,
             WalFiles* tracker)
      : FSWritableFileOwnerWrapper(std::move(file)), state_(std::move(state)), tracker_(tracker) {
    state_->target = target();
  }
  ~TrackedWal() override { Closed(/*sync=*/false, rocksdb::IOOptions(), nullptr); }

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    return Wrote(FSWritableFileOwnerWrapper::Append(data, options, dbg), "append");
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    return Wrote(FSWritableFileOwnerWrapper::Append(data, options, info, dbg), "append");
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    return Wrote(FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, dbg),
                 "append");
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    return Wrote(FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, info, dbg),
                 "append");
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    return Wrote(FSWritableFileOwnerWrapper::Truncate(size, options, dbg), "truncate");
  }
  // RocksDB's own syncs (sync writes, closed logs before a flush). A failed
  // fsync may drop the dirty pages and report it once: remember it.
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    return SyncedIfOk(Checked(FSWritableFileOwnerWrapper::Sync(options, dbg), "sync"));
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return SyncedIfOk(Checked(FSWritableFileOwnerWrapper::Fsync(options, dbg), "sync"));
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    tracker_->Closed(target()->GetFileSize(options, dbg));
    // What SyncAll has not synced yet is synced here: once closed, the file
    // is out of its reach.
    rocksdb::IOStatus synced = Closed(/*sync=*/true, options, dbg);
    rocksdb::IOStatus closed = Checked(FSWritableFileOwnerWrapper::Close(options, dbg), "close");
    if (synced.ok()) tracker_->Synced(state_.get());
    return synced.ok() ? closed : synced;
  }

 private:
  rocksdb::IOStatus SyncedIfOk(rocksdb::IOStatus s) {
    if (s.ok()) {
      state_->dirty.store(false, std::memory_order_release);
      tracker_->Synced(state_.get());
    }
    return s;
  }
  rocksdb::IOStatus Wrote(rocksdb::IOStatus s, const char* what) {
    if (s.ok()) state_->dirty.store(true, std::memory_order_release);
    return Checked(std::move(s), what);
  }
  rocksdb::IOStatus Checked(rocksdb::IOStatus s, const char* what) {
    if (!s.ok()) {
      state_->failed.store(true, std::memory_order_release);
      tracker_->Failed(std::string("WAL ") + what + " of " + state_->name +
                       " failed: " + s.ToString());
    }
    return s;
  }
  // Out of SyncAll's reach from here on.
  rocksdb::IOStatus Closed(bool sync, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) {
    std::lock_guard<std::mutex> lock(state_->mu);
    rocksdb::IOStatus s;
    if (sync && state_->dirty.exchange(false)) s = Checked(target()->Sync(options, dbg), "sync");
    state_->open = false;
    state_->target = nullptr;
    return s;
  }

  std::shared_ptr<WalFiles::File> state_;
  WalFiles* tracker_;
};

class TrackingFileSystem : public rocksdb::FileSystemWrapper {
 public:
  TrackingFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target, WalFiles* tracker)
      : FileSystemWrapper(target), tracker_(tracker) {}

  const char* Name() const override { return "intentd.WalTrackingFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (tracker_->IsWal(name)) {
      if (const std::string spare = tracker_->TakeSpare(); !spare.empty()) {
        // Renamed to `name` and written from its start (wal_spares.h).
        rocksdb::IOStatus s = target()->ReuseWritableFile(name, spare, options, result, dbg);
        if (s.ok()) return Wrap(name, std::move(s), result);
        target()->DeleteFile(spare, rocksdb::IOOptions(), dbg).PermitUncheckedError();
      }
    }
    return Wrap(name, target()->NewWritableFile(name, options, result, dbg), result);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override {
    return Wrap(name, target()->ReopenWritableFile(name, options, result, dbg), result);
  }
  rocksdb::IOStatus ReuseWritableFile(const std::string& name, const std::string& old_name,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override {
    return Wrap(name, target()->ReuseWritableFile(name, old_name, options, result, dbg), result);
  }

 private:
  rocksdb::IOStatus Wrap(const std::string& name, rocksdb::IOStatus s,
                         std::unique_ptr<rocksdb::FSWritableFile>* result) {
    if (!s.ok() || !tracker_->IsWal(name)) return s;
    auto state = std::make_shared<WalFiles::File>(name);
    *result = std::make_unique<TrackedWal>(std::move(*result), state, tracker_);
    tracker_->Opened(std::move(state));
    return s;
  }
  WalFiles* tracker_;
};

}  // namespace

std::shared_ptr<rocksdb::FileSystem> WalFiles::Track(std::shared_ptr<rocksdb::FileSystem> base,
                                                     const std::string& wal_dir) {
  base_ = base;
  wal_dir_ = WithoutTrailingSlashes(wal_dir);
  return std::make_shared<TrackingFileSystem>(std::move(base), this);
}

void WalFiles::SetUpSpares(bool use, int64_t min_free_bytes) {
  if (spares_) return;
  WalSpares::RemoveLeftovers(base_.get(), wal_dir_);
  if (!use) return;
  spares_ = std::make_unique<WalSpares>(base_, wal_dir_, min_free_bytes);
  spares_->Start();
  spares_in_use_.store(spares_.get(), std::memory_order_release);
}

WalSpares::Counts WalFiles::spare_counts() const {
  WalSpares* spares = spares_in_use_.load(std::memory_order_acquire);
  return spares ? spares->counts() : WalSpares::Counts{};
}

std::string WalFiles::TakeSpare() {
  WalSpares* spares = spares_in_use_.load(std::memory_order_acquire);
  return spares ? spares->Take() : std::string();
}

void WalFiles::Closed(uint64_t bytes) {
  if (WalSpares* spares = spares_in_use_.load(std::memory_order_acquire)) spares->WalClosed(bytes);
}

bool WalFiles::IsWal(const std::string& path) const {
  return IsWalName(path) && SameDir(DirOf(path), wal_dir_);
}

void WalFiles::SetCommitHooks(std::function<uint64_t()> next_commit,
                              std::function<void(uint64_t through)> durable) {
  std::lock_guard<std::mutex> lock(mu_);
  next_commit_ = std::move(next_commit);
  durable_ = std::move(durable);
}

void WalFiles::Opened(std::shared_ptr<File> file) {
  std::lock_guard<std::mutex> lock(mu_);
  // Created by the write that will append to it (a memtable switch, under
  // the store's write lock) or by a flush or open, between writes.
  file->first_commit = next_commit_ ? next_commit_() : 0;
  if (!files_.empty() && files_.back()->last_commit == 0 && file->first_commit > 0) {
    files_.back()->last_commit = file->first_commit - 1;
  }
  files_.push_back(std::move(file));
  dir_unsynced_ = true;
}

void WalFiles::Synced(const File* file) {
  uint64_t through = 0;
  std::function<void(uint64_t)> durable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!durable_) return;
    durable = durable_;
    for (const auto& f : files_) {
      // A file whose append or sync failed may have lost pages that a later
      // sync does not write again (a failed fsync marks them clean): nothing
      // from it on is known durable this way.
      if (f->failed.load(std::memory_order_acquire)) return;
      if (f.get() == file) {
        through = f->last_commit;
        break;
      }
      // An older file with appends not synced yet: not a prefix.
      if (f->open.load() && f->dirty.load(std::memory_order_acquire)) return;
    }
  }
  if (through > 0) durable(through);
}

void WalFiles::Failed(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.empty()) failure_ = what;
  failed_.store(true, std::memory_order_release);
}

std::string WalFiles::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return "";
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

bool WalFiles::TracksAny() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !files_.empty();
}

void WalFiles::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  failure_.clear();
  failed_.store(false, std::memory_order_release);
}

std::string WalFiles::SyncAll() {
  // Checked before anything is synced: the appends that returned before
  // this call precede any failure seen after it.
  if (std::string error = failure(); !error.empty()) return error;
  // Lock order: a file's mu, then mu_ (a closing file reports a failed sync
  // under its mu); never the other way: mu_ is released before the syncs.
  std::vector<std::shared_ptr<File>> files;
  bool sync_dir = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Close synced what was left in them.
    files_.erase(std::remove_if(files_.begin(), files_.end(),
                                [](const std::shared_ptr<File>& f) { return !f->open.load(); }),
                 files_.end());
    files = files_;
    sync_dir = std::exchange(dir_unsynced_, false);
  }
  // A failure is final until Reset (failure() above): nothing to undo here.
  const rocksdb::IOOptions io;
  for (const auto& f : files) {
    std::lock_guard<std::mutex> file_lock(f->mu);
    if (!f->open.load()) continue;  // closed meanwhile
    // Cleared before the sync: an append during it marks the file again.
    if (!f->dirty.exchange(false, std::memory_order_acq_rel)) continue;
    if (rocksdb::IOStatus s = f->target->Sync(io, nullptr); !s.ok()) {
      Failed("WAL sync of " + f->name + " failed: " + s.ToString());
      return failure();
    }
  }
  if (sync_dir) {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    rocksdb::IOStatus s = base_->NewDirectory(wal_dir_, io, &dir, nullptr);
    if (s.ok()) s = dir->Fsync(io, nullptr);
    if (!s.ok()) {
      Failed("fsync of the WAL directory " + wal_dir_ + " failed: " + s.ToString());
      return failure();
    }
  }
  return "";
}

}  // namespace intentd::store
