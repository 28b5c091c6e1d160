// The inbound message records (the `seen` op): lock, read, decide
// (DecideSeen, DecideMessageDone), one write, like every other operation.
#include <map>

#include "store/decision.h"
#include "store/rocks/codec.h"
#include "store/rocks/impl.h"

namespace intentd::store {

Status RocksStoreImpl::ReadMessage(const std::string& encoded_key, int64_t now_ms,
                                   std::optional<MessageRecord>* out) {
  out->reset();
  rocksdb::PinnableSlice value;
  rocksdb::Status rs = h_.db->Get(rocksdb::ReadOptions(), h_.messages, encoded_key, &value);
  if (rs.IsNotFound()) return Status::Ok();
  if (!rs.ok()) return FromRocks(rs, "read message record");
  MessageRecord record;
  if (!codec::DecodeMessageKey(encoded_key, &record)) {
    return Status::Corruption("message key malformed");
  }
  Status s = codec::DecodeMessageValue(std::string_view(value.data(), value.size()), &record);
  if (!s.ok()) return s;
  if (!RetentionExpired(record.retain_until_ms, now_ms)) *out = std::move(record);
  return Status::Ok();
}

Status RocksStoreImpl::DoSeen(const SeenRequest& request, std::vector<SeenAnswer>* answers) {
  if (request.messages.empty()) return Status::InvalidArgument("seen needs at least one message");
  if (request.ttl_ms < 0 || request.lease_ms < 0) {
    return Status::InvalidArgument("ttl_ms and lease_ms must not be negative");
  }
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  if (h_.messages == nullptr) return Status::StorageError("the store has no messages records");
  // Every record of the batch is locked (in stripe order) before any is
  // read; an id repeated in the batch is decided against the record its
  // earlier entry left.
  std::vector<std::string> keys;
  keys.reserve(request.messages.size());
  LockSet locks(&locks_);
  for (const SeenRequest::Message& m : request.messages) {
    keys.push_back(codec::MessageKey(request.tenant_id, request.channel, m.message_id));
    locks.Add(keys.back());
  }
  locks.Lock();

  const int64_t now = clock_->NowMs();
  const int64_t ttl =
      request.ttl_ms > 0 ? request.ttl_ms : DefaultMessageTtlMs(options_.retention_ms);
  std::map<std::string_view, std::optional<MessageRecord>> records;
  std::vector<SeenAnswer> out(request.messages.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto [it, inserted] = records.try_emplace(keys[i]);
    if (inserted) {
      Status s = ReadMessage(keys[i], now, &it->second);
      if (!s.ok()) return s;
    }
    SeenStep step = DecideSeen(it->second, request, request.messages[i], ttl, now);
    it->second = step.record;
    out[i].first = step.first;
    out[i].record = std::move(step.record);
    out[i].retry_after_ms = step.retry_after_ms;
  }
  rocksdb::WriteBatch batch;
  for (const auto& [key, record] : records) {
    batch.Put(h_.messages, rocksdb::Slice(key.data(), key.size()),
              codec::EncodeMessageValue(*record));
  }
  Status s = Commit(&batch);
  if (!s.ok()) return s;
  *answers = std::move(out);
  return Status::Ok();
}

Status RocksStoreImpl::DoEndClaim(const std::string& tenant_id, const std::string& channel,
                                  const std::string& message_id, int64_t lease_token, bool release,
                                  MessageRecord* record) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  if (h_.messages == nullptr) return Status::StorageError("the store has no messages records");
  const std::string key = codec::MessageKey(tenant_id, channel, message_id);
  LockSet locks(&locks_);
  locks.Add(key);
  locks.Lock();
  const int64_t now = clock_->NowMs();
  std::optional<MessageRecord> current;
  Status s = ReadMessage(key, now, &current);
  if (!s.ok()) return s;
  if (!current) return NoSuchMessage();
  MessageDoneStep step = release ? DecideMessageRelease(*current, lease_token, now)
                                 : DecideMessageDone(*current, lease_token, now);
  if (step.write) {
    rocksdb::WriteBatch batch;
    batch.Put(h_.messages, key, codec::EncodeMessageValue(step.record));
    s = Commit(&batch);
    if (!s.ok()) return s;
  }
  *record = std::move(step.record);
  return step.status;
}

Status RocksStoreImpl::DoForgetMessage(const std::string& tenant_id, const std::string& channel,
                                       const std::string& message_id, bool* forgotten) {
  Entered entered(this);
  if (Status s = Enter(Access::kWrite, &entered); !s.ok()) return s;
  if (h_.messages == nullptr) return Status::StorageError("the store has no messages records");
  const std::string key = codec::MessageKey(tenant_id, channel, message_id);
  LockSet locks(&locks_);
  locks.Add(key);
  locks.Lock();
  std::optional<MessageRecord> current;
  Status s = ReadMessage(key, clock_->NowMs(), &current);
  if (!s.ok()) return s;
  *forgotten = current.has_value();
  if (!current) return Status::Ok();
  rocksdb::WriteBatch batch;
  batch.Delete(h_.messages, key);
  return Commit(&batch);
}

Status RocksStoreImpl::Seen(const SeenRequest& request, std::vector<SeenAnswer>* answers) {
  return Settle(DoSeen(request, answers));
}

Status RocksStoreImpl::MessageDone(const std::string& tenant_id, const std::string& channel,
                                   const std::string& message_id, int64_t lease_token,
                                   MessageRecord* record) {
  return Settle(DoEndClaim(tenant_id, channel, message_id, lease_token, false, record));
}

Status RocksStoreImpl::ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                                      const std::string& message_id, int64_t lease_token,
                                      MessageRecord* record) {
  return Settle(DoEndClaim(tenant_id, channel, message_id, lease_token, true, record));
}

Status RocksStoreImpl::ForgetMessage(const std::string& tenant_id, const std::string& channel,
                                     const std::string& message_id, bool* forgotten) {
  return Settle(DoForgetMessage(tenant_id, channel, message_id, forgotten));
}

}  // namespace intentd::store
