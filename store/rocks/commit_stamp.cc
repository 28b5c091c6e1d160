#include "store/rocks/commit_stamp.h"

#include <algorithm>
#include <cstring>

namespace intentd::store {
namespace {

// "intentd commit stamp", version 1: magic, version, commit, durable (both
// little-endian).
constexpr char kMagic[] = {'i', 'c', 's'};
constexpr uint8_t kVersion = 1;
constexpr size_t kStampSize = sizeof(kMagic) + 1 + 8 + 8;

void PutFixed64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t GetFixed64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

// Collects the stamps of a batch; every other entry is accepted and skipped.
class StampReader : public rocksdb::WriteBatch::Handler {
 public:
  std::vector<CommitStamp> stamps;
  void LogData(const rocksdb::Slice& blob) override {
    CommitStamp stamp;
    if (DecodeCommitStamp(blob, &stamp)) stamps.push_back(stamp);
  }
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
};

}  // namespace

bool InRanges(const std::vector<CommitRange>& ranges, uint64_t commit) {
  for (const CommitRange& r : ranges) {
    if (commit > r.after && commit <= r.through) return true;
  }
  return false;
}

std::string EncodeCommitStamp(const CommitStamp& stamp) {
  std::string blob(kStampSize, '\0');
  std::memcpy(blob.data(), kMagic, sizeof(kMagic));
  blob[sizeof(kMagic)] = static_cast<char>(kVersion);
  PutFixed64(blob.data() + sizeof(kMagic) + 1, stamp.commit);
  PutFixed64(blob.data() + sizeof(kMagic) + 9, stamp.durable);
  return blob;
}

bool DecodeCommitStamp(const rocksdb::Slice& blob, CommitStamp* stamp) {
  if (blob.size() != kStampSize || std::memcmp(blob.data(), kMagic, sizeof(kMagic)) != 0 ||
      static_cast<uint8_t>(blob[sizeof(kMagic)]) != kVersion) {
    return false;
  }
  stamp->commit = GetFixed64(blob.data() + sizeof(kMagic) + 1);
  stamp->durable = GetFixed64(blob.data() + sizeof(kMagic) + 9);
  return stamp->commit != 0;
}

std::vector<CommitStamp> ReadCommitStamps(const rocksdb::WriteBatch& batch) {
  StampReader reader;
  // An entry the handler cannot take would end the iteration early: the
  // stamps read so far are kept either way.
  batch.Iterate(&reader).PermitUncheckedError();
  return std::move(reader.stamps);
}

rocksdb::WalFilter::WalProcessingOption ReplayFilter::LogRecordFound(
    unsigned long long /*log_number*/, const std::string& /*log_file_name*/,
    const rocksdb::WriteBatch& batch, rocksdb::WriteBatch* /*new_batch*/, bool* /*batch_changed*/) {
  const std::vector<CommitStamp> stamps = ReadCommitStamps(batch);
  if (stamps.empty()) {
    ++unstamped_;
    return WalProcessingOption::kContinueProcessing;
  }
  bool voided = false;
  for (const CommitStamp& s : stamps) {
    highest_ = std::max(highest_, s.commit);
    voided |= InRanges(voids_, s.commit);
  }
  if (voided) {
    // A record holds one write of the store, or several merged by RocksDB,
    // all from one generation and so on the same side of a void.
    ++voided_;
    return WalProcessingOption::kIgnoreCurrentRecord;
  }
  replayed_.insert(replayed_.end(), stamps.begin(), stamps.end());
  return WalProcessingOption::kContinueProcessing;
}

GapReport FindGaps(const std::vector<CommitStamp>& replayed,
                   const std::vector<CommitRange>& voids) {
  GapReport report;
  // Is every commit in (a, b) voided?
  const auto covered = [&voids](uint64_t a, uint64_t b) {
    for (uint64_t c = a + 1; c < b;) {
      bool found = false;
      for (const CommitRange& r : voids) {
        if (c > r.after && c <= r.through) {
          c = r.through + 1;
          found = true;
          break;
        }
      }
      if (!found) return false;
    }
    return true;
  };
  // suffix_durable[i]: the highest `durable` of the records from i on.
  std::vector<uint64_t> suffix_durable(replayed.size() + 1, 0);
  for (size_t i = replayed.size(); i > 0; --i) {
    suffix_durable[i - 1] = std::max(suffix_durable[i], replayed[i - 1].durable);
  }
  for (size_t i = 1; i < replayed.size(); ++i) {
    const uint64_t a = replayed[i - 1].commit;
    const uint64_t b = replayed[i].commit;
    if (b == a + 1 || b <= a || covered(a, b)) continue;
    // Commits (a, b) are missing. Were they durable when a later record was
    // written? Then they had been acknowledged, or could have been.
    if (suffix_durable[i] > a) {
      report.damaged_after = a;
      report.damaged_next = b;
      report.records_after_damage = replayed.size() - i;
      return report;
    }
    if (!report.torn) {
      report.torn = true;
      report.torn_after = a;
      report.records_after_torn = replayed.size() - i;
    }
  }
  return report;
}

}  // namespace intentd::store
