// The canonical JSON text that is the digest input.
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

// Bytes that need an escape: '"', '\' and the C0 controls. UTF-8 bytes of
// other code points (U+007F and above included) pass through unchanged.
bool NeedsEscape(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

void AppendEscape(unsigned char c, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  switch (c) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\b':
      out->append("\\b");
      return;
    case '\f':
      out->append("\\f");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default: {
      const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out->append(escape, sizeof(escape));
    }
  }
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  size_t run_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (!NeedsEscape(c)) continue;
    out->append(text.substr(run_start, i - run_start));
    AppendEscape(c, out);
    run_start = i + 1;
  }
  out->append(text.substr(run_start));
  out->push_back('"');
}

std::string CanonicalJson(std::string_view tenant_id, std::string_view action_type,
                          const std::vector<std::pair<std::string, std::string>>& payload,
                          int rules_version) {
  size_t size = 32 + tenant_id.size() + action_type.size();
  for (const auto& [name, value] : payload) size += name.size() + value.size() + 6;
  std::string out;
  out.reserve(size);
  // Top-level keys in code point order: a, p, t, v.
  out.append("{\"a\":");
  AppendJsonString(action_type, &out);
  out.append(",\"p\":{");
  bool first = true;
  for (const auto& [name, value] : payload) {
    if (!first) out.push_back(',');
    first = false;
    AppendJsonString(name, &out);
    out.push_back(':');
    AppendJsonString(value, &out);
  }
  out.append("},\"t\":");
  AppendJsonString(tenant_id, &out);
  out.append(",\"v\":");
  out.append(std::to_string(rules_version));
  out.push_back('}');
  return out;
}

}  // namespace intentd::normalizers
