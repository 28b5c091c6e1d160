// Independent re-implementations of small pieces of the key-derivation
// contract (docs/key-derivation.md), written from the text, so the
// fuzz targets can compare the library with a second reading of the spec.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace intentd::fuzz {

// True when `text` is well-formed UTF-8 (no surrogates, no overlongs, at
// most U+10FFFF).
bool ValidUtf8(std::string_view text);

// The contract's strip set: U+0009..U+000D, U+001C..U+001F, U+0020, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool InStripSet(uint32_t code_point);

// strip: removes leading and trailing strip-set code points; an ill-formed
// sequence at either end stops the stripping there.
std::string_view ReferenceStrip(std::string_view text);

// The money text: strip, then digits, optionally '.' and at least one digit;
// digits past the cents must be zeros; a positive count of cents that fits
// int64_t. nullopt otherwise.
std::optional<int64_t> ReferenceMoneyCents(std::string_view text);

// CPF check digits (11 ASCII digits, not all equal).
bool ValidCpf(std::string_view digits);

// The HMAC-SHA256 of `message` under `secret` as 64 lowercase hex characters
// (OpenSSL's one-shot HMAC, independent of the deriver's keyed state).
std::string HmacSha256Hex(std::string_view secret, std::string_view message);

}  // namespace intentd::fuzz
