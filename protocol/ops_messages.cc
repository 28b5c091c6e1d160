// Inbound message de-duplication: seen, done and forget (docs/protocol.md).
#include "protocol/ops.h"

namespace intentd::agent {
namespace {

constexpr size_t kMaxChannelBytes = 64;
constexpr size_t kMaxMessageIdBytes = 256;
constexpr size_t kMaxMessages = 1000;
constexpr size_t kMaxMetaBytes = 4096;
constexpr int64_t kMaxTtlMs = 10LL * 365 * 24 * 3600 * 1000;

bool Fail(OpError* error, ErrorCode code, std::string field, std::string message) {
  error->code = code;
  error->field = std::move(field);
  error->message = std::move(message);
  return false;
}

bool ReadChannel(const JsonView& request, std::string* out, OpError* error) {
  const JsonView value = request.find("channel");
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "channel",
                "channel is required: where the message came from, e.g. \"whatsapp\"");
  }
  if (!value.is_string() || IsBlank(value.string()) || value.string().size() > kMaxChannelBytes) {
    return Fail(error, ErrorCode::kInvalidField, "channel",
                "channel must be a non-blank string of at most 64 bytes, e.g. \"whatsapp\"");
  }
  out->assign(value.string());
  return true;
}

// A message id at `field` (message_id, or messages[i].message_id).
bool ReadMessageId(const JsonView& value, const std::string& field, std::string* out,
                   OpError* error) {
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, field,
                field + " is required: the provider's message id, a string of at most 256 bytes");
  }
  if (!value.is_string()) {
    return Fail(error, ErrorCode::kInvalidField, field,
                field + " must be a string (got " + std::string(value.TypeName()) + ")");
  }
  const std::string_view id = value.string();
  if (IsBlank(id)) {
    return Fail(error, ErrorCode::kInvalidField, field, field + " must not be empty or blank");
  }
  if (id.size() > kMaxMessageIdBytes) {
    return Fail(error, ErrorCode::kInvalidField, field,
                field + " is " + std::to_string(id.size()) + " bytes; send at most 256 bytes");
  }
  out->assign(id);
  return true;
}

// meta at `field`: absent or null is none; else its compact form, at most 4 KiB.
bool ReadMeta(const JsonView& value, const std::string& field, std::string* out, OpError* error) {
  out->clear();
  if (value.is_null()) return true;
  AppendJson(value, out);
  if (out->size() > kMaxMetaBytes) {
    return Fail(error, ErrorCode::kInvalidField, field,
                field + " is " + std::to_string(out->size()) +
                    " bytes as compact JSON; store at most 4096 bytes (what the bot needs to "
                    "find the message again, not the message)");
  }
  return true;
}

// A positive integer member within [min, max]; *out = 0 when absent.
bool ReadOptionalMs(const JsonView& request, const char* name, int64_t min, int64_t max,
                    const char* hint, int64_t* out, OpError* error) {
  *out = 0;
  const JsonView value = request.find(name);
  if (value.is_null()) return true;
  if (!value.Int64(out) || *out < min || *out > max) {
    return Fail(error, ErrorCode::kInvalidField, name,
                std::string(name) + " must be an integer from " + std::to_string(min) + " to " +
                    std::to_string(max) + " (milliseconds)" + hint);
  }
  return true;
}

// The request's one message id or its batch, into request->messages; then
// the top-level meta, the default of entries without their own.
bool ReadMessages(const JsonView& request, store::SeenRequest* out, bool* batch, OpError* error) {
  const JsonView single = request.find("message_id");
  const JsonView list = request.find("messages");
  if (!list.is_null() && !single.is_null()) {
    return Fail(error, ErrorCode::kInvalidField, "message_id",
                "send either message_id (one message) or messages (a batch), not both");
  }
  *batch = !list.is_null();
  std::vector<bool> own_meta;
  if (!*batch) {
    store::SeenRequest::Message m;
    if (!ReadMessageId(single, "message_id", &m.message_id, error)) return false;
    out->messages.push_back(std::move(m));
    own_meta.push_back(false);
  } else {
    if (!list.is_array()) {
      return Fail(error, ErrorCode::kInvalidField, "messages",
                  "messages must be an array of message ids or of "
                  "{\"message_id\":...,\"meta\":...} objects");
    }
    const std::vector<JsonView> entries = list.Elements();
    if (entries.empty() || entries.size() > kMaxMessages) {
      return Fail(error, ErrorCode::kInvalidField, "messages",
                  "messages has " + std::to_string(entries.size()) +
                      " entries; send 1 to 1000 (split a larger webhook into several calls)");
    }
    out->messages.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const JsonView& e = entries[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      store::SeenRequest::Message m;
      bool has_meta = false;
      if (e.is_string()) {
        if (!ReadMessageId(e, at, &m.message_id, error)) return false;
      } else if (e.is_object()) {
        if (!ReadMessageId(e.find("message_id"), at + ".message_id", &m.message_id, error)) {
          return false;
        }
        const JsonView meta = e.find("meta");
        has_meta = !meta.absent();
        if (has_meta && !ReadMeta(meta, at + ".meta", &m.meta, error)) return false;
      } else {
        return Fail(error, ErrorCode::kInvalidField, at,
                    at + " must be a message id (string) or an object with message_id");
      }
      out->messages.push_back(std::move(m));
      own_meta.push_back(has_meta);
    }
  }
  std::string default_meta;
  if (!ReadMeta(request.find("meta"), "meta", &default_meta, error)) return false;
  for (size_t i = 0; i < out->messages.size(); ++i) {
    if (!own_meta[i]) out->messages[i].meta = default_meta;
  }
  return true;
}

