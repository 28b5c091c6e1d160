// Key derivation: the byte-exact contract of docs/key-derivation.md.
//
// Pure: no I/O, no clock. Thread safety: every function here is safe to call
// concurrently; a KeyDeriver and a Catalog are immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace intentd::normalizers {

// A key's txid (docs/key-derivation.md): its first kTxidLength characters,
// usable as the id of the Pix charge the action makes (a txid is 26 to 35
// letters and digits). Every layer that shows or asks about a txid takes it
// from here.
inline constexpr size_t kTxidLength = 35;
inline std::string TxidOfKey(std::string_view key) {
  return std::string(key.substr(0, kTxidLength));
}

// The normalizer kinds of the contract. Config files spell them
// "text", "trim", "lower-trim", "money", "pix-key".
enum class FieldKind { kText, kTrim, kLowerTrim, kMoney, kPixKey };

// Returns false when `name` is not a kind listed above.
bool ParseFieldKind(std::string_view name, FieldKind* out);
std::string_view FieldKindName(FieldKind kind);

struct FieldSpec {
  std::string name;
  FieldKind kind;
};

struct ActionType {
  std::string name;
  std::vector<FieldSpec> fields;  // non-empty, names unique
};

// A rejected input. `code` is a protocol error code: "invalid_field",
// "missing_field", "unknown_action_type", or "invalid_config" for a bad
// action-type definition. `field` names the culprit ("" when none applies).
// `message` is for people and says what to send instead.
struct Error {
  std::string code;
  std::string field;
  std::string message;
};

// The set of known action types: the built-ins plus those of a config file.
class Catalog {
 public:
  // `pix.cobranca` and `email.cobranca` as the contract lists them.
  static Catalog Builtins();

  // Adds the action types of a config document's "action_types" member:
  //   {"action_types": {"NAME": {"fields": [{"name": "F", "kind": "money"}, ...]}}}
  // A missing "action_types" member adds nothing. An unknown kind, a
  // duplicate or empty field name, an empty field list, or a built-in name
  // redefined differently is an error (code "invalid_config") naming the
  // action type and the field. On error *this is unchanged. Redefining a
  // known type (built-in or added earlier) with the same fields and kinds, in
  // any order, is accepted and changes nothing. A config that is not an
  // object, or a malformed definition, is "invalid_config" too.
  bool AddFromConfig(const nlohmann::json& config, Error* error);

  // nullptr when `name` is not a known action type. The pointer stays valid
  // until the next successful AddFromConfig.
  const ActionType* Find(std::string_view name) const;
  const std::vector<ActionType>& types() const { return types_; }

 private:
  std::vector<ActionType> types_;
};

struct Derivation {
  std::string key;        // HMAC-SHA256 as 64 lowercase hex characters
  std::string txid;       // TxidOfKey(key)
  std::string canonical;  // the exact digest input
  // The normalized listed fields, sorted by name (code point order).
  std::vector<std::pair<std::string, std::string>> payload;
  int rules_version = 0;
};

// The frozen payload as compact JSON text: `payload`'s members sorted by
// name, with the contract's escaping (AppendJsonString), so that another
// service computes the same bytes.
std::string PayloadText(const Derivation& derivation);

// A normalized money field's cents as whole units: "18000" -> "180.00",
// "5" -> "0.05". How answers (`money`) and messages spell an amount; the
// cents themselves are the key input.
std::string CentsAsUnits(std::string_view cents);

// One JSON value of a payload as the normalizers read it (from a nlohmann
// value, FieldValue::Of). Integers keep the type nlohmann would give them: kSigned
// for a negative one (and "-0"), kUnsigned otherwise. `text` (kString) points
// into the caller's value.
struct FieldValue {
  enum class Type { kNull, kBool, kString, kSigned, kUnsigned, kFloat, kObject, kArray };
  Type type = Type::kNull;
  std::string_view text;
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;
  double float_value = 0;

  static FieldValue Of(const nlohmann::json& value);
  // nlohmann's type names ("null", "boolean", "string", "number", "object",
  // "array"), which the error messages use.
  std::string_view TypeName() const;
};

// Where Derive finds the listed fields of a payload object.
class PayloadSource {
 public:
  virtual ~PayloadSource() = default;
  // False when the payload has no member `name`.
  virtual bool Find(std::string_view name, FieldValue* out) const = 0;
};

// Normalizes one field value under `rules_version` (1 or 2). A null value is
// "missing_field"; a string that is not valid UTF-8, or a value of a type the
// kind does not accept, is "invalid_field". Returns false and fills *error
// (with error->field = field; "rules_version" for a bad version).
bool NormalizeField(FieldKind kind, int rules_version, const FieldValue& value,
                    std::string_view field, std::string* out, Error* error);
