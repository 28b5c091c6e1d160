// The subcommands of the intentd binary other than `serve` (agent/serve.h):
// its client, admin and offline tools. Each takes the arguments after the
// subcommand's name and returns the process exit code (agent/serve.h).
#pragma once

#include <string>
#include <vector>

#include "common/binary.h"

namespace intentd::cli {

using agent::kDefaultConfig;
using agent::kDefaultDataDir;
using agent::kDefaultSocket;
using agent::kExitFailed;
using agent::kExitOk;
using agent::kExitUnreachable;
using agent::kExitUsage;

int RunKeygen(const std::vector<std::string>& args);
int RunDerive(const std::vector<std::string>& args);
// ping, begin, complete, fail, renew, status, lookup, amend, uncertain, seen
// (also done and forget), stats.
bool IsClientCommand(const std::string& name);
int RunClient(const std::string& name, const std::vector<std::string>& args);
int RunCost(const std::vector<std::string>& args);
// admin.cc: metrics and backup talk to the agent; restore, export and
// import work offline on a store directory.
int RunMetrics(const std::vector<std::string>& args);
// `intentd migrate --store postgresql://...`: creates or upgrades the schema.
int RunMigrate(const std::vector<std::string>& args);
int RunBackup(const std::vector<std::string>& args);
int RunRestore(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunImport(const std::vector<std::string>& args);
// `intentd reconcile --once`: one reconcile pass (reconcile/pass.h) against
// the agent, with the config file's providers. Exit codes: kExitOk nothing is
// left uncertain, kExitUncertain some action is.
inline constexpr int kExitUncertain = 4;
int RunReconcile(const std::vector<std::string>& args);

// The default socket for client commands: $INTENTD_SOCKET, else kDefaultSocket.
std::string DefaultClientSocket();

// Sends one request line to the agent at `socket_path` and reads one
// response line. False with *error when the agent cannot be reached.
bool CallAgent(const std::string& socket_path, const std::string& request, std::string* response,
               std::string* error);

}  // namespace intentd::cli
