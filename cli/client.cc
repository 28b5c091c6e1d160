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

#include "agent/config.h"
#include "agent/flags.h"
#include "agent/keyring.h"
#include "agent/ops.h"
#include "agent/secret.h"
#include "cli/commands.h"
#include "cli/cost.h"

namespace intentd::cli {

using agent::Config;
using agent::FlagSpec;
using agent::Flags;
using agent::FlagsUsage;
using agent::LoadConfigFile;
using agent::LoadSecret;
using agent::ParseInt;
using agent::PayloadText;
using nlohmann::json;

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
       "Lists started actions whose lease expired (outcome unknown), oldest first, per tenant,\n"
       "with how long ago the lease expired, the action's age, attempts and action type.",
       {{"tenant", true, "only this tenant (without it: every tenant, admin)"},
        {"limit", true, "at most N (1..1000, default 100)"}}},
      {"seen", "--tenant T --channel C --message-id ID [--meta JSON] [--ttl-ms N] [--lease-ms N]",
       "Records a sighting of an inbound message (webhook de-duplication): prints whether it is\n"
       "the first (process it) or a duplicate (drop it). --lease-ms claims it for processing;\n"
       "--done --token N records the claim's end; --release --token N gives the claim back (the\n"
       "next delivery takes it at once); --forget (admin) drops the record.",
       {kTenant,
        {"channel", true, "where the message came from, e.g. whatsapp"},
        {"message-id", true, "the provider's message id"},
        {"meta", true, "JSON stored with the first sighting (or @FILE), at most 4096 bytes"},
        {"ttl-ms", true, "keep the record this long after each sighting (default: retention, >= 7 days)"},
        {"lease-ms", true, "claim the message for processing for this long (1000..3600000)"},
        {"done", false, "record that the claimed message was processed (with --token)"},
        {"release", false, "give the claim back: the next delivery takes it at once (with --token)"},
        {"token", true, "the claim's lease token (with --done or --release)"},
        {"forget", false, "drop the message's record: it reads as never seen (admin)"}}},
      {"keys", "",
       "Lists the key ids of the agent's keyring and of its store: which is current, which\n"
       "the keyring holds, and how many live intents each keys, for which tenants (admin;\n"
       "reads every intent).",
       {}},
      {"stats", "",
       "Shows the agent's counters since it started: begin decisions, redeliveries absorbed,\n"
       "diverged payloads, outcomes and errors.",
       {}},
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
      {"tenant", "tenant_id"}, {"ref", "intent_ref"}, {"action", "action_type"}, {"key", "key"},
      {"channel", "channel"},  {"message-id", "message_id"}};
  for (const auto& [flag, member] : kStringFlags) {
    if (auto v = flags.Get(flag)) r[member] = *v;
  }
  static const std::map<std::string, std::string> kIntFlags = {
      {"token", "lease_token"}, {"lease-ms", "lease_ms"}, {"limit", "limit"}, {"ttl-ms", "ttl_ms"}};
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
  for (const char* name : {"payload", "response", "error", "meta"}) {
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

// "45s", "12m05s", "3h12m", "2d04h": enough to see what is old.
std::string HumanDuration(long long ms) {
  if (ms < 0) ms = 0;
  long long s = ms / 1000;
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

// A name as the terminal should show it: as is when printable ASCII/UTF-8,
// else JSON-quoted (control characters, invalid bytes).
std::string Shown(const json& v) {
  std::string text = Plain(v);
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return text;
}

void PrintUncertain(const json& response, long long limit) {
  const json& list = response["actions"];
  if (!list.is_array() || list.empty()) {
    std::printf("no uncertain actions\n");
    return;
  }
  // Oldest expiry first (the agent's order), grouped by tenant; tenants in
  // the order of their oldest action.
  std::vector<std::string> tenants;
  std::map<std::string, std::vector<const json*>> by_tenant;
  for (const json& a : list) {
    const std::string t = Plain(a.value("tenant_id", json("")));
    if (!by_tenant.count(t)) tenants.push_back(t);
    by_tenant[t].push_back(&a);
  }
  std::printf("%zu uncertain action%s (started, lease expired: the outcome is unknown), oldest "
              "first:\n",
              list.size(), list.size() == 1 ? "" : "s");
  for (const std::string& t : tenants) {
    const auto& rows = by_tenant[t];
    std::printf("\ntenant %s (%zu)\n", Shown(json(t)).c_str(), rows.size());
    std::printf("  %-9s %-9s %8s  %-16s %-24s %s\n", "expired", "age", "attempts", "action_type",
                "intent_ref", "key");
    for (const json* a : rows) {
      const long long expired = a->value("expired_for_ms", 0LL);
      // age: since the action was created, by the agent's clock.
      const long long age =
          expired + a->value("lease_until_ms", 0LL) - a->value("created_at_ms", 0LL);
      std::printf("  %-9s %-9s %8lld  %-16s %-24s %s\n", HumanDuration(expired).c_str(),
                  HumanDuration(age).c_str(), a->value("attempt", 0LL),
                  Shown(a->value("action_type", json(""))).c_str(),
                  Shown(a->value("intent_ref", json(""))).c_str(),
                  Shown(a->value("key", json(""))).c_str());
    }
  }
  if (static_cast<long long>(list.size()) >= limit) {
    std::printf("\n(the first %lld; there may be more: --limit N, up to 1000)\n", limit);
  }
}

unsigned long long Count(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_number_unsigned() ? it->get<unsigned long long>() : 0;
}

void PrintStats(const json& r) {
  const json& d = r.contains("decisions") ? r["decisions"] : json::object();
  const unsigned long long execute = Count(d, "execute"), in_flight = Count(d, "in_flight"),
                           recover = Count(d, "recover"), replay = Count(d, "replay");
  std::printf("intentd up %s, %lld connection%s open (%llu since start), %llu requests\n",
              HumanDuration(r.value("uptime_ms", 0LL)).c_str(), r.value("connections", 0LL),
              r.value("connections", 0LL) == 1 ? "" : "s", Count(r, "connections_total"),
              Count(r, "requests"));
  std::printf("intents        %llu frozen, %llu found frozen already\n", Count(r, "intents_created"),
              Count(r, "intents_reused"));
  std::printf("begin          %llu execute, %llu in_flight, %llu recover, %llu replay\n", execute,
              in_flight, recover, replay);
  std::printf("redeliveries   %llu absorbed (in_flight + replay: a repeat that did not act again)\n",
              in_flight + replay);
  std::printf("diverged       %llu payload%s differed from the frozen one (the frozen one was used)\n",
              Count(r, "diverged"), Count(r, "diverged") == 1 ? "" : "s");
  std::printf("outcomes       %llu completed, %llu failed, %llu released (retriable), %llu "
              "lease_lost\n",
              Count(r, "completed"), Count(r, "failed"), Count(r, "released"), Count(r, "lease_lost"));
  std::string errors;
  unsigned long long total = 0;
  if (r.contains("errors") && r["errors"].is_object()) {
    for (auto it = r["errors"].begin(); it != r["errors"].end(); ++it) {
      const unsigned long long n = it->is_number_unsigned() ? it->get<unsigned long long>() : 0;
      if (n == 0) continue;
      total += n;
      errors += (errors.empty() ? "" : ", ") + it.key() + " " + std::to_string(n);
    }
  }
  std::printf("errors         %s\n", total == 0 ? "none" : (std::to_string(total) + ": " + errors).c_str());
}

void PrintSeen(const json& r) {
  const long long count = r.value("count", 0LL);
  if (r.value("first", false)) {
    std::printf("first sighting: process it\n");
    if (r.contains("lease_token")) {
      std::printf("claimed with lease token %lld until %lld%s; run with --done --token %lld "
                  "when processed\n",
                  r.value("lease_token", 0LL), r.value("lease_until_ms", 0LL),
                  r.value("lease_token", 0LL) > 1 ? " (an earlier claim expired unfinished)" : "",
                  r.value("lease_token", 0LL));
    }
  } else {
    std::printf("duplicate: drop it (seen %lld time%s, first at %lld, state %s)\n", count,
                count == 1 ? "" : "s", r.value("first_seen_at_ms", 0LL),
                Plain(r.value("state", json(""))).c_str());
    if (r.contains("retry_after_ms")) {
      std::printf("being processed under a live claim; it expires in %s\n",
                  HumanDuration(r.value("retry_after_ms", 0LL)).c_str());
    }
  }
  if (r.contains("meta")) std::printf("meta: %s\n", Plain(r["meta"]).c_str());
  std::printf("expires at %lld unless seen again\n", r.value("expires_at_ms", 0LL));
}

void PrintKeys(const json& r) {
  std::printf("current key id: %s\n", Plain(r.value("current", json(""))).c_str());
  std::printf("  %-16s %-8s %-10s %12s  %s\n", "key_id", "current", "keyring", "live intents",
              "tenants");
  for (const json& k : r.value("keys", json::array())) {
    std::string tenants;
    for (const json& t : k.value("tenants", json::array())) {
      tenants += (tenants.empty() ? "" : ", ") + Shown(t);
    }
    const long long count = k.value("tenant_count", 0LL);
    if (count > static_cast<long long>(k.value("tenants", json::array()).size())) {
      tenants += ", ... (" + std::to_string(count) + " in all)";
    }
    std::printf("  %-16s %-8s %-10s %12lld  %s\n", Shown(k.value("key_id", json(""))).c_str(),
                k.value("current", false) ? "yes" : "",
                k.value("in_keyring", false) ? "holds it" : "MISSING",
                k.value("live_intents", 0LL), tenants.c_str());
  }
}

void PrintHuman(const std::string& op, const json& response, long long limit) {
  if (op == "keys") {
    PrintKeys(response);
    return;
  }
  if (op == "seen") {
    PrintSeen(response);
    return;
  }
  if (op == "uncertain") {
    PrintUncertain(response, limit);
    return;
  }
  if (op == "stats") {
    PrintStats(response);
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
  // `seen` drives four ops: seen, done (--done), release (--release) and
  // forget (--forget).
  std::string op = name;
  if (name == "seen") {
    if (flags.Has("done") + flags.Has("release") + flags.Has("forget") > 1) {
      return UsageError(name, "--done, --release and --forget exclude each other");
    }
    if (flags.Has("done")) op = "done";
    if (flags.Has("release")) op = "release";
    if (flags.Has("forget")) op = "forget";
    if ((op == "done" || op == "release") && !flags.Has("token")) {
      return UsageError(name, "--" + op + " needs --token N (the lease token of the claim)");
    }
    if (op == "seen" && flags.Has("token")) {
      return UsageError(name, "--token goes with --done or --release");
    }
  }
  json request;
  if (!BuildRequest(op, flags, &request, &error)) return UsageError(name, error);
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
    long long limit = 100;
    if (request.contains("limit")) limit = request["limit"].get<long long>();
    PrintHuman(op, response, limit);
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
      {"key-id", true, "derive with this secret of the keyring (default: its current one)"},
      {"config", true, "config file with action types (default /etc/intentd/intentd.json)"},
      {"hmac-key-file", true, "file holding the HMAC secret or keyring"},
  };
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) return UsageError("derive", error);
  if (flags.help_requested()) {
    std::fputs(FlagsUsage("derive", "--tenant T --action A --payload JSON",
                          "Computes an intent's idempotency key locally, exactly as the agent "
                          "does.\nPrints {\"key\",\"txid\",\"payload\",\"rules_version\",\"key_id\"}; on a "
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
  agent::Keyring keyring;
  std::string source;
  if (!agent::LoadKeyring(flags.GetOr("hmac-key-file", ""), &keyring, &source, &error)) {
    std::fprintf(stderr, "intentd derive: %s\n", error.c_str());
    return kExitFailed;
  }
  const std::string key_id = flags.GetOr("key-id", keyring.current_id());
  if (!keyring.Has(key_id)) {
    std::string ids;
    for (const std::string& id : keyring.ids()) ids += (ids.empty() ? "" : ", ") + id;
    std::fprintf(stderr, "intentd derive: the keyring from %s has no key id \"%s\" (it has %s)\n",
                 source.c_str(), key_id.c_str(), ids.c_str());
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
  normalizers::Derivation d;
  normalizers::Error e;
  if (!keyring.Find(key_id)->Derive(*flags.Get("tenant"), *type, payload,
                                    static_cast<int>(version), &d, &e)) {
    return print_error(e.code, e.field, e.message);
  }
  std::printf("{\"key\":\"%s\",\"txid\":\"%s\",\"payload\":%s,\"rules_version\":%d,"
              "\"key_id\":\"%s\"}\n",
              d.key.c_str(), d.txid.c_str(), PayloadText(d).c_str(), d.rules_version,
              key_id.c_str());
  return kExitOk;
}

int RunCost(const std::vector<std::string>& args) {
  auto fetch = [](const std::string& socket_path, std::string* stats_json, std::string* error) {
    return CallAgent(socket_path, "{\"op\":\"stats\"}", stats_json, error);
  };
  return RunCostCommand(args, fetch, std::cout, std::cerr);
}

}  // namespace intentd::cli
