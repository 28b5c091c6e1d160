// The Redis anchor: the same logical flow over Redis's Unix socket. `begin` is
// one Lua script (one round trip, one AOF write): intent SET NX, GET it (the
// frozen chave), action SET NX PX lease, else GET its status; `complete` is a
// plain SET of the completed record. The client derives the key (HMAC) itself.
#pragma once

#include <memory>
#include <string>

#include "bench/loadgen_client_key.h"
#include "bench/loadgen_session.h"

namespace intentd::bench {

// Loads the begin script (blocking); *sha receives its SHA1 for EVALSHA.
bool SetupRedis(const std::string& socket_path, std::string* sha, std::string* error);

// `deriver` must outlive the session.
std::unique_ptr<Session> ConnectRedis(const std::string& socket_path, const std::string& sha,
                                      const ClientKeyDeriver* deriver, std::string* error);

}  // namespace intentd::bench
