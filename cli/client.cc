// The client subcommands (they talk to a running agent) and `intentd derive`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.h"
#include "cli/cost.h"
#include "cli/uncertain.h"
#include "cli/view_text.h"
#include "common/config.h"
#include "common/flags.h"
#include "common/keyring.h"
#include "common/secret.h"
#include "normalizers/key_derivation.h"
#include "protocol/limits.h"
#include "store/decision.h"

namespace intentd::cli {

using agent::Config;
using agent::Flags;
using agent::FlagSpec;
using agent::FlagsUsage;
using agent::LoadConfigFile;
using agent::LoadSecret;
using agent::ParseInt;
using nlohmann::json;
using normalizers::PayloadText;

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
// "at most N (1..1000, default 100)": a listing's limit.
std::string ListingLimit() {
  return "at most N (1.." + std::to_string(protocol::kMaxListing) + ", default " +
         std::to_string(protocol::kDefaultListing) + ")";
}
// "1000..3600000": the lease_ms the agent accepts.
std::string LeaseRange() {
  return std::to_string(protocol::kMinLeaseMs) + ".." + std::to_string(protocol::kMaxLeaseMs);
}
const FlagSpec kLeaseMs{"lease-ms", true,
                        "lease length in ms, " + LeaseRange() + " (default " +
                            std::to_string(protocol::kDefaultLeaseMs) + ")"};

const std::vector<ClientCommand>& Commands() {
  static const auto* commands = new std::vector<ClientCommand>{
      {"ping", "", "Checks that the agent answers; prints its version.", {}},
      {"begin",
       "--tenant T --ref R --action A [--payload JSON]",
       "Freezes the intent (if new) and takes the begin decision: execute, in_flight, recover\n"
       "or replay.",
       {kTenant,
        kRef,
        kAction,
        {"payload", true, "the payload as JSON (or @FILE)"},
        kLeaseMs,
        {"reject-divergence", false, "fail with payload_mismatch when the payload diverged"}}},
      {"complete",
       "--tenant T --key K --token N --response JSON",
       "Records the provider's response of an action you hold the lease of.",
       {kTenant, kKey, kToken, {"response", true, "the response as JSON (or @FILE)"}}},
      {"fail",
       "--tenant T --key K --token N --error JSON [--retriable]",
       "Records a failure: terminal, or --retriable when the provider surely did not act.",
       {kTenant,
        kKey,
        kToken,
        {"error", true, "the error as JSON (or @FILE)"},
        {"retriable", false, "release the action so that the next attempt executes"}}},
      {"renew",
       "--tenant T --key K --token N [--lease-ms N]",
       "Extends a lease you hold.",
       {kTenant, kKey, kToken, kLeaseMs}},
      {"status", "--tenant T --key K", "Shows an action.", {kTenant, kKey}},
      {"lookup",
       "--tenant T --ref R --action A",
       "Shows an intent and its action.",
       {kTenant, kRef, kAction}},
      {"amend",
       "--tenant T --ref R --action A --payload JSON [--force]",
       "Replaces an intent's frozen payload and key (admin).",
       {kTenant,
        kRef,
        kAction,
        {"payload", true, "the corrected payload as JSON (or @FILE)"},
        {"force", false, "amend even when the action started or completed"}}},
      {"pending",
       "[--tenant T] [--limit N]",
       "Lists intents the policy holds for approval (an amount above approval_above), oldest\n"
       "first: tenant, intent_ref, action type, the amounts, how long each has waited and why.\n"
       "Approve with intentd approve, deny with intentd deny. Exit codes: 0 none waiting, 4\n"
       "some waiting, 1 the agent refused, 2 usage error, 3 agent unreachable.",
       {{"tenant", true, "only this tenant (without it: every tenant, admin)"},
        {"limit", true, ListingLimit()}}},
      {"approve",
       "--tenant T --ref R --action A [--note TEXT]",
       "Approves an intent waiting for approval (admin): its next begin executes. Recorded with\n"
       "who (the caller's uid) and when.",
       {kTenant, kRef, kAction, {"note", true, "why, for the record (at most 1024 bytes)"}}},
      {"deny",
       "--tenant T --ref R --action A [--note TEXT]",
       "Denies an intent waiting for approval (admin): its action ends failed (error code\n"
       "denied, terminal), so no attempt ever executes it. Recorded with who and when.",
       {kTenant, kRef, kAction, {"note", true, "why, for the record (at most 1024 bytes)"}}},
      {"uncertain",
       "[--tenant T] [--limit N] [--config F]",
       "Lists started actions whose lease expired (outcome unknown), oldest first, per tenant:\n"
       "how long ago the lease expired, the action's age, attempts, action type, intent_ref,\n"
       "the amount frozen in its payload (its money fields, in R$), the txid to ask the\n"
       "provider about, and the key. The amounts come from one pipelined lookup per row on the\n"
       "same connection. --json prints the agent's answer with txid, age_ms, payload and money\n"
       "(or amount_unavailable) added to each action.\n"
       "Exit codes: 0 none listed, 4 some listed (settle them: intentd reconcile, or by hand),\n"
       "1 the agent refused, 2 usage error, 3 agent unreachable.",
       {{"tenant", true, "only this tenant (without it: every tenant, admin)"},
        {"limit", true, ListingLimit()},
        {"config", true,
         "config file with the action types, to know their money fields (default "
         "/etc/intentd/intentd.json)"}}},
      {"seen",
       "--tenant T --channel C --message-id ID [--meta JSON] [--ttl-ms N] [--lease-ms N]",
       "Records a sighting of an inbound message (webhook de-duplication): prints whether it is\n"
       "the first (process it) or a duplicate (drop it). --lease-ms claims it for processing;\n"
       "--done --token N records the claim's end; --release --token N gives the claim back (the\n"
       "next delivery takes it at once); --forget (admin) drops the record.",
       {kTenant,
        {"channel", true, "where the message came from, e.g. whatsapp"},
        {"message-id", true, "the provider's message id"},
        {"meta", true, "JSON stored with the first sighting (or @FILE), at most 4096 bytes"},
        {"ttl-ms", true,
         "keep the record this long after each sighting (default: retention, >= 7 days)"},
        {"lease-ms", true, "claim the message for processing for this long (" + LeaseRange() + ")"},
        {"done", false, "record that the claimed message was processed (with --token)"},
        {"release", false,
         "give the claim back: the next delivery takes it at once (with --token)"},
        {"token", true, "the claim's lease token (with --done or --release)"},
        {"forget", false, "drop the message's record: it reads as never seen (admin)"}}},
      {"keys",
       "",
       "Lists the key ids of the agent's keyring and of its store: which is current, which\n"
       "the keyring holds, and how many live intents each keys, for which tenants (admin;\n"
       "reads every intent).",
       {}},
      {"stats",
       "",
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
  std::fprintf(stderr, "intentd %s: %s (see intentd %s --help)\n", command.c_str(), message.c_str(),
               command.c_str());
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
      {"tenant", "tenant_id"}, {"ref", "intent_ref"},  {"action", "action_type"},
      {"key", "key"},          {"channel", "channel"}, {"message-id", "message_id"},
      {"note", "note"}};
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

unsigned long long Count(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_number_unsigned() ? it->get<unsigned long long>() : 0;
}

void PrintStats(const json& r) {
  const json& d = r.contains("decisions") ? r["decisions"] : json::object();
  const unsigned long long in_flight = Count(d, "in_flight"), replay = Count(d, "replay");
  const long long uptime = r.value("uptime_ms", 0LL);
  std::printf(
      "intentd up %s (since %s), %lld connection%s open (%llu since start), %llu "
      "requests\n",
      HumanDuration(uptime).c_str(), IsoUtc(NowEpochMs() - uptime).c_str(),
      r.value("connections", 0LL), r.value("connections", 0LL) == 1 ? "" : "s",
      Count(r, "connections_total"), Count(r, "requests"));
  std::printf("intents        %llu frozen, %llu found frozen already\n",
              Count(r, "intents_created"), Count(r, "intents_reused"));
  std::string begins;  // "N execute, N in_flight, ...": every decision, in the store's order
  for (const store::DecisionSpec& decision : store::kDecisions) {
    begins += (begins.empty() ? "" : ", ") + std::to_string(Count(d, decision.name)) + " " +
              decision.name;
  }
  std::printf("begin          %s\n", begins.c_str());
  std::printf(
      "redeliveries   %llu absorbed (in_flight + replay: a repeat that did not act again)\n",
      in_flight + replay);
  if (r.contains("prevented") && r["prevented"].is_object()) {
    // Replays of a completed action and recoveries, with the money frozen in
    // their payloads (protocol/prevented.h).
    unsigned long long replayed = 0, recovered = 0, cents = 0;
    for (const json& t : r["prevented"]) {
      if (!t.is_object()) continue;
      replayed += Count(t, "replayed");
      recovered += Count(t, "recovered");
      for (const char* kind : {"replayed_cents", "recovered_cents"}) {
        if (!t.contains(kind) || !t[kind].is_object()) continue;
        for (const json& c : t[kind])
          cents += c.is_number_unsigned() ? c.get<unsigned long long>() : 0;
      }
    }
    std::printf(
        "prevented      %llu double charge%s (%llu replay%s of a completed action, %llu "
        "recover%s), R$ %llu.%02llu frozen in them\n",
        replayed + recovered, replayed + recovered == 1 ? "" : "s", replayed,
        replayed == 1 ? "" : "s", recovered, recovered == 1 ? "y" : "ies", cents / 100,
        cents % 100);
  }
  std::printf(
      "diverged       %llu payload%s differed from the frozen one (the frozen one was used)\n",
      Count(r, "diverged"), Count(r, "diverged") == 1 ? "" : "s");
  std::printf(
      "outcomes       %llu completed, %llu failed, %llu released (retriable), %llu "
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
  std::printf("errors         %s\n",
              total == 0 ? "none" : (std::to_string(total) + ": " + errors).c_str());
}

void PrintPending(const json& r) {
  const json list = r.value("intents", json::array());
  if (list.empty()) {
    std::printf("no intent waits for approval\n");
    return;
  }
  std::printf("%zu intent%s waiting for approval, oldest first:\n", list.size(),
              list.size() == 1 ? "" : "s");
  for (const json& i : list) {
    std::string money;
    const json amounts = i.value("money", json::object());
    for (auto it = amounts.begin(); it != amounts.end(); ++it) {
      money += (money.empty() ? "" : ", ") + it.key() + " R$ " + PlainText(it.value());
    }
    std::printf("  %s  %s  %s  %s  waiting %s\n    %s\n",
                Shown(i.value("tenant_id", json(""))).c_str(),
                Shown(i.value("intent_ref", json(""))).c_str(),
                Shown(i.value("action_type", json(""))).c_str(), money.c_str(),
                HumanDuration(i.value("waiting_ms", 0LL)).c_str(),
                PlainText(i.value("reason", json(""))).c_str());
  }
  std::printf("approve: intentd approve --tenant T --ref R --action A [--note TEXT]\n");
  std::printf("deny:    intentd deny --tenant T --ref R --action A [--note TEXT]\n");
}

void PrintSeen(const json& r) {
  const long long count = r.value("count", 0LL);
  if (r.value("first", false)) {
    std::printf("first sighting: process it\n");
    if (r.contains("lease_token")) {
      std::printf(
          "claimed with lease token %lld until %s%s; run with --done --token %lld "
          "when processed\n",
          r.value("lease_token", 0LL), IsoUtc(r.value("lease_until_ms", 0LL)).c_str(),
          r.value("lease_token", 0LL) > 1 ? " (an earlier claim expired unfinished)" : "",
          r.value("lease_token", 0LL));
    }
  } else {
    std::printf("duplicate: drop it (seen %lld time%s, first at %s, state %s)\n", count,
                count == 1 ? "" : "s", IsoUtc(r.value("first_seen_at_ms", 0LL)).c_str(),
                PlainText(r.value("state", json(""))).c_str());
    if (r.contains("retry_after_ms")) {
      std::printf("being processed under a live claim; it expires in %s\n",
                  HumanDuration(r.value("retry_after_ms", 0LL)).c_str());
    }
  }
  if (r.contains("meta")) std::printf("meta: %s\n", PlainText(r["meta"]).c_str());
  std::printf("expires at %s unless seen again\n", IsoUtc(r.value("expires_at_ms", 0LL)).c_str());
}

void PrintKeys(const json& r) {
  std::printf("current key id: %s\n", PlainText(r.value("current", json(""))).c_str());
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
                k.value("in_keyring", false) ? "holds it" : "MISSING", k.value("live_intents", 0LL),
                tenants.c_str());
  }
}

// A member as "name: value", an instant (a name ending in _at_ms or
// _until_ms) in ISO 8601 UTC under its name without "_ms".
std::string Member(const std::string& name, const json& value) {
  for (const char* suffix : {"_at_ms", "_until_ms"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0 &&
        value.is_number_integer()) {
      return name.substr(0, name.size() - 3) + ": " + IsoUtc(value.get<int64_t>());
    }
  }
  return name + ": " + PlainText(value);
}

void PrintHuman(const std::string& op, const json& response) {
  if (op == "keys") {
    PrintKeys(response);
    return;
  }
  if (op == "seen") {
    PrintSeen(response);
    return;
  }
  if (op == "stats") {
    PrintStats(response);
    return;
  }
  if (op == "pending") {
    PrintPending(response);
    return;
  }
  for (auto it = response.begin(); it != response.end(); ++it) {
    if (it.key() == "ok" || it.key() == "id") continue;
    if (it.value().is_object() && !it.value().empty()) {
      std::printf("%s:\n", it.key().c_str());
      for (auto in = it.value().begin(); in != it.value().end(); ++in) {
        std::printf("  %s\n", Member(in.key(), in.value()).c_str());
      }
    } else {
      std::printf("%s\n", Member(it.key(), it.value()).c_str());
    }
  }
}

}  // namespace

bool IsClientCommand(const std::string& name) { return FindCommand(name) != nullptr; }

int RunClient(const std::string& name, const std::vector<std::string>& args) {
  const ClientCommand& command = *FindCommand(name);
  std::vector<FlagSpec> specs = command.flags;
  specs.push_back({"socket", true,
                   "the agent's socket (default $INTENTD_SOCKET or /run/intentd/intentd.sock)"});
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
  if (op == "uncertain") {
    return RunUncertain({flags.GetOr("socket", DefaultClientSocket()), request,
                         flags.GetOr("config", kDefaultConfig), flags.Has("config"),
                         flags.Has("json")});
  }
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
    PrintHuman(op, response);
  } else {
    const json& e = response["error"];
    std::fprintf(stderr, "error %s: %s%s\n", PlainText(e.value("code", json("?"))).c_str(),
                 PlainText(e.value("message", json(""))).c_str(),
                 e.contains("field") ? (" (field " + PlainText(e["field"]) + ")").c_str() : "");
  }
  if (ok && op == "pending" && !response.value("intents", json::array()).empty()) {
    return kExitUncertain;  // 4: something is left to settle (here: to decide)
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
      {"json", false, "accepted for scripts that pass it to every command: derive prints JSON"},
  };
  Flags flags;
  std::string error;
  if (!flags.Parse(specs, args, &error)) return UsageError("derive", error);
  if (flags.help_requested()) {
    std::fputs(
        FlagsUsage(
            "derive", "--tenant T --action A --payload JSON",
            "Computes an intent's idempotency key locally, exactly as the agent "
            "does.\nPrints {\"key\",\"txid\",\"payload\",\"rules_version\",\"key_id\"}; on a "
            "bad payload prints the error object and exits 1.\nIts output is JSON "
            "with or without --json.",
            specs)
            .c_str(),
        stdout);
    return kExitOk;
  }
  for (const char* required : {"tenant", "action", "payload"}) {
    if (!flags.Has(required))
      return UsageError("derive", std::string("--") + required + " is required");
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
  if (!LoadConfigFile(flags.GetOr("config", kDefaultConfig), !flags.Has("config"), &config,
                      &error)) {
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
  if (!keyring.Find(key_id)->Derive(*flags.Get("tenant"), *type, payload, static_cast<int>(version),
                                    &d, &e)) {
    return print_error(e.code, e.field, e.message);
  }
  std::printf(
      "{\"key\":\"%s\",\"txid\":\"%s\",\"payload\":%s,\"rules_version\":%d,"
      "\"key_id\":\"%s\"}\n",
      d.key.c_str(), d.txid.c_str(), PayloadText(d).c_str(), d.rules_version, key_id.c_str());
  return kExitOk;
}

int RunCost(const std::vector<std::string>& args) {
  auto fetch = [](const std::string& socket_path, std::string* stats_json, std::string* error) {
    return CallAgent(socket_path, "{\"op\":\"stats\"}", stats_json, error);
  };
  const char* env = std::getenv("INTENTD_SOCKET");
  return RunCostCommand(args, env != nullptr ? env : "", fetch, std::cout, std::cerr);
}

}  // namespace intentd::cli
