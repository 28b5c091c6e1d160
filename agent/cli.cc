// The client subcommands (they talk to a running agent) and `intentd derive`.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "agent/commands.h"
#include "agent/config.h"
#include "agent/cost.h"
#include "agent/flags.h"
#include "agent/ops.h"
#include "agent/secret.h"

namespace intentd::agent {
namespace {

struct ClientCommand {
  const char* name;
  const char* synopsis;
  const char* summary;
  std::vector<FlagSpec> flags;  // beyond --socket and --json
};

const FlagSpec kTenant{"tenant", true, "tenant_id"};
const FlagSpec kRef{"ref", true, "intent_ref: the business reference of the intent"};
const FlagSpec kAction{"action", true, "action_type, e.g. pix.cobranca"};
const FlagSpec kKey{"key", true, "the action's key (as begin returned it)"};
const FlagSpec kToken{"token", true, "the lease token begin granted"};
const FlagSpec kLeaseMs{"lease-ms", true, "lease length in ms, 1000..3600000 (default 300000)"};

const std::vector<ClientCommand>& Commands() {
  static const auto* commands = new std::vector<ClientCommand>{
      {"ping", "", "Checks that the agent answers; prints its version.", {}},
      {"begin", "--tenant T --ref R --action A [--payload JSON]",
       "Freezes the intent (if new) and takes the begin decision: execute, in_flight, recover\n"
       "or replay.",
       {kTenant, kRef, kAction, {"payload", true, "the payload as JSON (or @FILE)"}, kLeaseMs,
        {"reject-divergence", false, "fail with payload_mismatch when the payload diverged"}}},
      {"complete", "--tenant T --key K --token N --response JSON",
       "Records the provider's response of an action you hold the lease of.",
       {kTenant, kKey, kToken, {"response", true, "the response as JSON (or @FILE)"}}},
      {"fail", "--tenant T --key K --token N --error JSON [--retriable]",
       "Records a failure: terminal, or --retriable when the provider surely did not act.",
       {kTenant, kKey, kToken, {"error", true, "the error as JSON (or @FILE)"},
        {"retriable", false, "release the action so that the next attempt executes"}}},
      {"renew", "--tenant T --key K --token N [--lease-ms N]", "Extends a lease you hold.",
       {kTenant, kKey, kToken, kLeaseMs}},
      {"status", "--tenant T --key K", "Shows an action.", {kTenant, kKey}},
      {"lookup", "--tenant T --ref R --action A", "Shows an intent and its action.",
       {kTenant, kRef, kAction}},
      {"amend", "--tenant T --ref R --action A --payload JSON [--force]",
       "Replaces an intent's frozen payload and key (admin).",
       {kTenant, kRef, kAction, {"payload", true, "the corrected payload as JSON (or @FILE)"},
        {"force", false, "amend even when the action started or completed"}}},
      {"uncertain", "[--tenant T] [--limit N]",
       "Lists started actions whose lease expired (outcome unknown), oldest first.",
       {{"tenant", true, "only this tenant (without it: every tenant, admin)"},
        {"limit", true, "at most N (1..1000, default 100)"}}},
      {"stats", "", "Shows the agent's counters.", {}},
  };
  return *commands;
}

const ClientCommand* FindCommand(const std::string& name) {
  for (const auto& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int UsageError(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "intentd %s: %s (see intentd %s --help)\n", command.c_str(),
               message.c_str(), command.c_str());
  return kExitUsage;
}

// A JSON argument: inline text, or @FILE.
bool ReadJsonFlag(const std::string& text, json* out, std::string* error) {
  std::string source = text;
  if (!text.empty() && text[0] == '@') {
    std::ifstream in(text.substr(1), std::ios::binary);
    if (!in) {
      *error = "cannot read " + text.substr(1);
      return false;
    }
    std::ostringstream s;
    s << in.rdbuf();
    source = s.str();
  }
  *out = json::parse(source, nullptr, false);
  if (out->is_discarded()) {
    *error = "not valid JSON: " + source.substr(0, 80);
    return false;
  }
  return true;
}

// Builds the request from the flags; false with *error for a usage error.
bool BuildRequest(const std::string& op, const Flags& flags, json* request, std::string* error) {
  json& r = *request;
  r["op"] = op;
  static const std::map<std::string, std::string> kStringFlags = {
      {"tenant", "tenant_id"}, {"ref", "intent_ref"}, {"action", "action_type"}, {"key", "key"}};
  for (const auto& [flag, member] : kStringFlags) {
    if (auto v = flags.Get(flag)) r[member] = *v;
  }
  static const std::map<std::string, std::string> kIntFlags = {
      {"token", "lease_token"}, {"lease-ms", "lease_ms"}, {"limit", "limit"}};
  for (const auto& [flag, member] : kIntFlags) {
    if (auto v = flags.Get(flag)) {
      long long n = 0;
      if (!ParseInt(*v, INT64_MIN, INT64_MAX, &n)) {
        *error = "--" + flag + " must be an integer";
        return false;
      }
      r[member] = n;
    }
  }
  for (const char* name : {"payload", "response", "error"}) {
    if (auto v = flags.Get(name)) {
      json value;
      if (!ReadJsonFlag(*v, &value, error)) {
        *error = std::string("--") + name + ": " + *error;
        return false;
      }
      r[name] = value;
    }
  }
  if (flags.Has("reject-divergence")) r["on_divergence"] = "reject";
  if (flags.Has("force")) r["force"] = true;
  if (op == "fail") r["retriable"] = flags.Has("retriable");
  return true;
}

std::string Plain(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void PrintHuman(const std::string& op, const json& response) {
  if (op == "uncertain") {
    const json& list = response["actions"];
    if (list.empty()) {
      std::printf("no uncertain actions\n");
      return;
    }
    std::printf("%-20s %-20s %-16s %8s %7s  %s\n", "tenant", "intent_ref", "action_type",
                "expired", "attempt", "key");
    for (const json& a : list) {
      std::printf("%-20s %-20s %-16s %7llds %7lld  %s\n", Plain(a["tenant_id"]).c_str(),
                  Plain(a["intent_ref"]).c_str(), Plain(a["action_type"]).c_str(),
                  a.value("expired_for_ms", 0LL) / 1000, a.value("attempt", 0LL),
                  Plain(a["key"]).c_str());
    }
    return;
  }
  for (auto it = response.begin(); it != response.end(); ++it) {
    if (it.key() == "ok" || it.key() == "id") continue;
    if (it.value().is_object() && !it.value().empty()) {
      std::printf("%s:\n", it.key().c_str());
      for (auto in = it.value().begin(); in != it.value().end(); ++in) {
        std::printf("  %s: %s\n", in.key().c_str(), Plain(in.value()).c_str());
      }
    } else {
      std::printf("%s: %s\n", it.key().c_str(), Plain(it.value()).c_str());
    }
  }
}

}  // namespace

std::string DefaultClientSocket() {
  const char* env = std::getenv("INTENTD_SOCKET");
  return env != nullptr && *env != '\0' ? env : kDefaultSocket;
}

bool CallAgent(const std::string& socket_path, const std::string& request, std::string* response,
               std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    *error = "socket path too long: " + socket_path;
    return false;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *error = "cannot connect to the agent at " + socket_path + ": " + std::strerror(errno) +
             " (is `intentd serve` running? pass --socket or set INTENTD_SOCKET)";
    if (fd >= 0) close(fd);
    return false;
  }
  std::string line = request + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("cannot send to the agent: ") + std::strerror(errno);
      close(fd);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  response->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = "the agent closed the connection without answering";
      close(fd);
      return false;
    }
    response->append(buf, static_cast<size_t>(n));
    if (size_t nl = response->find('\n'); nl != std::string::npos) {
      response->resize(nl);
      break;
    }
  }
  close(fd);
  return true;
}

