// The HMAC secret: where it comes from and what it must be.
#pragma once

#include <string>

namespace intentd::agent {

inline constexpr size_t kMinSecretBytes = 32;

// Loads the secret, in this order: `key_file` when non-empty, else
// $CREDENTIALS_DIRECTORY/hmac-key (systemd LoadCredential=) when that file
// exists, else the environment variable IDEMPOTENCY_HMAC_KEY. One trailing
// "\n" (or "\r\n") of a file is dropped. Fails (false, *error says what to do,
// never the secret itself) when none is set, when it is shorter than
// kMinSecretBytes, or when the key file is readable or writable by group or
// others. *source names where it came from (for the log).
bool LoadSecret(const std::string& key_file, std::string* secret, std::string* source,
                std::string* error);

// 32 random bytes from the OS CSPRNG as 64 lowercase hex characters.
bool GenerateKeyHex(std::string* hex, std::string* error);

}  // namespace intentd::agent
