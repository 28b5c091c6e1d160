// The subcommands of the intentd binary. Each takes the arguments after the
// subcommand's name and returns the process exit code:
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

int RunServe(const std::vector<std::string>& args);
int RunKeygen(const std::vector<std::string>& args);
int RunDerive(const std::vector<std::string>& args);
// ping, begin, complete, fail, renew, status, lookup, amend, uncertain, stats.
bool IsClientCommand(const std::string& name);
int RunClient(const std::string& name, const std::vector<std::string>& args);
int RunCost(const std::vector<std::string>& args);
// admin_cli.cc: metrics and backup talk to the agent; restore, export and
// import work offline on a store directory.
int RunMetrics(const std::vector<std::string>& args);
// `intentd migrate --store postgresql://...`: creates or upgrades the schema.
int RunMigrate(const std::vector<std::string>& args);
int RunBackup(const std::vector<std::string>& args);
int RunRestore(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunImport(const std::vector<std::string>& args);

// The default socket for client commands: $INTENTD_SOCKET, else kDefaultSocket.
std::string DefaultClientSocket();

// Sends one request line to the agent at `socket_path` and reads one
// response line. False with *error when the agent cannot be reached.
bool CallAgent(const std::string& socket_path, const std::string& request, std::string* response,
               std::string* error);

}  // namespace intentd::agent
