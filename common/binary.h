// What every subcommand of the intentd binary shares (`intentd serve` and the
// client, admin and offline commands of cli/): the version, the exit codes
// and the default paths.
//   exit codes: 0 success, 1 the operation failed (the agent answered an
//   error, or the agent could not start), 2 usage error, 3 the agent could
//   not be reached (cli/commands.h adds 4 for "something waits").
#pragma once

namespace intentd::agent {

// The software's version (the project's, from CMake).
extern const char kSoftwareVersion[];

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

inline constexpr char kDefaultSocket[] = "/run/intentd/intentd.sock";
inline constexpr char kDefaultDataDir[] = "/var/lib/intentd";
inline constexpr char kDefaultConfig[] = "/etc/intentd/intentd.json";

}  // namespace intentd::agent
