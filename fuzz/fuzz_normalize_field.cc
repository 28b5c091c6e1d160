// NormalizeField for each kind and rules version. Input: byte 0 picks the
// kind (low 3 bits) and whether the rest is a JSON value (bit 7) or the bytes
// of a JSON string; byte 1 picks the rules version (1 or 2; with bit 7 set,
// the raw 7-bit number, so invalid versions are tried too).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/reference.h"
#include "normalizers/key_derivation.h"

namespace {

namespace nz = intentd::normalizers;
namespace ref = intentd::fuzz;
using nlohmann::json;

[[noreturn]] void Fail(const char* what, nz::FieldKind kind, int version, const json& value,
                       const std::string& out, const nz::Error& error) {
  std::fprintf(stderr, "%s: kind %s v%d value %s -> out \"%s\" error %s/%s (%s)\n", what,
               std::string(nz::FieldKindName(kind)).c_str(), version,
               value.dump(-1, ' ', false, json::error_handler_t::replace).c_str(), out.c_str(),
               error.code.c_str(), error.field.c_str(), error.message.c_str());
  std::abort();
}

bool IsAscii(const std::string& s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The v2 canonical forms: e-mail, EVP, +phone, CPF, CNPJ.
bool IsV2PixForm(const std::string& s) {
  if (s.find('@') != std::string::npos) return true;
  if (s.size() == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-') {
    for (size_t i = 0; i < s.size(); ++i) {
      if (i == 8 || i == 13 || i == 18 || i == 23) continue;
      if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    }
    return true;
  }
  if (s[0] == '+') {
    const std::string_view digits = std::string_view(s).substr(1);
    if (!AllDigits(digits) || digits.size() < 8 || digits.size() > 15 || digits[0] == '0') {
      return false;
    }
    if (digits.substr(0, 2) == "55") {
      const std::string_view national = digits.substr(2);
      if (national.size() == 11) return national[2] == '9';
      if (national.size() == 10) return national[2] >= '2' && national[2] <= '5';
      return false;
    }
    return true;
  }
  if (s.size() == 11) return ref::ValidCpf(s);
  if (s.size() == 14) {
    for (char c : s) {
      if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) return false;
    }
    return AllDigits(std::string_view(s).substr(12));
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const nz::FieldKind kKinds[] = {nz::FieldKind::kText, nz::FieldKind::kTrim,
                                         nz::FieldKind::kLowerTrim, nz::FieldKind::kMoney,
                                         nz::FieldKind::kPixKey};
  const nz::FieldKind kind = kKinds[(data[0] & 7) % 5];
  const bool as_json = data[0] & 0x80;
  const int version = data[1] & 0x80 ? data[1] & 0x7F : 1 + (data[1] & 1);
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  json value;
  if (as_json) {
    value = json::parse(rest, nullptr, false);
    if (value.is_discarded()) return 0;
  } else {
    value = rest;
  }

  std::string out;
  nz::Error error;
  const bool ok = nz::NormalizeField(kind, version, value, "f", &out, &error);
  std::string again;
  nz::Error error2;
  if (ok != nz::NormalizeField(kind, version, value, "f", &again, &error2) ||
      (ok && again != out)) {
    Fail("not deterministic", kind, version, value, out, error);
  }
  if (version != 1 && version != 2) {
    if (ok || error.field != "rules_version")
      Fail("bad version accepted", kind, version, value, out, error);
    return 0;
  }
  if (!ok) {
    const bool expected_code = error.code == (value.is_null() ? "missing_field" : "invalid_field");
    if (!expected_code || error.field != "f" || error.message.empty()) {
      Fail("unexpected error", kind, version, value, out, error);
    }
  } else if (!ref::ValidUtf8(out)) {
    Fail("output is not UTF-8", kind, version, value, out, error);
  }
  if (value.is_null() || value.is_boolean() || value.is_array() || value.is_object()) {
    if (ok) Fail("accepted a null/bool/array/object", kind, version, value, out, error);
    return 0;
  }

  const bool is_string = value.is_string();
  const std::string text = is_string ? value.get<std::string>() : "";
  const bool integer = value.is_number_integer();
  if (kind != nz::FieldKind::kMoney) {
    // Text kinds: strings (UTF-8) and integers; never floats.
    const bool accept = integer || (is_string && ref::ValidUtf8(text));
    if (value.is_number_float()) {
      if (ok) Fail("a text kind accepted a float", kind, version, value, out, error);
      return 0;
    }
    if (kind != nz::FieldKind::kPixKey && ok != accept) {
      Fail("text acceptance differs from the contract", kind, version, value, out, error);
    }
    if (is_string && !ref::ValidUtf8(text) && ok) {
      Fail("accepted ill-formed UTF-8", kind, version, value, out, error);
    }
    if (!ok) return 0;
    const std::string input = integer ? value.dump() : text;
    switch (kind) {
      case nz::FieldKind::kText:
        if (out != input) Fail("text changed its input", kind, version, value, out, error);
        break;
      case nz::FieldKind::kTrim:
        if (out != ref::ReferenceStrip(input)) {
          Fail("trim differs from the reference strip", kind, version, value, out, error);
        }
        break;
      case nz::FieldKind::kLowerTrim: {
        if (IsAscii(input)) {
          std::string want(ref::ReferenceStrip(input));
          for (char& c : want) c = (c >= 'A' && c <= 'Z') ? c + 32 : c;
          if (out != want) Fail("ASCII lower-trim differs", kind, version, value, out, error);
        }
        if (ref::ReferenceStrip(out) != out) {
          Fail("lower-trim left strip-set characters", kind, version, value, out, error);
        }
        break;
      }
      case nz::FieldKind::kPixKey: {
        // v1 keeps only alnum code points and may end empty; v2 never does.
        if (version == 2 && (out.empty() || !IsV2PixForm(out))) {
          Fail("v2 pix key not in a canonical form", kind, version, value, out, error);
        }
        // A canonical ASCII key normalizes to itself.
        if (IsAscii(out)) {
          std::string twice;
          nz::Error e;
          if (!nz::NormalizeField(kind, version, json(out), "f", &twice, &e) || twice != out) {
            Fail("pix key not idempotent", kind, version, value, out, error);
          }
        }
        break;
      }
      default:
        break;
    }
    return 0;
  }

  // Money.
  if (is_string) {
    const auto want = ref::ReferenceMoneyCents(text);
    const bool accept = ref::ValidUtf8(text) && want.has_value();
    if (ok != accept || (ok && out != std::to_string(*want))) {
      Fail("money differs from the reference", kind, version, value, out, error);
    }
  } else if (ok) {
    if (!AllDigits(out) || out[0] == '0') {
      Fail("money output is not positive cents", kind, version, value, out, error);
    }
    if (integer) {
      const std::string units = value.dump();
      if (out != units + "00") Fail("integer money differs", kind, version, value, out, error);
    }
  } else if (integer && value.dump()[0] != '-' && value.dump() != "0" && value.dump().size() < 17) {
    Fail("a small positive integer amount was rejected", kind, version, value, out, error);
  }
  return 0;
}
