// KeyDeriver: normalized payload → canonical JSON → HMAC-SHA256.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "normalizers/key_derivation.h"
#include "normalizers/unicode.h"

namespace intentd::normalizers {

// An HMAC context keyed with the secret once; each derivation duplicates it,
// which skips the algorithm fetch and the key schedule (the pads) per call.
// The template is only read after construction, so concurrent Derive calls
// are safe.
struct KeyDeriver::Mac {
  EVP_MAC* mac = nullptr;
  EVP_MAC_CTX* keyed = nullptr;

  ~Mac() {
    EVP_MAC_CTX_free(keyed);
    EVP_MAC_free(mac);
  }
};

namespace {

constexpr size_t kDigestSize = 32;

bool Fail(std::string code, std::string field, std::string message, Error* error) {
  *error = Error{std::move(code), std::move(field), std::move(message)};
  return false;
}

void AppendHex(const unsigned char* bytes, size_t size, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    out->push_back(kHex[bytes[i] >> 4]);
    out->push_back(kHex[bytes[i] & 0xF]);
  }
}

}  // namespace

KeyDeriver::KeyDeriver(std::string secret) : secret_(std::move(secret)), mac_(new Mac) {
  mac_->mac = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
  if (mac_->mac != nullptr) mac_->keyed = EVP_MAC_CTX_new(mac_->mac);
  if (mac_->keyed == nullptr) return;
  char digest[] = OSSL_DIGEST_NAME_SHA2_256;
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  if (EVP_MAC_init(mac_->keyed, reinterpret_cast<const unsigned char*>(secret_.data()),
                   secret_.size(), params) != 1) {
    // Derive falls back to the one-shot HMAC() (e.g. for an empty secret).
    EVP_MAC_CTX_free(mac_->keyed);
    mac_->keyed = nullptr;
  }
}

KeyDeriver::~KeyDeriver() = default;

bool KeyDeriver::Derive(std::string_view tenant_id, const ActionType& type,
                        const nlohmann::json& payload, int rules_version, Derivation* out,
                        Error* error) const {
  if (rules_version != 1 && rules_version != 2) {
    return Fail("invalid_field", "rules_version", "rules_version must be 1 or 2", error);
  }
  if (!unicode::IsValidUtf8(tenant_id)) {
    return Fail("invalid_field", "tenant_id", "tenant_id must be valid UTF-8 text", error);
  }
  if (Strip(tenant_id).empty()) {
    return Fail("invalid_field", "tenant_id",
                "tenant_id must be a non-empty string that is not only whitespace", error);
  }
  if (!payload.is_object()) {
    return Fail("invalid_field", "payload",
                "payload must be a JSON object of the fields of " + type.name, error);
  }
  if (type.fields.empty()) {
    return Fail("invalid_config", "", "action type " + type.name + " lists no fields", error);
  }
  std::vector<std::pair<std::string, std::string>> normalized;
  normalized.reserve(type.fields.size());
  for (const FieldSpec& field : type.fields) {
    const auto it = payload.find(field.name);
    if (it == payload.end()) {
      return Fail("missing_field", field.name, field.name + " is required for " + type.name, error);
    }
    std::string value;
    if (!NormalizeField(field.kind, rules_version, *it, field.name, &value, error)) return false;
    normalized.emplace_back(field.name, std::move(value));
  }
  // Code point order of UTF-8 names is their byte order.
  std::sort(normalized.begin(), normalized.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < normalized.size(); ++i) {
    if (normalized[i].first == normalized[i - 1].first) {
      return Fail("invalid_config", normalized[i].first,
                  "action type " + type.name + " lists field " + normalized[i].first + " twice",
                  error);
    }
  }

  std::string canonical = CanonicalJson(tenant_id, type.name, normalized, rules_version);
  unsigned char digest[EVP_MAX_MD_SIZE];
  size_t digest_size = 0;
  bool ok = false;
  if (mac_->keyed != nullptr) {
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(mac_->keyed);
    ok = ctx != nullptr &&
         EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(canonical.data()),
                        canonical.size()) == 1 &&
         EVP_MAC_final(ctx, digest, &digest_size, sizeof(digest)) == 1;
    EVP_MAC_CTX_free(ctx);
  } else {
    unsigned int size = 0;
    ok = HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
              reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), digest,
              &size) != nullptr;
    digest_size = size;
  }
  if (!ok || digest_size != kDigestSize) {
    return Fail("internal", "", "HMAC-SHA256 failed", error);
  }

  out->key.clear();
  out->key.reserve(2 * kDigestSize);
  AppendHex(digest, digest_size, &out->key);
  out->txid.assign(out->key, 0, 35);
  out->canonical = std::move(canonical);
  out->payload = std::move(normalized);
  out->rules_version = rules_version;
  return true;
}

}  // namespace intentd::normalizers
