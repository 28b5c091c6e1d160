// Exact money parsing: integer cents, never a double times 100.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

// Normalizes `value` as money field "valor"; the cents text or "ERROR:<code>".
std::string Money(const nlohmann::json& value) {
  std::string out;
  Error error;
  if (!NormalizeField(FieldKind::kMoney, 1, value, "valor", &out, &error)) {
    EXPECT_EQ(error.field, "valor");
    EXPECT_NE(error.message.find("valor"), std::string::npos) << error.message;
    EXPECT_NE(error.message.find("\"180.00\""), std::string::npos) << error.message;
    return "ERROR:" + error.code;
  }
  return out;
}

int64_t Cents(std::string_view text) {
  int64_t cents = -1;
  return ParseMoneyCents(text, &cents) ? cents : -1;
}

TEST(ParseMoneyCents, ReadsPlainDecimalsExactly) {
  EXPECT_EQ(Cents("180.00"), 18000);
  EXPECT_EQ(Cents("180"), 18000);
  EXPECT_EQ(Cents("180.0"), 18000);
  EXPECT_EQ(Cents("19.99"), 1999);
  EXPECT_EQ(Cents("0.10"), 10);
  EXPECT_EQ(Cents("0.01"), 1);
  EXPECT_EQ(Cents("007.50"), 750);
  EXPECT_EQ(Cents("10.000000000000000000000"), 1000);
}

TEST(ParseMoneyCents, AllowsStripSetWhitespaceAround) {
  EXPECT_EQ(Cents(" 19.99\t"), 1999);
  EXPECT_EQ(Cents("\u00a010\u3000"), 1000);
  EXPECT_EQ(Cents("\u008510.5\u2028"), 1050);
  EXPECT_EQ(Cents("\u200b10"), -1);  // zero-width space is not whitespace
  EXPECT_EQ(Cents("1 000"), -1);     // nor is whitespace inside allowed
}

// Reading of "plain decimal digits with an optional '.' and fraction": digits
// are required before the '.', and a '.' must be followed by a fraction.
TEST(ParseMoneyCents, RequiresDigitsOnBothSidesOfTheDot) {
  EXPECT_EQ(Cents("5."), -1);
  EXPECT_EQ(Cents(".5"), -1);
  EXPECT_EQ(Cents("."), -1);
  EXPECT_EQ(Cents("1.5.0"), -1);
}

