// The config file's "reconcile" member: for each action type, the provider
// that `intentd reconcile` asks what became of an action whose outcome is
// uncertain.
//
//   "reconcile": {
//     "pix.cobranca": {"pix_api": {
//         "base_url": "https://pix.psp.example/api/v2",   // GET {base_url}/cob/{txid}
//         "token_url": "https://pix.psp.example/oauth/token",
//         "client_id": "...",
//         "client_secret_file": "/run/credentials/intentd.service/pix-secret",
//         "cert_file": "...", "key_file": "...",          // the client certificate (mTLS)
//         "ca_file": "...",                               // optional: the system's CAs
//         "scope": "cob.read",                            // optional: none sent
//         "timeout_ms": 10000}},                          // optional, per HTTP request
//     "boleto.cobranca": {"command": ["/usr/local/lib/intentd/boleto-status", "--env", "prod"],
//                         "timeout_ms": 10000},           // optional
//     "_comment": "members starting with _ are comments, at every level"}
//
// Paths are used as given (relative ones against the working directory).
// Secrets live in files only: the config holds their paths, never their
// values.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace intentd::reconcile {

// The BCB API Pix of one PSP (reconcile/pix_api.h says what is asked).
struct PixApiSettings {
  // http:// or https:// URLs, without user:password@. base_url loses any
  // trailing "/" when parsed.
  std::string base_url, token_url, client_id, client_secret_file, cert_file, key_file, ca_file;
  // Sent as the token request's scope when not empty. Default: none (the PSP
  // grants the client's default scopes); "cob.read" is the least that works.
  std::string scope;
  int64_t timeout_ms = 10000;  // per HTTP request (connect + transfer)
};

// A program run once per action (reconcile/command_hook.h says how).
struct CommandSettings {
  std::vector<std::string> argv;  // argv[0] absolute path
  int64_t timeout_ms = 10000;
};

struct TypeSettings {  // one action type's "reconcile" entry
  std::string action_type;
  std::optional<PixApiSettings> pix_api;
  std::optional<CommandSettings> command;  // exactly one of the two
};

// Parses the config's "reconcile" member (an object keyed by action type),
// appending one TypeSettings per action type, in key order. Errors name the
// member at fault ("reconcile.pix.cobranca.pix_api: missing base_url").
// Refused: unknown members (members starting with "_" are comments), an entry
// with neither or both of pix_api and command, timeout_ms outside
// 1..600000, an empty argv or a relative argv[0], URLs not starting with
// https:// or http:// or carrying credentials (user:password@), a base_url
// with a query, a client_id holding ":" (HTTP Basic cannot carry it),
// base_url and token_url of different schemes (the token request carries the
// client secret), https:// without cert_file and key_file (the API Pix
// requires mutual TLS), and TLS files with http:// URLs.
// Files are not opened here: MakeProvider (reconcile/provider.h) reads them.
bool ParseReconcileConfig(const nlohmann::json& member, std::vector<TypeSettings>* out,
                          std::string* error);

}  // namespace intentd::reconcile