bool NormalizeField(FieldKind kind, int rules_version, const nlohmann::json& value,
                    std::string_view field, std::string* out, Error* error);

// Writes the canonical JSON of the contract:
//   {"a":ACTION,"p":{FIELD:VALUE,...},"t":TENANT,"v":VERSION}
// `payload` must be sorted by name.
std::string CanonicalJson(std::string_view tenant_id, std::string_view action_type,
                          const std::vector<std::pair<std::string, std::string>>& payload,
                          int rules_version);

// Appends `text` as a JSON string literal with the contract's escaping.
// `text` is written byte for byte apart from the escapes: pass valid UTF-8.
void AppendJsonString(std::string_view text, std::string* out);
// The length of the longest prefix of `text` that AppendJsonString writes
// unchanged (no '"', '\\' or C0 control); with `ascii_only`, also no byte
// 0x7F or above.
size_t PlainJsonPrefix(std::string_view text, bool ascii_only);

// The contract's *strip*: `text` without the leading and trailing code points
// of the strip set (U+0009..U+000D, U+001C..U+001F, U+0020, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). An
// ill-formed UTF-8 sequence at either end stops the stripping there.
std::string_view Strip(std::string_view text);

// Parses the money text of the contract: optional strip-set whitespace, then
// ASCII digits, optionally '.' and at least one more digit ("180", "180.5",
// " 19.99 "; not "5.", ".5", "1e3", "1,5", "+1", "-1"). Digits past the cents
// must be zeros. Returns false unless the amount is a positive count of cents
// that fits in int64_t; *cents is written only on success.
bool ParseMoneyCents(std::string_view text, int64_t* cents);

// The Pix key types that rules version 2 tells apart.
enum class PixKeyType { kCpf, kCnpj, kPhone, kEmail, kEvp };
inline constexpr PixKeyType kPixKeyTypes[] = {
    PixKeyType::kCpf, PixKeyType::kCnpj, PixKeyType::kPhone, PixKeyType::kEmail, PixKeyType::kEvp};
// "cpf", "cnpj", "phone", "email", "evp".
std::string_view PixKeyTypeName(PixKeyType type);
bool ParsePixKeyType(std::string_view name, PixKeyType* out);

// How rules version 2 reads a Pix key as written (valid UTF-8): its type, and
// for a phone whether it was written "+55…" (a Brazilian number with its
// country code), rather than completed to +55 by the rules (a bare 11-digit
// mobile, "55…") or written with another country code.
// False, with *reason, when `text` is no Pix key under rules version 2. A
// restriction on the types a field accepts is checked against this reading,
// whatever rules version derives the key: it refuses, it never re-derives.
struct PixKeyReading {
  PixKeyType type = PixKeyType::kCpf;
  bool phone_written_as_plus55 = false;
};
bool ReadPixKey(std::string_view text, PixKeyReading* out, std::string* reason);

// The type of a key in rules version 2's canonical form (a frozen payload's
// value): "+digits" a phone, with '@' an e-mail, 8-4-4-4-12 hex an EVP, 11
// digits a CPF, 14 characters a CNPJ. False for anything else (a rules
// version 1 value, whose form does not keep the type).
bool PixKeyTypeOfCanonical(std::string_view normalized, PixKeyType* out);

class KeyDeriver {
 public:
  // `secret`: the HMAC key bytes. The caller checks its length.
  explicit KeyDeriver(std::string secret);
  ~KeyDeriver();
  KeyDeriver(const KeyDeriver&) = delete;
  KeyDeriver& operator=(const KeyDeriver&) = delete;

  // Derives the key of `payload` (a JSON object) for `type`. Fails with
  // "invalid_field" field "tenant_id" for an empty / whitespace-only tenant,
  // "invalid_field" for a payload that is not an object or a bad field value,
  // "missing_field" for an absent or null listed field. Unlisted payload
  // members are ignored. `rules_version` must be 1 or 2 ("invalid_field",
  // field "rules_version", otherwise). A type with duplicate field names is
  // "invalid_config"; a failure of OpenSSL or ICU is "internal". *out is
  // written only on success.
  bool Derive(std::string_view tenant_id, const ActionType& type, const nlohmann::json& payload,
              int rules_version, Derivation* out, Error* error) const;
  // The same for a payload object read through `payload`.
  bool Derive(std::string_view tenant_id, const ActionType& type, const PayloadSource& payload,
              int rules_version, Derivation* out, Error* error) const;

 private:
  struct Mac;  // OpenSSL HMAC state keyed once with the secret (key_deriver.cc)

  std::unique_ptr<Mac> mac_;
};

}  // namespace intentd::normalizers
