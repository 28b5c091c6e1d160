#include "cli/export_format.h"

#include <nlohmann/json.hpp>
#include <set>

#include "common/binary.h"
#include "common/keyring.h"
#include "normalizers/utf8.h"

namespace intentd::cli {

using agent::kSoftwareVersion;
using normalizers::IsValidUtf8;

namespace {

using nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

using ordered = nlohmann::ordered_json;

void PutBytes(ordered* j, const char* name, const std::string& bytes) {
  if (IsValidUtf8(bytes))
    (*j)[name] = bytes;
  else
    (*j)[std::string(name) + "_b64"] = Base64Encode(bytes);
}

std::string Dump(const ordered& j) {
  return j.dump(-1, ' ', false, ordered::error_handler_t::strict);
}

// Reads members and remembers which, so that unknown ones can be refused.
class Reader {
 public:
  Reader(const json& object, std::string* error) : o_(object), error_(error) {}

  bool Bytes(const char* name, std::string* out) {
    const std::string b64 = std::string(name) + "_b64";
    auto plain = o_.find(name);
    auto encoded = o_.find(b64);
    seen_.insert(name);
    seen_.insert(b64);
    if (plain != o_.end() && encoded != o_.end())
      return Fail(std::string(name) + " and " + b64 + " are exclusive");
    if (plain != o_.end()) {
      if (!plain->is_string()) return Fail(std::string(name) + " must be a string");
      *out = plain->get<std::string>();
      return true;
    }
    if (encoded != o_.end()) {
      if (!encoded->is_string() || !Base64Decode(encoded->get<std::string>(), out)) {
        return Fail(b64 + " must be a base64 string");
      }
      return true;
    }
    return Fail(std::string(name) + " is missing");
  }

  bool Int(const char* name, int64_t* out) {
    seen_.insert(name);
    auto it = o_.find(name);
    if (it == o_.end()) return Fail(std::string(name) + " is missing");
    if (!it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      return Fail(std::string(name) + " must be an integer");
    }
    *out = it->get<int64_t>();
    return true;
  }

  bool Unsigned(const char* name, uint64_t* out) {
    seen_.insert(name);
    auto it = o_.find(name);
    if (it == o_.end() || !it->is_number_unsigned()) {
      return Fail(std::string(name) + " must be a non-negative integer");
    }
    *out = it->get<uint64_t>();
    return true;
  }

  void Skip(const char* name) { seen_.insert(name); }

  // Int() for an optional member: *out keeps its value when absent.
  bool OptionalInt(const char* name, int64_t* out) {
    if (o_.find(name) == o_.end()) {
      seen_.insert(name);
      return true;
    }
    return Int(name, out);
  }

  // Bytes() for an optional member: *out keeps its value when both forms
  // are absent.
  bool OptionalBytes(const char* name, std::string* out) {
    if (o_.find(name) == o_.end() && o_.find(std::string(name) + "_b64") == o_.end()) {
      seen_.insert(name);
      seen_.insert(std::string(name) + "_b64");
      return true;
    }
    return Bytes(name, out);
  }

  // An optional string member; *out keeps its value when absent.
  bool OptionalText(const char* name, std::string* out) {
    seen_.insert(name);
    auto it = o_.find(name);
    if (it == o_.end()) return true;
    if (!it->is_string()) return Fail(std::string(name) + " must be a string");
    *out = it->get<std::string>();
    return true;
  }

  // An optional object member; *out is nullptr when absent.
  bool OptionalObject(const char* name, const json** out) {
    seen_.insert(name);
    *out = nullptr;
    auto it = o_.find(name);
    if (it == o_.end()) return true;
    if (!it->is_object()) return Fail(std::string(name) + " must be an object");
    *out = &*it;
    return true;
  }

  bool NoOthers() {
    for (auto it = o_.begin(); it != o_.end(); ++it) {
      if (!seen_.count(it.key())) return Fail("unknown member \"" + it.key() + "\"");
    }
    return true;
  }

  bool Fail(const std::string& message) {
    *error_ = message;
    return false;
  }

