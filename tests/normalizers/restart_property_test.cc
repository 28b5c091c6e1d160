// The restart property: the same intent, however it is presented on a
// redelivery, yields the same key; a different intent never does.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

const char kSecret[] = "restart-property-secret";

class Presenter {
 public:
  explicit Presenter(uint64_t seed) : rng_(seed) {}

  template <typename T>
  const T& Pick(const std::vector<T>& options) {
    return options[rng_() % options.size()];
  }

  // Unlisted members that must never change the key.
  void AddNoise(nlohmann::json* payload) {
    const int count = static_cast<int>(rng_() % 4);
    for (int i = 0; i < count; ++i) {
      const std::string name = Pick<std::string>(
          {"message_id", "attempt", "model_output", "x_" + std::to_string(rng_() % 1000)});
      (*payload)[name] = Pick<nlohmann::json>({rng_() % 100000,
                                               "wamid." + std::to_string(rng_()),
                                               nullptr,
                                               nlohmann::json::array(),
                                               {{"nested", true}},
                                               1.5});
    }
  }

 private:
  std::mt19937_64 rng_;  // output is specified by the standard: same sequence everywhere
};

const std::vector<nlohmann::json> kAmounts = {
    "10", "10.0", "10.00", 10, 10.0, 10.00, " 10.00 ", "\u00a010.000\t", "010.00", "\u300010"};
const std::vector<nlohmann::json> kCpfs = {"529.982.247-25", "52998224725", " 529.982.247-25\u3000",
                                           "529 982 247 25", 52998224725LL, "\n52998224725 "};
const std::vector<nlohmann::json> kEmails = {"fulano@exemplo.com", "Fulano@Exemplo.COM",
                                             "FULANO@EXEMPLO.COM ", "\tfulano@Exemplo.com",
                                             "\u00a0fuLANO@exemplo.com\u2028"};
const std::vector<nlohmann::json> kRefs = {"FAT-1", " FAT-1", "FAT-1\n", "\u2003FAT-1\u00a0"};
const std::vector<nlohmann::json> kClients = {"4242", 4242};

nlohmann::json Canonical(const nlohmann::json& pix_key) {
  return {{"cliente_id", "4242"},
          {"valor", "10.00"},
          {"chave_pix_destino", pix_key},
          {"referencia_intencao", "FAT-1"}};
}

std::string Key(const KeyDeriver& deriver, const ActionType& type, const nlohmann::json& payload,
                int version, std::string_view tenant = "acme") {
  Derivation d;
  Error error;
  EXPECT_TRUE(deriver.Derive(tenant, type, payload, version, &d, &error))
      << payload.dump() << ": " << error.message;
  return d.key;
}

TEST(RestartProperty, SameIntentGivesSameKeyAcrossPresentations) {
  const Catalog catalog = Catalog::Builtins();
  const ActionType& pix = *catalog.Find("pix.cobranca");
  const KeyDeriver deriver(kSecret);
  Presenter presenter(20260101);
  for (const auto* keys : {&kCpfs, &kEmails}) {
    for (int version : {1, 2}) {
      SCOPED_TRACE("version " + std::to_string(version) + ", key " + (*keys)[0].dump());
      const std::string expected = Key(deriver, pix, Canonical((*keys)[0]), version);
      for (int i = 0; i < 1000; ++i) {
        nlohmann::json payload = {{"cliente_id", presenter.Pick(kClients)},
                                  {"valor", presenter.Pick(kAmounts)},
                                  {"chave_pix_destino", presenter.Pick(*keys)},
                                  {"referencia_intencao", presenter.Pick(kRefs)}};
        presenter.AddNoise(&payload);
        ASSERT_EQ(Key(deriver, pix, payload, version), expected) << payload.dump();
      }
    }
  }
}

TEST(RestartProperty, AnyChangeOfAListedFieldChangesTheKey) {
  const Catalog catalog = Catalog::Builtins();
  const ActionType& pix = *catalog.Find("pix.cobranca");
  const KeyDeriver deriver(kSecret);
  const std::vector<std::pair<std::string, nlohmann::json>> changes = {
      {"valor", "10.01"},
      {"valor", "100.00"},
      {"valor", "1.00"},
      {"valor", 1800},
      {"chave_pix_destino", "111.444.777-35"},
      {"chave_pix_destino", "fulano@exemplo.com"},
      {"chave_pix_destino", "+55 11 99999-9999"},
      {"referencia_intencao", "FAT-2"},
      {"referencia_intencao", "fat-1"},  // trim keeps case
      {"referencia_intencao", "FAT -1"},
      {"cliente_id", "4243"},
      {"cliente_id", " 4242"},  // text is used unchanged
      {"cliente_id", "4242 "},
  };
  for (int version : {1, 2}) {
    std::set<std::string> keys = {Key(deriver, pix, Canonical("52998224725"), version)};
    for (const auto& [field, value] : changes) {
      nlohmann::json payload = Canonical("52998224725");
      payload[field] = value;
      EXPECT_TRUE(keys.insert(Key(deriver, pix, payload, version)).second)
          << "version " << version << ": " << field << " = " << value.dump();
    }
  }
}

TEST(RestartProperty, TenantAndActionTypeSeparateKeys) {
  Catalog catalog = Catalog::Builtins();
  Error error;
  // A configured type with exactly the fields of pix.cobranca.
  ASSERT_TRUE(catalog.AddFromConfig(nlohmann::json::parse(R"({"action_types": {"pix.agendado":
      {"fields": [{"name": "cliente_id", "kind": "text"}, {"name": "valor", "kind": "money"},
                  {"name": "chave_pix_destino", "kind": "pix-key"},
                  {"name": "referencia_intencao", "kind": "trim"}]}}})"),
                                    &error));
  const KeyDeriver deriver(kSecret);
  const nlohmann::json payload = Canonical("52998224725");
  const ActionType& pix = *catalog.Find("pix.cobranca");
  const ActionType& scheduled = *catalog.Find("pix.agendado");
  for (int version : {1, 2}) {
    std::set<std::string> keys;
    for (const char* tenant : {"acme", "acme2", "Acme", "acme ", "outra"}) {
      EXPECT_TRUE(keys.insert(Key(deriver, pix, payload, version, tenant)).second) << tenant;
      EXPECT_TRUE(keys.insert(Key(deriver, scheduled, payload, version, tenant)).second) << tenant;
    }
  }
}

TEST(RestartProperty, VersionOneAndTwoKeysNeverCoincide) {
  const Catalog catalog = Catalog::Builtins();
  const KeyDeriver deriver(kSecret);
  for (const nlohmann::json& pix_key :
       {nlohmann::json("52998224725"), nlohmann::json("fulano@exemplo.com")}) {
    const nlohmann::json payload = Canonical(pix_key);
    EXPECT_NE(Key(deriver, *catalog.Find("pix.cobranca"), payload, 1),
              Key(deriver, *catalog.Find("pix.cobranca"), payload, 2));
  }
  const nlohmann::json email = {
      {"cliente_id", "4242"}, {"referencia_intencao", "FAT-1"}, {"template", "lembrete"}};
  EXPECT_NE(Key(deriver, *catalog.Find("email.cobranca"), email, 1),
            Key(deriver, *catalog.Find("email.cobranca"), email, 2));
}

}  // namespace
}  // namespace intentd::normalizers
