// `intentd uncertain`: the started actions whose lease expired, with what the
// on-call engineer asks the payment provider about, so that no row needs a
// `lookup` of its own: the txid, the frozen payload's money fields, the age.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "normalizers/key_derivation.h"

namespace intentd::cli {

struct UncertainOptions {
  std::string socket_path;
  nlohmann::json request;        // the `uncertain` op as the flags built it
  std::string config_path;       // action types: which payload fields are money
  bool config_required = false;  // --config given: a missing file is an error
  bool json = false;
};

// Asks the agent for the uncertain actions, then looks up every row's intent
// on the same connection, pipelined (one batch, not one round trip per row).
// Prints the table, or with `json` the agent's answer with each action's
// details added (AddUncertainDetails). Returns the exit code: kExitOk when
// nothing is listed, kExitUncertain when something is, kExitFailed when the
// agent refused the `uncertain` op or the config is unreadable,
// kExitUnreachable when the agent cannot be reached. A failed lookup only
// leaves that row's amount unknown (said in the row).
int RunUncertain(const UncertainOptions& options);

// Adds to each element of `actions` (the `uncertain` op's objects):
//   "txid": the key's first 35 characters (the Pix charge's txid);
//   "age_ms": how long ago the action was created, by the agent's clock;
//   "payload": the frozen normalized payload, from `lookups[i]` (the answer
//     line of the lookup of action i's intent), when that intent still
//     points at the action's key;
//   "money": {"FIELD": "180.00", ...}: the payload's fields that `catalog`
//     declares money, in reais (the payload holds integer cents);
//   or "amount_unavailable": why there is no "money" (the lookup failed or
//     did not come, the intent was amended to another key or is gone, the
//     action type is not in `catalog`).
// `lookups` may be shorter than `actions` (the rest did not come).
void AddUncertainDetails(const normalizers::Catalog& catalog,
                         const std::vector<std::string>& lookups, nlohmann::json* actions);

}  // namespace intentd::cli
