// What the torture clients saw, and what the agent holds afterwards. The
// checker (tests/torture/checker.h) judges the agent only from these records:
// every fact in them is something a client was told (acknowledged) or did
// (sent, answer unknown).
#pragma once

#include <cstdint>
#include <map>
#include <string>
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
};

struct ClientLog {
  int client = 0;
  std::vector<BeginAck> begins;
  std::vector<Grant> grants;
  std::vector<Finish> finishes;
  int64_t begins_sent = 0;
  int64_t begins_unanswered = 0;          // connection lost before the answer
  std::map<std::string, int64_t> errors;  // error code -> count (ok:false answers)
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

struct FinalState {
  // (tenant, key) -> action (found=false: status answered not_found).
  std::map<std::pair<std::string, std::string>, FinalAction> actions;
  // (tenant, ref) -> key of the intent ("" when lookup answered found:false).
  std::map<std::pair<std::string, std::string>, std::string> intents;
};

// The harness's own facts.
struct RunFacts {
  int kills = 0;
  int restarts_attempted = 0;
  int restarts_succeeded = 0;
  int min_kills = 20;
};

}  // namespace intentd::torture
