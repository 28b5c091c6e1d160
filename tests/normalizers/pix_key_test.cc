// Pix keys under rules version 2, beyond the shared vectors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

const char kInvalid[] = "ERROR:invalid_field";

std::string V2(const nlohmann::json& value) {
  std::string out;
  Error error;
  if (!NormalizeField(FieldKind::kPixKey, 2, value, "chave_pix_destino", &out, &error)) {
    EXPECT_EQ(error.field, "chave_pix_destino");
    EXPECT_NE(error.message.find("chave_pix_destino"), std::string::npos);
    return "ERROR:" + error.code;
  }
  return out;
}

TEST(PixKeyV2Email, LowercasesAndStripsAValidAddress) {
  EXPECT_EQ(V2("A@B.COM"), "a@b.com");
  EXPECT_EQ(V2("\u00a0 Fulano+Tag@Exemplo.com.BR\n"), "fulano+tag@exemplo.com.br");
  EXPECT_EQ(V2("ÅSA@X.SE"), "åsa@x.se");
  EXPECT_EQ(V2("A\u030aSA@X.SE"), "\u00e5sa@x.se");  // composed before lowering
}

TEST(PixKeyV2Email, RejectsMalformedAddresses) {
  EXPECT_EQ(V2("a@@b.com"), kInvalid);
  EXPECT_EQ(V2("a@b@c.com"), kInvalid);
  EXPECT_EQ(V2("@b.com"), kInvalid);
  EXPECT_EQ(V2("a@"), kInvalid);
  EXPECT_EQ(V2("@"), kInvalid);
  EXPECT_EQ(V2("fulano silva@b.com"), kInvalid);
  EXPECT_EQ(V2("fulano@b\u00a0.com"), kInvalid);
  EXPECT_EQ(V2("fulano@b\u3000.com"), kInvalid);
}

