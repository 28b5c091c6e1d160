// Exact money parsing of the key derivation contract (internal to normalizers/).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers::money {

// Why an amount was refused; each reason gets its own message.
enum class Result {
  kOk,
  kMalformed,    // not plain decimal digits with an optional '.' and fraction
  kNotPositive,  // zero or negative
  kSubCent,      // a non-zero digit past the cents
  kOverflow,     // more cents than int64_t holds
  kWrongType,    // bool, array, object, NaN or infinity
};

// Decimal text: ASCII digits, then optionally '.' and one or more digits.
// No whitespace, sign or exponent. Leading zeros are fine ("007.50").
Result ParseDecimal(std::string_view text, int64_t* cents);

// A JSON value that is not null: an integer (signed or unsigned), a float
// (read as its shortest round-trip text, never scaled as a double), or a
// string of decimal text with strip-set whitespace around it.
Result FromJson(const nlohmann::json& value, int64_t* cents);
Result FromValue(const FieldValue& value, int64_t* cents);

}  // namespace intentd::normalizers::money
