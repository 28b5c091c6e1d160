// Reads the agent's records for everything the clients' logs mention.
#pragma once

#include <string>
#include <vector>

#include "tests/torture/torture_log.h"

namespace intentd::torture {

// Asks a running agent, over `socket_path`, for the `status` of every key and
// the `lookup` of every intent in `logs` (pipelined in batches). Returns
// false with *error set when the agent does not answer or answers something
// other than the record or not_found.
bool ReadFinalState(const std::string& socket_path, const std::vector<ClientLog>& logs,
                    FinalState* state, std::string* error);

}  // namespace intentd::torture
