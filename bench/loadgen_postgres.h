// The PostgreSQL anchor: the same logical flow over libpq (Unix socket), with
// the reference schema
//   intencao(tenant_id, intent_ref, action_type) -> payload, chave
//   acao_idempotente(tenant_id, chave) -> status, resposta, lease
// and the reference statements. Each step is one round trip and one
// transaction: `begin` pipelines (libpq pipeline mode, prepared statements)
//   insert intent on conflict do nothing; select it;
//   insert the action on conflict do nothing (returning it); select its status
// then one Sync, so the four run as one implicit transaction with one commit;
// `complete` is one guarded UPDATE. The client derives the key (HMAC) itself.
#pragma once

#include <memory>
#include <string>

#include "bench/loadgen_client_key.h"
#include "bench/loadgen_session.h"

namespace intentd::bench {

// Creates the two tables if absent (blocking). False with *error on failure.
bool SetupPostgres(const std::string& conninfo, std::string* error);

// Opens a connection, prepares the statements, enters pipeline mode.
// `deriver` must outlive the session.
std::unique_ptr<Session> ConnectPostgres(const std::string& conninfo,
                                         const ClientKeyDeriver* deriver, std::string* error);

}  // namespace intentd::bench
