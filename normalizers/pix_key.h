// Pix key normalization, rules versions 1 and 2 (internal to normalizers/).
// Input is valid UTF-8 text (the caller checks).
#pragma once

#include <string>
#include <string_view>

namespace intentd::normalizers::pix_key {

enum class Result {
  kOk,
  kInvalid,   // not a Pix key under the rules; *reason says why
  kInternal,  // ICU failed (out of memory)
};

// Version 1: s = lower(strip(NFC(x))); s if it contains '@', else only the
// alnum code points of s. Never kInvalid.
Result NormalizeV1(std::string_view text, std::string* out, std::string* reason);

// Version 2: typed, validated, one canonical form per key (e-mail, EVP,
// phone "+<digits>", CPF digits, CNPJ upper-cased); see the contract.
Result NormalizeV2(std::string_view text, std::string* out, std::string* reason);

}  // namespace intentd::normalizers::pix_key
