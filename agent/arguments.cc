// Argument readers and response pieces shared by the operations.
#include <algorithm>
#include <charconv>

#include "agent/log.h"
#include "agent/ops.h"

namespace intentd::agent {
namespace {

constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxResultBytes = 32 * 1024;
constexpr int64_t kMinLeaseMs = 1000;
constexpr int64_t kMaxLeaseMs = 3600 * 1000;
constexpr int64_t kDefaultLeaseMs = 300000;

bool Fail(OpError* error, ErrorCode code, std::string field, std::string message) {
  error->code = code;
  error->field = std::move(field);
  error->message = std::move(message);
  return false;
}

// tenant_id and intent_ref: non-empty, not blank, at most 256 bytes, as given.
bool ReadName(const JsonView& request, const char* name, std::string* out, OpError* error) {
  const JsonView value = request.find(name);
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, name,
                std::string(name) + " is required: a non-empty string of at most 256 bytes");
  }
  if (!value.is_string()) {
    return Fail(
        error, ErrorCode::kInvalidField, name,
        std::string(name) + " must be a string (got " + std::string(value.TypeName()) + ")");
  }
  const std::string_view s = value.string();
  if (IsBlank(s)) {
    return Fail(error, ErrorCode::kInvalidField, name,
                std::string(name) + " must not be empty or only whitespace");
  }
  if (s.size() > kMaxNameBytes) {
    return Fail(error, ErrorCode::kInvalidField, name,
                std::string(name) + " is " + std::to_string(s.size()) +
                    " bytes; send at most 256 bytes");
  }
  out->assign(s);
  return true;
}

}  // namespace

bool IsBlank(std::string_view text) { return normalizers::Strip(text).empty(); }

void Reply::AppendKey(std::string_view key) {
  body_.push_back(',');
  body_.push_back('"');
  body_.append(key);
  body_.append("\":");
}

namespace {

// Printable ASCII that JSON writes as it is: no quote, backslash or control.
bool PlainAscii(std::string_view text) {
  return normalizers::PlainJsonPrefix(text, /*ascii_only=*/true) == text.size();
}

// A JSON string holding `text`, as json::dump writes it.
void AppendJsonText(std::string_view text, std::string* out) {
  if (!PlainAscii(text)) {
    *out += json(text).dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  out->push_back('"');
  out->append(text);
  out->push_back('"');
}

template <typename Int>
void AppendInt(Int value, std::string* out) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out->append(digits, end);
}

}  // namespace

void AppendJson(const JsonView& value, std::string* out) {
  using Type = JsonView::Type;
  const normalizers::FieldValue v = value.AsField();
  switch (v.type) {
    case Type::kString:
      AppendJsonText(v.text, out);
      return;
    case Type::kSigned:
      AppendInt(v.signed_value, out);
      return;
    case Type::kUnsigned:
      AppendInt(v.unsigned_value, out);
      return;
    case Type::kBool:
      out->append(value.boolean() ? "true" : "false");
      return;
    case Type::kNull:
      out->append("null");
      return;
    case Type::kFloat:
      // nlohmann's number format (rare in requests and replies).
      *out += json(v.float_value).dump();
      return;
    case Type::kObject: {
      // nlohmann's map keeps the names sorted and the last of repeated ones.
      auto members = value.Members();
      const auto by_name = [](const auto& a, const auto& b) { return a.first < b.first; };
      if (members.size() <= 16) {
        // Stable and without stable_sort's buffer: the usual small object.
        for (size_t i = 1; i < members.size(); ++i) {
          for (size_t j = i; j > 0 && by_name(members[j], members[j - 1]); --j) {
            std::swap(members[j], members[j - 1]);
          }
        }
      } else {
        std::stable_sort(members.begin(), members.end(), by_name);
      }
      char separator = '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i + 1 < members.size() && members[i + 1].first == members[i].first) continue;
        out->push_back(separator);
        separator = ',';
        AppendJsonText(members[i].first, out);
        out->push_back(':');
        AppendJson(members[i].second, out);
      }
      out->append(separator == '{' ? "{}" : "}");
      return;
    }
    case Type::kArray: {
      char separator = '[';
      for (const JsonView& element : value.Elements()) {
        out->push_back(separator);
        separator = ',';
        AppendJson(element, out);
      }
      out->append(separator == '[' ? "[]" : "]");
      return;
    }
  }
}

