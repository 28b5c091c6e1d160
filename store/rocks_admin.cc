// RocksStoreImpl lifetime and the operator-facing calls: size, flush,
// checkpoint, compaction, bulk load.
#include <rocksdb/utilities/checkpoint.h>

#include "store/codec.h"
#include "store/decision.h"
#include "store/rocks_impl.h"

namespace intentd::store {

RocksStoreImpl::RocksStoreImpl(const RocksOptions& options, std::unique_ptr<rocksdb::Env> env,
                               std::shared_ptr<FaultInjection> faults, Handles handles)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock()),
      faults_(std::move(faults)),
      env_(std::move(env)),
      h_(std::move(handles)) {
  write_options_.sync = options.sync;
}

RocksStoreImpl::~RocksStoreImpl() {
  for (auto* handle : h_.all) h_.db->DestroyColumnFamilyHandle(handle);
  h_.db->Close();
  delete h_.db;
}

uint64_t RocksStoreImpl::ApproximateSizeBytes() {
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
  rocksdb::Status rs = h_.db->FlushWAL(/*sync=*/true);
  if (!rs.ok()) return FromRocks(rs, "sync WAL");
  rocksdb::FlushOptions fo;
  fo.wait = true;
  rs = h_.db->Flush(fo, h_.all);
  if (!rs.ok()) return FromRocks(rs, "flush");
  return Status::Ok();
}

Status RocksStoreImpl::Checkpoint(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("checkpoint directory is empty");
  if (h_.db->GetEnv()->FileExists(dir).ok()) {
    return Status::InvalidArgument("checkpoint directory " + dir + " already exists");
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status rs = rocksdb::Checkpoint::Create(h_.db, &raw);
  if (!rs.ok()) return FromRocks(rs, "checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  rs = checkpoint->CreateCheckpoint(dir);
  if (!rs.ok()) return FromRocks(rs, "checkpoint into " + dir);
  return Status::Ok();
}

Status RocksStoreImpl::CompactAll() {
  Status s = Flush();
  if (!s.ok()) return s;
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* handle : h_.all) {
    rocksdb::Status rs = h_.db->CompactRange(co, handle, nullptr, nullptr);
    if (!rs.ok()) return FromRocks(rs, "compact " + handle->GetName());
  }
  return Status::Ok();
}

Status RocksStoreImpl::BulkLoad(const std::vector<IntentRecord>& records) {
  const int64_t now = clock_->NowMs();
  rocksdb::WriteBatch batch;
  for (const IntentRecord& record : records) {
    const Intent& intent = record.intent;
    if (intent.key.empty()) return Status::InvalidArgument("bulk load: intent with an empty key");
    ActionStatus status = ActionStatus::kCompleted;  // no action: plain retention
    if (record.action) {
      Action action = *record.action;
      action.tenant_id = intent.tenant_id;
      action.key = intent.key;
      status = action.status;
      PutAction(&batch, codec::ActionKey(action.tenant_id, action.key), std::nullopt, action, now);
    }
    PutIntent(&batch,
              codec::IntentKey(intent.tenant_id, intent.intent_ref, intent.action_type), intent,
              ActionRetainUntil(status, now, options_.retention_ms));
  }
  rocksdb::WriteOptions unsynced;
  unsynced.sync = false;
  rocksdb::Status rs = h_.db->Write(unsynced, &batch);
  if (!rs.ok()) return FromRocks(rs, "bulk load");
  return Status::Ok();
}

}  // namespace intentd::store
