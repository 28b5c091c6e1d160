// Keyrings on PostgreSQL: the registry of key ids (intentd_key_ids), the
// live intents per id, and the current id the agents sharing the database
// agree on (intentd_keyring).
#include <map>
#include <set>

#include "store/postgres/impl.h"

namespace intentd::store {
namespace {

using pg::Params;
using pg::Result;
using pg::Statement;

// Ids 21..26 (rows.cc holds 0..16, messages.cc 17..20).
constexpr Statement kRegisterKeyId = {
    21, "INSERT INTO intentd_key_ids (key_id) VALUES ($1) ON CONFLICT DO NOTHING"};
constexpr Statement kListKeyIds = {22, "SELECT key_id FROM intentd_key_ids ORDER BY key_id"};
constexpr Statement kUnregisterKeyId = {23, "DELETE FROM intentd_key_ids WHERE key_id = $1"};
// An intent row's retain_until_ms follows its action (forever while started).
constexpr Statement kKeyIdUsage = {
    24,
    "SELECT key_id, tenant_id, count(*) FROM intencao WHERE retain_until_ms > $1 "
    "GROUP BY key_id, tenant_id ORDER BY key_id, tenant_id"};
constexpr Statement kCurrentKeyId = {25, "SELECT current_key_id FROM intentd_keyring FOR UPDATE"};
constexpr Statement kSetCurrentKeyId = {
    26,
    "INSERT INTO intentd_keyring (current_key_id) VALUES ($1) "
    "ON CONFLICT (singleton) DO UPDATE SET current_key_id = EXCLUDED.current_key_id"};

}  // namespace

Status PostgresStoreImpl::RegisterKeyId(const std::string& key_id) {
  return Query("register key id", [&](pg::Connection& c) -> Status {
    return c.Exec(kRegisterKeyId, Params().Text(key_id)) ? Status::Ok() : c.Failure();
  });
}

Status PostgresStoreImpl::UnregisterKeyId(const std::string& key_id) {
  return Query("unregister key id", [&](pg::Connection& c) -> Status {
    return c.Exec(kUnregisterKeyId, Params().Text(key_id)) ? Status::Ok() : c.Failure();
  });
}

Status PostgresStoreImpl::RegisteredKeyIds(std::vector<std::string>* key_ids) {
  return Query("registered key ids", [&](pg::Connection& c) -> Status {
    Result r;
    if (!c.Exec(kListKeyIds, Params(), &r)) return c.Failure();
    key_ids->clear();
    for (int row = 0; row < r.rows(); ++row) key_ids->push_back(r.Bytes(row, 0));
    return Status::Ok();
  });
}

Status PostgresStoreImpl::CountKeyIdUsage(const std::vector<std::string>& only,
                                          std::vector<KeyIdUsage>* usage) {
  const std::set<std::string> wanted(only.begin(), only.end());
  return Query("key id usage", [&](pg::Connection& c) -> Status {
    Result r;
    if (!c.Exec(kKeyIdUsage, Params().Int8(clock_->NowMs()), &r)) return c.Failure();
    usage->clear();
    for (int row = 0; row < r.rows(); ++row) {
      const std::string id = r.Bytes(row, 0);
      if (!wanted.empty() && !wanted.count(id)) continue;
      if (usage->empty() || usage->back().key_id != id) usage->push_back(KeyIdUsage{id});
      KeyIdUsage& u = usage->back();
      u.live_intents += static_cast<uint64_t>(r.Int8(row, 2));
      ++u.tenant_count;
      if (u.tenants.size() < kUsageTenants) u.tenants.push_back(r.Bytes(row, 1));
    }
    return Status::Ok();
  });
}

Status PostgresStoreImpl::AgreeCurrentKeyId(const std::string& key_id, bool switch_to,
                                            std::string* recorded) {
  return Transact("agree on the current key id", [&](pg::Connection& c, TxEnd* end) -> Status {
    Result r;
    if (!c.Exec(kCurrentKeyId, Params(), &r)) return c.Failure();
    *recorded = r.rows() == 1 ? r.Bytes(0, 0) : std::string();
    if (*recorded == key_id) return Status::Ok();  // rolled back: nothing to write
    if (!recorded->empty() && !switch_to) {
      return Status::Conflict("the database records current key id \"" + *recorded +
                              "\", this agent's keyring has \"" + key_id + "\"");
    }
    if (!c.Exec(kSetCurrentKeyId, Params().Text(key_id))) return c.Failure();
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

}  // namespace intentd::store
