// `intentd cost`: what the agent measured, and what repeated model calls cost.
//
// Two tables, kept apart so that an assumption never reads as a measurement:
//
// 1. Measured, with an agent (`--socket PATH`, else $INTENTD_SOCKET): its
//    `stats` counters since it started.
//    - Double charges prevented: begins answered `replay` on a completed
//      action (the provider charged; a key drawn per attempt charges again)
//      and `recover` (an attempt died mid-call; the same key lets the provider
//      deduplicate the repeat: a double charge only if the first call
//      charged, so an upper bound), with the money their frozen payloads held
//      (the `stats` op's "prevented", protocol/prevented.h). An agent without
//      "prevented" gives the counts from its decisions and no amounts.
//    - Repeated begins: absorbed / begins, where
//        absorbed = decisions.replay + decisions.in_flight + decisions.recover
//        begins   = execute + in_flight + recover + replay
//      the measured repeat rate (an upper bound: a client polling an
//      in_flight action counts once per poll).
//    - Duplicate messages dropped by `seen`, of all sightings.
// 2. An estimate of the model tokens that repeated calls burn a month
//    without intentd (the seed article's table): cost per call, the month's
//    waste, its share of revenue, a year, the conversations that pay for it,
//    and the model calls `seen` saved priced at the cost per call. Its inputs
//    are assumptions (the flags, else the article's example: 30,000
//    conversations, 8,000 input + 600 output tokens, R$ 0.015 / R$ 0.075 per
//    thousand, 3% repeated, R$ 1.20 a resolved conversation: R$ 0.165 a call,
//    R$ 148.50 a month, 0.41% of R$ 36,000, R$ 1,782.00 a year, 124
//    conversations), each marked so. The repeat rate is the measured one only
//    when the agent answered at least --min-sample begins (default 1000) and
//    no --repeat-rate is given: a handful of manual calls on a dev agent is
//    shown as measured, never extrapolated to a month.
//
// Money is computed exactly (cli/exact.h) and rounded only when printed:
// half up, to the cent (the cost per call to at most 6 decimals, the revenue
// share to 0.01%); break-even is a ceiling.
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
//   --socket PATH        the agent to measure (else `env_socket`)
//   --min-sample N       begins needed to extrapolate the measured rate 1000
//   --json               one JSON object instead of the tables
//   --help               usage on `out`, exit 0
// `env_socket` is $INTENTD_SOCKET ("" when unset): without --socket, a
// non-empty one is measured; with neither, nothing is.
// Decimal values are plain digits with an optional '.' fraction (at most 9
// decimals; the repeat rate at most 6 and an optional trailing '%').
// Returns the exit code: 0 printed; 2 usage error (unknown flag, bad value,
// figures too large to compute exactly), message on `err`; 3 the agent
// cannot be reached; 1 the agent answered an error or stats without the
// decision counters. Never throws.
int RunCostCommand(const std::vector<std::string>& args, const std::string& env_socket,
                   const FetchStatsFn& fetch_stats, std::ostream& out, std::ostream& err);

}  // namespace intentd::cli
