// Runs every line of tests/vectors/key-derivation.jsonl, the public vectors
// of docs/key-derivation.md.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::normalizers {
namespace {

const char kVectorPath[] = INTENTD_VECTORS_DIR "/key-derivation.jsonl";

std::vector<nlohmann::json> LoadVectors() {
  std::vector<nlohmann::json> vectors;
  std::ifstream in(kVectorPath);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    vectors.push_back(nlohmann::json::parse(line));
  }
  return vectors;
}

// Derives one vector as the agent would: Find, then Derive.
bool RunVector(const nlohmann::json& v, Derivation* d, Error* error) {
  const Catalog catalog = Catalog::Builtins();
  const ActionType* type = catalog.Find(v.at("action_type").get<std::string>());
  if (type == nullptr) {
    *error = Error{"unknown_action_type", "", ""};
    return false;
  }
  const KeyDeriver deriver(v.at("hmac_key").get<std::string>());
  return deriver.Derive(v.at("tenant_id").get<std::string>(), *type, v.at("payload"),
                        v.at("rules_version").get<int>(), d, error);
}

TEST(KeyDerivationVectors, FileIsPresentAndNotEmpty) {
  std::ifstream in(kVectorPath);
  ASSERT_TRUE(in.good()) << "cannot open " << kVectorPath;
  // 61 lines today; far fewer means a truncated or wrong file.
  EXPECT_GE(LoadVectors().size(), 50u) << kVectorPath << " has too few vectors";
}

TEST(KeyDerivationVectors, EveryLineMatches) {
  const std::vector<nlohmann::json> vectors = LoadVectors();
  ASSERT_FALSE(vectors.empty()) << "no vectors read from " << kVectorPath;
  for (const nlohmann::json& v : vectors) {
    SCOPED_TRACE(v.at("name").get<std::string>());
    const nlohmann::json& expect = v.at("expect");
    Derivation d;
    Error error;
    const bool ok = RunVector(v, &d, &error);
    if (expect.contains("error")) {
      ASSERT_FALSE(ok) << "derived " << d.canonical;
      EXPECT_EQ(error.code, expect.at("error").get<std::string>());
      EXPECT_EQ(error.field, expect.value("field", std::string()));
      if (error.code != "unknown_action_type") {
        EXPECT_FALSE(error.message.empty());
      }
      continue;
    }
    ASSERT_TRUE(ok) << error.code << " " << error.field << ": " << error.message;
    EXPECT_EQ(d.key, expect.at("key").get<std::string>());
    EXPECT_EQ(d.txid, d.key.substr(0, 35));
    EXPECT_EQ(d.canonical, expect.at("canonical").get<std::string>());
    EXPECT_EQ(d.rules_version, v.at("rules_version").get<int>());
    nlohmann::json payload = nlohmann::json::object();
    for (const auto& [name, value] : d.payload) payload[name] = value;
    EXPECT_EQ(payload, expect.at("payload"));
    // The expected payload names every field, in the derivation's order too.
    ASSERT_EQ(d.payload.size(), expect.at("payload").size());
    for (size_t i = 1; i < d.payload.size(); ++i) {
      EXPECT_LT(d.payload[i - 1].first, d.payload[i].first);
    }
  }
}

}  // namespace
}  // namespace intentd::normalizers
