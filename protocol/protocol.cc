#include "protocol/protocol.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "normalizers/key_derivation.h"
#include "protocol/request_line.h"

namespace intentd::agent {

using nlohmann::json;

namespace {

// kOps' rows, checked when the agent is compiled: a name and a function
// each, no name twice, and a whole_store text exactly for kAdminOfAll.
constexpr bool OpTableIsConsistent() {
  for (size_t i = 0; i < kOpCount; ++i) {
    const OpSpec& op = kOps[i];
    if (op.name.empty() || op.run == nullptr) return false;
    if ((op.access == OpAccess::kAdminOfAll) == op.whole_store.empty()) return false;
    for (size_t j = 0; j < i; ++j) {
      if (kOps[j].name == op.name) return false;
    }
  }
  return true;
}
static_assert(OpTableIsConsistent(), "kOps: every row needs a unique name and a function");

}  // namespace

size_t FindOp(std::string_view name) {
  for (size_t i = 0; i < kOpCount; ++i) {
    if (kOps[i].name == name) return i;
  }
  return kOpCount;
}

std::string OpList() {
  std::string out;
  for (const OpSpec& op : kOps) {
    if (!out.empty()) out += ", ";
    out += op.name;
  }
  return out;
}

namespace {

// The start of every response line: "{" and the echoed id, if any.
void AppendLineStart(const std::string& id_text, std::string* line) {
  line->push_back('{');
  if (!id_text.empty()) line->append("\"id\":").append(id_text).append(",");
}

std::string LineStart(const std::string& id_text) {
  std::string line;
  AppendLineStart(id_text, &line);
  return line;
}

}  // namespace

std::string ErrorLine(const std::string& id_text, ErrorCode code, const std::string& message,
                      const std::string& field) {
  std::string line = LineStart(id_text);
  line += "\"ok\":false,\"error\":{\"code\":\"";
  line += ErrorCodeName(code);
  line += "\",\"message\":";
  line += json(message).dump(-1, ' ', false, json::error_handler_t::replace);
  if (!field.empty()) {
    line += ",\"field\":";
    line += json(field).dump(-1, ' ', false, json::error_handler_t::replace);
  }
  line += "}}";
  return line;
}

std::string SuccessLine(const std::string& id_text, const Reply& reply) {
  std::string out;
  out.reserve(id_text.size() + reply.body().size() + 16);
  AppendLineStart(id_text, &out);
  out += "\"ok\":true";
  out += reply.body();
  out += "}";
  return out;
}

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
      // nlohmann's map: sorted by name, each name once.
      char separator = '{';
      for (const auto& [name, member] : value.Members()) {
        out->push_back(separator);
        separator = ',';
        AppendJsonText(name, out);
        out->push_back(':');
        AppendJson(member, out);
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

void AppendJson(const json& value, std::string* out) {
  *out += value.dump(-1, ' ', false, json::error_handler_t::replace);
}

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

}  // namespace intentd::agent