bool IsClientCommand(const std::string& name) { return FindCommand(name) != nullptr; }

int RunClient(const std::string& name, const std::vector<std::string>& args) {
  const ClientCommand& command = *FindCommand(name);
  std::vector<FlagSpec> specs = command.flags;
  specs.push_back({"socket", true, "the agent's socket (default $INTENTD_SOCKET or /run/intentd/intentd.sock)"});
  specs.push_back({"json", false, "print the agent's raw JSON response"});
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) return UsageError(name, error);
  if (flags.help_requested()) {
    std::fputs(FlagsUsage(name, command.synopsis, command.summary, specs).c_str(), stdout);
    return kExitOk;
  }
  if (!flags.positional().empty()) {
    return UsageError(name, "unexpected argument " + flags.positional()[0]);
  }
  json request;
  if (!BuildRequest(name, flags, &request, &error)) return UsageError(name, error);
  std::string response_line;
  if (!CallAgent(flags.GetOr("socket", DefaultClientSocket()), request.dump(), &response_line,
                 &error)) {
    std::fprintf(stderr, "intentd %s: %s\n", name.c_str(), error.c_str());
    return kExitUnreachable;
  }
  json response = json::parse(response_line, nullptr, false);
  if (response.is_discarded() || !response.is_object()) {
    std::fprintf(stderr, "intentd %s: the agent answered something that is not JSON\n",
                 name.c_str());
    return kExitFailed;
  }
  const bool ok = response.value("ok", false);
  if (flags.Has("json")) {
    std::printf("%s\n", response_line.c_str());
  } else if (ok) {
    PrintHuman(name, response);
  } else {
    const json& e = response["error"];
    std::fprintf(stderr, "error %s: %s%s\n", Plain(e.value("code", json("?"))).c_str(),
                 Plain(e.value("message", json(""))).c_str(),
                 e.contains("field") ? (" (field " + Plain(e["field"]) + ")").c_str() : "");
  }
  return ok ? kExitOk : kExitFailed;
}