TEST(PixKeyV2Evp, WritesLowercaseHyphenatedForm) {
  EXPECT_EQ(V2("123E4567E89B12D3A456426614174000"), "123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ(V2(" 123e4567-e89b-12d3-a456-426614174000 "), "123e4567-e89b-12d3-a456-426614174000");
}

TEST(PixKeyV2Evp, RejectsWrongLengthsAndHyphenPositions) {
  EXPECT_EQ(V2("123e4567e89b12d3a45642661417400"), kInvalid);    // 31 hex digits
  EXPECT_EQ(V2("123e4567e89b12d3a4564266141740000"), kInvalid);  // 33
  EXPECT_EQ(V2("123e4567-e89b12d3-a456-426614174000"), kInvalid);
  EXPECT_EQ(V2("123e4567-e89b-12d3-a456-42661417400g"), kInvalid);
}

TEST(PixKeyV2Phone, AcceptsInternationalNumbers) {
  EXPECT_EQ(V2("+1 (415) 555-2671"), "+14155552671");
  EXPECT_EQ(V2("+44 20 7946 0958"), "+442079460958");
  EXPECT_EQ(V2("+12345678"), "+12345678");                // 8 digits
  EXPECT_EQ(V2("+123456789012345"), "+123456789012345");  // 15 digits
  EXPECT_EQ(V2("+1234567"), kInvalid);                    // 7
  EXPECT_EQ(V2("+1234567890123456"), kInvalid);           // 16
  EXPECT_EQ(V2("+0123456789"), kInvalid);
  EXPECT_EQ(V2("+1 415 555 267a"), kInvalid);
  EXPECT_EQ(V2("+"), kInvalid);
  EXPECT_EQ(V2("++14155552671"), kInvalid);
}

TEST(PixKeyV2Phone, ChecksBrazilianMobilesAndLandlines) {
  EXPECT_EQ(V2("+55 11 3333-4444"), "+551133334444");
  EXPECT_EQ(V2("+55 61 2333-4444"), "+556123334444");
  EXPECT_EQ(V2("+55 11 6333-4444"), kInvalid);  // 10 digits need 2-5 third
  EXPECT_EQ(V2("+55 11 1333-4444"), kInvalid);
  EXPECT_EQ(V2("+55 11 89999-9999"), kInvalid);   // 11 digits need 9 third
  EXPECT_EQ(V2("+55 11 99999-99999"), kInvalid);  // 12 national digits
  EXPECT_EQ(V2("+55 11 9999-999"), kInvalid);     // 9 national digits
  EXPECT_EQ(V2("+55 (10) 99999-9999"), kInvalid);
  EXPECT_EQ(V2("+55 (52) 99999-9999"), kInvalid);
}

TEST(PixKeyV2Phone, KnowsExactlyTheSixtySevenAreaCodes) {
  int accepted = 0;
  for (int area = 10; area <= 99; ++area) {
    const std::string mobile = "+55" + std::to_string(area) + "988887777";
    const std::string landline = "+55" + std::to_string(area) + "33334444";
    const bool ok = V2(mobile) == mobile;
    EXPECT_EQ(V2(landline) == landline, ok) << area;
    if (ok) ++accepted;
  }
  EXPECT_EQ(accepted, 67);
  for (int area : {20, 23, 25, 26, 29, 30, 36, 39, 40, 50, 52, 56, 60, 70, 72, 76, 78, 80, 90}) {
    EXPECT_EQ(V2("+55" + std::to_string(area) + "988887777"), kInvalid) << area;
  }
}

TEST(PixKeyV2Phone, ReadsNationalNumbersAsBrazilian) {
  EXPECT_EQ(V2("(11) 99999-9999"), "+5511999999999");
  EXPECT_EQ(V2("1133334444"), "+551133334444");
  EXPECT_EQ(V2("1193334444"), kInvalid);       // 10 digits, not a landline
  EXPECT_EQ(V2("(20) 99999-9999"), kInvalid);  // unknown area code
  EXPECT_EQ(V2("551133334444"), "+551133334444");
  EXPECT_EQ(V2("55 11 99999 9999"), "+5511999999999");
  EXPECT_EQ(V2("551199999999"), kInvalid);    // 12 digits: landline must have 2-5
  EXPECT_EQ(V2("5611999999999"), kInvalid);   // 13 digits not starting with 55
  EXPECT_EQ(V2("11999999999999"), kInvalid);  // 14 digits: a CNPJ that fails
}

TEST(PixKeyV2Cpf, ValidCpfWinsOverTheMobileReading) {
  EXPECT_EQ(V2("52998224725"), "52998224725");
  EXPECT_EQ(V2(" 529 982 247 25 "), "52998224725");
  // A valid CPF that is also a well-formed mobile (area 11, 9 third).
  EXPECT_EQ(V2("11900000083"), "11900000083");
  EXPECT_EQ(V2("(11) 90000-0083"), "11900000083");
  // Written with +55 it is a phone.
  EXPECT_EQ(V2("+55 11 90000-0083"), "+5511900000083");
}

TEST(PixKeyV2Cpf, CpfLayoutWithBadCheckDigitsIsRejectedNotReadAsPhone) {
  // The same 11 digits read as a phone when not written as a CPF.
  EXPECT_EQ(V2("11999999999"), "+5511999999999");
  EXPECT_EQ(V2("119.999.999-99"), kInvalid);
  EXPECT_EQ(V2("111.111.111-11"), kInvalid);  // all equal digits are never a CPF
  EXPECT_EQ(V2("11111111111"), kInvalid);     // not a CPF and no 9 for a mobile
}

TEST(PixKeyV2Cpf, AcceptsAnIntegerValue) { EXPECT_EQ(V2(52998224725LL), "52998224725"); }

TEST(PixKeyV2Cnpj, AcceptsNumericAndAlphanumericForms) {
  EXPECT_EQ(V2("11222333000181"), "11222333000181");
  EXPECT_EQ(V2("11.222.333/0001-81"), "11222333000181");
  EXPECT_EQ(V2("12.abc.345/01de-35"), "12ABC34501DE35");
  EXPECT_EQ(V2("11.222.333/0001-82"), kInvalid);
  EXPECT_EQ(V2("12ABC34501DEA5"), kInvalid);  // letter in a check digit position
  EXPECT_EQ(V2("12ÀBC34501DE35"), kInvalid);  // only ASCII letters
}

TEST(PixKeyV2, DoesNotApplyCompatibilityMappings) {
  // NFC is canonical composition only: fullwidth digits stay non-ASCII.
  EXPECT_EQ(V2("５２９９８２２４７２５"), kInvalid);
  EXPECT_EQ(V2("banana"), kInvalid);
  EXPECT_EQ(V2(""), kInvalid);
  EXPECT_EQ(V2(" \u3000 "), kInvalid);
}

TEST(PixKeyV2, ErrorMessageSaysWhatToSend) {
  std::string out;
  Error error;
  ASSERT_FALSE(
      NormalizeField(FieldKind::kPixKey, 2, "529.982.247-24", "chave_pix_destino", &out, &error));
  EXPECT_EQ(error.code, "invalid_field");
  EXPECT_NE(error.message.find("check digits"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("+5511999999999"), std::string::npos) << error.message;
}

TEST(PixKeyVersions, OnlyTheVersionTwoRulesValidate) {
  std::string out;
  Error error;
  ASSERT_TRUE(NormalizeField(FieldKind::kPixKey, 1, "banana", "k", &out, &error));
  EXPECT_EQ(out, "banana");
  EXPECT_FALSE(NormalizeField(FieldKind::kPixKey, 3, "banana", "k", &out, &error));
  EXPECT_EQ(error.field, "rules_version");
}

TEST(PixKeyReading, SaysTheTypeRulesVersionTwoReadsAndHowAPhoneWasWritten) {
  struct Case {
    const char* text;
    PixKeyType type;
    bool plus55;
  };
  const Case cases[] = {
      {"529.982.247-25", PixKeyType::kCpf, false},
      {"52998224725", PixKeyType::kCpf, false},
      // A mistyped CPF whose third digit is 9 reads as a mobile number.
      {"11944477736", PixKeyType::kPhone, false},
      {"5511944477736", PixKeyType::kPhone, false},
      {"+55 11 94447-7736", PixKeyType::kPhone, true},
      {"+1 415 555 0100", PixKeyType::kPhone, false},
      {"11.222.333/0001-81", PixKeyType::kCnpj, false},
      {"Fulano@Example.com", PixKeyType::kEmail, false},
      {"123E4567E89B12D3A456426614174000", PixKeyType::kEvp, false},
  };
  for (const Case& c : cases) {
    PixKeyReading reading;
    std::string reason;
    ASSERT_TRUE(ReadPixKey(c.text, &reading, &reason)) << c.text << ": " << reason;
    EXPECT_EQ(PixKeyTypeName(reading.type), PixKeyTypeName(c.type)) << c.text;
    EXPECT_EQ(reading.phone_written_as_plus55, c.plus55) << c.text;
  }
  PixKeyReading reading;
  std::string reason;
  EXPECT_FALSE(ReadPixKey("529.982.247-24", &reading, &reason));
  EXPECT_NE(reason.find("check digits"), std::string::npos) << reason;
}

TEST(PixKeyReading, TheCanonicalFormKeepsTheType) {
  const std::pair<const char*, const char*> cases[] = {
      {"52998224725", "cpf"},
      {"+5511944477736", "phone"},
      {"11222333000181", "cnpj"},
      {"fulano@example.com", "email"},
      {"123e4567-e89b-12d3-a456-426614174000", "evp"},
  };
  for (const auto& [canonical, name] : cases) {
    PixKeyType t;
    ASSERT_TRUE(PixKeyTypeOfCanonical(canonical, &t)) << canonical;
    EXPECT_EQ(PixKeyTypeName(t), name) << canonical;
    // And it is what the version 2 normalizer writes for that type.
    EXPECT_EQ(V2(canonical), canonical);
  }
  PixKeyType t;
  EXPECT_FALSE(PixKeyTypeOfCanonical("banana", &t));
  for (PixKeyType each : kPixKeyTypes) {
    PixKeyType parsed;
    ASSERT_TRUE(ParsePixKeyType(PixKeyTypeName(each), &parsed));
    EXPECT_EQ(parsed, each);
  }
  EXPECT_FALSE(ParsePixKeyType("telefone", &t));
}

}  // namespace
}  // namespace intentd::normalizers
