// KeyDeriver::Derive. Input: byte 0 picks the action type (pix.cobranca,
// email.cobranca, or a type with one field of every kind), byte 1 the rules
// version (as in fuzz_normalize_field), then the tenant up to the first '\n',
// then the payload as JSON text.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/reference.h"
#include "normalizers/key_derivation.h"

namespace {

namespace nz = intentd::normalizers;
using nlohmann::json;

constexpr char kSecret[] = "fuzz-hmac-secret-0123456789abcdef0123456789";

[[noreturn]] void Fail(const std::string& what, const std::string& tenant, const json& payload) {
  std::fprintf(stderr, "%s (tenant \"%s\", payload %s)\n", what.c_str(), tenant.c_str(),
               payload.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  std::abort();
}

const nz::ActionType& EveryKind() {
  static const nz::ActionType type = {"fuzz.every_kind",
                                      {{"t", nz::FieldKind::kText},
                                       {"tr", nz::FieldKind::kTrim},
                                       {"lt", nz::FieldKind::kLowerTrim},
                                       {"m", nz::FieldKind::kMoney},
                                       {"k", nz::FieldKind::kPixKey}}};
  return type;
}

bool IsLowerHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const nz::Catalog catalog = nz::Catalog::Builtins();
  static const nz::KeyDeriver deriver(kSecret);
  const nz::ActionType* type = data[0] % 3 == 0   ? catalog.Find("pix.cobranca")
                               : data[0] % 3 == 1 ? catalog.Find("email.cobranca")
                                                  : &EveryKind();
  if (type == nullptr) std::abort();
  const int version = data[1] & 0x80 ? data[1] & 0x7F : 1 + (data[1] & 1);
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t nl = rest.find('\n');
  if (nl == std::string::npos) return 0;
  const std::string tenant = rest.substr(0, nl);
  const json payload = json::parse(rest.substr(nl + 1), nullptr, false);
  if (payload.is_discarded()) return 0;

  nz::Derivation d;
  nz::Error error;
  const bool ok = deriver.Derive(tenant, *type, payload, version, &d, &error);
  nz::Derivation d2;
  nz::Error error2;
  if (ok != deriver.Derive(tenant, *type, payload, version, &d2, &error2) ||
      (ok && d2.key != d.key) || (!ok && error2.code != error.code)) {
    Fail("Derive is not deterministic", tenant, payload);
  }
  if (!ok) {
    if (error.code != "invalid_field" && error.code != "missing_field") {
      Fail("unexpected error code " + error.code + ": " + error.message, tenant, payload);
    }
    if (error.message.empty()) Fail("error without a message", tenant, payload);
    return 0;
  }
  if (intentd::fuzz::ReferenceStrip(tenant).empty())
    Fail("a blank tenant was accepted", tenant, payload);
  // The agent only passes tenants from JSON text (UTF-8); CanonicalJson wants
  // UTF-8. Other bytes only have to not crash.
  if (!intentd::fuzz::ValidUtf8(tenant)) return 0;
  if (!payload.is_object()) Fail("a non-object payload was accepted", tenant, payload);
  if (version != 1 && version != 2) Fail("a bad rules version was accepted", tenant, payload);
  if (d.key.size() != 64 || !IsLowerHex(d.key))
    Fail("key is not 64 lowercase hex", tenant, payload);
  if (d.txid != d.key.substr(0, 35)) Fail("txid is not the key's prefix", tenant, payload);
  if (d.rules_version != version) Fail("rules_version differs", tenant, payload);
  if (d.canonical != nz::CanonicalJson(tenant, type->name, d.payload, version)) {
    Fail("canonical differs from CanonicalJson", tenant, payload);
  }
  if (d.key != intentd::fuzz::HmacSha256Hex(kSecret, d.canonical)) {
    Fail("key is not HMAC-SHA256(secret, canonical)", tenant, payload);
  }
  // The canonical text is JSON holding exactly the normalized fields.
  json canonical = json::parse(d.canonical, nullptr, false);
  if (canonical.is_discarded() || canonical.size() != 4 || canonical["a"] != type->name ||
      canonical["t"] != tenant || canonical["v"] != version ||
      canonical["p"].size() != type->fields.size()) {
    Fail("canonical JSON does not hold a, p, t, v: " + d.canonical, tenant, payload);
  }
  if (d.payload.size() != type->fields.size() ||
      !std::is_sorted(d.payload.begin(), d.payload.end())) {
    Fail("normalized payload is not every field, sorted by name", tenant, payload);
  }
  for (const auto& [name, value] : d.payload) {
    const nz::FieldSpec* spec = nullptr;
    for (const auto& f : type->fields) {
      if (f.name == name) spec = &f;
    }
    std::string alone;
    nz::Error e;
    if (spec == nullptr ||
        !nz::NormalizeField(spec->kind, version, payload.at(name), name, &alone, &e) ||
        alone != value || canonical["p"][name] != value) {
      Fail("field " + name + " differs from NormalizeField", tenant, payload);
    }
  }
  return 0;
}