 private:
  const json& o_;
  std::string* error_;
  std::set<std::string> seen_;
};

bool ParseStatus(const std::string& name, store::ActionStatus* status) {
  using store::ActionStatus;
  for (ActionStatus s : {ActionStatus::kStarted, ActionStatus::kCompleted, ActionStatus::kFailed,
                         ActionStatus::kReleased}) {
    if (name == store::ActionStatusName(s)) {
      *status = s;
      return true;
    }
  }
  return false;
}

bool ParseIntent(Reader& r, store::ExportRecord* record) {
  store::Intent& i = record->intent;
  int64_t rules_version = 0;
  if (!r.Bytes("tenant_id", &i.tenant_id) || !r.Bytes("intent_ref", &i.intent_ref) ||
      !r.Bytes("action_type", &i.action_type) || !r.Bytes("key", &i.key) ||
      !r.Bytes("payload", &i.payload) || !r.Int("rules_version", &rules_version) ||
      !r.Int("created_at_ms", &i.created_at_ms) || !r.Int("updated_at_ms", &i.updated_at_ms) ||
      !r.Int("retain_until_ms", &record->retain_until_ms)) {
    return false;
  }
  // Exports from before keyrings have none: their intents were keyed with
  // the one secret, id "0".
  i.key_id = "0";
  if (!r.OptionalText("key_id", &i.key_id)) return false;
  // Exports from before inputs were kept have none.
  if (!r.OptionalBytes("input", &i.input)) return false;
  // Only intents the policy held for approval have one.
  const json* approval = nullptr;
  if (!r.OptionalObject("approval", &approval)) return false;
  if (approval != nullptr) {
    std::string error;
    Reader a(*approval, &error);
    std::string state;
    store::Approval& out = i.approval;
    if (!a.Bytes("state", &state) || !a.Bytes("reason", &out.reason) ||
        !a.OptionalBytes("decided_by", &out.decided_by) || !a.OptionalBytes("note", &out.note) ||
        !a.OptionalInt("decided_at_ms", &out.decided_at_ms) || !a.NoOthers()) {
      return r.Fail("approval: " + error);
    }
    using store::ApprovalState;
    out.state = ApprovalState::kNone;
    for (ApprovalState s :
         {ApprovalState::kPending, ApprovalState::kApproved, ApprovalState::kDenied}) {
      if (state == store::ApprovalStateName(s)) out.state = s;
    }
    if (out.state == ApprovalState::kNone) {
      return r.Fail("approval: state must be pending, approved or denied");
    }
  }
  if (!agent::Keyring::ValidId(i.key_id)) {
    return r.Fail("key_id must be 1 to 16 characters of A-Z a-z 0-9 _ . -");
  }
  if (rules_version < 1 || rules_version > 1000) return r.Fail("rules_version is out of range");
  i.rules_version = static_cast<int>(rules_version);
  return true;
}

bool ParseAction(Reader& r, store::ExportRecord* record) {
  store::Action& a = record->action;
  std::string status;
  if (!r.Bytes("tenant_id", &a.tenant_id) || !r.Bytes("key", &a.key) ||
      !r.Bytes("action_type", &a.action_type) || !r.Bytes("intent_ref", &a.intent_ref) ||
      !r.Bytes("status", &status) || !r.Int("attempt", &a.attempt) ||
      !r.Int("lease_token", &a.lease_token) || !r.Int("lease_until_ms", &a.lease_until_ms) ||
      !r.Bytes("response", &a.response) || !r.Bytes("error", &a.error) ||
      !r.Int("created_at_ms", &a.created_at_ms) || !r.Int("updated_at_ms", &a.updated_at_ms) ||
      !r.Int("retain_until_ms", &record->retain_until_ms)) {
    return false;
  }
  if (!ParseStatus(status, &a.status)) {
    return r.Fail("status must be started, completed, failed or released");
  }
  return true;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) |
                       (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

bool Base64Decode(std::string_view text, std::string* bytes) {
  if (text.size() % 4 != 0) return false;
  bytes->clear();
  bytes->reserve(text.size() / 4 * 3);
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return false;  // "x=y=" style
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      int d = 0;
      if (k >= 4 - pad) {
        if (c != '=') return false;
      } else if ((d = value(c)) < 0) {
        return false;
      }
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    bytes->push_back(static_cast<char>(v >> 16));
    if (pad < 2) bytes->push_back(static_cast<char>((v >> 8) & 0xff));
    if (pad < 1) bytes->push_back(static_cast<char>(v & 0xff));
  }
  return true;
}

std::string ExportHeaderLine(int64_t exported_at_ms) {
  return Dump(ordered{{"intentd_export", kExportFormat},
                      {"software", std::string(kSoftwareVersion)},
                      {"exported_at_ms", exported_at_ms}});
}

std::string ExportRecordLine(const store::ExportRecord& record) {
  ordered j = ordered::object();
  if (record.kind == store::ExportRecord::Kind::kCounter) {
    const store::Counter& c = record.counter;
    j["type"] = "counter";
    PutBytes(&j, "tenant_id", c.tenant_id);
    PutBytes(&j, "name", c.name);
    j["day"] = c.day;
    j["total"] = c.total;
    j["count"] = c.count;
    j["retain_until_ms"] = record.retain_until_ms;
    return Dump(j);
  }
  if (record.kind == store::ExportRecord::Kind::kIntent) {
    const store::Intent& i = record.intent;
    j["type"] = "intent";
    PutBytes(&j, "tenant_id", i.tenant_id);
    PutBytes(&j, "intent_ref", i.intent_ref);
    PutBytes(&j, "action_type", i.action_type);
    PutBytes(&j, "key", i.key);
    PutBytes(&j, "payload", i.payload);
    j["rules_version"] = i.rules_version;
    j["key_id"] = i.key_id;
    if (!i.input.empty()) PutBytes(&j, "input", i.input);
    if (i.approval.state != store::ApprovalState::kNone) {
      ordered a = ordered::object();
      a["state"] = store::ApprovalStateName(i.approval.state);
      PutBytes(&a, "reason", i.approval.reason);
      if (i.approval.state != store::ApprovalState::kPending) {
        PutBytes(&a, "decided_by", i.approval.decided_by);
        PutBytes(&a, "note", i.approval.note);
        a["decided_at_ms"] = i.approval.decided_at_ms;
      }
      j["approval"] = a;
    }
    j["created_at_ms"] = i.created_at_ms;
    j["updated_at_ms"] = i.updated_at_ms;
  } else {
    const store::Action& a = record.action;
    j["type"] = "action";
    PutBytes(&j, "tenant_id", a.tenant_id);
    PutBytes(&j, "key", a.key);
    PutBytes(&j, "action_type", a.action_type);
    PutBytes(&j, "intent_ref", a.intent_ref);
    j["status"] = store::ActionStatusName(a.status);
    j["attempt"] = a.attempt;
    j["lease_token"] = a.lease_token;
    j["lease_until_ms"] = a.lease_until_ms;
    PutBytes(&j, "response", a.response);
    PutBytes(&j, "error", a.error);
    j["created_at_ms"] = a.created_at_ms;
    j["updated_at_ms"] = a.updated_at_ms;
  }
  j["retain_until_ms"] = record.retain_until_ms;
  return Dump(j);
}

std::string ExportEndLine(uint64_t intents, uint64_t actions, uint64_t counters) {
  ordered j{{"type", "end"}, {"intents", intents}, {"actions", actions}};
  if (counters > 0) j["counters"] = counters;
  return Dump(j);
}

bool ParseExportLine(std::string_view line, ExportLine* out, std::string* error) {
  json o = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (o.is_discarded() || !o.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  Reader r(o, error);
  if (o.contains("intentd_export")) {
    uint64_t format = 0;
    if (!r.Unsigned("intentd_export", &format)) return false;
    if (format != kExportFormat) {
      return r.Fail("export format " + std::to_string(format) + " is not " +
                    std::to_string(kExportFormat) + " (written by another intentd version)");
    }
    r.Skip("software");
    r.Skip("exported_at_ms");
    out->kind = ExportLine::Kind::kHeader;
    return r.NoOthers();
  }
  auto type = o.find("type");
  r.Skip("type");
  if (type == o.end() || !type->is_string()) return r.Fail("type is missing");
  out->record = store::ExportRecord();
  if (*type == "intent") {
    out->kind = ExportLine::Kind::kRecord;
    out->record.kind = store::ExportRecord::Kind::kIntent;
    if (!ParseIntent(r, &out->record)) return false;
  } else if (*type == "action") {
    out->kind = ExportLine::Kind::kRecord;
    out->record.kind = store::ExportRecord::Kind::kAction;
    if (!ParseAction(r, &out->record)) return false;
  } else if (*type == "counter") {
    out->kind = ExportLine::Kind::kRecord;
    out->record.kind = store::ExportRecord::Kind::kCounter;
    store::Counter& c = out->record.counter;
    if (!r.Bytes("tenant_id", &c.tenant_id) || !r.Bytes("name", &c.name) || !r.Int("day", &c.day) ||
        !r.Int("total", &c.total) || !r.Int("count", &c.count) ||
        !r.Int("retain_until_ms", &out->record.retain_until_ms)) {
      return false;
    }
  } else if (*type == "end") {
    out->kind = ExportLine::Kind::kEnd;
    out->end_counters = 0;
    if (!r.Unsigned("intents", &out->end_intents) || !r.Unsigned("actions", &out->end_actions)) {
      return false;
    }
    if (o.contains("counters") && !r.Unsigned("counters", &out->end_counters)) return false;
    r.Skip("counters");
  } else {
    return r.Fail("type must be intent, action, counter or end");
  }
  return r.NoOthers();
}

}  // namespace intentd::cli
