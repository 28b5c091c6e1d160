#include "store/rocks/wal_spares.h"

#include <pthread.h>
#include <rocksdb/file_system.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "store/rocks/options.h"

namespace intentd::store {
namespace {

constexpr char kPrefix[] = "intentd-wal-spare.";
constexpr char kTmpSuffix[] = ".tmp";
constexpr uint64_t kSizeStep = 1u << 20;  // spares are whole MiB
// Spares are written 256 KiB at a time, 64 MiB/s at most (a 20 MiB spare in
// ~0.3 s). Written at once, a spare delayed the WAL syncs queued behind it:
// intentd_loadgen --connections 64, eight runs alternated with the code
// without spares, p99.9 latency 54-61 ms against 14-22 ms; paced, 15-18 ms
// and, in another window, 12-20 ms against 13-36 ms.
constexpr uint64_t kWriteChunk = 256u << 10;
constexpr auto kWritePause = std::chrono::milliseconds(4);
// After a spare could not be made (space, I/O), the next try waits this long.
constexpr auto kRetry = std::chrono::seconds(1);

uint64_t RoundUpToChunk(uint64_t n) { return (n + kSizeStep - 1) / kSizeStep * kSizeStep; }

}  // namespace

WalSpares::WalSpares(std::shared_ptr<rocksdb::FileSystem> fs, std::string dir,
                     int64_t min_free_bytes)
    : fs_(std::move(fs)), dir_(std::move(dir)), min_free_bytes_(min_free_bytes) {}

WalSpares::~WalSpares() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!ready_.empty())
    fs_->DeleteFile(ready_, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
}

bool WalSpares::IsSpareName(const std::string& name) { return name.rfind(kPrefix, 0) == 0; }

void WalSpares::RemoveLeftovers(rocksdb::FileSystem* fs, const std::string& dir) {
  std::vector<std::string> children;
  if (!fs->GetChildren(dir, rocksdb::IOOptions(), &children, nullptr).ok()) return;
  for (const std::string& name : children) {
    if (!IsSpareName(name)) continue;
    fs->DeleteFile(dir + "/" + name, rocksdb::IOOptions(), nullptr).PermitUncheckedError();
  }
}

void WalSpares::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "intentd-spares");  // in top and the CPU reports
    Run();
  });
}

std::string WalSpares::Take() {
  std::string spare;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spare = std::exchange(ready_, std::string());
    ++(spare.empty() ? counts_.missed : counts_.taken);
  }
  wake_.notify_all();
  return spare;
}

void WalSpares::WalClosed(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    recent_[recent_next_] = std::max<uint64_t>(bytes, 1);
    recent_next_ = (recent_next_ + 1) % 4;
  }
  wake_.notify_all();
}

WalSpares::Counts WalSpares::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

uint64_t WalSpares::next_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return NextBytesLocked();
}

uint64_t WalSpares::NextBytesLocked() const {
  const uint64_t largest = *std::max_element(std::begin(recent_), std::end(recent_));
  if (largest == 0) return 0;
  // An eighth more than the largest, so that the usual WAL ends inside it.
  return std::clamp<uint64_t>(RoundUpToChunk(largest + largest / 8), kSizeStep, kMaxBytes);
}

void WalSpares::Run() {
  uint64_t serial = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const uint64_t bytes = NextBytesLocked();
    if (!ready_.empty() || bytes == 0) {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    std::string path = SpaceFor(bytes) ? Make(bytes, serial++) : std::string();
    lock.lock();
    if (path.empty()) {
      if (!stop_) ++counts_.failed;
      wake_.wait_for(lock, kRetry, [this] { return stop_.load(); });
      continue;
    }
    ready_ = std::move(path);
    ++counts_.made;
  }
}

bool WalSpares::SpaceFor(uint64_t bytes) const {
  DiskSpace space;
  return ReadDiskSpace(dir_, &space) &&
         space.free >= FreeSpaceReserve(min_free_bytes_, space.total) + bytes;
}

std::string WalSpares::Make(uint64_t bytes, uint64_t serial) {
  const rocksdb::IOOptions io;
  const std::string ready = dir_ + "/" + kPrefix + std::to_string(serial);
  const std::string tmp = ready + kTmpSuffix;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  rocksdb::IOStatus s = fs_->NewWritableFile(tmp, rocksdb::FileOptions(), &file, nullptr);
  if (s.ok()) {
    const std::string zeros(kWriteChunk, '\0');
    for (uint64_t written = 0; s.ok() && written < bytes; written += kWriteChunk) {
      if (stop_) s = rocksdb::IOStatus::Aborted("closing");
      if (s.ok()) s = file->Append(zeros, io, nullptr);
      // Each chunk's write-back is started at once and the next waits: the
      // WAL's syncs queue behind one chunk at most, not a whole spare.
      if (s.ok()) s = file->RangeSync(written, kWriteChunk, io, nullptr);
      if (s.ok() && written + kWriteChunk < bytes) std::this_thread::sleep_for(kWritePause);
    }
    // The size too (fsync, not fdatasync): a spare is used whole.
    if (s.ok()) s = file->Fsync(io, nullptr);
    rocksdb::IOStatus closed = file->Close(io, nullptr);
    if (s.ok()) s = closed;
  }
  if (s.ok()) s = fs_->RenameFile(tmp, ready, io, nullptr);
  if (!s.ok()) {
    fs_->DeleteFile(tmp, io, nullptr).PermitUncheckedError();
    return "";
  }
  return ready;
}

}  // namespace intentd::store
