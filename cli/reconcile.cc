// `intentd reconcile --once`: resolves uncertain actions by asking their
// provider (reconcile/pass.h), talking to the agent over its socket.
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/config.h"
#include "common/flags.h"
#include "protocol/limits.h"
#include "reconcile/pass.h"

namespace intentd::cli {

using agent::Config;
using agent::Flags;
using agent::FlagSpec;
using agent::FlagsUsage;
using agent::LoadConfigFile;
using agent::ParseInt;

namespace {

constexpr char kSynopsis[] =
    "--once [--socket S] [--config F] [--json] [--dry-run] [--tenant T] [--limit N] "
    "[--lease-ms N]";
constexpr char kSummary[] =
    "Resolves uncertain actions (started, lease expired) from their provider's own record:\n"
    "asks the provider configured for the action type in the config's \"reconcile\" member,\n"
    "and records a definite answer under the action's lease (a live attempt is never\n"
    "overtaken): the charge exists -> complete with it; never created -> fail retriable (the\n"
    "next attempt executes with the same key). A provider that cannot answer -> nothing.\n"
    "Exit codes: 0 nothing left uncertain, 4 some action left uncertain, 1 the agent refused\n"
    "or the config is wrong, 2 usage error, 3 agent unreachable.";

int UsageError(const std::string& message) {
  std::fprintf(stderr, "intentd reconcile: %s (see intentd reconcile --help)\n", message.c_str());
  return kExitUsage;
}

nlohmann::json ResultJson(const reconcile::ActionResult& r, bool dry_run) {
  return {{"tenant_id", r.action.tenant_id},
          {"key", r.action.key},
          {"txid", r.action.txid},
          {"action_type", r.action.action_type},
          {"intent_ref", r.action.intent_ref},
          {"provider", r.provider},
          {"provider_said", r.provider_said},
          {"recorded", r.recorded},
          {"cause", r.cause},
          {"detail", r.detail},
          {"dry_run", dry_run}};
}

void PrintTable(const reconcile::PassResult& pass, bool dry_run) {
  if (pass.actions.empty() && pass.agent_error.empty()) {
    std::printf("no uncertain actions\n");
    return;
  }
  std::map<std::string, int> by_recorded;
  for (const reconcile::ActionResult& r : pass.actions) {
    ++by_recorded[r.recorded];
    std::string what = r.recorded;
    if (!r.cause.empty()) what += " (" + r.cause + ")";
    if (dry_run && r.recorded != "nothing" && r.recorded != "skipped")
      what = "would record " + what;
    std::printf("%s %s %s txid %s: %s%s\n", r.action.tenant_id.c_str(),
                r.action.action_type.c_str(), r.action.intent_ref.c_str(), r.action.txid.c_str(),
                r.provider_said.empty() ? "" : ("provider said " + r.provider_said + "; ").c_str(),
                what.c_str());
    if (!r.detail.empty() && r.recorded != "completed") std::printf("    %s\n", r.detail.c_str());
  }
  std::string summary;
  for (const auto& [recorded, n] : by_recorded) {
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + recorded;
  }
  std::printf("%zu action%s: %s; %zu left uncertain%s\n", pass.actions.size(),
              pass.actions.size() == 1 ? "" : "s", summary.c_str(), pass.left_uncertain,
              dry_run ? " (dry run: nothing was recorded)" : "");
}

}  // namespace

int RunReconcile(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      {"once", false, "run one pass (required: for a loop, use serve --reconcile-every)"},
      {"socket", true, "the agent's socket (default $INTENTD_SOCKET or /run/intentd/intentd.sock)"},
      {"config", true,
       "config file with the \"reconcile\" member (default /etc/intentd/intentd.json)"},
      {"json", false, "one JSON line per action instead of the table"},
      {"dry-run", false, "ask the providers, record nothing and take no lease"},
      {"tenant", true, "only this tenant's actions (without it: every tenant, admin)"},
      {"limit", true,
       "at most N actions (1.." + std::to_string(protocol::kMaxListing) + ", default " +
           std::to_string(protocol::kDefaultListing) + ")"},
      {"lease-ms", true,
       "the lease taken to record an answer, " + std::to_string(protocol::kMinLeaseMs) + ".." +
           std::to_string(protocol::kMaxLeaseMs) +
           " (default 60000, at least the provider's timeouts + 5 s)"},
  };
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) return UsageError(error);
  if (flags.help_requested()) {
    std::fputs(FlagsUsage("reconcile", kSynopsis, kSummary, specs).c_str(), stdout);
    return kExitOk;
  }
  if (!flags.positional().empty())
    return UsageError("unexpected argument " + flags.positional()[0]);
  if (!flags.Has("once")) {
    return UsageError("--once is required (one pass; serve --reconcile-every runs it in a loop)");
  }
  reconcile::PassOptions options;
  long long n = 0;
  if (auto limit = flags.Get("limit")) {
    if (!ParseInt(*limit, 1, protocol::kMaxListing, &n))
      return UsageError("--limit must be an integer from 1 to " +
                        std::to_string(protocol::kMaxListing));
    options.limit = static_cast<int>(n);
  }
  if (auto lease = flags.Get("lease-ms")) {
    if (!ParseInt(*lease, protocol::kMinLeaseMs, protocol::kMaxLeaseMs, &n)) {
      return UsageError("--lease-ms must be an integer from " +
                        std::to_string(protocol::kMinLeaseMs) + " to " +
                        std::to_string(protocol::kMaxLeaseMs));
    }
    options.lease_ms = n;
  }
  if (auto tenant = flags.Get("tenant")) options.tenant_id = *tenant;
  options.dry_run = flags.Has("dry-run");

  Config config;
  const std::string config_path = flags.GetOr("config", kDefaultConfig);
  if (!LoadConfigFile(config_path, false, &config, &error)) {
    std::fprintf(stderr, "intentd reconcile: %s\n", error.c_str());
    return kExitFailed;
  }
  if (config.reconcile.empty()) {
    std::fprintf(stderr,
                 "intentd reconcile: %s has no \"reconcile\" member: nothing says which provider "
                 "to ask for which action type (see intentd-reconcile(8))\n",
                 config_path.c_str());
    return kExitFailed;
  }
  std::unique_ptr<reconcile::Reconciler> reconciler;
  if (!reconcile::Reconciler::Create(config.reconcile, &reconciler, &error)) {
    std::fprintf(stderr, "intentd reconcile: %s: %s\n", config_path.c_str(), error.c_str());
    return kExitFailed;
  }
  const std::string socket = flags.GetOr("socket", DefaultClientSocket());
  const reconcile::CallFn call = [&socket](const std::string& request, std::string* response,
                                           std::string* why) {
    return CallAgent(socket, request, response, why);
  };
  const reconcile::PassResult pass = reconciler->RunPass(call, options);
  if (flags.Has("json")) {
    for (const reconcile::ActionResult& r : pass.actions) {
      std::printf("%s\n", ResultJson(r, options.dry_run)
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    }
  } else {
    PrintTable(pass, options.dry_run);
  }
  if (!pass.agent_error.empty()) {
    std::fprintf(stderr, "intentd reconcile: %s\n", pass.agent_error.c_str());
    return pass.agent_unreachable ? kExitUnreachable : kExitFailed;
  }
  return pass.left_uncertain > 0 ? kExitUncertain : kExitOk;
}

}  // namespace intentd::cli
