// `intentd keygen`: a fresh HMAC secret, or a keyring line for one.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/flags.h"
#include "common/keyring.h"
#include "common/secret.h"

namespace intentd::cli {

using agent::Flags;
using agent::FlagSpec;
using agent::FlagsUsage;
using agent::GenerateKeyHex;

int RunKeygen(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      {"id", true, "print a keyring line ID:SECRET for this key id (1 to 16 of A-Z a-z 0-9 _ . -)"},
      {"json", false, "print {\"secret\":HEX} (with --id also key_id and keyring_line)"},
  };
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) {
    std::fprintf(stderr, "intentd keygen: %s (see intentd keygen --help)\n", error.c_str());
    return kExitUsage;
  }
  if (flags.help_requested()) {
    std::fputs(FlagsUsage("keygen", "[--id ID]",
                          "Prints a fresh HMAC secret: 32 bytes from the OS CSPRNG as 64 "
                          "lowercase hex characters.\nStore it with mode 0600, e.g. `intentd "
                          "keygen > key && chmod 600 key`. With --id, prints the\nkeyring line "
                          "ID:SECRET to add to a keyring (mark the current line with *ID:SECRET).",
                          specs)
                   .c_str(),
               stdout);
    return kExitOk;
  }
  if (!flags.positional().empty()) {
    std::fprintf(stderr, "intentd keygen: unexpected argument %s\n", flags.positional()[0].c_str());
    return kExitUsage;
  }
  const std::string id = flags.GetOr("id", "");
  if (flags.Has("id") && !agent::Keyring::ValidId(id)) {
    std::fprintf(stderr, "intentd keygen: --id must be 1 to 16 characters of A-Z a-z 0-9 _ . -\n");
    return kExitUsage;
  }
  std::string hex;
  if (!GenerateKeyHex(&hex, &error)) {
    std::fprintf(stderr, "intentd keygen: %s\n", error.c_str());
    return kExitFailed;
  }
  if (flags.Has("json")) {
    nlohmann::json out = {{"secret", hex}};
    if (flags.Has("id")) {
      out["key_id"] = id;
      out["keyring_line"] = id + ":" + hex;
    }
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  std::printf("%s%s\n", flags.Has("id") ? (id + ":").c_str() : "", hex.c_str());
  return kExitOk;
}

}  // namespace intentd::cli
