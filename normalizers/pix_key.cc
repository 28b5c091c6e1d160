#include "normalizers/pix_key.h"

#include <algorithm>

#include "normalizers/brazil_ids.h"
#include "normalizers/key_derivation.h"
#include "normalizers/unicode.h"

namespace intentd::normalizers::pix_key {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLowerHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

bool AllDigits(std::string_view text) { return std::all_of(text.begin(), text.end(), IsDigit); }

// 32 hex digits, or 8-4-4-4-12 with hyphens; `lower` is already lower-cased.
bool IsEvp(std::string_view lower) {
  if (lower.size() == 32) return std::all_of(lower.begin(), lower.end(), IsLowerHex);
  if (lower.size() != 36) return false;
  for (size_t i = 0; i < lower.size(); ++i) {
    const bool hyphen_position = i == 8 || i == 13 || i == 18 || i == 23;
    if (hyphen_position ? lower[i] != '-' : !IsLowerHex(lower[i])) return false;
  }
  return true;
}

void AppendEvp(std::string_view lower, std::string* out) {
  if (lower.size() == 36) {
    out->append(lower);
    return;
  }
  out->append(lower.substr(0, 8)).append(1, '-');
  out->append(lower.substr(8, 4)).append(1, '-');
  out->append(lower.substr(12, 4)).append(1, '-');
  out->append(lower.substr(16, 4)).append(1, '-');
  out->append(lower.substr(20));
}

// `ddd.ddd.ddd-dd`: how a CPF is written by hand.
bool HasCpfLayout(std::string_view t) {
  if (t.size() != 14) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char expected = i == 3 || i == 7 ? '.' : i == 11 ? '-' : 'd';
    if (expected == 'd' ? !IsDigit(t[i]) : t[i] != expected) return false;
  }
  return true;
}

// Step 3's c: t without whitespace (the strip set) and ". - / ( )".
void RemoveSeparators(std::string_view t, std::string* c) {
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t start = pos;
    const int cp = unicode::NextCodePoint(t, &pos);
    if (cp == '.' || cp == '-' || cp == '/' || cp == '(' || cp == ')') continue;
    if (cp >= 0 && unicode::IsStripSpace(cp)) continue;
    c->append(t.substr(start, pos - start));
  }
}

Result Phone(std::string_view digits, std::string* out, std::string* reason) {
  if (const char* why = CheckPhoneDigits(digits)) {
    *reason = why;
    return Result::kInvalid;
  }
  out->assign(1, '+').append(digits);
  return Result::kOk;
}

Result Email(std::string_view t, std::string* out, std::string* reason) {
  const size_t at = t.find('@');
  if (t.find('@', at + 1) != std::string_view::npos) {
    *reason = "an e-mail key has exactly one '@'";
    return Result::kInvalid;
  }
  if (at == 0 || at + 1 == t.size()) {
    *reason = "an e-mail key has text on both sides of '@'";
    return Result::kInvalid;
  }
  size_t pos = 0;
  while (pos < t.size()) {
    const int cp = unicode::NextCodePoint(t, &pos);
    if (cp >= 0 && unicode::IsStripSpace(cp)) {
      *reason = "an e-mail key has no spaces inside";
      return Result::kInvalid;
    }
  }
  out->clear();
  return unicode::AppendLower(t, out) ? Result::kOk : Result::kInternal;
}

}  // namespace

Result NormalizeV1(std::string_view text, std::string* out, std::string* reason) {
  std::string nfc;
  std::string lower;
  if (!unicode::AppendNfc(text, &nfc) || !unicode::AppendLower(Strip(nfc), &lower)) {
    return Result::kInternal;
  }
  if (lower.find('@') != std::string::npos) {
    *out = std::move(lower);
  } else {
    out->clear();
    unicode::AppendAlnum(lower, out);
  }
  return Result::kOk;
}

Result NormalizeV2(std::string_view text, std::string* out, std::string* reason) {
  PixKeyType type;
  bool plus = false;
  return NormalizeV2Typed(text, out, reason, &type, &plus);
}

