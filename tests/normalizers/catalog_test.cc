// Built-in action types and configured ones.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

nlohmann::json Config(const char* text) { return nlohmann::json::parse(text); }

// Adds `config` to the built-ins, expecting an error; returns it.
Error ConfigError(const char* config) {
  Catalog catalog = Catalog::Builtins();
  Error error;
  EXPECT_FALSE(catalog.AddFromConfig(Config(config), &error));
  EXPECT_EQ(error.code, "invalid_config");
  EXPECT_EQ(catalog.types().size(), 2u) << "catalog changed on error";
  return error;
}

bool Mentions(const Error& error, const std::string& text) {
  return error.message.find(text) != std::string::npos;
}

TEST(FieldKind, NamesRoundTrip) {
  for (const char* name : {"text", "trim", "lower-trim", "money", "pix-key"}) {
    FieldKind kind;
    ASSERT_TRUE(ParseFieldKind(name, &kind)) << name;
    EXPECT_EQ(FieldKindName(kind), name);
  }
  FieldKind kind;
  EXPECT_FALSE(ParseFieldKind("Money", &kind));
  EXPECT_FALSE(ParseFieldKind("lower_trim", &kind));
  EXPECT_FALSE(ParseFieldKind("", &kind));
}

TEST(CatalogBuiltins, ListTheContractTypes) {
  const Catalog catalog = Catalog::Builtins();
  const ActionType* pix = catalog.Find("pix.cobranca");
  ASSERT_NE(pix, nullptr);
  ASSERT_EQ(pix->fields.size(), 4u);
  EXPECT_EQ(pix->fields[0].name, "cliente_id");
  EXPECT_EQ(pix->fields[0].kind, FieldKind::kText);
  EXPECT_EQ(pix->fields[1].name, "valor");
  EXPECT_EQ(pix->fields[1].kind, FieldKind::kMoney);
  EXPECT_EQ(pix->fields[2].name, "chave_pix_destino");
  EXPECT_EQ(pix->fields[2].kind, FieldKind::kPixKey);
  EXPECT_EQ(pix->fields[3].name, "referencia_intencao");
  EXPECT_EQ(pix->fields[3].kind, FieldKind::kTrim);
  const ActionType* email = catalog.Find("email.cobranca");
  ASSERT_NE(email, nullptr);
  ASSERT_EQ(email->fields.size(), 3u);
  EXPECT_EQ(email->fields[2].name, "template");
  EXPECT_EQ(email->fields[2].kind, FieldKind::kLowerTrim);
  EXPECT_EQ(catalog.Find("pix.estorno"), nullptr);
  EXPECT_EQ(catalog.Find("PIX.COBRANCA"), nullptr);
}

TEST(CatalogConfig, AddsConfiguredTypes) {
  Catalog catalog = Catalog::Builtins();
  Error error;
  ASSERT_TRUE(catalog.AddFromConfig(Config(R"({"action_types": {"boleto.emissao": {"fields": [
      {"name": "valor", "kind": "money"}, {"name": "sacado", "kind": "lower-trim"}]}}})"),
                                    &error))
      << error.message;
  const ActionType* boleto = catalog.Find("boleto.emissao");
  ASSERT_NE(boleto, nullptr);
  ASSERT_EQ(boleto->fields.size(), 2u);
  EXPECT_EQ(boleto->fields[1].kind, FieldKind::kLowerTrim);
  EXPECT_NE(catalog.Find("pix.cobranca"), nullptr);

  const KeyDeriver deriver("k");
  Derivation d;
  ASSERT_TRUE(
      deriver.Derive("acme", *boleto, {{"valor", "1.5"}, {"sacado", " ANA "}}, 2, &d, &error))
      << error.message;
  EXPECT_EQ(d.canonical,
            R"({"a":"boleto.emissao","p":{"sacado":"ana","valor":"150"},"t":"acme","v":2})");
}

TEST(CatalogConfig, WithoutActionTypesAddsNothing) {
  Catalog catalog = Catalog::Builtins();
  Error error;
  EXPECT_TRUE(catalog.AddFromConfig(Config(R"({"socket": "/run/intentd.sock"})"), &error));
  EXPECT_EQ(catalog.types().size(), 2u);
}

TEST(CatalogConfig, AcceptsAnIdenticalRedefinitionOfABuiltin) {
  Catalog catalog = Catalog::Builtins();
  Error error;
  // Same fields and kinds, listed in another order: the same keys.
  EXPECT_TRUE(catalog.AddFromConfig(Config(R"({"action_types": {"pix.cobranca": {"fields": [
      {"name": "referencia_intencao", "kind": "trim"}, {"name": "cliente_id", "kind": "text"},
      {"name": "valor", "kind": "money"}, {"name": "chave_pix_destino", "kind": "pix-key"}]}}})"),
                                    &error))
      << error.message;
  EXPECT_EQ(catalog.types().size(), 2u);
  EXPECT_EQ(catalog.Find("pix.cobranca")->fields[0].name, "cliente_id");
}

