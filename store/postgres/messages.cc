// The inbound message records of the PostgreSQL store (the `seen` op): one
// transaction each, locking the rows it decides on (DecideSeen,
// DecideMessageDone). A batch locks its rows in message id byte order, so
// two batches sharing ids do not deadlock (one that still does is retried).
#include <map>

#include "store/postgres/impl.h"

namespace intentd::store {
namespace {

using pg::Params;
using pg::Result;
using pg::Statement;

#define MESSAGE_COLS                                                                         \
  "state, meta, sightings, first_seen_at_ms, last_seen_at_ms, lease_token, lease_until_ms, " \
  "retain_until_ms"
#define MESSAGE_KEY "tenant_id = $1 AND channel = $2 AND message_id = $3"

// Ids 17..20 (rows.cc holds 0..16).
constexpr Statement kLockMessage = {
    17, "SELECT " MESSAGE_COLS " FROM mensagem_vista WHERE " MESSAGE_KEY " FOR UPDATE"};
constexpr Statement kInsertMessage = {
    18, "INSERT INTO mensagem_vista (tenant_id, channel, message_id, " MESSAGE_COLS
        ") VALUES ($1, $2, $3, $4, NULLIF($5, ''::bytea), $6, $7, $8, $9, $10, $11) "
        "ON CONFLICT DO NOTHING"};
constexpr Statement kUpdateMessage = {
    19,
    "UPDATE mensagem_vista SET state = $4, meta = NULLIF($5, ''::bytea), sightings = $6, "
    "first_seen_at_ms = $7, last_seen_at_ms = $8, lease_token = $9, lease_until_ms = $10, "
    "retain_until_ms = $11 WHERE " MESSAGE_KEY};
constexpr Statement kDeleteMessage = {
    20, "DELETE FROM mensagem_vista WHERE " MESSAGE_KEY " RETURNING retain_until_ms"};

Params KeyParams(const std::string& tenant, const std::string& channel, const std::string& id) {
  Params p;
  p.Bytes(tenant).Bytes(channel).Bytes(id);
  return p;
}

Params RecordParams(const MessageRecord& m) {
  Params p = KeyParams(m.tenant_id, m.channel, m.message_id);
  p.Text(MessageStateName(m.state)).Bytes(m.meta).Int8(m.count).Int8(m.first_seen_at_ms);
  p.Int8(m.last_seen_at_ms).Int8(m.lease_token).Int8(m.lease_until_ms).Int8(m.retain_until_ms);
  return p;
}

bool ParseState(const std::string& name, MessageState* state) {
  for (MessageState s : {MessageState::kSeen, MessageState::kProcessing, MessageState::kDone}) {
    if (name == MessageStateName(s)) {
      *state = s;
      return true;
    }
  }
  return false;
}

}  // namespace

Status PostgresStoreImpl::LockMessage(pg::Connection& c, const std::string& tenant,
                                      const std::string& channel, const std::string& message_id,
                                      std::optional<MessageRecord>* row) {
  row->reset();
  Result r;
  if (!c.Exec(kLockMessage, KeyParams(tenant, channel, message_id), &r)) return c.Failure();
  if (r.rows() == 0) return Status::Ok();
  MessageRecord m;
  m.tenant_id = tenant;
  m.channel = channel;
  m.message_id = message_id;
  if (!ParseState(r.Bytes(0, 0), &m.state)) {
    return Status::Corruption("mensagem_vista holds an unknown state \"" + r.Bytes(0, 0) + "\"");
  }
  m.meta = r.Bytes(0, 1);
  m.count = r.Int8(0, 2);
  m.first_seen_at_ms = r.Int8(0, 3);
  m.last_seen_at_ms = r.Int8(0, 4);
  m.lease_token = r.Int8(0, 5);
  m.lease_until_ms = r.Int8(0, 6);
  m.retain_until_ms = r.Int8(0, 7);
  *row = std::move(m);
  return Status::Ok();
}

Status PostgresStoreImpl::Seen(const SeenRequest& request, std::vector<SeenAnswer>* answers) {
  if (request.messages.empty()) return Status::InvalidArgument("seen needs at least one message");
  if (request.ttl_ms < 0 || request.lease_ms < 0) {
    return Status::InvalidArgument("ttl_ms and lease_ms must not be negative");
  }
  const int64_t ttl =
      request.ttl_ms > 0 ? request.ttl_ms : DefaultMessageTtlMs(options_.retention_ms);
  return Transact("seen", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    // Each distinct id: whether its row exists (physically), and the live
    // record the batch's entries are decided against, in request order.
    struct Row {
      bool exists = false;
      std::optional<MessageRecord> live;
    };
    std::map<std::string, Row> rows;  // byte order: the lock order
    for (const SeenRequest::Message& m : request.messages) rows.try_emplace(m.message_id);
    for (auto& [id, row] : rows) {
      Status s = LockMessage(c, request.tenant_id, request.channel, id, &row.live);
      if (!s.ok()) return s;
      row.exists = row.live.has_value();
      if (row.live && RetentionExpired(row.live->retain_until_ms, now)) row.live.reset();
    }
    std::vector<SeenAnswer> out(request.messages.size());
    for (size_t i = 0; i < request.messages.size(); ++i) {
      Row& row = rows[request.messages[i].message_id];
      SeenStep step = DecideSeen(row.live, request, request.messages[i], ttl, now);
      row.live = step.record;
      out[i].first = step.first;
      out[i].record = std::move(step.record);
      out[i].retry_after_ms = step.retry_after_ms;
    }
    for (const auto& [id, row] : rows) {
      Result r;
      if (!c.Exec(row.exists ? kUpdateMessage : kInsertMessage, RecordParams(*row.live), &r)) {
        return c.Failure();
      }
      if (!row.exists && r.affected() != 1) {  // inserted concurrently: decide again
        *end = TxEnd::kRetry;
        return Status::Ok();
      }
    }
    *answers = std::move(out);
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::MessageDone(const std::string& tenant_id, const std::string& channel,
                                      const std::string& message_id, int64_t lease_token,
                                      MessageRecord* record) {
  return EndClaim(tenant_id, channel, message_id, lease_token, /*release=*/false, record);
}

Status PostgresStoreImpl::ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                                         const std::string& message_id, int64_t lease_token,
                                         MessageRecord* record) {
  return EndClaim(tenant_id, channel, message_id, lease_token, /*release=*/true, record);
}

Status PostgresStoreImpl::EndClaim(const std::string& tenant_id, const std::string& channel,
                                   const std::string& message_id, int64_t lease_token, bool release,
                                   MessageRecord* record) {
  return Transact(release ? "release" : "done", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    std::optional<MessageRecord> current;
    Status s = LockMessage(c, tenant_id, channel, message_id, &current);
    if (!s.ok()) return s;
    if (!current || RetentionExpired(current->retain_until_ms, now)) {
      return NoSuchMessage();
    }
    MessageDoneStep step = release ? DecideMessageRelease(*current, lease_token, now)
                                   : DecideMessageDone(*current, lease_token, now);
    *record = step.record;
    if (!step.status.ok() || !step.write) return step.status;  // rolled back
    if (!c.Exec(kUpdateMessage, RecordParams(step.record))) return c.Failure();
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::ForgetMessage(const std::string& tenant_id, const std::string& channel,
                                        const std::string& message_id, bool* forgotten) {
  return Transact("forget", [&](pg::Connection& c, TxEnd* end) -> Status {
    Result r;
    if (!c.Exec(kDeleteMessage, KeyParams(tenant_id, channel, message_id), &r)) {
      return c.Failure();
    }
    *forgotten = r.rows() == 1 && !RetentionExpired(r.Int8(0, 0), clock_->NowMs());
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

}  // namespace intentd::store
