// Unicode helpers of the key derivation contract (internal to normalizers/).
//
// Every function takes and returns UTF-8. ICU does the Unicode work; pure
// ASCII input takes a fast path that gives the same result without ICU.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace intentd::normalizers::unicode {

// True when `text` has no byte above 0x7F.
bool IsAscii(std::string_view text);

// Decodes the code point at text[*pos] and advances *pos past it. Returns a
// negative value for an ill-formed sequence (and advances past it).
int NextCodePoint(std::string_view text, size_t* pos);

// A member of the contract's strip set.
bool IsStripSpace(int code_point);

// General category L* or N*.
bool IsAlnum(int code_point);

// The following append to *out and return false only when ICU fails (out of
// memory); they expect valid UTF-8.

// Unicode canonical composition (NFC).
bool AppendNfc(std::string_view text, std::string* out);

// Full lowercase mapping of the root locale: SpecialCasing included, final
// sigma in context ("ΟΔΥΣΣΕΥΣ" → "οδυσσευς", "İ" → "i̇"), as Python's str.lower().
bool AppendLower(std::string_view text, std::string* out);

// The code points of `text` that are alnum, in order.
void AppendAlnum(std::string_view text, std::string* out);

}  // namespace intentd::normalizers::unicode
