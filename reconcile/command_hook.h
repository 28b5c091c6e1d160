// The command provider: a program of the operator's that asks its payment
// provider (any API, any action type) and says what it found.
//
// Each Ask runs argv (argv[0] an absolute path, no $PATH search, no shell)
// in its own process group, with:
//   stdin   the action record (ActionInfo::record_json) as one compact JSON
//           line, then end of file;
//   stdout  captured: it must hold exactly one non-empty line, a JSON object
//           {"outcome": "completed", "response": <any JSON, null when absent>}
//           {"outcome": "failed", "error": <any JSON but null>}
//           {"outcome": "not_executed"}
//           {"outcome": "unknown"}
//           each with an optional "detail" string (shown to the operator);
//           members starting with "_" are ignored, any other is refused;
//   stderr  captured; its last line is quoted in the detail of a failure;
//   the environment of the caller minus IDEMPOTENCY_HMAC_KEY (the HMAC
//           secret), NOTIFY_SOCKET, WATCHDOG_*, LISTEN_* (the service's, not
//           the hook's); other file descriptors closed; signals at their
//           defaults, none blocked.
// When the program is still running after timeout_ms, its process group is
// killed (SIGKILL) and the answer is command_timeout. Whatever remains of the
// group when the program exits is killed too: nothing outlives the Ask.
//
//   completed -> kExecuted (response), failed -> kFailed (error),
//   not_executed -> kNotExecuted (error {"reconciled":"not_executed","provider":"command"}),
//   unknown -> kUnknown command_unknown; a program that cannot start, exits
//   non-zero, is killed, or writes anything but one valid line (or more than
//   1 MiB) -> kUnknown command_failed.
#pragma once

#include <memory>
#include <string>

#include "reconcile/provider.h"

namespace intentd::reconcile {

std::unique_ptr<Provider> MakeCommandProvider(const CommandSettings& settings, std::string* error);

}  // namespace intentd::reconcile
