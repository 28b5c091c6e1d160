// `intentd serve`: runs the agent. The exit codes and default paths are
// shared by every subcommand of the intentd binary (cli/commands.h):
//   0 success, 1 the operation failed (the agent answered an error, or the
//   agent could not start), 2 usage error, 3 the agent could not be reached.
#pragma once

#include <string>
#include <vector>

namespace intentd::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

inline constexpr char kDefaultSocket[] = "/run/intentd/intentd.sock";
inline constexpr char kDefaultDataDir[] = "/var/lib/intentd";
inline constexpr char kDefaultConfig[] = "/etc/intentd/intentd.json";

// Takes the arguments after "serve"; returns the process exit code.
int RunServe(const std::vector<std::string>& args);

}  // namespace intentd::agent
