#include "reconcile/pass.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "normalizers/key_derivation.h"
#include "protocol/limits.h"

namespace intentd::reconcile {
namespace {

using nlohmann::json;

constexpr auto kFirstBackoff = std::chrono::seconds(30);
constexpr auto kMaxBackoff = std::chrono::hours(1);
constexpr int kMaxListed = protocol::kMaxListing;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Text(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One request to the agent: its parsed answer, or false with *error (then
// *unreachable when the agent could not be reached at all).
bool Ask(const CallFn& call, const json& request, json* answer, std::string* error,
         bool* unreachable) {
  std::string line;
  if (!call(Dump(request), &line, error)) {
    *unreachable = true;
    return false;
  }
  *answer = json::parse(line, nullptr, false);
  if (answer->is_discarded() || !answer->is_object()) {
    *error = "the agent answered something that is not a JSON object";
    return false;
  }
  return true;
}

// The error code of a refused request ("" when it succeeded).
std::string ErrorCode(const json& answer) {
  if (answer.value("ok", false)) return "";
  const json& e = answer.contains("error") ? answer["error"] : json::object();
  return e.is_object() ? Text(e, "code") : "?";
}

std::string ErrorLine(const json& answer) {
  const json& e = answer.contains("error") ? answer["error"] : json::object();
  return e.is_object() ? Text(e, "code") + ": " + Text(e, "message") : "an error";
}

// The agent stores responses up to protocol::kMaxResultBytes. A larger
// charge is stored as its identifying members (what a replay needs to
// show), marked truncated.
json StoredResponse(const std::string& text) {
  json response = json::parse(text, nullptr, false);
  if (text.size() <= protocol::kMaxResultBytes || !response.is_object()) return response;
  json kept = {{"truncated", true}};
  for (const char* name : {"txid", "status", "revisao", "valor", "calendario", "chave", "loc"}) {
    if (response.contains(name)) kept[name] = response[name];
  }
  return kept;
}

const char* RecordedName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kExecuted:
      return "completed";
    case Verdict::kNotExecuted:
      return "released";
    case Verdict::kFailed:
      return "failed";
    case Verdict::kUnknown:
      break;
  }
  return "nothing";
}

}  // namespace

bool IsProviderCause(const std::string& cause) {
  for (const char* c : kCauses) {
    if (cause == c) return true;
  }
  return false;
}

bool Reconciler::Create(const std::vector<TypeSettings>& settings, std::unique_ptr<Reconciler>* out,
                        std::string* error) {
  auto r = std::unique_ptr<Reconciler>(new Reconciler());
  for (const TypeSettings& t : settings) {
    std::string why;
    std::unique_ptr<Provider> provider = MakeProvider(t, &why);
    if (!provider) {
      *error = why;  // MakeProvider names the member ("reconcile.TYPE: ...")
      return false;
    }
    // The lease outlasts the provider's slowest answer under it: an API Pix
    // ask may take a token request, the GET, a new token and the GET again.
    const int64_t timeout = t.pix_api ? 4 * t.pix_api->timeout_ms : t.command->timeout_ms;
    r->providers_[t.action_type] = {t.pix_api ? "pix_api" : "command", std::move(provider),
                                    std::min<int64_t>(timeout + 5000, protocol::kMaxLeaseMs)};
  }
  *out = std::move(r);
  return true;
}

// The causes of "nothing" and "skipped" beyond the providers' (kCauses):
//   no_provider   the config has no "reconcile" entry for the action type
//   backoff       the provider could not answer for this action lately
//   retry_after   the provider asked not to be asked before a time
//   amended       the intent now points at another key: this action is not
//                 reached through it any more (resolve it by hand)
//   agent_error   the agent refused a request (the detail says which)
//   lease_lost    a newer attempt took the action while the provider was asked
//   in_flight, replay, released: (skipped) the begin decision: a live worker
//                 holds it, it was finished, or it was released meanwhile
ActionResult Reconciler::Reconcile(const CallFn& call, const PassOptions& options,
                                   const std::string& listed_json, bool* unreachable) {
  const json listed = json::parse(listed_json);
  ActionResult result;
  ActionInfo& info = result.action;
  info.tenant_id = Text(listed, "tenant_id");
  info.key = Text(listed, "key");
  info.txid = normalizers::TxidOfKey(info.key);
  info.action_type = Text(listed, "action_type");
  info.intent_ref = Text(listed, "intent_ref");
  auto nothing = [&](std::string cause, std::string detail) {
    result.recorded = "nothing";
    result.cause = std::move(cause);
    result.detail = std::move(detail);
    return result;
  };

  auto configured = providers_.find(info.action_type);
  if (configured == providers_.end()) {
    return nothing("no_provider", "the config's \"reconcile\" member has no entry for " +
                                      info.action_type + ": resolve it by hand");
  }
  Configured& provider = configured->second;
  result.provider = provider.kind;
  const std::string backoff_key = info.tenant_id + '\0' + info.key;
  if (auto b = backoff_.find(backoff_key); b != backoff_.end() && Clock::now() < b->second.next) {
    return nothing("backoff",
                   "the provider could not answer for this action lately; asked "
                   "again later");
  }
  if (auto p = paused_.find(info.action_type); p != paused_.end() && Clock::now() < p->second) {
    return nothing("retry_after",
                   "the provider asked not to be asked before a later time "
                   "(Retry-After)");
  }
  // An answer that says nothing: no write, asked again after a backoff.
  auto unknown = [&](const Answer& said, const std::string& when) {
    Backoff& b = backoff_[backoff_key];
    b.failures += 1;
    const auto wait = kFirstBackoff * (1 << std::min(b.failures - 1, 7));
    b.next = Clock::now() + std::min<Clock::duration>(wait, kMaxBackoff);
    if (said.retry_after_ms > 0) {
      paused_[info.action_type] = Clock::now() + std::chrono::milliseconds(said.retry_after_ms);
    }
    result.provider_said = said.provider_said;
    return nothing(said.cause, when + said.detail);
  };

  // The intent's frozen payload (for a command hook), and that it still
  // points at this action.
  json answer;
  std::string error;
  const json identity = {{"tenant_id", info.tenant_id},
                         {"intent_ref", info.intent_ref},
                         {"action_type", info.action_type}};
  json lookup = identity;
  lookup["op"] = "lookup";
  if (!Ask(call, lookup, &answer, &error, unreachable)) return nothing("agent_error", error);
  if (!ErrorCode(answer).empty()) return nothing("agent_error", "lookup: " + ErrorLine(answer));
  if (Text(answer, "key") != info.key) {
    return nothing("amended", "intent " + info.intent_ref +
                                  " was amended to another key; this action is not reached "
                                  "through it any more: resolve it by hand");
  }
  json record = listed;
  record.erase("expired_for_ms");
  record["txid"] = info.txid;
  if (answer.contains("payload")) record["payload"] = answer["payload"];
  info.record_json = Dump(record);

  // First without the lease: a provider that cannot answer costs no write,
  // and the action stays listed as uncertain (and counted so).
  Answer said = provider.provider->Ask(info);
  result.provider_said = said.provider_said;
  result.detail = said.detail;
  if (said.verdict == Verdict::kUnknown) return unknown(said, "");
  if (options.dry_run) {
    result.recorded = RecordedName(said.verdict);
    return result;
  }

  // Then the lease: the same fencing as a bot's recover.
  json begin = identity;
  begin["op"] = "begin";
  begin["lease_ms"] = std::max(options.lease_ms, provider.min_lease_ms);
  if (!Ask(call, begin, &answer, &error, unreachable)) return nothing("agent_error", error);
  if (!ErrorCode(answer).empty()) return nothing("agent_error", "begin: " + ErrorLine(answer));
  const std::string decision = Text(answer, "decision");
  const std::string key = Text(answer, "key");
  const int64_t token = answer.value("lease_token", int64_t{0});
  if (decision == "execute") {
    // Released since it was listed: the next attempt is the bot's to make.
    // The lease just granted is released again at once.
    json give_back = {{"op", "fail"},
                      {"tenant_id", info.tenant_id},
                      {"key", key},
                      {"lease_token", token},
                      {"retriable", true},
                      {"error",
                       {{"reconcile",
                         "released before the reconciler could take it; "
                         "released again, nothing recorded from the "
                         "provider"}}}};
    Ask(call, give_back, &answer, &error, unreachable);
  }
  if (decision != "recover" || key != info.key) {
    result.recorded = "skipped";
    result.cause = key != info.key ? "amended" : (decision == "execute" ? "released" : decision);
    result.detail = "begin answered " + decision + ": " +
                    (decision == "in_flight" ? "a live attempt holds it"
                     : decision == "replay"  ? "it was finished meanwhile"
                                             : "it was released meanwhile");
    return result;
  }
  // A charge that exists stays so. Any other answer is asked again under the
  // lease: given before it, it may predate an attempt that acted since.
  if (said.verdict != Verdict::kExecuted) {
    record["lease_token"] = token;
    record["attempt"] = answer.value("attempt", record.value("attempt", 0));
    record["lease_until_ms"] = answer.value("lease_until_ms", record.value("lease_until_ms", 0));
    info.record_json = Dump(record);
    said = provider.provider->Ask(info);
    result.provider_said = said.provider_said;
    result.detail = said.detail;
    if (said.verdict == Verdict::kUnknown) {
      return unknown(said, "asked again under the lease (left to run out): ");
    }
  }
  backoff_.erase(backoff_key);

  json write = {{"tenant_id", info.tenant_id},
                {"key", info.key},
                {"lease_token", token},
                {"reconciled", true}};
  if (said.verdict == Verdict::kExecuted) {
    write["op"] = "complete";
    write["response"] = StoredResponse(said.response);
  } else {
    write["op"] = "fail";
    write["retriable"] = said.verdict == Verdict::kNotExecuted;
    write["error"] = json::parse(said.error, nullptr, false);
  }
  if (!Ask(call, write, &answer, &error, unreachable)) {
    // The outcome is unknown: the write may have been recorded. The next
    // pass finds the action resolved, or uncertain again.
    return nothing("agent_error", std::string(write["op"]) + ": " + error);
  }
  const std::string code = ErrorCode(answer);
  if (code == "lease_lost") {
    return nothing("lease_lost",
                   "a newer attempt took the action while the provider was asked: "
                   "it resolves the action");
  }
  if (!code.empty()) {
    return nothing("agent_error", std::string(write["op"]) + ": " + ErrorLine(answer));
  }
  result.recorded = RecordedName(said.verdict);
  return result;
}

PassResult Reconciler::RunPass(const CallFn& call, const PassOptions& options) {
  PassResult pass;
  // Listed up to the protocol's most, so that actions no provider can
  // resolve (no_provider, amended) do not hide the others; at most
  // options.limit are asked about.
  json list = {{"op", "uncertain"}, {"limit", kMaxListed}};
  if (options.tenant_id) list["tenant_id"] = *options.tenant_id;
  json answer;
  std::string error;
  if (!Ask(call, list, &answer, &error, &pass.agent_unreachable)) {
    pass.agent_error = error;
    return pass;
  }
  if (!ErrorCode(answer).empty() || !answer.contains("actions") || !answer["actions"].is_array()) {
    pass.agent_error = "uncertain: " + ErrorLine(answer);
    return pass;
  }
  int asked = 0;
  // A full listing may have left older-leased actions out: say so.
  if (answer["actions"].size() >= static_cast<size_t>(kMaxListed)) ++pass.left_uncertain;
  for (const json& listed : answer["actions"]) {
    if (!listed.is_object()) continue;
    if (options.stop && options.stop()) break;
    const bool has_provider = providers_.count(Text(listed, "action_type")) > 0;
    if (has_provider && asked >= options.limit) {
      ++pass.left_uncertain;  // beyond the limit: the next pass
      continue;
    }
    asked += has_provider;
    bool unreachable = false;
    pass.actions.push_back(Reconcile(call, options, Dump(listed), &unreachable));
    const ActionResult& r = pass.actions.back();
    if (r.recorded == "nothing" || r.cause == "amended" || options.dry_run) ++pass.left_uncertain;
    if (unreachable) {
      pass.agent_unreachable = true;
      pass.agent_error = r.detail;
      return pass;
    }
  }
  return pass;
}

}  // namespace intentd::reconcile
