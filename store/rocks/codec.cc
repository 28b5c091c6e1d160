#include "store/rocks/codec.h"

#include <cstring>

namespace intentd::store::codec {
namespace {

// leveldb-style varints; signed values zigzag-encoded so that small negative
// numbers stay short.
// The encoders fill a local buffer and append it once: a push_back per byte
// was ~1% of the agent's io thread.
void PutVarint64(std::string* out, uint64_t v) {
  char buffer[10];
  size_t n = 0;
  while (v >= 0x80) {
    buffer[n++] = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  buffer[n++] = static_cast<char>(v);
  out->append(buffer, n);
}

bool GetVarint64(std::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    if (shift == 63 && byte > 1) return false;  // overflows 64 bits
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

void PutSigned(std::string* out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  PutVarint64(out, (u << 1) ^ static_cast<uint64_t>(v >> 63));
}

bool GetSigned(std::string_view* in, int64_t* v) {
  uint64_t u;
  if (!GetVarint64(in, &u)) return false;
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

void PutLengthPrefixed(std::string* out, std::string_view s) {
  PutVarint64(out, s.size());
  out->append(s);
}

bool GetLengthPrefixed(std::string_view* in, std::string* s) {
  uint64_t n;
  if (!GetVarint64(in, &n) || n > in->size()) return false;
  s->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

void PutOrderedInt64(std::string* out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v) ^ (1ULL << 63);
  char buffer[8];
  for (int i = 0; i < 8; ++i) buffer[i] = static_cast<char>(u >> (8 * (7 - i)));
  out->append(buffer, sizeof(buffer));
}

bool GetOrderedInt64(std::string_view* in, int64_t* v) {
  if (in->size() < 8) return false;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<uint8_t>((*in)[i]);
  in->remove_prefix(8);
  *v = static_cast<int64_t>(u ^ (1ULL << 63));
  return true;
}

void PutHeader(std::string* out, int64_t retain_until_ms) {
  const uint64_t u = static_cast<uint64_t>(retain_until_ms);
  char buffer[9];
  buffer[0] = static_cast<char>(kValueFormat);
  for (int i = 0; i < 8; ++i) buffer[1 + i] = static_cast<char>(u >> (8 * i));
  out->append(buffer, sizeof(buffer));
}

Status CheckedBody(std::string_view value, const char* what, std::string_view* body,
                   int64_t* retain_until_ms) {
  ValueHeader header;
  if (!ReadValueHeader(value, &header)) {
    return Status::Corruption(std::string(what) + " value shorter than its header");
  }
  if (header.format != kValueFormat) {
    return Status::Corruption(std::string(what) + " value of unknown format " +
                              std::to_string(header.format));
  }
  *retain_until_ms = header.retain_until_ms;
  *body = value.substr(kValueHeaderSize);
  return Status::Ok();
}

}  // namespace

std::string IntentKey(std::string_view tenant_id, std::string_view intent_ref,
                      std::string_view action_type) {
  std::string out;
  out.reserve(tenant_id.size() + intent_ref.size() + action_type.size() + 6);
  PutLengthPrefixed(&out, tenant_id);
  PutLengthPrefixed(&out, intent_ref);
  PutLengthPrefixed(&out, action_type);
  return out;
}

std::string ActionKey(std::string_view tenant_id, std::string_view key) {
  std::string out;
  out.reserve(tenant_id.size() + key.size() + 4);
  PutLengthPrefixed(&out, tenant_id);
  PutLengthPrefixed(&out, key);
  return out;
}

bool DecodeIntentKey(std::string_view encoded, Intent* intent) {
  return GetLengthPrefixed(&encoded, &intent->tenant_id) &&
         GetLengthPrefixed(&encoded, &intent->intent_ref) &&
         GetLengthPrefixed(&encoded, &intent->action_type) && encoded.empty();
}

bool DecodeActionKey(std::string_view encoded, Action* action) {
  return GetLengthPrefixed(&encoded, &action->tenant_id) &&
         GetLengthPrefixed(&encoded, &action->key) && encoded.empty();
}

std::string MessageKey(std::string_view tenant_id, std::string_view channel,
                       std::string_view message_id) {
  std::string out;
  out.reserve(tenant_id.size() + channel.size() + message_id.size() + 6);
  PutLengthPrefixed(&out, tenant_id);
  PutLengthPrefixed(&out, channel);
  PutLengthPrefixed(&out, message_id);
  return out;
}

bool DecodeMessageKey(std::string_view encoded, MessageRecord* record) {
  return GetLengthPrefixed(&encoded, &record->tenant_id) &&
         GetLengthPrefixed(&encoded, &record->channel) &&
         GetLengthPrefixed(&encoded, &record->message_id) && encoded.empty();
}

std::string LeaseKeyAll(int64_t lease_until_ms, std::string_view tenant_id, std::string_view key) {
  std::string out = LeasePrefixAll();
  // The ordered int64, then two length prefixes (varints: 2 bytes each below
  // 16 KiB) and their bytes.
  out.reserve(out.size() + 8 + 2 + tenant_id.size() + 2 + key.size());
  PutOrderedInt64(&out, lease_until_ms);
  PutLengthPrefixed(&out, tenant_id);
  PutLengthPrefixed(&out, key);
  return out;
}

std::string LeasePrefixAll() { return std::string(1, 'A'); }

bool DecodeLeaseKey(std::string_view encoded, int64_t* lease_until_ms, std::string* tenant_id,
                    std::string* key) {
  if (encoded.empty() || encoded.front() != 'A') return false;
  encoded.remove_prefix(1);
  return GetOrderedInt64(&encoded, lease_until_ms) && GetLengthPrefixed(&encoded, tenant_id) &&
         GetLengthPrefixed(&encoded, key) && encoded.empty();
}

bool ReadValueHeader(std::string_view value, ValueHeader* header) {
  if (value.size() < kValueHeaderSize) return false;
  header->format = static_cast<uint8_t>(value[0]);
  uint64_t u = 0;
  for (int i = 7; i >= 0; --i) u = (u << 8) | static_cast<uint8_t>(value[1 + i]);
  header->retain_until_ms = static_cast<int64_t>(u);
  return true;
}

std::string EncodeIntentValue(const Intent& intent, int64_t retain_until_ms) {
  std::string out;
  out.reserve(kValueHeaderSize + 32 + intent.payload.size() + intent.key.size() +
              intent.input.size());
  PutHeader(&out, retain_until_ms);
  PutSigned(&out, intent.rules_version);
  PutSigned(&out, intent.created_at_ms);
  PutSigned(&out, intent.updated_at_ms);
  PutLengthPrefixed(&out, intent.key);
  PutLengthPrefixed(&out, intent.payload);
  PutLengthPrefixed(&out, intent.key_id);
  PutLengthPrefixed(&out, intent.input);
  if (intent.approval.state != ApprovalState::kNone) {
    const Approval& a = intent.approval;
    out.push_back(static_cast<char>(a.state));
    PutLengthPrefixed(&out, a.reason);
    PutLengthPrefixed(&out, a.decided_by);
    PutLengthPrefixed(&out, a.note);
    PutSigned(&out, a.decided_at_ms);
  }
  return out;
}

std::string EncodeActionValue(const Action& action, int64_t retain_until_ms) {
  std::string out;
  out.reserve(kValueHeaderSize + 48 + action.action_type.size() + action.intent_ref.size() +
              action.response.size() + action.error.size());
  PutHeader(&out, retain_until_ms);
  out.push_back(static_cast<char>(action.status));
  PutSigned(&out, action.attempt);
  PutSigned(&out, action.lease_token);
  PutSigned(&out, action.lease_until_ms);
  PutSigned(&out, action.created_at_ms);
  PutSigned(&out, action.updated_at_ms);
  PutLengthPrefixed(&out, action.action_type);
  PutLengthPrefixed(&out, action.intent_ref);
  PutLengthPrefixed(&out, action.response);
  PutLengthPrefixed(&out, action.error);
  return out;
}

Status DecodeIntentValue(std::string_view value, Intent* intent, int64_t* retain_until_ms) {
  std::string_view in;
  Status s = CheckedBody(value, "intent", &in, retain_until_ms);
  if (!s.ok()) return s;
  int64_t rules_version;
  if (!GetSigned(&in, &rules_version) || !GetSigned(&in, &intent->created_at_ms) ||
      !GetSigned(&in, &intent->updated_at_ms) || !GetLengthPrefixed(&in, &intent->key) ||
      !GetLengthPrefixed(&in, &intent->payload)) {
    return Status::Corruption("intent value malformed");
  }
  // Format 4 appends the key id; an older value has none and reads as "0".
  // Format 5 appends the input; an older value has none and reads as "".
  intent->key_id = "0";
  intent->input.clear();
  if (!in.empty() && !GetLengthPrefixed(&in, &intent->key_id)) {
    return Status::Corruption("intent value malformed");
  }
  if (!in.empty() && !GetLengthPrefixed(&in, &intent->input)) {
    return Status::Corruption("intent value malformed");
  }
  // Format 6 appends an approval, only to intents that have one.
  intent->approval = Approval();
  if (!in.empty()) {
    const uint8_t state = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    Approval& a = intent->approval;
    if (state == 0 || state > static_cast<uint8_t>(ApprovalState::kDenied) ||
        !GetLengthPrefixed(&in, &a.reason) || !GetLengthPrefixed(&in, &a.decided_by) ||
        !GetLengthPrefixed(&in, &a.note) || !GetSigned(&in, &a.decided_at_ms) || !in.empty()) {
      return Status::Corruption("intent value malformed");
    }
    a.state = static_cast<ApprovalState>(state);
  }
  intent->rules_version = static_cast<int>(rules_version);
  return Status::Ok();
}

Status DecodeActionValue(std::string_view value, Action* action, int64_t* retain_until_ms) {
  std::string_view in;
  Status s = CheckedBody(value, "action", &in, retain_until_ms);
  if (!s.ok()) return s;
  if (in.empty()) return Status::Corruption("action value malformed");
  const uint8_t status = static_cast<uint8_t>(in.front());
  in.remove_prefix(1);
  if (status > static_cast<uint8_t>(ActionStatus::kReleased)) {
    return Status::Corruption("action value with unknown status " + std::to_string(status));
  }
  action->status = static_cast<ActionStatus>(status);
  if (!GetSigned(&in, &action->attempt) || !GetSigned(&in, &action->lease_token) ||
      !GetSigned(&in, &action->lease_until_ms) || !GetSigned(&in, &action->created_at_ms) ||
      !GetSigned(&in, &action->updated_at_ms) || !GetLengthPrefixed(&in, &action->action_type) ||
      !GetLengthPrefixed(&in, &action->intent_ref) || !GetLengthPrefixed(&in, &action->response) ||
      !GetLengthPrefixed(&in, &action->error) || !in.empty()) {
    return Status::Corruption("action value malformed");
  }
  return Status::Ok();
}

std::string EncodeMessageValue(const MessageRecord& record) {
  std::string out;
  out.reserve(kValueHeaderSize + 40 + record.meta.size());
  PutHeader(&out, record.retain_until_ms);
  out.push_back(static_cast<char>(record.state));
  PutSigned(&out, record.count);
  PutSigned(&out, record.first_seen_at_ms);
  PutSigned(&out, record.last_seen_at_ms);
  PutSigned(&out, record.lease_token);
  PutSigned(&out, record.lease_until_ms);
  PutLengthPrefixed(&out, record.meta);
  return out;
}

Status DecodeMessageValue(std::string_view value, MessageRecord* record) {
  std::string_view in;
  Status s = CheckedBody(value, "message", &in, &record->retain_until_ms);
  if (!s.ok()) return s;
  if (in.empty()) return Status::Corruption("message value malformed");
  const uint8_t state = static_cast<uint8_t>(in.front());
  in.remove_prefix(1);
  if (state > static_cast<uint8_t>(MessageState::kDone)) {
    return Status::Corruption("message value with unknown state " + std::to_string(state));
  }
  record->state = static_cast<MessageState>(state);
  if (!GetSigned(&in, &record->count) || !GetSigned(&in, &record->first_seen_at_ms) ||
      !GetSigned(&in, &record->last_seen_at_ms) || !GetSigned(&in, &record->lease_token) ||
      !GetSigned(&in, &record->lease_until_ms) || !GetLengthPrefixed(&in, &record->meta) ||
      !in.empty()) {
    return Status::Corruption("message value malformed");
  }
  return Status::Ok();
}

std::string CounterPrefix(std::string_view tenant_id, int64_t day) {
  std::string out;
  out.reserve(tenant_id.size() + 13);
  out.push_back(kCounterTag);
  PutLengthPrefixed(&out, tenant_id);
  PutOrderedInt64(&out, day);
  return out;
}

std::string CounterKey(std::string_view tenant_id, int64_t day, std::string_view name) {
  std::string out = CounterPrefix(tenant_id, day);
  PutLengthPrefixed(&out, name);
  return out;
}

bool DecodeCounterKey(std::string_view encoded, Counter* counter) {
  if (encoded.empty() || encoded.front() != kCounterTag) return false;
  encoded.remove_prefix(1);
  return GetLengthPrefixed(&encoded, &counter->tenant_id) &&
         GetOrderedInt64(&encoded, &counter->day) && GetLengthPrefixed(&encoded, &counter->name) &&
         encoded.empty();
}

std::string EncodeCounterValue(const Counter& counter, int64_t retain_until_ms) {
  std::string out;
  out.reserve(kValueHeaderSize + 20);
  PutHeader(&out, retain_until_ms);
  PutSigned(&out, counter.total);
  PutSigned(&out, counter.count);
  return out;
}

Status DecodeCounterValue(std::string_view value, Counter* counter, int64_t* retain_until_ms) {
  std::string_view in;
  Status s = CheckedBody(value, "counter", &in, retain_until_ms);
  if (!s.ok()) return s;
  if (!GetSigned(&in, &counter->total) || !GetSigned(&in, &counter->count) || !in.empty()) {
    return Status::Corruption("counter value malformed");
  }
  return Status::Ok();
}

std::string PendingPrefix(std::optional<std::string_view> tenant_id) {
  std::string out(1, kPendingTag);
  if (tenant_id) PutLengthPrefixed(&out, *tenant_id);
  return out;
}

std::string PendingKey(std::string_view tenant_id, std::string_view intent_ref,
                       std::string_view action_type) {
  std::string out = PendingPrefix(tenant_id);
  PutLengthPrefixed(&out, intent_ref);
  PutLengthPrefixed(&out, action_type);
  return out;
}

bool DecodePendingKey(std::string_view encoded, Intent* intent) {
  if (encoded.empty() || encoded.front() != kPendingTag) return false;
  encoded.remove_prefix(1);
  return GetLengthPrefixed(&encoded, &intent->tenant_id) &&
         GetLengthPrefixed(&encoded, &intent->intent_ref) &&
         GetLengthPrefixed(&encoded, &intent->action_type) && encoded.empty();
}

std::string EncodePendingValue(int64_t created_at_ms, int64_t retain_until_ms) {
  std::string out;
  PutHeader(&out, retain_until_ms);
  PutSigned(&out, created_at_ms);
  return out;
}

Status DecodePendingValue(std::string_view value, int64_t* created_at_ms,
                          int64_t* retain_until_ms) {
  std::string_view in;
  Status s = CheckedBody(value, "pending approval", &in, retain_until_ms);
  if (!s.ok()) return s;
  if (!GetSigned(&in, created_at_ms) || !in.empty()) {
    return Status::Corruption("pending approval value malformed");
  }
  return Status::Ok();
}

}  // namespace intentd::store::codec
