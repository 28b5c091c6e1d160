// Brazilian identifiers behind Pix keys: CPF, CNPJ, phone numbers
// (internal to normalizers/). Pure ASCII checks, no allocation.
#pragma once

#include <string_view>

namespace intentd::normalizers::pix_key {

// `digits` is 11 ASCII digits, not all equal, whose two check digits match.
bool IsValidCpf(std::string_view digits);

// `text` is 14 characters [0-9A-Z]{12}[0-9]{2} (already upper-cased) whose two
// check digits match; covers the numeric and the alphanumeric CNPJ.
bool IsValidCnpj(std::string_view text);

// One of the 67 Brazilian area codes (DDD) in use, e.g. 11, 21, 61.
bool IsBrazilianAreaCode(int code);

// Checks the digits of a phone after its '+': 8 to 15 ASCII digits, the
// first not '0'; with country code 55 a 10-digit landline (third national
// digit 2-5) or an 11-digit mobile (third national digit 9) under a known
// area code. Returns nullptr when valid, otherwise a short reason for people.
const char* CheckPhoneDigits(std::string_view digits);

}  // namespace intentd::normalizers::pix_key
