// Argument readers and response pieces shared by the operations.

#include "common/log.h"
#include "protocol/limits.h"
#include "protocol/ops.h"

namespace intentd::agent {
namespace {

constexpr size_t kMaxNameBytes = 256;
using protocol::kDefaultLeaseMs;
using protocol::kMaxLeaseMs;
using protocol::kMaxResultBytes;
using protocol::kMinLeaseMs;

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
    return Fail(
        error, ErrorCode::kInvalidField, name,
        std::string(name) + " is " + std::to_string(s.size()) + " bytes; send at most 256 bytes");
  }
  out->assign(s);
  return true;
}

}  // namespace

bool IsBlank(std::string_view text) { return normalizers::Strip(text).empty(); }

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

bool ReadListing(const OpContext& ctx, std::optional<std::string>* tenant, size_t* limit,
                 OpError* error) {
  tenant->reset();
  if (!ctx.request.find("tenant_id").is_null()) {
    std::string t;
    if (!ReadTenant(ctx, &t, error)) return false;
    *tenant = std::move(t);
  } else if (!ctx.access.admin()) {
    return Fail(error, ErrorCode::kForbidden, "tenant_id",
                "listing every tenant needs admin rights; pass tenant_id");
  }
  int64_t n = protocol::kDefaultListing;
  if (const JsonView given = ctx.request.find("limit"); !given.is_null()) {
    if (!given.Int64(&n) || n < 1 || n > protocol::kMaxListing) {
      return Fail(error, ErrorCode::kInvalidField, "limit",
                  "limit must be an integer from 1 to " + std::to_string(protocol::kMaxListing));
    }
  }
  *limit = static_cast<size_t>(n);
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
                "lease_ms must be an integer from " + std::to_string(kMinLeaseMs) + " to " +
                    std::to_string(kMaxLeaseMs) + " (milliseconds)");
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
                    " bytes as compact JSON; store at most " + std::to_string(kMaxResultBytes) +
                    " bytes (keep the provider's id and status, not the whole body)");
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
    case Code::kNotFound:
      e.code = ErrorCode::kNotFound;
      break;
    case Code::kLeaseLost:
      e.code = ErrorCode::kLeaseLost;
      break;
    case Code::kInvalidState:
      e.code = ErrorCode::kInvalidState;
      break;
    case Code::kInvalidArgument:
      e.code = ErrorCode::kBadRequest;
      break;
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
  j["txid"] = normalizers::TxidOfKey(a.key);
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

}  // namespace intentd::agent