void AppendJson(const json& value, std::string* out) { AppendJson(JsonView(&value), out); }

void Reply::Add(std::string_view key, const json& value) {
  AppendKey(key);
  AppendJson(value, &body_);
}

void Reply::Add(std::string_view key, std::string_view text) {
  AppendKey(key);
  AppendJsonText(text, &body_);
}

void Reply::Add(std::string_view key, bool value) {
  AppendKey(key);
  body_.append(value ? "true" : "false");
}

void Reply::Add(std::string_view key, int64_t value) {
  AppendKey(key);
  AppendInt(value, &body_);
}

void Reply::Add(std::string_view key, uint64_t value) {
  AppendKey(key);
  AppendInt(value, &body_);
}

void Reply::AddRaw(std::string_view key, std::string_view raw_json) {
  AppendKey(key);
  body_.append(raw_json);
}

bool ReadTenant(const OpContext& ctx, std::string* out, OpError* error) {
  if (!ReadName(ctx.request, "tenant_id", out, error)) return false;
  if (!ctx.access.MayUseTenant(*out)) {
    return Fail(error, ErrorCode::kForbidden, "tenant_id",
                "this connection's user may not use tenant \"" + *out +
                    "\"; ask the operator to add it to the access rules");
  }
  return true;
}

bool ReadIntentRef(const JsonView& request, std::string* out, OpError* error) {
  return ReadName(request, "intent_ref", out, error);
}

bool ReadActionType(const OpContext& ctx, const normalizers::ActionType** out, OpError* error) {
  const JsonView value = ctx.request.find("action_type");
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "action_type",
                "action_type is required, e.g. \"pix.cobranca\"");
  }
  if (!value.is_string()) {
    return Fail(error, ErrorCode::kInvalidField, "action_type", "action_type must be a string");
  }
  const std::string_view name = value.string();
  const normalizers::ActionType* type = ctx.config.catalog.Find(name);
  if (type == nullptr) {
    std::string known;
    for (const auto& t : ctx.config.catalog.types()) known += (known.empty() ? "" : ", ") + t.name;
    return Fail(error, ErrorCode::kUnknownActionType, "action_type",
                "unknown action type \"" + std::string(name) + "\"; configured: " + known);
  }
  *out = type;
  return true;
}

bool ReadKey(const JsonView& request, std::string* out, OpError* error) {
  const JsonView value = request.find("key");
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "key",
                "key is required: the 64-hex key that begin returned");
  }
  if (!value.is_string() || value.string().empty() || value.string().size() > kMaxNameBytes) {
    return Fail(error, ErrorCode::kInvalidField, "key",
                "key must be the 64-hex key string that begin returned");
  }
  out->assign(value.string());
  return true;
}

bool ReadLeaseToken(const JsonView& request, int64_t* out, OpError* error) {
  const JsonView value = request.find("lease_token");
  if (value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "lease_token",
                "lease_token is required: the token that begin granted");
  }
  int64_t token = 0;
  if (!value.Int64(&token) || token < 1) {
    return Fail(error, ErrorCode::kInvalidField, "lease_token",
                "lease_token must be a positive integer: the token that begin granted");
  }
  *out = token;
  return true;
}

bool ReadLeaseMs(const JsonView& request, int64_t* out, OpError* error) {
  const JsonView value = request.find("lease_ms");
  if (value.is_null()) {
    *out = kDefaultLeaseMs;
    return true;
  }
  int64_t ms = 0;
  if (!value.Int64(&ms) || ms < kMinLeaseMs || ms > kMaxLeaseMs) {
    return Fail(error, ErrorCode::kInvalidField, "lease_ms",
                "lease_ms must be an integer from 1000 to 3600000 (milliseconds)");
  }
  *out = ms;
  return true;
}

bool ReadOptionalBool(const JsonView& request, const char* name, bool fallback, bool* out,
                      OpError* error) {
  const JsonView value = request.find(name);
  if (value.is_null()) {
    *out = fallback;
    return true;
  }
  if (!value.is_bool()) {
    return Fail(error, ErrorCode::kInvalidField, name,
                std::string(name) + " must be true or false");
  }
  *out = value.boolean();
  return true;
}

