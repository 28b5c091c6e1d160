// The keyring's forms (common/keyring.h): the plain secret stays id "0" with
// the same keys, lines and JSON name their current secret, and nothing that
// is not a keyring is split at a ':' by accident.
#include "common/keyring.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "normalizers/key_derivation.h"

namespace intentd::agent {
namespace {

const std::string kHex0(64, 'a');
const std::string kHex1 = std::string(32, '1') + std::string(32, 'f');

std::string KeyUnder(const normalizers::KeyDeriver& deriver) {
  const normalizers::Catalog catalog = normalizers::Catalog::Builtins();
  const nlohmann::json payload = {{"cliente_id", "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"},
                                  {"valor", "180.00"},
                                  {"chave_pix_destino", "111.444.777-35"},
                                  {"referencia_intencao", "FAT-1"}};
  normalizers::Derivation d;
  normalizers::Error e;
  EXPECT_TRUE(deriver.Derive("acme", *catalog.Find("pix.cobranca"), payload, 2, &d, &e))
      << e.message;
  return d.key;
}

TEST(Keyring, APlainSecretIsIdZeroWithTheSameKeys) {
  Keyring k;
  std::string error;
  // A key file's one trailing newline is not part of the secret, as before.
  char path[] = "/tmp/intentd-keyring-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = kHex0 + "\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  std::string source;
  const bool loaded = LoadKeyring(path, &k, &source, &error);
  unlink(path);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(k.current_id(), "0");
  EXPECT_EQ(k.ids(), std::vector<std::string>{"0"});
  const normalizers::KeyDeriver plain(kHex0);
  EXPECT_EQ(KeyUnder(k.current()), KeyUnder(plain));
  // Text that only looks like lines in part stays one plain secret.
  for (const std::string& text :
       {std::string("id:not-hex-so-a-plain-secret-of-enough-bytes"),
        std::string("{\"not\": \"a keyring\", \"but\": \"a plain secret\"}"),
        std::string("a secret with spaces and a colon: in it, long enough\n\n"),
        std::string("a secret from the environment with its own newline\r\n")}) {
    ASSERT_TRUE(Keyring::Parse(text, &k, &error)) << error;
    EXPECT_EQ(k.ids(), std::vector<std::string>{"0"}) << text;
    EXPECT_EQ(KeyUnder(k.current()), KeyUnder(normalizers::KeyDeriver(text))) << text;
  }
}

TEST(Keyring, LinesMarkTheCurrentSecretAndKeepEveryId) {
  Keyring k;
  std::string error;
  ASSERT_TRUE(Keyring::Parse(
      "# rotation of December\n0:" + kHex0 + "\n\n*2026-12:" + kHex1 + "\r\n", &k, &error))
      << error;
  EXPECT_EQ(k.current_id(), "2026-12");
  EXPECT_EQ(k.ids(), (std::vector<std::string>{"0", "2026-12"}));
  // Id "0" of a keyring is the plain secret it came from: the same keys.
  EXPECT_EQ(KeyUnder(*k.Find("0")), KeyUnder(normalizers::KeyDeriver(kHex0)));
  EXPECT_EQ(KeyUnder(k.current()), KeyUnder(normalizers::KeyDeriver(kHex1)));
  EXPECT_NE(KeyUnder(k.current()), KeyUnder(*k.Find("0")));
  EXPECT_EQ(k.Find("1"), nullptr);
  // One line needs no mark.
  ASSERT_TRUE(Keyring::Parse("7:" + kHex1, &k, &error)) << error;
  EXPECT_EQ(k.current_id(), "7");
}

TEST(Keyring, JsonNamesItsCurrentSecret) {
  Keyring k;
  std::string error;
  const nlohmann::json doc = {{"current", "b"}, {"keys", {{"a", kHex0}, {"b", kHex1}}}};
  ASSERT_TRUE(Keyring::Parse(doc.dump(), &k, &error)) << error;
  EXPECT_EQ(k.current_id(), "b");
  EXPECT_EQ(KeyUnder(*k.Find("a")), KeyUnder(normalizers::KeyDeriver(kHex0)));
}

TEST(Keyring, BadKeyringsAreRefusedWithoutShowingASecret) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0:" + kHex0 + "\n*1:" + kHex1 + "Z", "line 2"},
      {"0:" + kHex0 + "\nplain second line", "line 2"},
      {"0:" + kHex0 + "\n1:" + kHex1, "mark exactly one"},
      {"*0:" + kHex0 + "\n*1:" + kHex1, "mark exactly one"},
      {"*0:" + kHex0 + "\n0:" + kHex1, "twice"},
      {R"({"current": "x", "keys": {"a": ")" + kHex0 + R"("}})", "not one of its secrets"},
      {R"({"current": "a", "keys": {"a": "short"}})", "at least"},
      {R"({"current": "a", "keys": {"a": 5}})", "not a string"},
      {R"({"current": "a", "keys": {"an id that is far too long": ")" + kHex0 + R"("}})",
       "1 to 16"},
      {R"({"keys": {}})", "not {"},
      {R"({"current": "a", "keys": {"a": ")" + kHex0 + R"(", "a": ")" + kHex1 + R"("}})",
       "names \"a\" twice"},
      {R"({"current": "a", "current": "b", "keys": {"a": ")" + kHex0 + R"(", "b": ")" + kHex1 +
           R"("}})",
       "names \"current\" twice"},
      {"short", "at least"},
  };
  for (const auto& [text, expected] : cases) {
    Keyring k;
    std::string error;
    EXPECT_FALSE(Keyring::Parse(text, &k, &error)) << text;
    EXPECT_NE(error.find(expected), std::string::npos) << error;
    EXPECT_EQ(error.find(kHex0), std::string::npos) << error;
    EXPECT_EQ(error.find(kHex1), std::string::npos) << error;
  }
}

TEST(Keyring, IdsHaveAShape) {
  EXPECT_TRUE(Keyring::ValidId("0"));
  EXPECT_TRUE(Keyring::ValidId("2026-12_b.1"));
  EXPECT_FALSE(Keyring::ValidId(""));
  EXPECT_FALSE(Keyring::ValidId("seventeen-chars-x"));
  EXPECT_FALSE(Keyring::ValidId("a:b"));
  EXPECT_FALSE(Keyring::ValidId("a b"));
}

}  // namespace
}  // namespace intentd::agent