Result NormalizeV2Typed(std::string_view text, std::string* out, std::string* reason,
                        PixKeyType* type, bool* written_with_plus) {
  // Sets the reading when `r` is kOk.
  const auto typed = [&](Result r, PixKeyType t, bool plus) {
    if (r == Result::kOk) {
      *type = t;
      *written_with_plus = plus;
    }
    return r;
  };
  std::string nfc;
  if (!unicode::AppendNfc(text, &nfc)) return Result::kInternal;
  const std::string_view t = Strip(nfc);
  // 1. An e-mail.
  if (t.find('@') != std::string_view::npos) {
    return typed(Email(t, out, reason), PixKeyType::kEmail, false);
  }
  // 2. A random key (EVP).
  std::string lower;
  if (!unicode::AppendLower(t, &lower)) return Result::kInternal;
  if (IsEvp(lower)) {
    out->clear();
    AppendEvp(lower, out);
    return typed(Result::kOk, PixKeyType::kEvp, false);
  }
  // 3. Phone, CPF or CNPJ, written with or without separators.
  std::string c;
  RemoveSeparators(t, &c);
  if (!c.empty() && c[0] == '+') {
    return typed(Phone(std::string_view(c).substr(1), out, reason), PixKeyType::kPhone, true);
  }
  if (c.size() == 11 && AllDigits(c)) {
    // A valid CPF wins over the mobile reading: a Pix phone carries +55.
    if (IsValidCpf(c)) {
      *out = std::move(c);
      return typed(Result::kOk, PixKeyType::kCpf, false);
    }
    if (HasCpfLayout(t)) {
      *reason = "written as a CPF but its check digits do not match";
      return Result::kInvalid;
    }
    if (c[2] != '9') {
      *reason =
          "11 digits that are neither a valid CPF nor a mobile number (9 after the area code)";
      return Result::kInvalid;
    }
    return typed(Phone("55" + c, out, reason), PixKeyType::kPhone, false);
  }
  if (c.size() == 14) {
    std::string upper = c;
    for (char& ch : upper) {
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    }
    if (IsValidCnpj(upper)) {
      *out = std::move(upper);
      return typed(Result::kOk, PixKeyType::kCnpj, false);
    }
    *reason = "14 characters that are not a CNPJ with valid check digits";
    return Result::kInvalid;
  }
  if (c.size() == 10 && AllDigits(c)) {
    return typed(Phone("55" + c, out, reason), PixKeyType::kPhone, false);
  }
  if ((c.size() == 12 || c.size() == 13) && AllDigits(c) && c.compare(0, 2, "55") == 0) {
    return typed(Phone(c, out, reason), PixKeyType::kPhone, false);
  }
  *reason = "not an e-mail, random key (EVP), phone, CPF or CNPJ";
  return Result::kInvalid;
}

}  // namespace intentd::normalizers::pix_key

namespace intentd::normalizers {

std::string_view PixKeyTypeName(PixKeyType type) {
  switch (type) {
    case PixKeyType::kCpf:
      return "cpf";
    case PixKeyType::kCnpj:
      return "cnpj";
    case PixKeyType::kPhone:
      return "phone";
    case PixKeyType::kEmail:
      return "email";
    case PixKeyType::kEvp:
      return "evp";
  }
  return "cpf";
}

bool ParsePixKeyType(std::string_view name, PixKeyType* out) {
  for (PixKeyType t : kPixKeyTypes) {
    if (PixKeyTypeName(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

bool ReadPixKey(std::string_view text, PixKeyReading* out, std::string* reason) {
  std::string normalized;
  PixKeyReading reading;
  bool plus = false;
  const pix_key::Result r =
      pix_key::NormalizeV2Typed(text, &normalized, reason, &reading.type, &plus);
  if (r == pix_key::Result::kInternal) *reason = "ICU failed to normalize the key";
  if (r != pix_key::Result::kOk) return false;
  reading.phone_written_as_plus55 =
      reading.type == PixKeyType::kPhone && plus && normalized.compare(0, 3, "+55") == 0;
  *out = reading;
  return true;
}

bool PixKeyTypeOfCanonical(std::string_view v, PixKeyType* out) {
  const auto all_digits = [](std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (v.size() > 1 && v[0] == '+' && all_digits(v.substr(1))) {
    *out = PixKeyType::kPhone;
  } else if (v.find('@') != std::string_view::npos) {
    *out = PixKeyType::kEmail;
  } else if (v.size() == 36 && v[8] == '-' && v[13] == '-' && v[18] == '-' && v[23] == '-') {
    *out = PixKeyType::kEvp;
  } else if (v.size() == 11 && all_digits(v)) {
    *out = PixKeyType::kCpf;
  } else if (v.size() == 14 && std::all_of(v.begin(), v.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
             })) {
    *out = PixKeyType::kCnpj;
  } else {
    return false;
  }
  return true;
}

}  // namespace intentd::normalizers