bool ReadResultValue(const JsonView& request, const char* name, std::string* out, OpError* error) {
  const JsonView value = request.find(name);
  if (value.absent()) {
    return Fail(error, ErrorCode::kMissingField, name,
                std::string(name) + " is required (any JSON value, null included)");
  }
  // (Request values are valid UTF-8: the line was parsed strictly.)
  out->clear();
  out->reserve(512);  // one allocation for the usual provider response
  AppendJson(value, out);
  if (out->size() > kMaxResultBytes) {
    return Fail(error, ErrorCode::kInvalidField, name,
                std::string(name) + " is " + std::to_string(out->size()) +
                    " bytes as compact JSON; store at most 32768 bytes (keep the provider's id "
                    "and status, not the whole body)");
  }
  return true;
}

namespace {

// A full disk refuses every write: one line a second per kind of store
// error, not one per request (and one kind does not hide another).
LogThrottle& StoreErrorLog(store::Status::Code code) {
  using Code = store::Status::Code;
  constexpr auto kInterval = std::chrono::seconds(1);
  static LogThrottle storage(kInterval), corruption(kInterval), incompatible(kInterval),
      busy(kInterval);
  switch (code) {
    case Code::kCorruption:
      return corruption;
    case Code::kIncompatible:
      return incompatible;
    case Code::kBusy:
      return busy;
    default:
      return storage;
  }
}

}  // namespace

void LogStoreFailure(const store::Status& status) {
  StoreErrorLog(status.code()).Log(LogLevel::kError, "storage error: " + status.message());
}

OpError FromStore(const store::Status& status) {
  using Code = store::Status::Code;
  OpError e;
  e.message = status.message();
  switch (status.code()) {
    case Code::kNotFound: e.code = ErrorCode::kNotFound; break;
    case Code::kLeaseLost: e.code = ErrorCode::kLeaseLost; break;
    case Code::kInvalidState: e.code = ErrorCode::kInvalidState; break;
    case Code::kInvalidArgument: e.code = ErrorCode::kBadRequest; break;
    case Code::kStorageError:
    case Code::kCorruption:
    case Code::kIncompatible:
    case Code::kBusy:
      e.code = ErrorCode::kStorageError;
      e.message = "the store could not complete the operation (" + status.message() +
                  "); nothing was granted; retry later";
      LogStoreFailure(status);
      break;
    default:
      e.code = ErrorCode::kInternal;
      LogError("unexpected store status: " + status.message());
      break;
  }
  return e;
}

json ActionJson(const store::Action& a) {
  json j = json::object();
  j["tenant_id"] = a.tenant_id;
  j["key"] = a.key;
  j["txid"] = a.key.substr(0, 35);
  j["action_type"] = a.action_type;
  j["intent_ref"] = a.intent_ref;
  j["status"] = store::ActionStatusName(a.status);
  j["attempt"] = a.attempt;
  j["lease_token"] = a.lease_token;
  j["lease_until_ms"] = a.lease_until_ms;
  j["created_at_ms"] = a.created_at_ms;
  j["updated_at_ms"] = a.updated_at_ms;
  if (a.status == store::ActionStatus::kCompleted) {
    j["response"] = json::parse(a.response, nullptr, false);
  }
  if (!a.error.empty()) j["error"] = json::parse(a.error, nullptr, false);
  return j;
}

json PayloadJson(const normalizers::Derivation& d) {
  json p = json::object();
  for (const auto& [name, value] : d.payload) p[name] = value;
  return p;
}

std::string PayloadText(const normalizers::Derivation& d) {
  // Compact, sorted by name, with the contract's escaping: the same bytes
  // other services would compute.
  size_t size = 2;
  for (const auto& [name, value] : d.payload) size += name.size() + value.size() + 6;
  std::string out;
  out.reserve(size);
  out.push_back('{');
  for (size_t i = 0; i < d.payload.size(); ++i) {
    if (i > 0) out.push_back(',');
    normalizers::AppendJsonString(d.payload[i].first, &out);
    out.push_back(':');
    normalizers::AppendJsonString(d.payload[i].second, &out);
  }
  out.push_back('}');
  return out;
}

}  // namespace intentd::agent