TEST(ParseMoneyCents, RejectsSignsExponentsCommasAndWords) {
  for (const char* bad : {"", " ", "-10.00", "+10", "1e3", "1E3", "1,50", "1.000,00", "NaN",
                          "Infinity", "inf", "0x10", "R$ 10", "10 reais", "١٠", "１０"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(Cents(bad), -1);
  }
}

TEST(ParseMoneyCents, RejectsNonZeroDigitsPastTheCentsInsteadOfTruncating) {
  EXPECT_EQ(Cents("10.005"), -1);
  EXPECT_EQ(Cents("10.0000001"), -1);
  EXPECT_EQ(Cents("0.001"), -1);
}

TEST(ParseMoneyCents, RejectsZero) {
  EXPECT_EQ(Cents("0"), -1);
  EXPECT_EQ(Cents("0.00"), -1);
  EXPECT_EQ(Cents("000.000"), -1);
}

TEST(ParseMoneyCents, AcceptsUpToTheLargestInt64CountOfCents) {
  EXPECT_EQ(Cents("92233720368547758.07"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Cents("92233720368547758.08"), -1);
  EXPECT_EQ(Cents("92233720368547758.1"), -1);
  EXPECT_EQ(Cents("92233720368547759"), -1);
  EXPECT_EQ(Cents("00000000000000092233720368547758.07"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Cents("99999999999999999999999999999999"), -1);
}

TEST(MoneyField, ReadsJsonIntegersOfEitherSign) {
  EXPECT_EQ(Money(180), "18000");
  EXPECT_EQ(Money(nlohmann::json::parse("92233720368547758")), "9223372036854775800");
  EXPECT_EQ(Money(nlohmann::json::parse("92233720368547759")), "ERROR:invalid_field");
  EXPECT_EQ(Money(nlohmann::json::parse("18446744073709551615")), "ERROR:invalid_field");
  EXPECT_EQ(Money(uint64_t{5}), "500");
  // nlohmann parses non-negative integers as unsigned; built values may be signed.
  EXPECT_EQ(Money(int64_t{92233720368547758}), "9223372036854775800");
  EXPECT_EQ(Money(int64_t{92233720368547759}), "ERROR:invalid_field");
  EXPECT_EQ(Money(int64_t{1}), "100");
  EXPECT_EQ(Money(0), "ERROR:invalid_field");
  EXPECT_EQ(Money(-10), "ERROR:invalid_field");
  EXPECT_EQ(Money(nlohmann::json::parse("-9223372036854775808")), "ERROR:invalid_field");
}

TEST(MoneyField, ReadsJsonFloatsByTheirShortestRoundTripText) {
  EXPECT_EQ(Money(19.99), "1999");  // 19.99 * 100 would be 1998.9999999999998
  EXPECT_EQ(Money(0.1), "10");
  EXPECT_EQ(Money(1.15), "115");  // 1.15 * 100 = 114.99999999999999
  EXPECT_EQ(Money(180.0), "18000");
  EXPECT_EQ(Money(nlohmann::json::parse("1e2")), "10000");
  EXPECT_EQ(Money(nlohmann::json::parse("1.5E1")), "1500");
  EXPECT_EQ(Money(nlohmann::json::parse("1e16")), "1000000000000000000");
}

TEST(MoneyField, RejectsFloatsWithSubCentDigitsOrOutOfRange) {
  EXPECT_EQ(Money(0.30000000000000004), "ERROR:invalid_field");
  EXPECT_EQ(Money(1.005), "ERROR:invalid_field");
  EXPECT_EQ(Money(1e-7), "ERROR:invalid_field");
  EXPECT_EQ(Money(5e-324), "ERROR:invalid_field");
  EXPECT_EQ(Money(0.0), "ERROR:invalid_field");
  EXPECT_EQ(Money(-0.0), "ERROR:invalid_field");
  EXPECT_EQ(Money(-1.5), "ERROR:invalid_field");
  EXPECT_EQ(Money(1e17), "ERROR:invalid_field");
  EXPECT_EQ(Money(std::numeric_limits<double>::max()), "ERROR:invalid_field");
  EXPECT_EQ(Money(std::nan("")), "ERROR:invalid_field");
  EXPECT_EQ(Money(std::numeric_limits<double>::infinity()), "ERROR:invalid_field");
}

TEST(MoneyField, ReadsStringsLikeParseMoneyCents) {
  EXPECT_EQ(Money("180.00"), "18000");
  EXPECT_EQ(Money(" 180.0 "), "18000");
  EXPECT_EQ(Money("92233720368547758.07"), "9223372036854775807");
  EXPECT_EQ(Money("10.005"), "ERROR:invalid_field");
  EXPECT_EQ(Money("1e2"), "ERROR:invalid_field");
  EXPECT_EQ(Money("\xff"), "ERROR:invalid_field");
}

TEST(MoneyField, RejectsBoolArrayObjectAndTreatsNullAsMissing) {
  EXPECT_EQ(Money(true), "ERROR:invalid_field");
  EXPECT_EQ(Money(false), "ERROR:invalid_field");
  EXPECT_EQ(Money(nlohmann::json::array({10})), "ERROR:invalid_field");
  EXPECT_EQ(Money(nlohmann::json{{"valor", 10}}), "ERROR:invalid_field");
  std::string out;
  Error error;
  EXPECT_FALSE(NormalizeField(FieldKind::kMoney, 1, nullptr, "valor", &out, &error));
  EXPECT_EQ(error.code, "missing_field");
  EXPECT_EQ(error.field, "valor");
}

TEST(MoneyField, ExplainsWhatToSendInstead) {
  std::string out;
  Error error;
  ASSERT_FALSE(NormalizeField(FieldKind::kMoney, 1, "10.005", "valor", &out, &error));
  EXPECT_NE(error.message.find("past the cents"), std::string::npos) << error.message;
  ASSERT_FALSE(NormalizeField(FieldKind::kMoney, 2, "1.000,00", "total", &out, &error));
  EXPECT_EQ(error.field, "total");
  EXPECT_NE(error.message.find("total must be a positive amount with at most 2 decimals"),
            std::string::npos)
      << error.message;
}

}  // namespace
}  // namespace intentd::normalizers
