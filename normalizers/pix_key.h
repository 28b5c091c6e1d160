// Pix key normalization, rules versions 1 and 2 (internal to normalizers/).
// Input is valid UTF-8 text (the caller checks).
#pragma once

#include <string>
#include <string_view>

#include "normalizers/key_derivation.h"

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

// NormalizeV2 that also says which type it read `text` as, and for a phone
// whether it was written with its "+" country code (not completed to +55 by
// the rules). *type and *written_with_plus are set only on kOk.
Result NormalizeV2Typed(std::string_view text, std::string* out, std::string* reason,
                        PixKeyType* type, bool* written_with_plus);

}  // namespace intentd::normalizers::pix_key
