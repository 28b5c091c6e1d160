// `intentd cost`: the seed article's cost table for duplicated model calls.
//
// Prints what redelivered conversations cost in model tokens when nothing
// stops a repeated call: cost per call, the month's waste, its share of the
// revenue, the year, and the conversations needed to break even. The defaults
// are the seed's example (30,000 conversations, 8,000 input + 600 output
// tokens, R$ 0.015 / R$ 0.075 per thousand, 3% repeated, R$ 1.20 a resolved
// conversation) and give R$ 0.165 a call, R$ 148.50 a month, 0.41% of
// R$ 36,000, R$ 1,782.00 a year, 124 conversations.
//
// Money is computed exactly (rational arithmetic on 128-bit integers) and
// rounded only when printed: half up, to the cent (the cost per call to at
// most 6 decimals, the revenue share to 0.01%); break-even is a ceiling.
//
// With `--socket PATH` the repeat rate comes from the agent's `stats` op:
//   absorbed = decisions.replay + decisions.in_flight + decisions.recover
//   begins   = execute + in_flight + recover + replay
//   rate     = absorbed / begins
// Every begin that did not execute fresh is a redelivery whose model call the
// bot did not need (recover included: the bot repeats the provider call with
// the frozen key and payload, not the model call). A client that polls an
// in_flight action counts once per poll, so the rate is an upper bound.
// It also reads the `seen` op's counters: each duplicate message the agent
// dropped before the model is a model call saved, priced at the cost per
// call (a row of the table; "seen_duplicates" and "saved_by_dedup" in JSON).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace intentd::cli {

// Fetches the raw JSON response line of the `stats` op from the agent at
// `socket_path`. Returns false and sets `*error` when the agent cannot be
// reached; returns true with the line (which may carry "ok":false) otherwise.
using FetchStatsFn = std::function<bool(const std::string& socket_path, std::string* stats_json,
                                        std::string* error)>;

// Runs `intentd cost ARGS...` (`args` are the arguments after `cost`).
// Flags (`--flag VALUE` or `--flag=VALUE`):
//   --conversations N    conversations a month (integer >= 1)      30000
//   --input-tokens N     input tokens per model call (integer >= 0)  8000
//   --output-tokens N    output tokens per model call (integer >= 0)  600
//   --input-price R$     price per thousand input tokens (>= 0)      0.015
//   --output-price R$    price per thousand output tokens (>= 0)     0.075
//   --repeat-rate PCT    percent of conversations repeating the call  3
//   --ticket R$          revenue per resolved conversation (> 0)     1.20
//   --socket PATH        take the repeat rate from the agent's counters
//   --json               one JSON object instead of the table
//   --help               usage on `out`, exit 0
// Decimal values are plain digits with an optional '.' fraction (at most 9
// decimals; the repeat rate at most 6 and an optional trailing '%').
// Returns the exit code: 0 printed; 2 usage error (unknown flag, bad value,
// --repeat-rate together with --socket, figures too large to compute exactly),
// message on `err`; 3 the agent cannot be reached; 1 the agent answered an
// error or stats without the decision counters. Never throws.
int RunCostCommand(const std::vector<std::string>& args, const FetchStatsFn& fetch_stats,
                   std::ostream& out, std::ostream& err);

}  // namespace intentd::cli
