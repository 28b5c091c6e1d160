// The WAL files of one store, tracked by a file system wrapper, so that the
// group commit (group_commit.h) makes them durable itself instead of through
// DB::SyncWAL.
//
// Kept rather than RocksDB's own WAL syncing because no public RocksDB call
// syncs the WAL without the abort described below, and the power-loss
// torture passes with it (ctest -R powerloss.torture); the one thing it
// assumes of RocksDB, the WAL files' names, is pinned against the installed
// version by WalFilesTest.TheInstalledRocksDbNamesItsWalFilesAsTheTrackerExpects
// and checked at every open (TracksAny).
//
// Why: RocksDB 7.8 as Debian builds it keeps assertions on, and its
// WritableFileWriter asserts (aborting the process) when a WAL writer that
// saw a failed append is synced with SyncWithoutFlush, which is what
// SyncWAL does. A WAL append fails when the disk fills up between the free
// space check and the write, and the sync thread runs SyncWAL concurrently
// with the writers, so no check made before SyncWAL can exclude that race.
// Syncing the files directly never touches RocksDB's writer objects: a failed
// append only marks this tracker, every later sync reports it, and the store
// recovers by reopening (RocksStoreImpl::Recover). Appends themselves reach
// RocksDB's writer only under the store's write lock, never after a failure
// (RocksStoreImpl::Commit): the same assertion guards Append.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/rocks/wal_spares.h"

namespace rocksdb {
class FileSystem;
}

namespace intentd::store {

class WalFiles {
 public:
  WalFiles() = default;
  WalFiles(const WalFiles&) = delete;
  WalFiles& operator=(const WalFiles&) = delete;

  // `base`, with every WAL file (NNNNNN.log) it opens for writing in
  // `wal_dir` tracked here; files of that name elsewhere (a checkpoint's
  // copies of the WAL) are not. The tracker must outlive the file system and
  // its files.
  std::shared_ptr<rocksdb::FileSystem> Track(std::shared_ptr<rocksdb::FileSystem> base,
                                             const std::string& wal_dir);

  // Makes every WAL append that returned before the call durable: one
  // fdatasync per WAL file appended to since its last sync, and an fsync of
  // the WAL directory when a WAL file was created since. Thread-safe; runs
  // beside appends. "" when done, else what failed (the data may not be
  // durable): failure() when set, without syncing anything.
  std::string SyncAll();

  // What made an append or a sync fail since the last Reset, "" if nothing
  // did. After a failed append the WAL may hold a torn record, and a failed
  // fsync may have dropped pages and reports that once: nothing can be
  // declared durable before a reopen.
  std::string failure() const;
  // After the store was reopened on fresh WAL files.
  void Reset();
  // Whether any WAL file is tracked (an open DB always has one: if none is,
  // the syncs would cover nothing, and the store must not open).
  bool TracksAny() const;

  // Once, after the store opened: deletes the spares an earlier process
  // left, and with `use`, makes new WAL files from zero-filled spares from
  // now on (wal_spares.h), written through the tracked file system's base in
  // the WAL directory.
  void SetUpSpares(bool use, int64_t min_free_bytes);
  // {0, ...} without spares.
  WalSpares::Counts spare_counts() const;

  // Commit numbers (commit_stamp.h) per WAL file. `next_commit` tells, when
  // a WAL file is created, the commit number of the first record it will
  // hold (the store's next one). `durable` is told, after a sync made a
  // closed WAL file and every older one durable, the highest commit number
  // they hold: RocksDB syncs closed WAL files itself before it flushes the
  // memtables they back into tables (SyncClosedLogs), so those commits are
  // durable whatever the group commit knows. Set once, before the DB opens.
  void SetCommitHooks(std::function<uint64_t()> next_commit,
                      std::function<void(uint64_t through)> durable);

  // Called by the file system and the tracked files. IsWal: whether `path`
  // names a WAL file of the tracked directory.
  bool IsWal(const std::string& path) const;
  struct File;
  void Opened(std::shared_ptr<File> file);
  void Failed(const std::string& what);
  // A ready spare's path, "" when there is none (or no spares are used).
  std::string TakeSpare();
  void Closed(uint64_t bytes);
  // A sync of `file` succeeded (RocksDB's, or at its close).
  void Synced(const File* file);

 private:
  std::shared_ptr<rocksdb::FileSystem> base_;  // set by Track
  std::string wal_dir_;                        // set by Track
  std::atomic<bool> failed_{false};            // failure_ is set, read without mu_
  mutable std::mutex mu_;
  std::string failure_;                       // guarded by mu_
  std::vector<std::shared_ptr<File>> files_;  // guarded by mu_; SyncAll drops closed ones
  bool dir_unsynced_ = false;                 // guarded by mu_; a WAL file was created
  std::unique_ptr<WalSpares> spares_;         // set once by SetUpSpares
  std::function<uint64_t()> next_commit_;     // guarded by mu_; set by SetCommitHooks
  std::function<void(uint64_t)> durable_;     // guarded by mu_; set by SetCommitHooks
  std::atomic<WalSpares*> spares_in_use_{nullptr};
};

}  // namespace intentd::store