// One message's answer members.
void AddAnswer(const store::SeenAnswer& a, bool claim, Reply* r) {
  const store::MessageRecord& m = a.record;
  r->Add("first", a.first);
  r->Add("state", store::MessageStateName(m.state));
  r->Add("count", m.count);
  r->Add("first_seen_at_ms", m.first_seen_at_ms);
  r->Add("expires_at_ms", m.retain_until_ms);
  if (!m.meta.empty()) r->AddRaw("meta", m.meta);
  if (claim && a.first) {
    r->Add("lease_token", m.lease_token);
    r->Add("lease_until_ms", m.lease_until_ms);
  }
  if (claim && !a.first && m.state == store::MessageState::kProcessing) {
    r->Add("retry_after_ms", a.retry_after_ms);
  }
}

// tenant_id, channel and the single message_id of done and forget.
bool ReadOneMessage(const OpContext& ctx, std::string* tenant, std::string* channel,
                    std::string* id, OpError* error) {
  return ReadTenant(ctx, tenant, error) && ReadChannel(ctx.request, channel, error) &&
         ReadMessageId(ctx.request.find("message_id"), "message_id", id, error);
}

}  // namespace

bool OpSeen(const OpContext& ctx, Reply* reply, OpError* error) {
  store::SeenRequest request;
  bool batch = false;
  if (!ReadTenant(ctx, &request.tenant_id, error) ||
      !ReadChannel(ctx.request, &request.channel, error) ||
      !ReadMessages(ctx.request, &request, &batch, error) ||
      !ReadOptionalMs(ctx.request, "ttl_ms", 1, kMaxTtlMs,
                      "; omit it for the store's retention (at least 7 days)", &request.ttl_ms,
                      error) ||
      // The claim's lease has begin's limits; absent, a plain sighting.
      (!ctx.request.find("lease_ms").is_null() &&
       !ReadLeaseMs(ctx.request, &request.lease_ms, error))) {
    return false;
  }
  std::vector<store::SeenAnswer> answers;
  const store::Status st = ctx.store.Seen(request, &answers);
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  const bool claim = request.lease_ms > 0;
  uint64_t first = 0, reclaimed = 0;
  for (const store::SeenAnswer& a : answers) {
    first += a.first;
    reclaimed += a.first && a.record.lease_token > 1;
  }
  const uint64_t duplicates = answers.size() - first;
  ctx.stats.seen_first.fetch_add(first, std::memory_order_relaxed);
  ctx.stats.seen_duplicates.fetch_add(duplicates, std::memory_order_relaxed);
  ctx.stats.seen_reclaimed.fetch_add(reclaimed, std::memory_order_relaxed);
  ctx.stats.channels.Count(request.channel, first, duplicates);
  if (!batch) {
    AddAnswer(answers.front(), claim, reply);
    return true;
  }
  std::string results = "[";
  for (size_t i = 0; i < answers.size(); ++i) {
    Reply r;
    r.Add("message_id", request.messages[i].message_id);
    AddAnswer(answers[i], claim, &r);
    if (i > 0) results.push_back(',');
    results.push_back('{');
    results.append(r.body(), 1, std::string::npos);  // without the leading comma
    results.push_back('}');
  }
  results.push_back(']');
  reply->AddRaw("results", results);
  return true;
}

namespace {

// done and release: the claim's holder ends it (release: gives it back).
bool EndClaim(const OpContext& ctx, bool release, Reply* reply, OpError* error) {
  std::string tenant, channel, id;
  int64_t token = 0;
  if (!ReadOneMessage(ctx, &tenant, &channel, &id, error) ||
      !ReadLeaseToken(ctx.request, &token, error)) {
    return false;
  }
  store::MessageRecord record;
  const store::Status st = release ? ctx.store.ReleaseMessage(tenant, channel, id, token, &record)
                                   : ctx.store.MessageDone(tenant, channel, id, token, &record);
  if (!st.ok()) {
    *error = FromStore(st);
    if (error->code == ErrorCode::kNotFound) {
      error->field = "message_id";
      error->message =
          "no record of this message (never seen with lease_ms, forgotten, or "
          "past its ttl)";
    } else if (error->code == ErrorCode::kLeaseLost) {
      ctx.stats.lease_lost.fetch_add(1);
      error->field = "lease_token";
      error->message += "; another processor holds the message now: stop";
    } else if (error->code == ErrorCode::kInvalidState) {
      error->field = "lease_token";
    }
    return false;
  }
  if (release) ctx.stats.seen_released.fetch_add(1, std::memory_order_relaxed);
  reply->Add("state", store::MessageStateName(record.state));
  if (release) reply->Add("lease_until_ms", record.lease_until_ms);
  return true;
}

}  // namespace

bool OpDone(const OpContext& ctx, Reply* reply, OpError* error) {
  return EndClaim(ctx, /*release=*/false, reply, error);
}

bool OpRelease(const OpContext& ctx, Reply* reply, OpError* error) {
  return EndClaim(ctx, /*release=*/true, reply, error);
}

// Admins only (kOps).
bool OpForget(const OpContext& ctx, Reply* reply, OpError* error) {
  std::string tenant, channel, id;
  if (!ReadOneMessage(ctx, &tenant, &channel, &id, error)) return false;
  bool forgotten = false;
  const store::Status st = ctx.store.ForgetMessage(tenant, channel, id, &forgotten);
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  reply->Add("forgotten", forgotten);
  return true;
}

}  // namespace intentd::agent
