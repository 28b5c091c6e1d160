// RocksStore's implementation class (internal: includes RocksDB).
//
// Atomicity: a plain rocksdb::DB plus a striped lock table (lock_table.h),
// rather than a TransactionDB. Every operation locks the stripes of the
// records it reads and writes, reads them, takes the pure decision
// (decision.h) and applies it as ONE WriteBatch. Because every writer of a
// record holds its stripe, nothing changes between the read and the write,
// which is exactly the put-if-absent / compare-and-set the protocol needs.
// Compared with TransactionDB + GetForUpdate this skips the transaction's
// lock manager, its write-batch-with-index and the per-key lock bookkeeping,
// keeps write groups (shared fsyncs) intact, and never reports a deadlock or
// timeout that callers would have to retry. The price is that the lock table
// covers only this process, which RocksDB's LOCK file already guarantees.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/write_batch.h>

#include "store/decision.h"
#include "store/fault_injection.h"
#include "store/lock_table.h"
#include "store/rocks_store.h"

namespace intentd::store {

// The on-disk format written by this version (meta "format_version").
inline constexpr int kFormatVersion = 1;

class RocksStoreImpl final : public RocksStore {
 public:
  struct Handles {
    rocksdb::DB* db = nullptr;
    rocksdb::ColumnFamilyHandle* intents = nullptr;
    rocksdb::ColumnFamilyHandle* actions = nullptr;
    rocksdb::ColumnFamilyHandle* leases = nullptr;
    rocksdb::ColumnFamilyHandle* meta = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> all;  // every handle, to destroy
  };

  RocksStoreImpl(const RocksOptions& options, std::unique_ptr<rocksdb::Env> env,
                 std::shared_ptr<FaultInjection> faults, Handles handles);
  ~RocksStoreImpl() override;

  // Store
  Status Freeze(const IntentCandidate& request, FreezeResult* result) override;
  Status Begin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result) override;
  Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                  const std::string& response, Action* action) override;
  Status Fail(const std::string& tenant_id, const std::string& key, int64_t lease_token,
              const std::string& error, bool retriable, Action* action) override;
  Status Renew(const std::string& tenant_id, const std::string& key, int64_t lease_token,
               int64_t lease_ms, Action* action) override;
  Status GetAction(const std::string& tenant_id, const std::string& key, Action* action) override;
  Status Lookup(const std::string& tenant_id, const std::string& intent_ref,
                const std::string& action_type, LookupResult* result) override;
  Status Amend(const IntentCandidate& request, bool force, AmendResult* result) override;
  Status Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                   std::vector<Action>* actions) override;

  // RocksStore
  uint64_t ApproximateSizeBytes() override;
  Status Flush() override;
  Status Checkpoint(const std::string& dir) override;
  Status CompactAll() override;
  Status BulkLoad(const std::vector<IntentRecord>& records) override;

 private:
  struct StoredIntent {
    Intent intent;
    int64_t retain_until_ms = 0;
  };

  // Reads a record; nullopt when absent or past retention.
  Status ReadIntent(const std::string& encoded_key, int64_t now_ms,
                    std::optional<StoredIntent>* out, const rocksdb::Snapshot* snapshot = nullptr);
  Status ReadAction(const std::string& encoded_key, int64_t now_ms, std::optional<Action>* out,
                    const rocksdb::Snapshot* snapshot = nullptr);

  // Adds to `batch` the new action record and the lease index changes from
  // `before` (nullopt: absent) to `after`.
  void PutAction(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                 const std::optional<Action>& before, const Action& after, int64_t now_ms);
  void PutIntent(rocksdb::WriteBatch* batch, const std::string& encoded_key, const Intent& intent,
                 int64_t retain_until_ms);
  // The intent's retention after its action `action` was (changed) or was
  // seen (unchanged); writes it when it differs.
  void RefreshIntent(rocksdb::WriteBatch* batch, const std::string& encoded_key,
                     const StoredIntent& stored, const Action& action, bool action_changed,
                     int64_t now_ms);

  // The one write of an operation. Resumes the DB first when an earlier write
  // failed. Any failure is kStorageError and nothing was granted.
  Status Commit(rocksdb::WriteBatch* batch);

  Status Finish(const std::string& tenant_id, const std::string& key,
                const FinishRequest& request, Action* action);

  RocksOptions options_;
  const Clock* clock_;
  std::shared_ptr<FaultInjection> faults_;  // before env_: the file system reads it
  std::unique_ptr<rocksdb::Env> env_;       // outlives db_ (nullptr: Env::Default())
  Handles h_;
  rocksdb::WriteOptions write_options_;
  LockTable locks_{4096};
  std::atomic<bool> needs_resume_{false};
};

// Translates a RocksDB status (never kOk) into the store's status.
Status FromRocks(const rocksdb::Status& s, const std::string& context);

}  // namespace intentd::store

namespace intentd::store {

// RocksStore::Open, optionally on a file system with injected faults.
Status OpenRocksStore(const RocksOptions& options, std::shared_ptr<FaultInjection> faults,
                      std::unique_ptr<RocksStore>* store);

// Wraps the default file system so that writes and syncs fail on demand.
std::unique_ptr<rocksdb::Env> NewFaultInjectionEnv(std::shared_ptr<FaultInjection> faults);

}  // namespace intentd::store
