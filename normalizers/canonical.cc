// The canonical JSON text that is the digest input.
#include <cstdint>
#include <cstring>
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

size_t PlainJsonPrefix(std::string_view text, bool ascii_only) {
  // Eight bytes at a time: the exact "has a byte less than n" and "has a
  // byte equal to v" word tests (any byte values), then byte by byte.
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  const auto has_zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, text.data() + i, 8);
    uint64_t special = ((x - kOnes * 0x20) & ~x & kHigh) | has_zero(x ^ (kOnes * '"')) |
                       has_zero(x ^ (kOnes * '\\'));
    if (ascii_only) special |= (x & kHigh) | has_zero(x ^ (kOnes * 0x7f));
    if (special != 0) break;
  }
  for (; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (NeedsEscape(c) || (ascii_only && c >= 0x7f)) break;
  }
  return i;
}

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  while (true) {
    const size_t plain = PlainJsonPrefix(text, /*ascii_only=*/false);
    out->append(text.data(), plain);
    if (plain == text.size()) break;
    AppendEscape(static_cast<unsigned char>(text[plain]), out);
    text.remove_prefix(plain + 1);
  }
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

std::string PayloadText(const Derivation& d) {
  size_t size = 2;
  for (const auto& [name, value] : d.payload) size += name.size() + value.size() + 6;
  std::string out;
  out.reserve(size);
  out.push_back('{');
  for (size_t i = 0; i < d.payload.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(d.payload[i].first, &out);
    out.push_back(':');
    AppendJsonString(d.payload[i].second, &out);
  }
  out.push_back('}');
  return out;
}

std::string CentsAsUnits(std::string_view cents) {
  std::string sign;
  if (!cents.empty() && cents.front() == '-') {
    sign = "-";
    cents.remove_prefix(1);
  }
  std::string digits(cents.size() < 3 ? 3 - cents.size() : 0, '0');
  digits.append(cents);
  return sign + digits.substr(0, digits.size() - 2) + "." + digits.substr(digits.size() - 2);
}

}  // namespace intentd::normalizers
