// The HMAC keyring: the secrets keys are derived with, each under a short id,
// one of them current.
//
// Where it is read from is LoadSecret's (common/secret.h): --hmac-key-file,
// $CREDENTIALS_DIRECTORY/hmac-key or IDEMPOTENCY_HMAC_KEY. What it holds is
// one of three forms:
//   a plain secret (the whole text, one trailing newline dropped), which is
//     the keyring {"0": secret} with "0" current: what a single-secret
//     deployment always had, so its keys and ids do not change;
//   lines "ID:SECRET", the current one marked "*ID:SECRET" (a single line
//     needs no mark); blank lines and lines starting with "#" are skipped;
//   JSON: {"current": "ID", "keys": {"ID": "SECRET", ...}}.
// An id is 1 to 16 characters of [A-Za-z0-9_.-]. Every secret is used as
// the bytes written (a 64-hex line from `intentd keygen` is 64 key bytes,
// as in the plain form) and must be at least kMinSecretBytes long. Text is
// read as lines when its lines have that shape, each secret hex; text with
// some such lines and some others is refused (a keyring with a typo must
// not become a plain secret). JSON is an object with "keys"; other text
// starting with '{' is a plain secret.
//
// Secrets never appear in an error message or a log line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::agent {

class Keyring {
 public:
  // The keyring of a single secret under id "0" (the plain form).
  static Keyring Single(std::string secret);
  // The same around a deriver that the caller keeps alive.
  static Keyring Borrowed(const normalizers::KeyDeriver& deriver);
  // Parses `text` (see above). False with *error, which never holds a secret.
  static bool Parse(std::string_view text, Keyring* out, std::string* error);

  Keyring() = default;
  Keyring(Keyring&&) = default;
  Keyring& operator=(Keyring&&) = default;

  // The deriver of secret `id`; nullptr when the keyring has none.
  const normalizers::KeyDeriver* Find(std::string_view id) const;
  const std::string& current_id() const { return current_; }
  const normalizers::KeyDeriver& current() const { return *Find(current_); }
  // Every id, in the order given.
  std::vector<std::string> ids() const;
  bool Has(std::string_view id) const { return Find(id) != nullptr; }
  bool empty() const { return entries_.empty(); }

  // Whether `id` has the shape of a key id.
  static bool ValidId(std::string_view id);

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const normalizers::KeyDeriver> deriver;
  };
  std::vector<Entry> entries_;
  std::string current_;
};

// LoadSecret, read as a keyring. *source names where it came from.
bool LoadKeyring(const std::string& key_file, Keyring* keyring, std::string* source,
                 std::string* error);

}  // namespace intentd::agent
