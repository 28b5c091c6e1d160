// `intentd serve`: runs the agent (the exit codes and default paths of
// every subcommand: common/binary.h).
#pragma once

#include <string>
#include <vector>

#include "common/binary.h"

namespace intentd::agent {

// Takes the arguments after "serve"; returns the process exit code.
int RunServe(const std::vector<std::string>& args);

}  // namespace intentd::agent
