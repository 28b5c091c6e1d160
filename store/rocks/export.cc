// Offline export and import (store/rocks/export.h) on the RocksDB column families.
#include "store/export.h"

#include <algorithm>
#include <memory>
#include <string_view>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"
#include "store/rocks/options.h"

namespace intentd::store {
namespace {

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// The store's LOCK, held for the whole export: RocksDB's read-only open does
// not take it, and an agent writing meanwhile would make the export a blend.
class StoreLock {
 public:
  explicit StoreLock(rocksdb::Env* env) : env_(env) {}
  ~StoreLock() {
    if (lock_ != nullptr) env_->UnlockFile(lock_);
  }
  Status Take(const std::string& path) {
    rocksdb::Status rs = env_->LockFile(path + "/LOCK", &lock_);
    if (!rs.ok()) {
      lock_ = nullptr;
      return Status::Busy("store " + path + " is in use by another process (" + rs.ToString() +
                          "); stop the agent, or export a backup taken with `intentd backup`");
    }
    return Status::Ok();
  }

 private:
  rocksdb::Env* env_;
  rocksdb::FileLock* lock_ = nullptr;
};

// The deadline an intent is exported with: when it is live only through its
// action (IntentLive), the action's, so that the importing store keeps it as
// long (kRetainForever while the action is started: it then follows the
// action there too). Otherwise its own; an intent no longer live gets a
// deadline in the past.
Status IntentDeadline(const DbHandles& h, int64_t now, ExportRecord* record) {
  const int64_t own = record->retain_until_ms;
  Action action;
  int64_t action_until = 0;
  bool found = false;
  Status s = GetActionRecord(h.db, h.actions, rocksdb::ReadOptions(),
                             codec::ActionKey(record->intent.tenant_id, record->intent.key),
                             &action, &action_until, &found);
  if (!s.ok()) return s;
  const bool action_live = found && !RetentionExpired(action_until, now);
  if (!IntentLive(own, action_live ? &action : nullptr, now)) {
    record->retain_until_ms = std::min<int64_t>(own, now);
  } else if (action_live && ActionKeepsIntent(own, action)) {
    record->retain_until_ms = own == kRetainForever ? action_until : std::max(own, action_until);
  }
  return Status::Ok();
}

Status ScanIntents(const DbHandles& h, int64_t now,
                   const std::function<Status(const ExportRecord&)>& visit, ExportCounts* counts) {
  std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(TotalOrderRead(), h.intents));
  ExportRecord record;
  record.kind = ExportRecord::Kind::kIntent;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    record.intent = Intent();
    if (!codec::DecodeIntentKey(View(it->key()), &record.intent)) {
      return Status::Corruption("an intent key is malformed");
    }
    Status s = codec::DecodeIntentValue(View(it->value()), &record.intent, &record.retain_until_ms);
    if (!s.ok()) return s;
    s = IntentDeadline(h, now, &record);
    if (!s.ok()) return s;
    if (RetentionExpired(record.retain_until_ms, now)) {
      ++counts->expired;
      continue;
    }
    s = visit(record);
    if (!s.ok()) return s;
    ++counts->intents;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan intents");
  return Status::Ok();
}

Status ScanActions(const DbHandles& h, int64_t now,
                   const std::function<Status(const ExportRecord&)>& visit, ExportCounts* counts) {
  std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(TotalOrderRead(), h.actions));
  ExportRecord record;
  record.kind = ExportRecord::Kind::kAction;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    record.action = Action();
    if (!codec::DecodeActionKey(View(it->key()), &record.action)) {
      return Status::Corruption("an action key is malformed");
    }
    Status s = codec::DecodeActionValue(View(it->value()), &record.action, &record.retain_until_ms);
    if (!s.ok()) return s;
    if (RetentionExpired(record.retain_until_ms, now)) {
      ++counts->expired;
      continue;
    }
    s = visit(record);
    if (!s.ok()) return s;
    ++counts->actions;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan actions");
  return Status::Ok();
}

