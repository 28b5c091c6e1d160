// What the torture clients saw, and what the agent holds afterwards. The
// checker (tests/torture/checker.h) judges the agent only from these records:
// every fact in them is something a client was told (acknowledged) or did
// (sent, answer unknown).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace intentd::torture {

// A `begin` the agent answered with ok:true.
struct BeginAck {
  BeginAck() = default;
  BeginAck(std::string tenant_, std::string ref_, std::string key_, std::string decision_,
           std::string replay_status_ = "", std::string replay_outcome_ = "")
      : tenant(std::move(tenant_)),
        ref(std::move(ref_)),
        key(std::move(key_)),
        decision(std::move(decision_)),
        replay_status(std::move(replay_status_)),
        replay_outcome(std::move(replay_outcome_)) {}

  std::string tenant;
  std::string ref;
  std::string key;
  std::string decision;        // execute, recover, in_flight, replay
  std::string replay_status;   // replay: completed or failed
  std::string replay_outcome;  // replay: compact JSON of response / error
};

// An acknowledged grant (decision execute or recover).
struct Grant {
  std::string tenant;
  std::string key;
  int64_t token = 0;
  int64_t previous_token = 0;  // recover: previous_lease_token
  bool recover = false;
  int64_t granted_at_ms = 0;  // the agent's clock: lease_until_ms - lease_ms
  int64_t lease_until_ms = 0;
  int client = 0;
};

enum class FinishKind { kComplete, kFailRetriable, kFailFinal };

// A complete / fail sent with a lease token. `acked`: the agent answered
// ok:true to (some repeat of) it; `outcome` is the response / error sent.
struct Finish {
  std::string tenant;
  std::string key;
  int64_t token = 0;
  FinishKind kind = FinishKind::kComplete;
  std::string outcome;  // compact JSON
  bool acked = false;
  std::string answered_status;  // when acked: the `status` member of the answer
  // Answered storage_error, and no earlier attempt of it went unanswered:
  // it must not have taken effect (it is not sent again).
  bool refused = false;
};

// A `seen` of a message id no client had sent before.
struct Sighting {
  std::string tenant;
  std::string channel;
  std::string message_id;
};

struct ClientLog {
  int client = 0;
  std::vector<BeginAck> begins;
  std::vector<Grant> grants;
  std::vector<Finish> finishes;
  int64_t begins_sent = 0;
  int64_t begins_unanswered = 0;          // connection lost before the answer
  std::map<std::string, int64_t> errors;  // error code -> count (ok:false answers)
  // Begins of an intent no client had sent before, answered storage_error:
  // nothing may have been frozen. (tenant, intent_ref)
  std::vector<std::pair<std::string, std::string>> refused_begins;
  std::vector<Sighting> seen_acked;    // answered first: true
  std::vector<Sighting> seen_refused;  // answered storage_error
  int64_t seen_sent = 0;
  // A fresh id answered first: false: seen although never sent before.
  std::vector<std::string> seen_fresh_duplicates;
  // Requests left unanswered longer than the stall limit while the agent ran
  // (no kill in between), described.
  std::vector<std::string> stalls;
  // Pipelined: answered batches by the time their last answer took.
  int64_t batches = 0, batches_over_1s = 0;
  int64_t batch_ms_max = 0;
};

// The agent's records after the run, read back over the socket.
struct FinalAction {
  bool found = false;
  std::string status;
  std::string response;  // compact JSON, completed
  std::string error;     // compact JSON, failed / released
  int64_t lease_token = 0;
  int64_t attempt = 0;
};

// A message read back with one more `seen` of it (at the very end).
struct FinalSighting {
  bool was_absent = false;  // that seen answered first: true
  int64_t count = 0;
};

struct FinalState {
  // (tenant, key) -> action (found=false: status answered not_found).
  std::map<std::pair<std::string, std::string>, FinalAction> actions;
  // (tenant, ref) -> key of the intent ("" when lookup answered found:false).
  std::map<std::pair<std::string, std::string>, std::string> intents;
  // (tenant, channel, message_id) -> the last seen's answer.
  std::map<std::tuple<std::string, std::string, std::string>, FinalSighting> messages;
};

// The harness's own facts.
struct RunFacts {
  int kills = 0;
  int restarts_attempted = 0;
  int restarts_succeeded = 0;
  int min_kills = 20;
  // The agent was found dead before a kill (an abort, a crash), described.
  std::vector<std::string> unexpected_exits;
};

}  // namespace intentd::torture
