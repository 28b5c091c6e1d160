// intentd: `intentd serve` runs the agent; the other subcommands are its
// admin and client command line.
#include <cstdio>
#include <string>
#include <vector>

#include "agent/serve.h"
#include "cli/commands.h"
#include "protocol/dispatcher.h"

namespace {

constexpr char kUsage[] =
    "Usage: intentd COMMAND [OPTIONS]\n"
    "\n"
    "intentd freezes an action's intent before a bot acts, derives its idempotency key from the\n"
    "frozen payload, and lets exactly one attempt execute it.\n"
    "\n"
    "Commands:\n"
    "  serve       run the agent on a Unix socket\n"
    "  migrate     create or upgrade the PostgreSQL schema (--store postgresql://...)\n"
    "  keygen      print a fresh HMAC secret (64 hex characters)\n"
    "  derive      compute an intent's key locally (no agent needed)\n"
    "  ping        check that the agent answers\n"
    "  begin       freeze an intent and claim its action\n"
    "  complete    record an action's response (with its lease token)\n"
    "  fail        record an action's failure (terminal, or --retriable)\n"
    "  renew       extend a lease\n"
    "  status      show an action\n"
    "  lookup      show an intent and its action\n"
    "  amend       replace an intent's frozen payload (admin)\n"
    "  pending     list intents waiting for approval (the policy's approval_above)\n"
    "  approve     approve an intent waiting for approval (admin)\n"
    "  deny        deny an intent waiting for approval: it ends failed (admin)\n"
    "  uncertain   list actions whose lease expired while started\n"
    "  reconcile   resolve uncertain actions by asking their provider (--once)\n"
    "  seen        record an inbound message: first sighting or duplicate (webhook dedup)\n"
    "  stats       show the agent's counters\n"
    "  keys        list the keyring's key ids and the live intents of each (admin)\n"
    "  metrics     print the agent's metrics (Prometheus text format)\n"
    "  backup      copy the running agent's store into a new directory (admin)\n"
    "  restore     put a backup in place of a store (offline)\n"
    "  export      write a store's records as JSON lines (offline)\n"
    "  import      load exported records into a store (offline, idempotent)\n"
    "  cost        the cost of duplicate model calls\n"
    "  version     print the version (--json: {\"version\",\"protocol\"})\n"
    "\n"
    "`intentd COMMAND --help` describes each command.\n"
    "Every command that prints a result takes --json (derive prints JSON always).\n"
    "Exit codes: 0 ok, 1 failed (error answered), 2 usage error, 3 agent unreachable,\n"
    "4 actions left uncertain (reconcile) or listed (uncertain), intents waiting (pending).\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace intentd::agent;
  using namespace intentd::cli;
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (command == "version" || command == "--version") {
    if (args.size() == 1 && args[0] == "--json") {
      std::printf("{\"version\":\"%s\",\"protocol\":%d}\n", kSoftwareVersion, kProtocolVersion);
      return kExitOk;
    }
    if (!args.empty()) {
      std::fprintf(stderr, "intentd version: unexpected argument %s (it takes only --json)\n",
                   args[0].c_str());
      return kExitUsage;
    }
    std::printf("intentd %s (protocol %d)\n", kSoftwareVersion, kProtocolVersion);
    return kExitOk;
  }
  if (command == "serve") return RunServe(args);
  if (command == "keygen") return RunKeygen(args);
  if (command == "derive") return RunDerive(args);
  if (command == "cost") return RunCost(args);
  if (command == "migrate") return RunMigrate(args);
  if (command == "metrics") return RunMetrics(args);
  if (command == "backup") return RunBackup(args);
  if (command == "restore") return RunRestore(args);
  if (command == "export") return RunExport(args);
  if (command == "import") return RunImport(args);
  if (command == "reconcile") return RunReconcile(args);
  if (IsClientCommand(command)) return RunClient(command, args);
  std::fprintf(stderr, "intentd: unknown command \"%s\"\n\n%s", command.c_str(), kUsage);
  return kExitUsage;
}
