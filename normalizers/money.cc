#include "normalizers/money.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <system_error>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace money {
namespace {

constexpr int64_t kMaxCents = std::numeric_limits<int64_t>::max();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result ParseDecimal(std::string_view text, int64_t* cents) {
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty()) return Result::kMalformed;                                      // ".5"
  if (dot != std::string_view::npos && fraction.empty()) return Result::kMalformed;  // "5."
  for (char c : whole) {
    if (!IsDigit(c)) return Result::kMalformed;
  }
  for (char c : fraction) {
    if (!IsDigit(c)) return Result::kMalformed;
  }
  // Past the cents only zeros may follow: "10.005" is refused, never truncated.
  for (size_t i = 2; i < fraction.size(); ++i) {
    if (fraction[i] != '0') return Result::kSubCent;
  }
  int64_t value = 0;
  for (char c : whole) {
    const int digit = c - '0';
    // Keeps value * 10 + digit inside int64_t; the exact bound (the whole
    // amount in cents) is checked after the loop.
    if (value > (kMaxCents - digit) / 10) return Result::kOverflow;
    value = value * 10 + digit;
  }
  int64_t fraction_cents = 0;
  if (fraction.size() >= 1) fraction_cents += (fraction[0] - '0') * 10;
  if (fraction.size() >= 2) fraction_cents += fraction[1] - '0';
  if (value > (kMaxCents - fraction_cents) / 100) return Result::kOverflow;
  value = value * 100 + fraction_cents;
  if (value == 0) return Result::kNotPositive;
  *cents = value;
  return Result::kOk;
}

Result FromValue(const FieldValue& value, int64_t* cents) {
  using Type = FieldValue::Type;
  switch (value.type) {
    case Type::kSigned: {
      const int64_t units = value.signed_value;
      if (units <= 0) return Result::kNotPositive;
      if (units > kMaxCents / 100) return Result::kOverflow;
      *cents = units * 100;
      return Result::kOk;
    }
    case Type::kUnsigned: {
      const uint64_t units = value.unsigned_value;
      if (units == 0) return Result::kNotPositive;
      if (units > static_cast<uint64_t>(kMaxCents / 100)) return Result::kOverflow;
      *cents = static_cast<int64_t>(units) * 100;
      return Result::kOk;
    }
    case Type::kFloat: {
      const double number = value.float_value;
      if (!std::isfinite(number)) return Result::kWrongType;
      if (!(number > 0)) return Result::kNotPositive;
      // The shortest text that round-trips the double, in fixed notation
      // (19.99 → "19.99", 1e2 → "100", 0.30000000000000004 stays as is); the
      // largest double needs 309 digits, the smallest 0.(323 zeros)5.
      char buffer[400];
      const auto [end, ec] =
          std::to_chars(buffer, buffer + sizeof(buffer), number, std::chars_format::fixed);
      if (ec != std::errc()) return Result::kOverflow;
      return ParseDecimal(std::string_view(buffer, end - buffer), cents);
    }
    case Type::kString:
      return ParseDecimal(Strip(value.text), cents);
    default:
      return Result::kWrongType;
  }
}

Result FromJson(const nlohmann::json& value, int64_t* cents) {
  return FromValue(FieldValue::Of(value), cents);
}

}  // namespace money

bool ParseMoneyCents(std::string_view text, int64_t* cents) {
  return money::ParseDecimal(Strip(text), cents) == money::Result::kOk;
}

}  // namespace intentd::normalizers
