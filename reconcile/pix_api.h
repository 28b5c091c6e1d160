// The BCB API Pix provider: what a PSP says about an immediate charge.
//
// Ask(action) sends GET {base_url}/cob/{txid} (txid percent-encoded, any
// trailing "/" of base_url dropped) with "Authorization: Bearer TOKEN", the
// token from POST token_url (HTTP Basic client_id:client_secret, form
// grant_type=client_credentials, and scope when set), both over mutual TLS
// with the configured client certificate and key and, when ca_file is set,
// trusting only the CAs in it (else the system's).
// Each request has timeout_ms for connect and transfer; an Ask makes at most
// four (token, GET, and after a 401 a new token and a second GET). No
// redirect is followed; only http and https are spoken; proxies come from the
// environment (http_proxy, https_proxy, no_proxy) as curl reads them.
//
//   200, a charge (an object whose status is ATIVA, CONCLUIDA,
//        REMOVIDA_PELO_USUARIO_RECEBEDOR or REMOVIDA_PELO_PSP, and whose txid,
//        when present, is the one asked): kExecuted, response = the charge.
//        Every one of these statuses means the charge was created.
//   404 with the problem type CobNaoEncontrado: kNotExecuted, error =
//        {"reconciled":"not_found","provider":"pix_api","status":404}.
//   anything else: kUnknown, with the cause of reconcile/provider.h.
//
// Retry-After (seconds, or an HTTP date), on any answer, sets
// Answer::retry_after_ms (at most a day).
//
// The token is kept until 60 s before its expires_in runs out (until half of
// it when expires_in is under 2 minutes); a token without expires_in is
// taken to last 60 s.
#pragma once

#include <memory>
#include <string>

#include "reconcile/provider.h"

namespace intentd::reconcile {

std::unique_ptr<Provider> MakePixApiProvider(const PixApiSettings& settings, std::string* error);

// Parses a Retry-After value: delay-seconds, or an HTTP date (as curl_getdate
// reads it) relative to `now` (Unix seconds). 0 when unparsable or past;
// capped at a day. Exposed for tests.
int64_t ParseRetryAfterMs(const std::string& value, int64_t now);

}  // namespace intentd::reconcile