TEST(CatalogConfig, RejectsABuiltinRedefinedDifferently) {
  Error error = ConfigError(R"({"action_types": {"pix.cobranca": {"fields": [
      {"name": "cliente_id", "kind": "text"}, {"name": "valor", "kind": "text"},
      {"name": "chave_pix_destino", "kind": "pix-key"},
      {"name": "referencia_intencao", "kind": "trim"}]}}})");
  EXPECT_EQ(error.field, "valor");
  EXPECT_TRUE(Mentions(error, "pix.cobranca")) << error.message;
  EXPECT_TRUE(Mentions(error, "valor")) << error.message;

  error = ConfigError(R"({"action_types": {"email.cobranca": {"fields": [
      {"name": "cliente_id", "kind": "text"}, {"name": "referencia_intencao", "kind": "trim"}]}}})");
  EXPECT_EQ(error.field, "template");  // dropped
  EXPECT_TRUE(Mentions(error, "email.cobranca")) << error.message;

  error = ConfigError(R"({"action_types": {"email.cobranca": {"fields": [
      {"name": "cliente_id", "kind": "text"}, {"name": "referencia_intencao", "kind": "trim"},
      {"name": "template", "kind": "lower-trim"}, {"name": "canal", "kind": "text"}]}}})");
  EXPECT_EQ(error.field, "canal");  // added
}

TEST(CatalogConfig, RejectsAnUnknownKindNamingTypeAndField) {
  const Error error = ConfigError(R"({"action_types": {"boleto.emissao": {"fields": [
      {"name": "valor", "kind": "currency"}]}}})");
  EXPECT_EQ(error.field, "valor");
  EXPECT_TRUE(Mentions(error, "boleto.emissao")) << error.message;
  EXPECT_TRUE(Mentions(error, "currency")) << error.message;
  EXPECT_TRUE(Mentions(error, "\"money\"")) << error.message;  // lists the valid kinds
}

TEST(CatalogConfig, RejectsAMissingOrNonStringKind) {
  EXPECT_EQ(ConfigError(R"({"action_types": {"t": {"fields": [{"name": "a"}]}}})").field, "a");
  EXPECT_EQ(ConfigError(R"({"action_types": {"t": {"fields": [{"name": "a", "kind": 1}]}}})").field,
            "a");
}

TEST(CatalogConfig, RejectsDuplicateAndEmptyFieldNames) {
  Error error = ConfigError(R"({"action_types": {"t.dup": {"fields": [
      {"name": "a", "kind": "text"}, {"name": "a", "kind": "trim"}]}}})");
  EXPECT_EQ(error.field, "a");
  EXPECT_TRUE(Mentions(error, "t.dup")) << error.message;
  EXPECT_TRUE(Mentions(error, "twice")) << error.message;

  error =
      ConfigError(R"({"action_types": {"t.empty": {"fields": [{"name": "", "kind": "text"}]}}})");
  EXPECT_TRUE(Mentions(error, "t.empty")) << error.message;
  ConfigError(R"({"action_types": {"t": {"fields": [{"name": 7, "kind": "text"}]}}})");
}

TEST(CatalogConfig, RejectsAnEmptyFieldList) {
  const Error error = ConfigError(R"({"action_types": {"t.none": {"fields": []}}})");
  EXPECT_TRUE(Mentions(error, "t.none")) << error.message;
}

TEST(CatalogConfig, RejectsMalformedDocuments) {
  ConfigError(R"([])");
  ConfigError(R"({"action_types": []})");
  ConfigError(R"({"action_types": {"t": []}})");
  ConfigError(R"({"action_types": {"t": {}}})");
  ConfigError(R"({"action_types": {"t": {"fields": {"a": "text"}}}})");
  ConfigError(R"({"action_types": {"t": {"fields": ["a"]}}})");
  ConfigError(R"({"action_types": {"": {"fields": [{"name": "a", "kind": "text"}]}}})");
}

TEST(CatalogConfig, LeavesTheCatalogUnchangedWhenALaterTypeFails) {
  // "a.ok" sorts before "b.bad": it is parsed first, yet must not be added.
  ConfigError(R"({"action_types": {
      "a.ok": {"fields": [{"name": "x", "kind": "text"}]},
      "b.bad": {"fields": [{"name": "x", "kind": "nope"}]}}})");
}

}  // namespace
}  // namespace intentd::normalizers
