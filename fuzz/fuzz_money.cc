// ParseMoneyCents and the money normalizer against a second reading of the
// contract (fuzz/reference.h). Input: the money text itself.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/reference.h"
#include "normalizers/key_derivation.h"

namespace nz = intentd::normalizers;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  int64_t cents = -1;
  const bool ok = nz::ParseMoneyCents(text, &cents);
  const std::optional<int64_t> want = intentd::fuzz::ReferenceMoneyCents(text);
  if (ok != want.has_value() || (ok && cents != *want)) {
    std::fprintf(stderr, "ParseMoneyCents(\"%s\"): library %s %lld, reference %s %lld\n",
                 text.c_str(), ok ? "ok" : "rejects", static_cast<long long>(cents),
                 want ? "ok" : "rejects", static_cast<long long>(want.value_or(-1)));
    std::abort();
  }
  if (!ok && cents != -1) std::abort();  // *cents is written only on success

  // The money normalizer reads strings the same way (after the UTF-8 check).
  std::string out;
  nz::Error error;
  const bool valid = intentd::fuzz::ValidUtf8(text);
  const bool normalized =
      nz::NormalizeField(nz::FieldKind::kMoney, 2, nlohmann::json(text), "valor", &out, &error);
  if (normalized != (valid && ok)) {
    std::fprintf(stderr, "NormalizeField(money, \"%s\"): %s (%s %s), ParseMoneyCents %s\n",
                 text.c_str(), normalized ? "ok" : "rejects", error.code.c_str(),
                 error.message.c_str(), ok ? "ok" : "rejects");
    std::abort();
  }
  if (normalized && out != std::to_string(cents)) std::abort();
  if (!normalized && (error.code != "invalid_field" || error.field != "valor")) {
    std::fprintf(stderr, "money rejected with code %s field %s\n", error.code.c_str(),
                 error.field.c_str());
    std::abort();
  }
  return 0;
}
