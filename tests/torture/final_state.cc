#include "tests/torture/final_state.h"

#include <set>
#include <tuple>
#include <utility>

#include "tests/agent/agent_util.h"

namespace intentd::torture {
namespace {

using intentd::testing::Client;
using intentd::testing::json;

constexpr size_t kBatch = 128;  // well below the server's 256 pending lines

// Sends `requests` pipelined in batches; answers[i] answers requests[i].
bool CallAll(Client* client, const std::vector<json>& requests, std::vector<json>* answers,
             std::string* error) {
  for (size_t start = 0; start < requests.size(); start += kBatch) {
    const size_t end = std::min(requests.size(), start + kBatch);
    std::string batch;
    for (size_t i = start; i < end; ++i) batch += requests[i].dump() + "\n";
    if (!client->SendRaw(batch)) {
      *error = "the agent closed the connection while reading records back";
      return false;
    }
    for (size_t i = start; i < end; ++i) {
      std::string line;
      if (!client->ReadLine(&line)) {
        *error = "no answer to " + requests[i].dump();
        return false;
      }
      answers->push_back(json::parse(line, nullptr, false));
    }
  }
  return true;
}

bool IsNotFound(const json& a) {
  return a.is_object() && !a.value("ok", true) && a["error"].is_object() &&
         a["error"].value("code", "") == "not_found";
}

}  // namespace

bool ReadFinalState(const std::string& socket_path, const std::vector<ClientLog>& logs,
                    FinalState* state, std::string* error) {
  std::set<std::pair<std::string, std::string>> keys, refs;
  for (const ClientLog& log : logs) {
    for (const BeginAck& b : log.begins) {
      keys.insert({b.tenant, b.key});
      refs.insert({b.tenant, b.ref});
    }
    for (const Grant& g : log.grants) keys.insert({g.tenant, g.key});
    for (const Finish& f : log.finishes) keys.insert({f.tenant, f.key});
    for (const auto& refused : log.refused_begins) refs.insert(refused);
  }
  // Messages are read back with one more sighting each: a write, so this is
  // done once, at the end (the checks during the run leave them out).
  std::set<std::tuple<std::string, std::string, std::string>> messages;
  for (const ClientLog& log : logs) {
    for (const Sighting& m : log.seen_acked) messages.insert({m.tenant, m.channel, m.message_id});
    for (const Sighting& m : log.seen_refused) messages.insert({m.tenant, m.channel, m.message_id});
  }
  Client client(socket_path);
  if (!client.connected()) {
    *error = "cannot connect to " + socket_path;
    return false;
  }
  std::vector<json> requests, answers;
  for (const auto& [tenant, key] : keys) {
    requests.push_back({{"op", "status"}, {"tenant_id", tenant}, {"key", key}});
  }
  for (const auto& [tenant, ref] : refs) {
    requests.push_back({{"op", "lookup"},
                        {"tenant_id", tenant},
                        {"intent_ref", ref},
                        {"action_type", "pix.cobranca"}});
  }
  for (const auto& [tenant, channel, id] : messages) {
    requests.push_back(
        {{"op", "seen"}, {"tenant_id", tenant}, {"channel", channel}, {"message_id", id}});
  }
  if (!CallAll(&client, requests, &answers, error)) return false;
  size_t i = 0;
  for (const auto& id : keys) {
    const json& a = answers[i++];
    FinalAction action;
    if (IsNotFound(a)) {
      state->actions[id] = action;
      continue;
    }
    if (!a.is_object() || !a.value("ok", false) || !a["action"].is_object()) {
      *error = "status of " + id.first + "/" + id.second + " answered " + a.dump();
      return false;
    }
    const json& rec = a["action"];
    action.found = true;
    action.status = rec.value("status", "");
    if (rec.contains("response")) action.response = rec["response"].dump();
    if (rec.contains("error")) action.error = rec["error"].dump();
    action.lease_token = rec.value("lease_token", int64_t{0});
    action.attempt = rec.value("attempt", int64_t{0});
    state->actions[id] = action;
  }
  for (const auto& id : refs) {
    const json& a = answers[i++];
    if (!a.is_object() || !a.value("ok", false)) {
      *error = "lookup of " + id.first + "/" + id.second + " answered " + a.dump();
      return false;
    }
    state->intents[id] = a.value("found", false) ? a.value("key", "") : "";
  }
  for (const auto& id : messages) {
    const json& a = answers[i++];
    if (!a.is_object() || !a.value("ok", false)) {
      *error = "seen of " + std::get<0>(id) + "/" + std::get<2>(id) + " answered " + a.dump();
      return false;
    }
    state->messages[id] = FinalSighting{a.value("first", false), a.value("count", int64_t{0})};
  }
  return true;
}

}  // namespace intentd::torture
