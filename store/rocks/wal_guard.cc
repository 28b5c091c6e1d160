#include "store/rocks/wal_guard.h"

#include <rocksdb/file_system.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace intentd::store {
namespace {

constexpr size_t kSlotBytes = 512;
constexpr char kHeader[] = "intentd-wal-guard 1\n";

// FNV-1a, 64 bits: detects a torn or garbled slot (not an adversary).
uint64_t Checksum(std::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A slot: text lines, then "sum HEX\n", padded with newlines to kSlotBytes.
std::string EncodeSlot(const WalGuard::State& state, uint64_t slot_seq) {
  std::ostringstream body;
  body << kHeader << "seq " << slot_seq << "\n"
       << "identity " << state.identity << "\n"
       << "acked " << state.acked_seq << "\n"
       << "next " << state.next_commit << "\n";
  for (const CommitRange& r : state.voids) body << "void " << r.after << " " << r.through << "\n";
  std::string text = body.str();
  char sum[40];
  std::snprintf(sum, sizeof(sum), "sum %016" PRIx64 "\n", Checksum(text));
  text += sum;
  text.resize(kSlotBytes, '\n');
  return text;
}

// false: not a valid slot.
bool DecodeSlot(std::string_view slot, WalGuard::State* state, uint64_t* slot_seq) {
  const size_t sum_at = slot.find("\nsum ");
  if (slot.substr(0, sizeof(kHeader) - 1) != kHeader || sum_at == std::string_view::npos) {
    return false;
  }
  const std::string_view text = slot.substr(0, sum_at + 1);
  uint64_t sum = 0;
  if (std::sscanf(std::string(slot.substr(sum_at + 5, 16)).c_str(), "%16" SCNx64, &sum) != 1 ||
      sum != Checksum(text)) {
    return false;
  }
  WalGuard::State out;
  bool have_seq = false;
  std::istringstream lines{std::string(text.substr(sizeof(kHeader) - 1))};
  std::string word;
  while (lines >> word) {
    if (word == "seq") {
      have_seq = static_cast<bool>(lines >> *slot_seq);
    } else if (word == "identity") {
      std::getline(lines, out.identity);
      if (!out.identity.empty() && out.identity[0] == ' ') out.identity.erase(0, 1);
    } else if (word == "acked") {
      lines >> out.acked_seq;
    } else if (word == "next") {
      lines >> out.next_commit;
    } else if (word == "void") {
      CommitRange r;
      lines >> r.after >> r.through;
      out.voids.push_back(r);
    } else {
      return false;
    }
    if (!lines && !lines.eof()) return false;
  }
  if (!have_seq) return false;
  *state = std::move(out);
  return true;
}

std::string GuardPath(const std::string& dir) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path + "/" + kWalGuardFile;
}

Status IoError(const std::string& what, const rocksdb::IOStatus& s) {
  return Status::StorageError(what + ": " + s.ToString());
}

// Reads both slots; *state from the valid one with the highest sequence.
Status LoadSlots(rocksdb::FileSystem* fs, const std::string& dir, WalGuard::State* state,
                 uint64_t* slot_seq, bool* found) {
  *found = false;
  const std::string path = GuardPath(dir);
  const rocksdb::IOOptions io;
  if (fs->FileExists(path, io, nullptr).IsNotFound()) return Status::Ok();
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  rocksdb::IOStatus s = fs->NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return IoError("open " + path, s);
  std::string scratch(2 * kSlotBytes, '\0');
  rocksdb::Slice data;
  s = file->Read(0, scratch.size(), io, &data, scratch.data(), nullptr);
  if (!s.ok()) return IoError("read " + path, s);
  const std::string_view all(data.data(), data.size());
  bool any = false;
  uint64_t best_seq = 0;
  for (size_t slot = 0; slot < 2 && (slot + 1) * kSlotBytes <= all.size(); ++slot) {
    WalGuard::State candidate;
    uint64_t seq = 0;
    if (DecodeSlot(all.substr(slot * kSlotBytes, kSlotBytes), &candidate, &seq) &&
        (!any || seq > best_seq)) {
      *state = std::move(candidate);
      best_seq = seq;
      any = true;
    }
  }
  if (!any) {
    return Status::Corruption(path + " is unreadable (both of its slots are damaged)");
  }
  *slot_seq = best_seq;
  *found = true;
  return Status::Ok();
}

}  // namespace

Status WalGuard::Load(rocksdb::FileSystem* fs, const std::string& dir, State* state, bool* found) {
  uint64_t slot_seq = 0;
  return LoadSlots(fs, dir, state, &slot_seq, found);
}

