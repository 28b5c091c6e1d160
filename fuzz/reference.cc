#include "fuzz/reference.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace intentd::fuzz {
namespace {

// Decodes the code point starting at text[i]; returns its length in bytes,
// or 0 when the sequence there is ill-formed.
size_t Decode(std::string_view text, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = b(i);
  size_t len;
  uint32_t min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

bool ValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    const size_t n = Decode(text, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool InStripSet(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x20 || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string_view ReferenceStrip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    uint32_t cp;
    const size_t n = Decode(text, begin, &cp);
    if (n == 0 || !InStripSet(cp)) break;
    begin += n;
  }
  size_t end = text.size();
  while (end > begin) {
    // The last code point starts at most 3 continuation bytes back.
    size_t start = end - 1;
    while (start > begin && end - start < 4 &&
           (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    uint32_t cp;
    const size_t n = Decode(text, start, &cp);
    if (n == 0 || start + n != end || !InStripSet(cp)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::optional<int64_t> ReferenceMoneyCents(std::string_view text) {
  const std::string_view t = ReferenceStrip(text);
  size_t i = 0;
  __int128 units = 0;
  bool huge = false;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    units = units * 10 + (t[i] - '0');
    if (units > (static_cast<__int128>(1) << 80))
      huge = true, units = static_cast<__int128>(1) << 80;
    ++i;
  }
  if (i == 0) return std::nullopt;
  int cents = 0;
  if (i < t.size()) {
    if (t[i] != '.') return std::nullopt;
    ++i;
    const size_t first = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      const size_t pos = i - first;
      if (pos == 0)
        cents += (t[i] - '0') * 10;
      else if (pos == 1)
        cents += t[i] - '0';
      else if (t[i] != '0')
        return std::nullopt;
      ++i;
    }
    if (i == first || i != t.size()) return std::nullopt;
  }
  const __int128 total = units * 100 + cents;
  if (huge || total <= 0 || total > INT64_MAX) return std::nullopt;
  return static_cast<int64_t>(total);
}

bool ValidCpf(std::string_view d) {
  if (d.size() != 11) return false;
  bool all_equal = true;
  for (char c : d) {
    if (c < '0' || c > '9') return false;
    all_equal = all_equal && c == d[0];
  }
  if (all_equal) return false;
  for (int check = 9; check <= 10; ++check) {
    int sum = 0;
    for (int k = 0; k < check; ++k) sum += (d[k] - '0') * (check + 1 - k);
    const int r = (sum * 10) % 11 % 10;
    if (r != d[check] - '0') return false;
  }
  return true;
}

std::string HmacSha256Hex(std::string_view secret, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[mac[i] >> 4];
    hex += kHex[mac[i] & 15];
  }
  return hex;
}

}  // namespace intentd::fuzz
