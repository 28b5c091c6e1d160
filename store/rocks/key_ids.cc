// The registry of keyring ids (meta "key_id/ID") and the count of live
// intents per id (a scan of the intents column family).
#include <map>
#include <set>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"

namespace intentd::store {

// The registry is written outside the request path, by callers that take no
// ticket: its writes are durable when they return (SettleAlways), whatever
// the mode.
Status RocksStoreImpl::RegisterKeyId(const std::string& key_id) {
  return SettleAlways([&] {
    Entered entered(this);
    if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
    std::string ignored;
    const std::string name = kKeyIdPrefix + key_id;
    const rocksdb::Status rs = h_.db->Get(rocksdb::ReadOptions(), h_.meta, name, &ignored);
    if (rs.ok()) return Status::Ok();
    if (!rs.IsNotFound()) return FromRocks(rs, "read the key id registry");
    rocksdb::WriteBatch batch;
    batch.Put(h_.meta, name, "");
    return Commit(&batch);
  }());
}

Status RocksStoreImpl::UnregisterKeyId(const std::string& key_id) {
  return SettleAlways([&] {
    Entered entered(this);
    if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
    rocksdb::WriteBatch batch;
    batch.Delete(h_.meta, kKeyIdPrefix + key_id);
    return Commit(&batch);
  }());
}

Status RocksStoreImpl::RegisteredKeyIds(std::vector<std::string>* key_ids) {
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s;
  key_ids->clear();
  std::unique_ptr<rocksdb::Iterator> it(h_.db->NewIterator(rocksdb::ReadOptions(), h_.meta));
  const std::string prefix = kKeyIdPrefix;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    key_ids->push_back(it->key().ToString().substr(prefix.size()));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "read the key id registry");
  return Status::Ok();
}

Status RocksStoreImpl::CountKeyIdUsage(const std::vector<std::string>& only,
                                       std::vector<KeyIdUsage>* usage) {
  Entered entered(this);
  if (Status s = Enter(Access::kRead, &entered); !s.ok()) return s;
  usage->clear();
  const std::set<std::string> wanted(only.begin(), only.end());
  struct Count {
    uint64_t intents = 0;
    std::set<std::string> tenants;
  };
  std::map<std::string, Count> counts;
  rocksdb::ManagedSnapshot snapshot(h_.db);
  rocksdb::ReadOptions ro = TotalOrderRead();
  ro.snapshot = snapshot.snapshot();
  const int64_t now = clock_->NowMs();
  std::unique_ptr<rocksdb::Iterator> it(h_.db->NewIterator(ro, h_.intents));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Intent intent;
    int64_t retain_until_ms = 0;
    if (!codec::DecodeIntentKey(std::string_view(it->key().data(), it->key().size()), &intent)) {
      return Status::Corruption("intent key malformed");
    }
    Status s = codec::DecodeIntentValue(std::string_view(it->value().data(), it->value().size()),
                                        &intent, &retain_until_ms);
    if (!s.ok()) return s;
    if (!wanted.empty() && !wanted.count(intent.key_id)) continue;
    if (!IntentLive(retain_until_ms, nullptr, now)) {
      std::optional<Action> action;
      s = ReadAction(codec::ActionKey(intent.tenant_id, intent.key), now, &action,
                     snapshot.snapshot());
      if (!s.ok()) return s;
      if (!IntentLive(retain_until_ms, action ? &*action : nullptr, now)) continue;
    }
    Count& c = counts[intent.key_id];
    ++c.intents;
    c.tenants.insert(intent.tenant_id);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan intents");
  for (auto& [id, c] : counts) {
    KeyIdUsage u;
    u.key_id = id;
    u.live_intents = c.intents;
    u.tenant_count = c.tenants.size();
    for (const std::string& t : c.tenants) {
      if (u.tenants.size() == kUsageTenants) break;
      u.tenants.push_back(t);
    }
    usage->push_back(std::move(u));
  }
  return Status::Ok();
}

}  // namespace intentd::store