Status WalGuard::Open(std::shared_ptr<rocksdb::FileSystem> fs, const std::string& dir,
                      const State& state, std::unique_ptr<WalGuard>* guard) {
  if (state.voids.size() > kMaxVoids) {
    return Status::InvalidArgument("too many voided commit ranges for the guard file");
  }
  const std::string path = GuardPath(dir);
  const rocksdb::IOOptions io;
  uint64_t slot_seq = 0;
  bool found = false;
  State existing;
  if (Status loaded = LoadSlots(fs.get(), dir, &existing, &slot_seq, &found); !loaded.ok()) {
    // Both slots damaged: written afresh below (the open decided already
    // what to make of it).
    found = false;
  }
  if (!found) {
    // Both slots written once, then the directory entry synced: from here
    // on every write overwrites blocks that exist.
    std::unique_ptr<rocksdb::FSWritableFile> created;
    rocksdb::IOStatus s = fs->NewWritableFile(path, rocksdb::FileOptions(), &created, nullptr);
    if (s.ok()) s = created->Append(EncodeSlot(state, 1) + EncodeSlot(state, 0), io, nullptr);
    if (s.ok()) s = created->Sync(io, nullptr);
    if (s.ok()) s = created->Close(io, nullptr);
    if (!s.ok()) return IoError("create " + path, s);
    std::unique_ptr<rocksdb::FSDirectory> d;
    s = fs->NewDirectory(dir, io, &d, nullptr);
    if (s.ok()) s = d->Fsync(io, nullptr);
    if (!s.ok()) return IoError("sync the directory of " + path, s);
    slot_seq = 1;
  }
  std::unique_ptr<rocksdb::FSRandomRWFile> file;
  rocksdb::IOStatus s = fs->NewRandomRWFile(path, rocksdb::FileOptions(), &file, nullptr);
  if (!s.ok()) return IoError("open " + path, s);
  guard->reset(new WalGuard(fs, path, std::move(file), state, slot_seq));
  if (found) {
    // Two writes: both slots hold `state` (the older slot may have been the
    // valid one, and a torn write of it now would leave only the other).
    std::lock_guard<std::mutex> lock((*guard)->mu_);
    Status w = (*guard)->WriteLocked();
    if (w.ok()) w = (*guard)->WriteLocked();
    if (!w.ok()) {
      guard->reset();
      return w;
    }
  }
  (*guard)->acked_thread_ = std::thread([g = guard->get()] { g->AckedLoop(); });
  return Status::Ok();
}

WalGuard::WalGuard(std::shared_ptr<rocksdb::FileSystem> fs, std::string path,
                   std::unique_ptr<rocksdb::FSRandomRWFile> file, State state, uint64_t slot_seq)
    : fs_(std::move(fs)),
      path_(std::move(path)),
      file_(std::move(file)),
      state_(std::move(state)),
      written_acked_(state_.acked_seq),
      slot_seq_(slot_seq) {}

WalGuard::~WalGuard() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (acked_thread_.joinable()) acked_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.acked_seq != written_acked_) (void)WriteLocked();
  if (file_) file_->Close(rocksdb::IOOptions(), nullptr).PermitUncheckedError();
}

Status WalGuard::WriteLocked() {
  const uint64_t seq = slot_seq_ + 1;
  const std::string slot = EncodeSlot(state_, seq);
  const rocksdb::IOOptions io;
  rocksdb::IOStatus s = file_->Write((seq % 2) * kSlotBytes, slot, io, nullptr);
  if (s.ok()) s = file_->Sync(io, nullptr);
  if (!s.ok()) return IoError("write " + path_, s);
  slot_seq_ = seq;
  written_acked_ = state_.acked_seq;
  return Status::Ok();
}

Status WalGuard::SetVoids(const std::vector<CommitRange>& voids, uint64_t next_commit) {
  if (voids.size() > kMaxVoids) {
    return Status::StorageError("more than " + std::to_string(kMaxVoids) +
                                " failed store generations are waiting to be reopened");
  }
  std::lock_guard<std::mutex> lock(mu_);
  state_.voids = voids;
  state_.next_commit = std::max(state_.next_commit, next_commit);
  return WriteLocked();
}

void WalGuard::Acked(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq <= state_.acked_seq) return;
    state_.acked_seq = seq;
  }
  cv_.notify_one();
}

Status WalGuard::FlushAcked() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.acked_seq == written_acked_) return Status::Ok();
  return WriteLocked();
}

WalGuard::State WalGuard::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void WalGuard::AckedLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || state_.acked_seq != written_acked_; });
    if (stopping_) return;
    // A failed write is tried again at the next change: the watermark only
    // ever lags, which costs nothing but some protection.
    (void)WriteLocked();
    cv_.wait_for(lock, kAckedInterval, [this] { return stopping_; });
  }
}

}  // namespace intentd::store
