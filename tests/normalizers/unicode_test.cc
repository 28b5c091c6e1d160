// Unicode behaviour of the text kinds and the pix key beyond the vectors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

// Normalizes `value` as field "f"; returns the result or "ERROR:<code>".
std::string Normalize(FieldKind kind, const nlohmann::json& value, int rules_version = 1) {
  std::string out;
  Error error;
  if (!NormalizeField(kind, rules_version, value, "f", &out, &error)) {
    EXPECT_EQ(error.field, "f");
    EXPECT_FALSE(error.message.empty());
    return "ERROR:" + error.code;
  }
  return out;
}

// UTF-8 of one code point (test input building).
std::string Utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

const char32_t kStripSet[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x1C,   0x1D,   0x1E,
                              0x1F,   0x20,   0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002,
                              0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
                              0x2028, 0x2029, 0x202F, 0x205F, 0x3000};

TEST(Strip, RemovesEveryMemberOfTheStripSetAtBothEnds) {
  for (char32_t c : kStripSet) {
    SCOPED_TRACE(static_cast<int>(c));
    const std::string space = Utf8(c);
    EXPECT_EQ(Strip(space + space + "a b" + space), "a b");
    EXPECT_EQ(Normalize(FieldKind::kTrim, space + "x" + space), "x");
    EXPECT_EQ(Strip(space), "");
  }
}

TEST(Strip, KeepsCodePointsOutsideTheSet) {
  // Zero-width space, BOM, Mongolian vowel separator, U+0008, U+001B, U+0021.
  for (char32_t c : {0x200B, 0xFEFF, 0x180E, 0x08, 0x1B, 0x21, 0x2060}) {
    SCOPED_TRACE(static_cast<int>(c));
    const std::string other = Utf8(c);
    EXPECT_EQ(Strip(other + "a" + other), other + "a" + other);
  }
}

TEST(Strip, KeepsInnerWhitespaceAndStopsAtIllFormedBytes) {
  EXPECT_EQ(Strip("  a \u00a0 b  "), "a \u00a0 b");
  EXPECT_EQ(Strip(" \xff "), "\xff");
  EXPECT_EQ(Strip(""), "");
}

TEST(LowerTrim, UsesFinalSigmaInContext) {
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "ΟΔΥΣΣΕΥΣ"), "οδυσσευς");
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "ΣΑΣ ΣΑΣ"), "σας σας");
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "ΑΣ."), "ας.");
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "Σ"), "σ");  // no cased letter before it
}

TEST(LowerTrim, UsesFullMappingsOfTheRootLocale) {
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "İ"), "i\u0307");  // not Turkish "i"
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "I"), "i");        // not Turkish "ı"
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "ẞ"), "ß");
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "ǅ"), "ǆ");
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "\u3000JOSÉ\u0085"), "josé");
}

TEST(LowerTrim, DoesNotNormalizeComposition) {
  // Only the pix key applies NFC: lower-trim keeps a decomposed accent.
  EXPECT_EQ(Normalize(FieldKind::kLowerTrim, "JOSE\u0301"), "jose\u0301");
}

TEST(Text, KeepsTheValueUnchanged) {
  EXPECT_EQ(Normalize(FieldKind::kText, " Ab\u00a0"), " Ab\u00a0");
  EXPECT_EQ(Normalize(FieldKind::kText, "Jose\u0301"), "Jose\u0301");
  EXPECT_EQ(Normalize(FieldKind::kText, ""), "");
  EXPECT_EQ(Normalize(FieldKind::kText, std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(TextKinds, WriteIntegersInDecimal) {
  for (FieldKind kind : {FieldKind::kText, FieldKind::kTrim, FieldKind::kLowerTrim}) {
    EXPECT_EQ(Normalize(kind, -7), "-7");
    EXPECT_EQ(Normalize(kind, 0), "0");
    EXPECT_EQ(Normalize(kind, nlohmann::json::parse("18446744073709551615")),
              "18446744073709551615");
    EXPECT_EQ(Normalize(kind, nlohmann::json::parse("-9223372036854775808")),
              "-9223372036854775808");
  }
}

TEST(TextKinds, RejectBoolFloatArrayObjectAndTreatNullAsMissing) {
  for (FieldKind kind :
       {FieldKind::kText, FieldKind::kTrim, FieldKind::kLowerTrim, FieldKind::kPixKey}) {
    EXPECT_EQ(Normalize(kind, true), "ERROR:invalid_field");
    EXPECT_EQ(Normalize(kind, 1.5), "ERROR:invalid_field");
    EXPECT_EQ(Normalize(kind, nlohmann::json::parse("1e2")), "ERROR:invalid_field");
    EXPECT_EQ(Normalize(kind, nlohmann::json::array({"a"})), "ERROR:invalid_field");
    EXPECT_EQ(Normalize(kind, nlohmann::json::object()), "ERROR:invalid_field");
    EXPECT_EQ(Normalize(kind, nullptr), "ERROR:missing_field");
  }
}

TEST(TextKinds, RejectInvalidUtf8) {
  const char* const kBad[] = {
      "\xC3\x28",          // bad continuation
      "\xC0\xAF",          // overlong '/'
      "\xED\xA0\x80",      // surrogate U+D800
      "\xF4\x90\x80\x80",  // above U+10FFFF
      "ok\xE2\x82",        // truncated
      "\x80",              // lone continuation
      "\xFF",
  };
  for (const char* bad : kBad) {
    SCOPED_TRACE(bad);
    for (FieldKind kind :
         {FieldKind::kText, FieldKind::kTrim, FieldKind::kLowerTrim, FieldKind::kPixKey}) {
      EXPECT_EQ(Normalize(kind, bad, 1), "ERROR:invalid_field");
      EXPECT_EQ(Normalize(kind, bad, 2), "ERROR:invalid_field");
    }
  }
  EXPECT_EQ(Normalize(FieldKind::kText, "\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // U+1F600
}

TEST(PixKeyV1, ComposesBeforeLowering) {
  // "José" with a combining acute: NFC gives U+00E9, which is alnum; without
  // NFC the combining mark (Mn) would be dropped and "jose" would remain.
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "JOSE\u0301 123", 1), "jos\u00e9123");
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "Jose\u0301@Exemplo.com", 1), "jos\u00e9@exemplo.com");
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "Jose\u0301@Exemplo.com", 1),
            Normalize(FieldKind::kPixKey, "Jos\u00e9@exemplo.com", 1));
}

TEST(PixKeyV1, KeepsOnlyLettersAndNumbersOfAnyScript) {
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "١٢٣-½ Ⅻ!😀", 1), "١٢٣½ⅻ");
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "\u200b12\u00a03", 1), "123");
  EXPECT_EQ(Normalize(FieldKind::kPixKey, " +55 (11) 9999-9999 ", 1), "551199999999");
}

TEST(PixKeyV1, KeepsEverythingOfAnEmailButCaseAndOuterSpace) {
  EXPECT_EQ(Normalize(FieldKind::kPixKey, "\u3000 A.B-C+D@X.COM\u2029", 1), "a.b-c+d@x.com");
}

}  // namespace
}  // namespace intentd::normalizers