int RunDerive(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      {"tenant", true, "tenant_id"},
      {"action", true, "action_type, e.g. pix.cobranca"},
      {"payload", true, "the payload as JSON (or @FILE)"},
      {"rules-version", true, "1 or 2 (default 2)"},
      {"config", true, "config file with action types (default /etc/intentd/intentd.json)"},
      {"hmac-key-file", true, "file holding the HMAC secret"},
  };
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) return UsageError("derive", error);
  if (flags.help_requested()) {
    std::fputs(FlagsUsage("derive", "--tenant T --action A --payload JSON",
                          "Computes an intent's idempotency key locally, exactly as the agent "
                          "does.\nPrints {\"key\",\"txid\",\"payload\",\"rules_version\"}; on a "
                          "bad payload prints the error object and exits 1.",
                          specs)
                   .c_str(),
               stdout);
    return kExitOk;
  }
  for (const char* required : {"tenant", "action", "payload"}) {
    if (!flags.Has(required)) return UsageError("derive", std::string("--") + required + " is required");
  }
  long long version = 2;
  if (!ParseInt(flags.GetOr("rules-version", "2"), 1, 2, &version)) {
    return UsageError("derive", "--rules-version must be 1 or 2");
  }
  json payload;
  if (!ReadJsonFlag(*flags.Get("payload"), &payload, &error)) {
    return UsageError("derive", "--payload: " + error);
  }
  Config config;
  if (!LoadConfigFile(flags.GetOr("config", kDefaultConfig), !flags.Has("config"), &config, &error)) {
    std::fprintf(stderr, "intentd derive: %s\n", error.c_str());
    return kExitFailed;
  }
  std::string secret, source;
  if (!LoadSecret(flags.GetOr("hmac-key-file", ""), &secret, &source, &error)) {
    std::fprintf(stderr, "intentd derive: %s\n", error.c_str());
    return kExitFailed;
  }
  auto print_error = [](const std::string& code, const std::string& field,
                        const std::string& message) {
    json e = {{"code", code}, {"message", message}};
    if (!field.empty()) e["field"] = field;
    std::printf("%s\n", e.dump().c_str());
    return kExitFailed;
  };
  const std::string action = *flags.Get("action");
  const normalizers::ActionType* type = config.catalog.Find(action);
  if (type == nullptr) {
    return print_error("unknown_action_type", "action_type",
                       "unknown action type \"" + action + "\"");
  }
  normalizers::KeyDeriver deriver(std::move(secret));
  normalizers::Derivation d;
  normalizers::Error e;
  if (!deriver.Derive(*flags.Get("tenant"), *type, payload, static_cast<int>(version), &d, &e)) {
    return print_error(e.code, e.field, e.message);
  }
  std::printf("{\"key\":\"%s\",\"txid\":\"%s\",\"payload\":%s,\"rules_version\":%d}\n",
              d.key.c_str(), d.txid.c_str(), PayloadText(d).c_str(), d.rules_version);
  return kExitOk;
}

int RunCost(const std::vector<std::string>& args) {
  auto fetch = [](const std::string& socket_path, std::string* stats_json, std::string* error) {
    return CallAgent(socket_path, "{\"op\":\"stats\"}", stats_json, error);
  };
  return RunCostCommand(args, fetch, std::cout, std::cerr);
}

}  // namespace intentd::agent
