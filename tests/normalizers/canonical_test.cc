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
