// KeyDeriver: argument checks, the HMAC, and the output shape.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

const nlohmann::json kPayload = {{"cliente_id", "C-42"},
                                 {"valor", "10.00"},
                                 {"chave_pix_destino", "529.982.247-25"},
                                 {"referencia_intencao", "FAT-1"}};

const ActionType& Pix() {
  static const Catalog catalog = Catalog::Builtins();
  return *catalog.Find("pix.cobranca");
}

Error DeriveError(std::string_view tenant, const nlohmann::json& payload, int version = 2) {
  const KeyDeriver deriver("secret");
  Derivation d;
  d.key = "untouched";
  Error error;
  EXPECT_FALSE(deriver.Derive(tenant, Pix(), payload, version, &d, &error));
  EXPECT_EQ(d.key, "untouched");
  EXPECT_FALSE(error.message.empty());
  return error;
}

std::string Key(const KeyDeriver& deriver, std::string_view tenant,
                const nlohmann::json& payload = kPayload, int version = 2) {
  Derivation d;
  Error error;
  EXPECT_TRUE(deriver.Derive(tenant, Pix(), payload, version, &d, &error)) << error.message;
  return d.key;
}

TEST(Derive, ProducesLowercaseHexKeyAndTxidPrefix) {
  const KeyDeriver deriver("secret");
  Derivation d;
  Error error;
  ASSERT_TRUE(deriver.Derive("acme", Pix(), kPayload, 2, &d, &error));
  ASSERT_EQ(d.key.size(), 64u);
  EXPECT_EQ(d.key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(d.txid, d.key.substr(0, 35));
  EXPECT_EQ(d.rules_version, 2);
  EXPECT_EQ(d.canonical,
            R"({"a":"pix.cobranca","p":{"chave_pix_destino":"52998224725","cliente_id":"C-42",)"
            R"("referencia_intencao":"FAT-1","valor":"1000"},"t":"acme","v":2})");
}

TEST(Derive, ComputesHmacSha256OfTheCanonicalText) {
  // Python: hmac.new(b"", canonical, hashlib.sha256).hexdigest() with the empty
  // key and with a key holding a NUL byte.
  Derivation d;
  Error error;
  ASSERT_TRUE(KeyDeriver("").Derive("acme", Pix(), kPayload, 2, &d, &error)) << error.message;
  EXPECT_EQ(d.key, "5445f60ec8b95edf346520f95093ea0664ebe5c99847e368a30329caa8eb0454");
  ASSERT_TRUE(KeyDeriver(std::string("a\0b", 3)).Derive("acme", Pix(), kPayload, 2, &d, &error));
  EXPECT_EQ(d.key, "0c96db1431ba8b176983e0414cb54f63cab9b41255b7534b80679b7c7ef0192f");
}

TEST(Derive, PadsOrHashesTheSecretAroundSha256sBlockSize) {
  // A secret up to 64 bytes is zero-padded, a longer one hashed first.
  // Python: k = bytes((i * 7 + 1) % 256 for i in range(n));
  // hmac.new(k, canonical, hashlib.sha256).hexdigest().
  const std::pair<size_t, const char*> kCases[] = {
      {63, "0e1b917d50519b9b8ca3f03a59a9122116c07a09cc54dba02e180ae8524331ff"},
      {64, "b0217b93b89d6e02dcda8540cd37428c8f62cb6a03a92456afda7b865771b9dd"},
      {65, "b5b889f673fe9626d7bed5ad4cac8fe19f899e5ffe22a53baeb69fd7a8feb25c"},
      {200, "557c8dfd0d6155543a11ef1b2aab8aa1539734d823e607f27ad237a1823ec6a5"},
  };
  for (const auto& [size, expected] : kCases) {
    std::string secret;
    for (size_t i = 0; i < size; ++i) secret.push_back(static_cast<char>((i * 7 + 1) % 256));
    const KeyDeriver deriver(secret);
    EXPECT_EQ(Key(deriver, "acme"), expected) << size << "-byte secret";
    EXPECT_EQ(Key(deriver, "acme"), expected) << size << "-byte secret, second use";
  }
}

TEST(Derive, DependsOnTheSecret) {
  EXPECT_NE(Key(KeyDeriver("secret-a"), "acme"), Key(KeyDeriver("secret-b"), "acme"));
  EXPECT_EQ(Key(KeyDeriver("secret-a"), "acme"), Key(KeyDeriver("secret-a"), "acme"));
}

TEST(Derive, RejectsEmptyOrWhitespaceOnlyTenant) {
  for (const char* tenant : {"", " ", "\t\n", "\u3000", "\u00a0\u2028"}) {
    const Error error = DeriveError(tenant, kPayload);
    EXPECT_EQ(error.code, "invalid_field");
    EXPECT_EQ(error.field, "tenant_id");
  }
  const Error error = DeriveError("ac\xffme", kPayload);
  EXPECT_EQ(error.field, "tenant_id");
}

TEST(Derive, UsesTheTenantAsGiven) {
  const KeyDeriver deriver("secret");
  EXPECT_NE(Key(deriver, " acme"), Key(deriver, "acme"));
  EXPECT_NE(Key(deriver, "ACME"), Key(deriver, "acme"));
  EXPECT_NE(Key(deriver, "\u200bacme"), Key(deriver, "acme"));
}

TEST(Derive, RejectsRulesVersionsOtherThanOneAndTwo) {
  for (int version : {0, 3, -1}) {
    const Error error = DeriveError("acme", kPayload, version);
    EXPECT_EQ(error.code, "invalid_field");
    EXPECT_EQ(error.field, "rules_version");
  }
}

TEST(Derive, RejectsAPayloadThatIsNotAnObject) {
  for (const nlohmann::json& payload :
       {nlohmann::json::array({"x"}), nlohmann::json("x"), nlohmann::json(nullptr)}) {
    EXPECT_EQ(DeriveError("acme", payload).code, "invalid_field");
  }
}

TEST(Derive, ReportsTheFirstMissingFieldInListedOrder) {
  nlohmann::json payload = kPayload;
  payload.erase("valor");
  payload.erase("referencia_intencao");
  Error error = DeriveError("acme", payload);
  EXPECT_EQ(error.code, "missing_field");
  EXPECT_EQ(error.field, "valor");

  payload = kPayload;
  payload["referencia_intencao"] = nullptr;
  error = DeriveError("acme", payload);
  EXPECT_EQ(error.code, "missing_field");
  EXPECT_EQ(error.field, "referencia_intencao");
}

TEST(Derive, ReportsAnInvalidFieldByName) {
  nlohmann::json payload = kPayload;
  payload["cliente_id"] = 4.5;
  const Error error = DeriveError("acme", payload);
  EXPECT_EQ(error.code, "invalid_field");
  EXPECT_EQ(error.field, "cliente_id");
}

TEST(Derive, RejectsAHandBuiltTypeWithDuplicateFields) {
  const ActionType type{"t", {{"a", FieldKind::kText}, {"a", FieldKind::kTrim}}};
  Derivation d;
  Error error;
  EXPECT_FALSE(KeyDeriver("k").Derive("acme", type, {{"a", "x"}}, 1, &d, &error));
  EXPECT_EQ(error.code, "invalid_config");
  EXPECT_EQ(error.field, "a");
}

TEST(Derive, GivesTheSameKeysFromConcurrentThreads) {
  const KeyDeriver deriver("secret");
  const std::string expected = Key(deriver, "acme");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        Derivation d;
        Error error;
        if (!deriver.Derive("acme", Pix(), kPayload, 2, &d, &error) || d.key != expected) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace intentd::normalizers
