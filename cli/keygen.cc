// `intentd keygen`: a fresh HMAC secret.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/flags.h"
#include "agent/secret.h"
#include "cli/commands.h"

namespace intentd::cli {

using agent::FlagsUsage;
using agent::GenerateKeyHex;

int RunKeygen(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(FlagsUsage("keygen", "", "Prints a fresh HMAC secret: 32 bytes from the OS CSPRNG "
                                         "as 64 lowercase hex characters.\nStore it with mode "
                                         "0600, e.g. `intentd keygen > key && chmod 600 key`.",
                          {})
                   .c_str(),
               stdout);
    return kExitOk;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "intentd keygen: unexpected argument %s\n", args[0].c_str());
    return kExitUsage;
  }
  std::string hex, error;
  if (!GenerateKeyHex(&hex, &error)) {
    std::fprintf(stderr, "intentd keygen: %s\n", error.c_str());
    return kExitFailed;
  }
  std::printf("%s\n", hex.c_str());
  return kExitOk;
}

}  // namespace intentd::cli