Status ScanCounters(const DbHandles& h, int64_t now,
                    const std::function<Status(const ExportRecord&)>& visit, ExportCounts* counts) {
  if (h.policy == nullptr) return Status::Ok();  // a store from before the policy's family
  std::unique_ptr<rocksdb::Iterator> it(h.db->NewIterator(TotalOrderRead(), h.policy));
  ExportRecord record;
  record.kind = ExportRecord::Kind::kCounter;
  const std::string tag(1, codec::kCounterTag);
  for (it->Seek(tag); it->Valid() && it->key().starts_with(tag); it->Next()) {
    record.counter = Counter();
    if (!codec::DecodeCounterKey(View(it->key()), &record.counter)) {
      return Status::Corruption("a counter key is malformed");
    }
    Status s =
        codec::DecodeCounterValue(View(it->value()), &record.counter, &record.retain_until_ms);
    if (!s.ok()) return s;
    if (RetentionExpired(record.retain_until_ms, now)) {
      ++counts->expired;
      continue;
    }
    s = visit(record);
    if (!s.ok()) return s;
    ++counts->counters;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan counters");
  return Status::Ok();
}

bool ValidStatus(ActionStatus status) {
  return status == ActionStatus::kStarted || status == ActionStatus::kCompleted ||
         status == ActionStatus::kFailed || status == ActionStatus::kReleased;
}

class RocksImporter final : public StoreImporter {
 public:
  RocksImporter(const OfflineOptions& options, DbHandles handles)
      : clock_(options.clock != nullptr ? options.clock : &SystemClock()), h_(handles) {}
  ~RocksImporter() override { CloseDb(&h_); }

  Status Add(const ExportRecord& record, Outcome* outcome) override {
    if (RetentionExpired(record.retain_until_ms, clock_->NowMs())) {
      *outcome = Outcome::kExpired;
      return Status::Ok();
    }
    rocksdb::WriteBatch batch;
    std::string encoded_key, value;
    rocksdb::ColumnFamilyHandle* cf = nullptr;
    if (record.kind == ExportRecord::Kind::kIntent) {
      const Intent& i = record.intent;
      if (i.tenant_id.empty() || i.intent_ref.empty() || i.action_type.empty() || i.key.empty()) {
        return Status::InvalidArgument(
            "an intent needs a non-empty tenant_id, intent_ref, action_type and key");
      }
      cf = h_.intents;
      encoded_key = codec::IntentKey(i.tenant_id, i.intent_ref, i.action_type);
      value = codec::EncodeIntentValue(i, record.retain_until_ms);
      batch.Put(cf, encoded_key, value);
      batch.Put(h_.meta, kKeyIdPrefix + i.key_id, "");    // the registry (store.h)
      if (i.approval.state == ApprovalState::kPending) {  // PendingApprovals' index
        batch.Put(h_.policy, codec::PendingKey(i.tenant_id, i.intent_ref, i.action_type),
                  codec::EncodePendingValue(i.created_at_ms, record.retain_until_ms));
      }
    } else if (record.kind == ExportRecord::Kind::kCounter) {
      const Counter& c = record.counter;
      if (c.tenant_id.empty() || c.name.empty() || c.total < 0 || c.count < 0) {
        return Status::InvalidArgument(
            "a counter needs a non-empty tenant_id and name and no negative total or count");
      }
      cf = h_.policy;
      encoded_key = codec::CounterKey(c.tenant_id, c.day, c.name);
      value = codec::EncodeCounterValue(c, record.retain_until_ms);
      batch.Put(cf, encoded_key, value);
    } else {
      const Action& a = record.action;
      if (a.tenant_id.empty() || a.key.empty()) {
        return Status::InvalidArgument("an action needs a non-empty tenant_id and key");
      }
      if (!ValidStatus(a.status)) return Status::InvalidArgument("an action has no valid status");
      cf = h_.actions;
      encoded_key = codec::ActionKey(a.tenant_id, a.key);
      value = codec::EncodeActionValue(a, record.retain_until_ms);
      batch.Put(cf, encoded_key, value);
      if (a.status == ActionStatus::kStarted) {
        batch.Put(h_.leases, codec::LeaseKeyAll(a.lease_until_ms, a.tenant_id, a.key),
                  rocksdb::Slice());
      }
    }
    std::string stored;
    rocksdb::Status rs = h_.db->Get(rocksdb::ReadOptions(), cf, encoded_key, &stored);
    if (rs.ok() && record.kind == ExportRecord::Kind::kIntent) {
      // Compared as this version writes it: an older value has no key_id.
      Intent si;
      int64_t retain = 0;
      if (codec::DecodeIntentKey(encoded_key, &si) &&
          codec::DecodeIntentValue(stored, &si, &retain).ok()) {
        stored = codec::EncodeIntentValue(si, retain);
      }
    }
    if (rs.ok()) {
      codec::ValueHeader header;
      // Same body (everything after the retention header): the same record.
      const bool same = codec::ReadValueHeader(stored, &header) &&
                        header.format == static_cast<uint8_t>(value[0]) &&
                        std::string_view(stored).substr(codec::kValueHeaderSize) ==
                            std::string_view(value).substr(codec::kValueHeaderSize);
      *outcome = same ? Outcome::kUnchanged : Outcome::kConflict;
      return Status::Ok();
    }
    if (!rs.IsNotFound()) return FromRocks(rs, "read before import");
    rocksdb::WriteOptions unsynced;
    unsynced.sync = false;
    rs = h_.db->Write(unsynced, &batch);
    if (!rs.ok()) return FromRocks(rs, "import write");
    *outcome = Outcome::kAdded;
    return Status::Ok();
  }

  Status Finish() override {
    // The flush writes and syncs the tables: the imported records are then
    // durable without the WAL. (No DB::SyncWAL: after a failed append, a
    // full disk, RocksDB 7.8 asserts on it; see store/rocks/wal_files.h.)
    rocksdb::FlushOptions fo;
    fo.wait = true;
    rocksdb::Status rs = h_.db->Flush(fo, h_.all);
    if (!rs.ok()) return FromRocks(rs, "import flush");
    return Status::Ok();
  }

 private:
  const Clock* clock_;
  DbHandles h_;
};

}  // namespace

