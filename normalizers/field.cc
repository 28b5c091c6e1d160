// NormalizeField: one payload value through its normalizer kind.
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "normalizers/key_derivation.h"
#include "normalizers/money.h"
#include "normalizers/pix_key.h"
#include "normalizers/unicode.h"
#include "normalizers/utf8.h"

namespace intentd::normalizers {
namespace {

bool Fail(std::string code, std::string_view field, std::string message, Error* error) {
  *error = Error{std::move(code), std::string(field), std::move(message)};
  return false;
}

template <typename Integer>
void AppendDecimal(Integer value, std::string* out) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

std::string MoneyMessage(money::Result result, std::string_view field) {
  const std::string f(field);
  switch (result) {
    case money::Result::kNotPositive:
      return f + " must be a positive amount, like \"180.00\"";
    case money::Result::kSubCent:
      return f + " has a non-zero digit past the cents; send at most 2 decimals, like \"180.00\"";
    case money::Result::kOverflow:
      return f + " is too large; send at most 92233720368547758.07, like \"180.00\"";
    case money::Result::kWrongType:
      return f +
             " must be a JSON string like \"180.00\" or a JSON number, not a bool, array, "
             "object or non-finite number";
    default:
      return f +
             " must be a positive amount with at most 2 decimals, like \"180.00\" (digits "
             "and an optional '.', no sign, comma, exponent or currency symbol)";
  }
}

// Text kinds take a JSON string (valid UTF-8) or a JSON integer in decimal.
bool ReadText(const FieldValue& value, std::string_view field, std::string* storage,
              std::string_view* text, Error* error) {
  switch (value.type) {
    case FieldValue::Type::kString:
      *text = value.text;
      if (!IsValidUtf8(*text)) {
        return Fail("invalid_field", field, std::string(field) + " is not valid UTF-8 text", error);
      }
      return true;
    case FieldValue::Type::kSigned:
      AppendDecimal(value.signed_value, storage);
      *text = *storage;
      return true;
    case FieldValue::Type::kUnsigned:
      AppendDecimal(value.unsigned_value, storage);
      *text = *storage;
      return true;
    default:
      return Fail("invalid_field", field,
                  std::string(field) + " must be a JSON string or integer, not " +
                      std::string(value.TypeName()) +
                      (value.type == FieldValue::Type::kFloat ? " with a fraction" : ""),
                  error);
  }
}

bool PixKey(int rules_version, std::string_view text, std::string_view field, std::string* out,
            Error* error) {
  std::string reason;
  const pix_key::Result result = rules_version == 1 ? pix_key::NormalizeV1(text, out, &reason)
                                                    : pix_key::NormalizeV2(text, out, &reason);
  switch (result) {
    case pix_key::Result::kOk:
      return true;
    case pix_key::Result::kInvalid:
      return Fail("invalid_field", field,
                  std::string(field) + " is not a valid Pix key (" + reason +
                      "); send an e-mail, a CPF or CNPJ with valid check digits, a phone like "
                      "\"+5511999999999\" or a random key like "
                      "\"123e4567-e89b-12d3-a456-426614174000\"",
                  error);
    default:
      return Fail("internal", field, "Unicode normalization failed", error);
  }
}

}  // namespace

FieldValue FieldValue::Of(const nlohmann::json& value) {
  using J = nlohmann::json::value_t;
  FieldValue v;
  switch (value.type()) {
    case J::boolean:
      v.type = Type::kBool;
      break;
    case J::string:
      v.type = Type::kString;
      v.text = value.get_ref<const std::string&>();
      break;
    case J::number_integer:
      v.type = Type::kSigned;
      v.signed_value = value.get<int64_t>();
      break;
    case J::number_unsigned:
      v.type = Type::kUnsigned;
      v.unsigned_value = value.get<uint64_t>();
      break;
    case J::number_float:
      v.type = Type::kFloat;
      v.float_value = value.get<double>();
      break;
    case J::object:
      v.type = Type::kObject;
      break;
    case J::array:
      v.type = Type::kArray;
      break;
    default:  // null, and nlohmann's "discarded" (never a parsed value)
      v.type = Type::kNull;
      break;
  }
  return v;
}

std::string_view FieldValue::TypeName() const {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "boolean";
    case Type::kString:
      return "string";
    case Type::kObject:
      return "object";
    case Type::kArray:
      return "array";
    default:
      return "number";
  }
}

bool NormalizeField(FieldKind kind, int rules_version, const nlohmann::json& value,
                    std::string_view field, std::string* out, Error* error) {
  return NormalizeField(kind, rules_version, FieldValue::Of(value), field, out, error);
}

bool NormalizeField(FieldKind kind, int rules_version, const FieldValue& value,
                    std::string_view field, std::string* out, Error* error) {
  if (rules_version != 1 && rules_version != 2) {
    return Fail("invalid_field", "rules_version", "rules_version must be 1 or 2", error);
  }
  if (value.type == FieldValue::Type::kNull) {
    return Fail("missing_field", field, std::string(field) + " is required", error);
  }
  out->clear();
  if (kind == FieldKind::kMoney) {
    int64_t cents = 0;
    const money::Result result = money::FromValue(value, &cents);
    if (result != money::Result::kOk) {
      return Fail("invalid_field", field, MoneyMessage(result, field), error);
    }
    AppendDecimal(cents, out);
    return true;
  }
  std::string storage;
  std::string_view text;
  if (!ReadText(value, field, &storage, &text, error)) return false;
  switch (kind) {
    case FieldKind::kText:
      out->assign(text);
      return true;
    case FieldKind::kTrim:
      out->assign(Strip(text));
      return true;
    case FieldKind::kLowerTrim:
      if (!unicode::AppendLower(Strip(text), out)) {
        return Fail("internal", field, "Unicode case mapping failed", error);
      }
      return true;
    case FieldKind::kPixKey:
      return PixKey(rules_version, text, field, out, error);
    default:
      return Fail("invalid_config", field, "unknown field kind", error);
  }
}

}  // namespace intentd::normalizers
