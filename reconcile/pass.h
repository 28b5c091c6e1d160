// One reconcile pass: every uncertain action (started, lease expired) of an
// action type with a provider configured is asked about at its provider,
// and a definite answer is recorded through the agent's protocol:
//
//   provider says                       recorded
//   executed (200 with the charge)      complete, the charge as the response
//   not executed (404)                  fail retriable: released, the next
//                                       begin executes with the same key/txid
//   failed (a hook's "failed")          fail, terminal
//   unknown (401/403, 5xx, timeouts,    nothing: no lease taken, nothing
//   TLS errors, bad answers)            written; asked again after a backoff
//
// A definite answer is recorded under the lease of a begin (the same fencing
// as a bot's recover: a live attempt is never overtaken, and a worker that
// comes back with its old token gets lease_lost). An answer other than
// "executed" is asked again once that lease is held, and only that second
// answer is recorded: the first may predate an attempt that acted since.
// (A charge that exists stays so.) If the second cannot be had, nothing is
// recorded and the reconciler's lease runs out.
//
// The pass talks to the agent only through the protocol (CallFn), so the
// same code runs in `intentd reconcile --once` (over the socket) and in
// `serve --reconcile-every` (inside the agent). Its complete and fail carry
// "reconciled": true, which the agent counts (intentd_reconciled_total).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/limits.h"
#include "reconcile/config.h"
#include "reconcile/provider.h"

namespace intentd::reconcile {

// Sends one request line (compact JSON, without '\n') to the agent and
// reads its response line. False with *error when the agent cannot be
// reached (or the connection broke).
using CallFn =
    std::function<bool(const std::string& request, std::string* response, std::string* error)>;

struct PassOptions {
  std::optional<std::string> tenant_id;   // nullopt: every tenant (admin)
  int limit = protocol::kDefaultListing;  // actions listed per pass, 1..kMaxListing
  bool dry_run = false;                   // ask the providers, record nothing, take no lease
  // The lease a pass takes to record a definite answer (and to ask again
  // under it), at least the provider's slowest answer plus 5 s.
  int64_t lease_ms = 60000;
  // Asked between actions: true ends the pass early (the agent stopping).
  std::function<bool()> stop;
};

// Whether `cause` is one of the providers' (reconcile/provider.h kCauses):
// the provider was asked and could not answer.
bool IsProviderCause(const std::string& cause);

// What happened to one listed action.
struct ActionResult {
  ActionInfo action;
  std::string provider;       // "pix_api", "command", or "" when the type has none configured
  std::string provider_said;  // the provider's answer in short, "" when not asked
  // "completed", "released", "failed": recorded (with dry_run: what would be);
  // "nothing": left uncertain (cause says why); "skipped": someone else
  // resolved or holds it now (cause: the begin decision).
  std::string recorded;
  std::string cause;   // with "nothing"/"skipped": why (a provider cause, or see pass.cc)
  std::string detail;  // one human line
};

struct PassResult {
  std::vector<ActionResult> actions;
  // Actions still uncertain after the pass: those left "nothing" or
  // amended, and those beyond the limit (with dry_run: every one listed).
  size_t left_uncertain = 0;
  // The pass could not list (or the agent went away): why. Then `actions`
  // holds what was done before.
  std::string agent_error;
  bool agent_unreachable = false;
};

class Reconciler {
 public:
  // Builds each type's provider (MakeProvider: reads the secret and
  // certificate files now). False with *error naming the type at fault.
  static bool Create(const std::vector<TypeSettings>& settings, std::unique_ptr<Reconciler>* out,
                     std::string* error);

  // One pass: lists up to protocol::kMaxListing uncertain actions (oldest
  // lease first) and asks about at most options.limit of those with a provider. Between
  // passes of one Reconciler (serve --reconcile-every), an action whose
  // provider answered unknown is asked again after a backoff (30 s doubling
  // to 1 h, reset by an answer), and a provider that said Retry-After is not
  // asked before then; each `intentd reconcile --once` starts afresh. Not
  // thread-safe: one pass at a time.
  PassResult RunPass(const CallFn& call, const PassOptions& options);

  bool empty() const { return providers_.empty(); }

 private:
  struct Configured {
    std::string kind;  // "pix_api" or "command"
    std::unique_ptr<Provider> provider;
    int64_t min_lease_ms = 0;  // the provider's slowest answer, plus 5 s
  };
  using Clock = std::chrono::steady_clock;
  struct Backoff {
    Clock::time_point next;
    int failures = 0;
  };

  ActionResult Reconcile(const CallFn& call, const PassOptions& options,
                         const std::string& listed_json, bool* unreachable);

  std::map<std::string, Configured> providers_;      // by action type
  std::map<std::string, Backoff> backoff_;           // by tenant_id '\0' key
  std::map<std::string, Clock::time_point> paused_;  // by action type: Retry-After
};

}  // namespace intentd::reconcile
