// Key derivation on the client side, for the anchors (PostgreSQL, Redis):
// there the bot itself normalizes the payload and computes the HMAC key
// (docs/key-derivation.md, the same code intentd runs), then stores it. intentd
// does this work in the agent; the anchors' sessions do it before sending,
// inside the measured latency, so both sides pay for the same work.
#pragma once

#include <memory>
#include <string>

#include "bench/loadgen_session.h"
#include "normalizers/key_derivation.h"

namespace intentd::bench {

class ClientKeyDeriver {
 public:
  // `secret` at least 32 bytes (not checked here).
  explicit ClientKeyDeriver(const std::string& secret);

  // The rules-version-2 key of `action`'s pix.cobranca payload. False with
  // *error filled when the payload is rejected.
  bool Derive(const Action& action, std::string* key, std::string* error) const;

 private:
  normalizers::Catalog catalog_;
  const normalizers::ActionType* type_;
  normalizers::KeyDeriver deriver_;
};

}  // namespace intentd::bench
