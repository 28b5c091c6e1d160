#include "normalizers/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <cstdint>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace unicode {
namespace {

const uint8_t* Bytes(std::string_view text) {
  return reinterpret_cast<const uint8_t*>(text.data());
}

}  // namespace

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

int NextCodePoint(std::string_view text, size_t* pos) {
  UChar32 c;
  size_t i = *pos;
  const size_t length = text.size();
  // ICU's checked decoder: rejects overlong forms, surrogates and values
  // above U+10FFFF with a negative result.
  U8_NEXT(Bytes(text), i, length, c);
  *pos = i;
  return c;
}

bool IsStripSpace(int c) {
  // The explicit list of the contract (the set of Python's str.isspace()).
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsAlnum(int c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return (U_GET_GC_MASK(c) & (U_GC_L_MASK | U_GC_N_MASK)) != 0;
}

bool AppendNfc(std::string_view text, std::string* out) {
  if (IsAscii(text)) {  // ASCII is invariant under NFC.
    out->append(text);
    return true;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return false;
  icu::StringByteSink<std::string> sink(out);
  nfc->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                     nullptr, status);
  return U_SUCCESS(status);
}

bool AppendLower(std::string_view text, std::string* out) {
  if (IsAscii(text)) {  // ASCII letters have no special or contextual mapping.
    const size_t start = out->size();
    out->append(text);
    for (size_t i = start; i < out->size(); ++i) {
      char& c = (*out)[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return true;
  }
  UErrorCode status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out);
  // "" is the root locale: no Turkish/Lithuanian tailoring, like Python.
  icu::CaseMap::utf8ToLower("", 0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())),
                            sink, nullptr, status);
  return U_SUCCESS(status);
}

void AppendAlnum(std::string_view text, std::string* out) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const int c = NextCodePoint(text, &pos);
    if (c >= 0 && IsAlnum(c)) out->append(text.substr(start, pos - start));
  }
}

}  // namespace unicode

std::string_view Strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    const int c = unicode::NextCodePoint(text, &next);
    if (c < 0 || !unicode::IsStripSpace(c)) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    // Step back over continuation bytes to the start of the last sequence;
    // every strip-set member is at most 3 bytes long.
    size_t start = end - 1;
    while (start > begin && end - start < 4 &&
           (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    size_t next = start;
    const int c = unicode::NextCodePoint(text, &next);
    if (c < 0 || next != end || !unicode::IsStripSpace(c)) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

}  // namespace intentd::normalizers
