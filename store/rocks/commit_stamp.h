// Commit numbers stamped into the WAL, and what a replay of the WAL makes of
// them (internal to the RocksDB store).
//
// Every batch the store commits carries a stamp as a LogData blob
// (WriteBatch::PutLogData: kept in the WAL only, never in tables, consuming
// no sequence number): its commit number, which grows by one per committed
// batch in WAL order (RocksStoreImpl::Commit assigns it under the write lock)
// and is never reused, and the highest commit number that was durable when
// the batch was written. With them a replay can name every record of the WAL:
//  - ReplayFilter skips the records of a voided range, writes that were
//    answered storage_error (RocksStoreImpl::Recover), so that they never
//    take effect;
//  - a gap in the commit numbers is a record lost from the WAL. When a later
//    record says the lost one was already durable when it was written, the
//    gap is damage of acknowledged data (a flipped byte, a WAL file missing
//    from the sequence), not the torn tail a power cut leaves, where every
//    record after the gap was written before the gap's records were synced.
#pragma once

#include <rocksdb/wal_filter.h>
#include <rocksdb/write_batch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace intentd::store {

// Commits (after, through]: the writes of a store generation that failed
// before they were durable (RocksStoreImpl::Recover).
struct CommitRange {
  uint64_t after = 0;
  uint64_t through = 0;
  bool operator==(const CommitRange& o) const { return after == o.after && through == o.through; }
};
bool InRanges(const std::vector<CommitRange>& ranges, uint64_t commit);

struct CommitStamp {
  uint64_t commit = 0;
  uint64_t durable = 0;  // the highest durable commit when this one was written
};
// The LogData blob of a stamp, and the stamp of a blob (false: not ours).
std::string EncodeCommitStamp(const CommitStamp& stamp);
bool DecodeCommitStamp(const rocksdb::Slice& blob, CommitStamp* stamp);
// The stamps of a batch, in order: one per batch the store wrote (RocksDB may
// have merged several into one WAL record); none in a batch written by an
// older intentd or by the open itself (the format version).
std::vector<CommitStamp> ReadCommitStamps(const rocksdb::WriteBatch& batch);

// A WAL replay's filter (DBOptions::wal_filter): skips the records stamped
// in `voids`, and records what it saw. Used by one open at a time.
class ReplayFilter : public rocksdb::WalFilter {
 public:
  explicit ReplayFilter(std::vector<CommitRange> voids) : voids_(std::move(voids)) {}

  WalProcessingOption LogRecordFound(unsigned long long log_number,
                                     const std::string& log_file_name,
                                     const rocksdb::WriteBatch& batch,
                                     rocksdb::WriteBatch* new_batch, bool* batch_changed) override;
  const char* Name() const override { return "intentd.ReplayFilter"; }

  // What the replay held, in WAL order: the stamps replayed (voided ones
  // left out), and the records without a stamp.
  const std::vector<CommitStamp>& replayed() const { return replayed_; }
  uint64_t unstamped() const { return unstamped_; }
  uint64_t voided() const { return voided_; }
  // The highest commit number seen, voided ones included (0: none).
  uint64_t highest() const { return highest_; }

 private:
  const std::vector<CommitRange> voids_;
  std::vector<CommitStamp> replayed_;
  uint64_t unstamped_ = 0;
  uint64_t voided_ = 0;
  uint64_t highest_ = 0;
};

// A replay's verdict on the gaps in its commit numbers (pure).
struct GapReport {
  // The first gap whose missing commits a later record says were durable:
  // damaged acknowledged data. damaged_after == 0: none.
  uint64_t damaged_after = 0;         // the last commit before the gap
  uint64_t damaged_next = 0;          // the first commit after it
  uint64_t records_after_damage = 0;  // records replayed after that gap
  // The first gap otherwise (a torn tail: everything after it was written
  // while the gap was unsynced, so nothing after it was acknowledged):
  // torn_after == 0 and torn == false: none.
  bool torn = false;
  uint64_t torn_after = 0;
  uint64_t records_after_torn = 0;
};
// `replayed` in WAL order; gaps that `voids` cover are not gaps.
GapReport FindGaps(const std::vector<CommitStamp>& replayed, const std::vector<CommitRange>& voids);

}  // namespace intentd::store
