// The torture run's invariants, judged from the clients' logs and the agent's
// records read back after the last restart. Pure: no I/O.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/torture/torture_log.h"

namespace intentd::torture {

struct InvariantResult {
  explicit InvariantResult(std::string name_) : name(std::move(name_)) {}

  std::string name;
  int64_t checked = 0;                // facts examined
  int64_t violations = 0;             // facts that break the invariant
  std::string figures;                // counts for people ("1234 grants on 987 keys")
  std::vector<std::string> examples;  // the first few violations, explained
  bool passed() const { return violations == 0; }
};

// Checks, in this order:
//  1. no two grants of the same key share a lease token;
//  2. a grant with token t > 1 follows the expiry of grant t-1 (recover, with
//     previous_lease_token t-1, taken at or after t-1's lease_until_ms when
//     t-1 was seen) or its release (execute, after a retriable fail with
//     token t-1 was sent); nothing is granted after an acknowledged
//     complete or final fail;
//  3. every acknowledged complete (and final fail) is in the final records
//     with its response (error);
//  4. every acknowledged intent is still there with the same key (and every
//     begin of one intent was answered with one key);
//  5. every replay carried the outcome that is finally stored;
//  6. final records account for every grant (lease_token >= the highest
//     token seen, attempt == lease_token);
//  7. every restart succeeded, after at least facts.min_kills kills;
//  8. no write answered storage_error took effect: a refused fresh begin
//     froze nothing, a refused seen recorded nothing, a refused complete or
//     fail stored nothing of its own;
//  9. every acknowledged first sighting is still there, and no fresh message
//     id was reported seen before;
// 10. the agent never died on its own (an abort), and answered every request
//     within the stall limit while it ran.
std::vector<InvariantResult> CheckInvariants(const std::vector<ClientLog>& logs,
                                             const FinalState& final_state, const RunFacts& facts);

// Prints one line for the invariant, "PASS name: ..." or "FAIL name: ...",
// each of its examples on a line of its own, indented by `indent` + 4 spaces.
void PrintResult(const InvariantResult& result, const std::string& indent, std::FILE* out);

// Prints one line per invariant (with up to 5 examples of violations) and the
// final line exactly "N passed, M failed". Returns M.
int PrintResults(const std::vector<InvariantResult>& results, std::FILE* out);

}  // namespace intentd::torture