Status ExportStore(const OfflineOptions& options,
                   const std::function<Status(const ExportRecord&)>& visit, ExportCounts* counts) {
  *counts = ExportCounts();
  if (options.path.empty()) return Status::InvalidArgument("store path is empty");
  rocksdb::Env* env = rocksdb::Env::Default();
  if (!env->FileExists(options.path + "/CURRENT").ok()) {
    return Status::NotFound("no store in " + options.path + " (no CURRENT file)");
  }
  StoreLock lock(env);
  Status s = lock.Take(options.path);
  if (!s.ok()) return s;
  RocksOptions rocks;
  rocks.path = options.path;
  rocks.clock = options.clock;
  rocks.block_cache_bytes = 8u << 20;
  DbHandles h;
  s = OpenDbReadOnly(rocks, env, {}, &h);
  if (!s.ok()) return s;
  std::string format;
  rocksdb::Status rs = h.db->Get(rocksdb::ReadOptions(), h.meta, kFormatVersionKey, &format);
  // Formats 1 and 2 differ in the lease index only, which is not exported;
  // format 3 reads format 2's intents as they are (impl.h).
  const bool known = format.size() == 1 && format[0] >= '1' &&
                     format[0] <= static_cast<char>('0' + kFormatVersion);
  if (rs.ok() && !known) {
    CloseDb(&h);
    return Status::Incompatible("store " + options.path + " has format version '" + format +
                                "'; this intentd exports formats 1 to " +
                                std::to_string(kFormatVersion) +
                                " (use the intentd that wrote it)");
  }
  const int64_t now = (options.clock != nullptr ? options.clock : &SystemClock())->NowMs();
  s = ScanIntents(h, now, visit, counts);
  if (s.ok()) s = ScanActions(h, now, visit, counts);
  if (s.ok()) s = ScanCounters(h, now, visit, counts);
  CloseDb(&h);
  return s;
}

Status StoreImporter::Open(const OfflineOptions& options,
                           std::unique_ptr<StoreImporter>* importer) {
  RocksOptions rocks;
  rocks.path = options.path;
  rocks.clock = options.clock;
  rocks.sync = false;
  DbHandles h;
  OpenRequest request;
  request.create = true;
  std::unique_ptr<WalGuard> guard;
  OpenOutcome outcome;
  Status s = OpenDb(rocks, rocksdb::Env::Default(), std::make_shared<StorageErrorListener>(),
                    request, &guard, &h, &outcome);
  if (!s.ok()) return s;
  *importer = std::make_unique<RocksImporter>(options, h);
  return Status::Ok();
}

}  // namespace intentd::store
