// The canonical JSON text: the digest input, byte for byte.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

std::string Quoted(std::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

TEST(AppendJsonString, EscapesQuoteBackslashAndShortControls) {
  EXPECT_EQ(Quoted("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Quoted("\b\f\n\r\t"), R"("\b\f\n\r\t")");
}

TEST(AppendJsonString, EscapesOtherControlsAsLowercaseHex) {
  EXPECT_EQ(Quoted(std::string("\0", 1)), R"("\u0000")");
  EXPECT_EQ(Quoted("\x01\x0b\x1b\x1f"), R"("\u0001\u000b\u001b\u001f")");
}

TEST(AppendJsonString, WritesEverythingElseAsItself) {
  EXPECT_EQ(Quoted("\x7f"), "\"\x7f\"");  // DEL is not escaped
  EXPECT_EQ(Quoted("/ é 😀 \u0085 \u2028"), "\"/ é 😀 \u0085 \u2028\"");
  EXPECT_EQ(Quoted(""), "\"\"");
  EXPECT_EQ(Quoted(" "), "\" \"");
}

TEST(AppendJsonString, AppendsToExistingText) {
  std::string out = "x:";
  AppendJsonString("y", &out);
  EXPECT_EQ(out, "x:\"y\"");
}

TEST(AppendJsonString, AgreesWithNlohmannOnEveryAsciiByte) {
  // nlohmann::json::dump uses the same escapes; a second opinion per byte.
  for (int c = 0; c < 0x80; ++c) {
    const std::string text(1, static_cast<char>(c));
    EXPECT_EQ(Quoted(text), nlohmann::json(text).dump()) << c;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    for (int n = 0; n < 20; ++n) text.push_back(static_cast<char>(rng() % 0x80));
    text += "ção";
    EXPECT_EQ(Quoted(text), nlohmann::json(text).dump());
  }
}

// The plain runs are found eight bytes at a time: an escaped byte at any
// position of a word or of the tail, between bytes that are not escaped
// (0x20, 0x7e, 0x7f and UTF-8 bytes next to the thresholds), is found.
TEST(AppendJsonString, FindsAnEscapedByteAtEveryPosition) {
  const std::string specials = std::string("\"\\\x1f\x01\n") + std::string(1, '\0');
  const std::string plain = std::string("\x20\x7e\x7f\x21\x5b\x5d") + "\xc3\xa9";
  for (size_t length = 1; length <= 24; ++length) {
    std::string base;
    while (base.size() < length) base += plain;
    base.resize(length);
    EXPECT_EQ(Quoted(base), "\"" + base + "\"");
    EXPECT_EQ(PlainJsonPrefix(base, /*ascii_only=*/false), length);
    for (size_t at = 0; at < length; ++at) {
      for (char special : specials) {
        std::string text = base;
        text[at] = special;
        EXPECT_EQ(PlainJsonPrefix(text, false), at) << length << " " << at;
        const std::string alone = Quoted(std::string(1, special));  // checked above
        EXPECT_EQ(Quoted(text), "\"" + base.substr(0, at) + alone.substr(1, alone.size() - 2) +
                                    base.substr(at + 1) + "\"")
            << length << " " << at;
      }
      std::string text(length, 'a');
      text[at] = '\x7f';
      EXPECT_EQ(PlainJsonPrefix(text, /*ascii_only=*/true), at);
      EXPECT_EQ(PlainJsonPrefix(text, /*ascii_only=*/false), length);
      text[at] = '\x80';
      EXPECT_EQ(PlainJsonPrefix(text, /*ascii_only=*/true), at);
    }
  }
}

TEST(CanonicalJson, MatchesTheContractExample) {
  const std::vector<std::pair<std::string, std::string>> payload = {
      {"chave_pix_destino", "11122233344"},
      {"cliente_id", "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"},
      {"referencia_intencao", "FAT-2026-000123"},
      {"valor", "18000"}};
  EXPECT_EQ(CanonicalJson("acme", "pix.cobranca", payload, 1),
            R"({"a":"pix.cobranca","p":{"chave_pix_destino":"11122233344",)"
            R"("cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A","referencia_intencao":"FAT-2026-000123",)"
            R"("valor":"18000"},"t":"acme","v":1})");
}

TEST(CanonicalJson, EscapesTenantActionFieldNamesAndValues) {
  EXPECT_EQ(CanonicalJson("a\"c\\me\n", "t\x01", {{"f\t", "v\x7f\x1f"}}, 2),
            "{\"a\":\"t\\u0001\",\"p\":{\"f\\t\":\"v\x7f\\u001f\"},\"t\":\"a\\\"c\\\\me\\n\","
            "\"v\":2}");
}

TEST(Derive, SortsFieldNamesByCodePoint) {
  Catalog catalog;
  Error error;
  ASSERT_TRUE(catalog.AddFromConfig(nlohmann::json::parse(R"({"action_types": {"t": {"fields": [
      {"name": "é", "kind": "text"}, {"name": "z", "kind": "text"}, {"name": "Z", "kind": "text"},
      {"name": "a", "kind": "text"}, {"name": "_", "kind": "text"}]}}})"),
                                    &error));
  const KeyDeriver deriver("k");
  Derivation d;
  ASSERT_TRUE(deriver.Derive("acme", *catalog.Find("t"),
                             {{"é", "1"}, {"z", "2"}, {"Z", "3"}, {"a", "4"}, {"_", "5"}}, 1, &d,
                             &error));
  EXPECT_EQ(d.canonical,
            R"({"a":"t","p":{"Z":"3","_":"5","a":"4","z":"2","é":"1"},"t":"acme","v":1})");
}

}  // namespace
}  // namespace intentd::normalizers
