// The store's guard file, `intentd-wal-guard` in its directory: what any
// replay of the WAL must respect (internal to the RocksDB store).
//
//  - acked_seq: a RocksDB sequence number through which every write was
//    durable (synced) before any of them was acknowledged. It is a lower
//    bound, written behind the syncs (at most every kAckedInterval): an open
//    whose replay ends below it would drop acknowledged writes, and is
//    refused (open.cc). It catches damage at the very end of the WAL, which
//    no later record can reveal (commit_stamp.h catches the rest).
//  - voids: commit ranges (commit_stamp.h) whose writes were answered
//    storage_error, written before that answer is sent: every replay skips
//    them, so that a write reported as not made never takes effect, also
//    when the process dies before the store reopened. They are dropped once
//    an open has replayed and flushed the WAL that held them.
//  - next_commit: commit numbers of this store start at or above it (above
//    every void), so that a void never names a later write.
//  - identity: RocksDB's DB identity of the store it guards; a guard of
//    another store (a directory copied over) is ignored.
//
// Two 512-byte slots, written alternately with a sequence number and a
// checksum (pwrite, then fdatasync): a write torn by a power cut leaves the
// other slot, which holds everything the store acted upon (nothing is
// answered before the write's sync returned). Written through the store's
// rocksdb::FileSystem, so that injected faults reach it too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/rocks/commit_stamp.h"
#include "store/status.h"

namespace rocksdb {
class FileSystem;
class FSRandomRWFile;
}  // namespace rocksdb

namespace intentd::store {

inline constexpr char kWalGuardFile[] = "intentd-wal-guard";

class WalGuard {
 public:
  struct State {
    std::string identity;
    uint64_t acked_seq = 0;
    uint64_t next_commit = 1;
    std::vector<CommitRange> voids;
  };
  static constexpr size_t kMaxVoids = 8;
  static constexpr std::chrono::milliseconds kAckedInterval{10};

  // Reads the guard of `dir`. *found false (and Ok) when there is none;
  // kCorruption when neither slot can be read.
  static Status Load(rocksdb::FileSystem* fs, const std::string& dir, State* state, bool* found);

  // Opens the guard of `dir` for writing, creating it (synced with the
  // directory) when absent, and writes `state` into it.
  static Status Open(std::shared_ptr<rocksdb::FileSystem> fs, const std::string& dir,
                     const State& state, std::unique_ptr<WalGuard>* guard);
  ~WalGuard();  // stops the acked writer, writing its last value
  WalGuard(const WalGuard&) = delete;
  WalGuard& operator=(const WalGuard&) = delete;

  // Writes the voids (and next_commit) now; Ok once durable. Thread-safe.
  Status SetVoids(const std::vector<CommitRange>& voids, uint64_t next_commit);
  // Raises acked_seq; a background thread writes it at most every
  // kAckedInterval. Thread-safe, never blocks on the disk.
  void Acked(uint64_t seq);
  // Writes the acked value now (a clean close). Ok once durable.
  Status FlushAcked();
  State state() const;

 private:
  WalGuard(std::shared_ptr<rocksdb::FileSystem> fs, std::string path,
           std::unique_ptr<rocksdb::FSRandomRWFile> file, State state, uint64_t slot_seq);
  Status WriteLocked();  // mu_ held
  void AckedLoop();

  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::string path_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<rocksdb::FSRandomRWFile> file_;  // guarded by mu_
  State state_;                                    // guarded by mu_
  uint64_t written_acked_ = 0;                     // guarded by mu_
  uint64_t slot_seq_ = 0;                          // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_
  std::thread acked_thread_;
};

}  // namespace intentd::store
