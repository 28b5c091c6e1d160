// Session speaking intentd's socket protocol (docs/protocol.md): one JSON line
// per request, `begin` with the payload, `complete` with the lease token.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "bench/loadgen_session.h"

namespace intentd::bench {

// Connects to the agent at `socket_path`. nullptr with *error on failure.
std::unique_ptr<Session> ConnectIntentd(const std::string& socket_path, std::string* error);

// The raw text of the top-level member `name` of the JSON object `line`
// (a string keeps its quotes), skipping nested values; empty when absent or
// when `line` is not an object. Exposed for the smoke check.
std::string_view TopLevelMember(std::string_view line, std::string_view name);

}  // namespace intentd::bench
