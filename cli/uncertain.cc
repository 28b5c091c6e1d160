#include "cli/uncertain.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "cli/agent_connection.h"
#include "cli/commands.h"
#include "cli/view_text.h"
#include "common/config.h"
#include "normalizers/key_derivation.h"
#include "protocol/limits.h"

namespace intentd::cli {
namespace {

using nlohmann::json;

// Integer cents as the normalized payload holds them ("18000") -> "180.00".
// Anything else is returned as it is: the row shows what was frozen.
std::string Reais(const std::string& cents) {
  if (cents.empty() || cents.size() > 18 ||
      cents.find_first_not_of("0123456789") != std::string::npos) {
    return cents;
  }
  const long long n = std::stoll(cents);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%02lld", n / 100, n % 100);
  return buf;
}

std::string Str(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

long long Num(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_number_integer() ? it->get<long long>() : 0;
}

// Why a lookup answer gives no amount for `action`, or "" with *payload set.
std::string FrozenPayload(const json& action, const std::string& line, json* payload) {
  const json answer = json::parse(line, nullptr, false);
  if (!answer.is_object()) return "the agent's lookup answer is not JSON";
  if (!answer.value("ok", false)) {
    const json e = answer.value("error", json::object());
    return "lookup failed: " + (e.is_object() ? Str(e, "code") + ": " + Str(e, "message") : "?");
  }
  if (!answer.value("found", false)) return "the intent is gone (past retention?)";
  if (Str(answer, "key") != Str(action, "key")) {
    return "the intent was amended since: it now keys txid " +
           normalizers::TxidOfKey(Str(answer, "key")) +
           ", and the payload this action began with is no longer stored";
  }
  *payload = answer.value("payload", json::object());
  return "";
}

}  // namespace

void AddUncertainDetails(const normalizers::Catalog& catalog,
                         const std::vector<std::string>& lookups, json* actions) {
  for (size_t i = 0; i < actions->size(); ++i) {
    json& a = (*actions)[i];
    if (!a.is_object()) continue;
    a["txid"] = normalizers::TxidOfKey(Str(a, "key"));
    // created_at_ms is the agent's clock; lease_until_ms + expired_for_ms
    // is the agent's "now", so the age does not depend on this host's clock.
    a["age_ms"] = Num(a, "lease_until_ms") + Num(a, "expired_for_ms") - Num(a, "created_at_ms");
    json payload;
    std::string why = i < lookups.size() ? FrozenPayload(a, lookups[i], &payload)
                                         : "the agent did not answer this row's lookup";
    if (why.empty()) a["payload"] = payload;
    const normalizers::ActionType* type = catalog.Find(Str(a, "action_type"));
    if (why.empty() && type == nullptr) {
      why = "the action type is not in the config read (pass --config: which fields are money)";
    }
    if (!why.empty()) {
      a["amount_unavailable"] = why;
      continue;
    }
    json money = json::object();
    for (const normalizers::FieldSpec& f : type->fields) {
      if (f.kind != normalizers::FieldKind::kMoney) continue;
      money[f.name] = Reais(payload.is_object() ? Str(payload, f.name.c_str()) : "");
    }
    a["money"] = money;
  }
}

namespace {

// "R$ 180.00"; several money fields: "valor R$ 180.00, taxa R$ 2.50"; none: "-".
std::string AmountText(const json& a) {
  auto it = a.find("money");
  if (it == a.end() || !it->is_object()) return "?";
  if (it->empty()) return "-";
  if (it->size() == 1) return "R$ " + PlainText(it->begin().value());
  std::string text;
  for (auto m = it->begin(); m != it->end(); ++m) {
    text += (text.empty() ? "" : ", ") + m.key() + " R$ " + PlainText(m.value());
  }
  return text;
}

void PrintTable(const json& list, long long limit, int64_t now_ms) {
  // Oldest expiry first (the agent's order), grouped by tenant; tenants in
  // the order of their oldest action.
  std::vector<std::string> tenants;
  std::map<std::string, std::vector<const json*>> by_tenant;
  for (const json& a : list) {
    const std::string t = Str(a, "tenant_id");
    if (!by_tenant.count(t)) tenants.push_back(t);
    by_tenant[t].push_back(&a);
  }
  std::printf(
      "%zu uncertain action%s at %s (started, lease expired: the outcome is unknown), "
      "oldest first:\n",
      list.size(), list.size() == 1 ? "" : "s", IsoUtc(now_ms).c_str());
  const std::vector<std::string> head = {"expired",    "age",    "attempts", "action_type",
                                         "intent_ref", "amount", "txid",     "key"};
  std::vector<std::vector<std::string>> rows;
  for (const json& a : list) {
    rows.push_back({HumanDuration(Num(a, "expired_for_ms")), HumanDuration(Num(a, "age_ms")),
                    std::to_string(Num(a, "attempt")), Shown(a.value("action_type", json(""))),
                    Shown(a.value("intent_ref", json(""))), AmountText(a), Str(a, "txid"),
                    Shown(a.value("key", json("")))});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = " ";
    for (size_t c = 0; c < cells.size(); ++c) {
      // attempts is a number: right-aligned; the key, last, is not padded.
      const std::string pad(width[c] - cells[c].size(), ' ');
      text += " " + (c == 2 ? pad + cells[c] : c + 1 == cells.size() ? cells[c] : cells[c] + pad);
    }
    std::printf("%s\n", text.c_str());
  };
  size_t index = 0;
  std::map<const json*, size_t> row_of;
  for (const json& a : list) row_of[&a] = index++;
  for (const std::string& t : tenants) {
    const auto& mine = by_tenant[t];
    std::printf("\ntenant %s (%zu)\n", Shown(json(t)).c_str(), mine.size());
    line(head);
    std::vector<std::string> notes;
    for (const json* a : mine) {
      line(rows[row_of[a]]);
      if (a->contains("amount_unavailable")) {
        notes.push_back("  ? " + Shown(a->value("intent_ref", json(""))) + ": " +
                        Str(*a, "amount_unavailable"));
      }
    }
    for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  }
  if (static_cast<long long>(list.size()) >= limit) {
    std::printf("\n(the first %lld; there may be more: --limit N, up to %lld)\n", limit,
                static_cast<long long>(protocol::kMaxListing));
  }
  std::printf(
      "\nAsk the provider about each txid, then settle it: intentd reconcile --once, or by hand "
      "(intentd-uncertain(8)).\n");
}

}  // namespace

int RunUncertain(const UncertainOptions& options) {
  // The config says which payload fields are money. The default one may be
  // unreadable to whoever runs this: then the list still comes, with amounts
  // for the built-in action types.
  agent::Config config;
  std::string error;
  if (!agent::LoadConfigFile(options.config_path, !options.config_required, &config, &error)) {
    if (options.config_required) {
      std::fprintf(stderr, "intentd uncertain: %s\n", error.c_str());
      return kExitFailed;
    }
    std::fprintf(stderr,
                 "intentd uncertain: %s; amounts are shown for the built-in action types only "
                 "(run it as a user who can read the config, or pass --config FILE)\n",
                 error.c_str());
    config = agent::Config();
  }
  std::unique_ptr<AgentConnection> connection;
  std::vector<std::string> answers;
  if (!AgentConnection::Open(options.socket_path, &connection, &error) ||
      !connection->Exchange({options.request.dump()}, &answers, &error)) {
    std::fprintf(stderr, "intentd uncertain: %s\n", error.c_str());
    return kExitUnreachable;
  }
  json response = json::parse(answers[0], nullptr, false);
  if (!response.is_object()) {
    std::fprintf(stderr, "intentd uncertain: the agent answered something that is not JSON\n");
    return kExitFailed;
  }
  if (!response.value("ok", false)) {
    if (options.json) {
      std::printf("%s\n", answers[0].c_str());
    } else {
      const json e = response.value("error", json::object());
      std::fprintf(stderr, "error %s: %s\n", Str(e, "code").c_str(), Str(e, "message").c_str());
    }
    return kExitFailed;
  }
  json& list = response["actions"];
  if (!list.is_array()) list = json::array();
  // One lookup per row, all in one pipelined batch on this connection.
  std::vector<std::string> lookups;
  for (const json& a : list) {
    lookups.push_back(json{{"op", "lookup"},
                           {"tenant_id", a.value("tenant_id", json(""))},
                           {"intent_ref", a.value("intent_ref", json(""))},
                           {"action_type", a.value("action_type", json(""))}}
                          .dump(-1, ' ', false, json::error_handler_t::replace));
  }
  std::vector<std::string> looked_up;
  if (!lookups.empty() && !connection->Exchange(lookups, &looked_up, &error)) {
    std::fprintf(stderr, "intentd uncertain: the amounts are incomplete: %s\n", error.c_str());
  }
  AddUncertainDetails(config.catalog, looked_up, &list);
  if (options.json) {
    std::printf("%s\n", response.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else if (list.empty()) {
    std::printf("no uncertain actions\n");
  } else {
    PrintTable(list, options.request.value("limit", 100LL), NowEpochMs());
  }
  return list.empty() ? kExitOk : kExitUncertain;
}

}  // namespace intentd::cli
