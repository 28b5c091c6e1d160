// Zero-filled files that new WAL files are made from (RocksOptions::wal_spares).
//
// Kept rather than RocksDB's own WAL file creation because they pass the
// power-loss torture (ctest -R powerloss.torture.spares_on) and, where the
// disk's syncs bound the agent, they earn their lines: at 16 connections a
// median 7,533 against 6,202 begin+complete actions/s off, even at 64
// (bench/RESULTS.md, "WAL spares").
//
// Why: the group commit makes the WAL durable with fdatasync (group_commit.h).
// When the WAL grows, each fdatasync must also make the new file size durable:
// a second synchronous write per sync (on this machine's ext4, which has no
// journal, the inode's block, `ext4_fsync_nojournal` in a profile; on a
// journaled ext4, a journal commit).
// A WAL file renamed from a spare already has its blocks written and its size
// set, so the fdatasync of an append into it writes the data alone. A loop
// of 8 KiB records, write + fdatasync, on an ext4 like the CI's: 1,756 /
// 2,090 / 1,788 syncs/s appending, 2,486 / 3,389 / 3,231 rewriting a written
// file; blocks only reserved with fallocate (unwritten extents) gave 1,810 /
// 1,912 / 2,004, so the zeros must really be written.
//
// What RocksDB reads of it: the WAL writer writes from offset 0 (RocksDB's
// PosixFileSystem::ReuseWritableFile opens without truncating), and a closed
// WAL is truncated to what was written (PosixWritableFile::Close trims the
// space preallocated for the WAL; one closed before any write keeps its
// zeros, an empty WAL to the reader). A WAL that was open when the process died
// ends in zeros, which RocksDB's log reader skips as the preallocated tail it
// knows (a zero-length record of type 0) without reporting corruption, so the
// point-in-time recovery replays every record before them and the next WAL
// files too. RocksDB's own recycle_log_file_num is not used: RocksDB 7.8
// turns it off under point-in-time recovery (old records are left in a
// recycled file), and tried with the one recovery mode it allows
// (kSkipAnyCorruptedRecords) and our WAL handling, the flush thread crashed
// in DBImpl::MarkLogsSynced within seconds.
//
// The one difference from a growing file, after a power loss (not a process
// crash): the pages written after the last fdatasync may reach the disk in
// any order, and a page that did not leaves zeros that the reader skips, so
// a replay could find a later unacknowledged record without an earlier one.
// The commit numbers stamped in every record (commit_stamp.h) show that gap,
// and every record written while it was unsynced says so: the open drops
// everything after it (open.cc, JudgeWal), leaving a prefix of the writes,
// which is all a power cut may leave.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace rocksdb {
class FileSystem;
}

namespace intentd::store {

class WalSpares {
 public:
  // Spares are written through `fs` in `dir` (the WAL directory), and only
  // while the file system keeps, besides the spare, the free space the store
  // reserves (FreeSpaceReserve of RocksOptions::min_free_bytes).
  WalSpares(std::shared_ptr<rocksdb::FileSystem> fs, std::string dir, int64_t min_free_bytes);
  // Stops the thread and deletes the spare not taken.
  ~WalSpares();
  WalSpares(const WalSpares&) = delete;
  WalSpares& operator=(const WalSpares&) = delete;

  // Deletes the spares an earlier process left in `dir` (whole or half
  // written): they are remade, not trusted.
  static void RemoveLeftovers(rocksdb::FileSystem* fs, const std::string& dir);
  // Whether `name` (a file name, no directory) is one of ours.
  static bool IsSpareName(const std::string& name);

  // Starts the thread that keeps one spare ready.
  void Start();
  // The path of a ready spare, now the caller's to rename, or "" when none is
  // ready (the caller creates an empty file). Never waits for I/O.
  std::string Take();
  // A WAL file was closed at `bytes`: spares are sized to the largest of the
  // last few (the WAL switches when a memtable is flushed, so its size
  // follows the memtables' and the load, not a setting of ours). No spare is
  // made before the first WAL file closed: a store that never switches WAL
  // files (most short-lived ones) writes none.
  void WalClosed(uint64_t bytes);
  static constexpr uint64_t kMaxBytes = 256u << 20;

  struct Counts {
    uint64_t made = 0;    // spares written and synced
    uint64_t taken = 0;   // WAL files made from one
    uint64_t missed = 0;  // WAL files created while none was ready
    uint64_t failed = 0;  // spares that could not be written (space, I/O)
  };
  Counts counts() const;
  // The size the next spare will have; 0 before a WAL file closed.
  uint64_t next_bytes() const;

 private:
  void Run();
  uint64_t NextBytesLocked() const;  // mu_ held
  // Writes and syncs one spare of `bytes`; its path, or "" on failure.
  std::string Make(uint64_t bytes, uint64_t serial);
  bool SpaceFor(uint64_t bytes) const;

  const std::shared_ptr<rocksdb::FileSystem> fs_;
  const std::string dir_;
  const int64_t min_free_bytes_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};  // written under mu_; read without it between writes
  std::string ready_;              // guarded by mu_; "" when none
  uint64_t recent_[4] = {};        // guarded by mu_; sizes of the last closed WALs
  int recent_next_ = 0;            // guarded by mu_
  Counts counts_;                  // guarded by mu_
  std::thread thread_;
};

}  // namespace intentd::store
