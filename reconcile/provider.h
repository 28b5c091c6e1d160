// A payment provider asked what became of one action whose outcome is
// uncertain (its lease expired without a completion): was the charge made or
// not? The answer decides what `intentd reconcile` records; kUnknown records
// nothing, so every doubt (a transport error, an answer that does not parse,
// a 404 that may come from a wrong URL) is kUnknown, never kNotExecuted.
//
// The settings types and ParseReconcileConfig are in reconcile/config.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "reconcile/config.h"

namespace intentd::reconcile {

enum class Verdict { kExecuted, kNotExecuted, kFailed, kUnknown };

// Answer::cause, the metric label of a kUnknown answer. The whole set:
//   "http_401"        401 from GET /cob, also with a token fetched after the first one
//   "http_403"        403 (the token lacks the scope, or the client is not allowed)
//   "http_429"        429 (rate limited; see retry_after_ms)
//   "http_4xx"        any other 4xx, and a 404 that is not the API Pix's
//                     CobNaoEncontrado (a wrong base_url answers 404 for every txid)
//   "http_5xx"        5xx
//   "timeout"         no whole answer within timeout_ms (connect or transfer)
//   "connect"         the connection could not be made (DNS, refused), or broke
//                     before a whole answer (reset, closed without answering)
//   "tls"             the TLS handshake failed: the server's certificate is not
//                     trusted, or the server refused the client certificate
//                     (with TLS 1.3 that refusal may only show as a reset
//                     right after the handshake, before any answer: such a
//                     reset counts as tls too)
//   "bad_response"    an answer that does not parse or does not say (not JSON, not
//                     a charge, an unknown status, another txid, a redirect, too large)
//   "token"           the token endpoint answered, but no token (non-200, no
//                     access_token); a transport failure there keeps its own cause
//   "command_failed"  the command could not start, exited non-zero or was
//                     killed, or its stdout was not one valid outcome line
//   "command_timeout" the command ran longer than timeout_ms (killed)
//   "command_unknown" the command answered {"outcome":"unknown"}
//   "config"          the action cannot be asked about (e.g. it has no txid)
inline constexpr const char* kCauses[] = {
    "http_401",        "http_403", "http_429",     "http_4xx", "http_5xx",       "timeout",
    "connect",         "tls",      "bad_response", "token",    "command_failed", "command_timeout",
    "command_unknown", "config"};

struct Answer {
  Verdict verdict = Verdict::kUnknown;
  std::string response;  // kExecuted: compact JSON text to store as the action's response (the
                         // charge / the script's response)
  std::string error;     // kNotExecuted / kFailed: compact JSON text to store as the error (e.g.
                         // {"reconciled":"not_found","provider":"pix_api","status":404})
  std::string cause;     // kUnknown: one of kCauses
  std::string detail;    // one human line: what happened (never a secret)
  std::string provider_said;   // short: "200 CONCLUIDA", "404", "503", "command: completed"
  int64_t retry_after_ms = 0;  // > 0 when the provider said Retry-After
};

struct ActionInfo {  // what the pass knows about the action
  std::string tenant_id, key, txid, action_type, intent_ref;
  // The action record as the agent listed it (JSON object text), with
  // "payload" added when known: what a command hook gets on stdin (as one
  // compact line).
  std::string record_json;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // Thread-compatible: one caller at a time. Blocks for at most a few times
  // the settings' timeout_ms (reconcile/pix_api.h, reconcile/command_hook.h).
  // Never raises SIGPIPE in the caller, whatever its disposition.
  virtual Answer Ask(const ActionInfo& action) = 0;
};

// The provider of one action type's settings. Reads the files now: the
// client secret, the client certificate and key, the CA file (false, with
// *error naming the file, when one is unreadable, not PEM, or the key does
// not match the certificate; the secret and key files are refused when group
// or others may access them, as the HMAC key file is); for a command, checks
// that argv[0] is an executable file. *error never holds a secret.
// The API Pix provider keeps its OAuth2 token until shortly before
// expires_in, and fetches a new one once on a 401 from GET /cob (then
// answers http_401 if it persists).
std::unique_ptr<Provider> MakeProvider(const TypeSettings& settings, std::string* error);

}  // namespace intentd::reconcile
