// Operations on actions (complete, fail, renew, status, uncertain) and on the
// agent itself (ping, stats).
#include <algorithm>
#include <memory>

#include "protocol/dispatcher.h"
#include "protocol/ops.h"

namespace intentd::agent {
namespace {

bool Fail(OpError* error, ErrorCode code, std::string field, std::string message) {
  error->code = code;
  error->field = std::move(field);
  error->message = std::move(message);
  return false;
}

struct LeaseArgs {
  std::string tenant_id;
  std::string key;
  int64_t lease_token = 0;
};

bool ReadLeaseArgs(const OpContext& ctx, LeaseArgs* args, OpError* error) {
  return ReadTenant(ctx, &args->tenant_id, error) && ReadKey(ctx.request, &args->key, error) &&
         ReadLeaseToken(ctx.request, &args->lease_token, error);
}

// complete and fail written by `intentd reconcile` carry "reconciled": true
// (counted apart; anything else in that member is ignored like any other
// unknown member).
bool Reconciled(const OpContext& ctx) {
  const JsonView value = ctx.request.find("reconciled");
  return value.is_bool() && value.boolean();
}

// Store errors of the lease operations, with what to do about them.
OpError LeaseError(const OpContext& ctx, const store::Status& st) {
  OpError e = FromStore(st);
  if (e.code == ErrorCode::kLeaseLost) {
    ctx.stats.lease_lost.fetch_add(1);
    e.field = "lease_token";
    e.message += "; a newer attempt holds the lease: stop, and do not report this outcome";
  } else if (e.code == ErrorCode::kNotFound) {
    e.field = "key";
    e.message = "no action with this tenant_id and key; call begin first";
  } else if (e.code == ErrorCode::kInvalidState) {
    e.field = "lease_token";
  }
  return e;
}

}  // namespace

namespace {

// A complete, from its arguments to its answer.
struct CompleteCall {
  LeaseArgs args;
  std::string response;
  store::Action action;
};

bool ReadComplete(const OpContext& ctx, CompleteCall* call, OpError* error) {
  return ReadLeaseArgs(ctx, &call->args, error) &&
         ReadResultValue(ctx.request, "response", &call->response, error);
}

// The answer to a complete the store applied (call->action).
void AnswerComplete(const OpContext& ctx, const CompleteCall& call, Reply* reply) {
  ctx.stats.completed.fetch_add(1);
  if (Reconciled(ctx)) ctx.stats.reconciled[0].fetch_add(1);
  ctx.stats.leases.Ended(call.args.tenant_id, call.args.key);
  reply->Add("status", store::ActionStatusName(call.action.status));
}

}  // namespace

bool OpComplete(const OpContext& ctx, Reply* reply, OpError* error) {
  CompleteCall call;
  if (!ReadComplete(ctx, &call, error)) return false;
  const LeaseArgs& args = call.args;
  store::Status st =
      ctx.store.Complete(args.tenant_id, args.key, args.lease_token, call.response, &call.action);
  if (!st.ok()) {
    *error = LeaseError(ctx, st);
    return false;
  }
  AnswerComplete(ctx, call, reply);
  return true;
}

bool StartComplete(const OpContext& ctx, AsyncAnswer* answer, StartDone done) {
  auto call = std::make_shared<CompleteCall>();
  OpError error;
  if (!ReadComplete(ctx, call.get(), &error)) return false;  // OpComplete answers the error
  const LeaseArgs& args = call->args;
  return ctx.store.CompleteAsync(
      args.tenant_id, args.key, args.lease_token, call->response, &call->action,
      AnswerWhenWritten("complete", answer, std::move(done),
                        [&ctx, call](const store::Status& st, AsyncAnswer* out) {
                          if (!st.ok()) {
                            out->error = LeaseError(ctx, st);
                            return;
                          }
                          AnswerComplete(ctx, *call, &out->reply);
                          out->ok = true;
                        }));
}

bool OpFail(const OpContext& ctx, Reply* reply, OpError* error) {
  LeaseArgs args;
  std::string err;
  if (!ReadLeaseArgs(ctx, &args, error) || !ReadResultValue(ctx.request, "error", &err, error)) {
    return false;
  }
  const JsonView retriable_value = ctx.request.find("retriable");
  if (retriable_value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "retriable",
                "retriable is required: true when the provider surely did not act (the next "
                "attempt may execute), false for a terminal failure");
  }
  if (!retriable_value.is_bool()) {
    return Fail(error, ErrorCode::kInvalidField, "retriable", "retriable must be true or false");
  }
  const bool retriable = retriable_value.boolean();
  store::Action action;
  store::Status st =
      ctx.store.Fail(args.tenant_id, args.key, args.lease_token, err, retriable, &action);
  if (!st.ok()) {
    *error = LeaseError(ctx, st);
    return false;
  }
  (retriable ? ctx.stats.released : ctx.stats.failed).fetch_add(1);
  if (Reconciled(ctx)) ctx.stats.reconciled[retriable ? 1 : 2].fetch_add(1);
  ctx.stats.leases.Ended(args.tenant_id, args.key);
  reply->Add("status", store::ActionStatusName(action.status));
  return true;
}

bool OpRenew(const OpContext& ctx, Reply* reply, OpError* error) {
  LeaseArgs args;
  int64_t lease_ms = 0;
  if (!ReadLeaseArgs(ctx, &args, error) || !ReadLeaseMs(ctx.request, &lease_ms, error)) {
    return false;
  }
  store::Action action;
  store::Status st = ctx.store.Renew(args.tenant_id, args.key, args.lease_token, lease_ms, &action);
  if (!st.ok()) {
    *error = LeaseError(ctx, st);
    return false;
  }
  ctx.stats.leases.Granted(args.tenant_id, args.key, action.lease_until_ms, ctx.clock.NowMs());
  reply->Add("lease_until_ms", action.lease_until_ms);
  return true;
}

bool OpStatus(const OpContext& ctx, Reply* reply, OpError* error) {
  std::string tenant, key;
  if (!ReadTenant(ctx, &tenant, error) || !ReadKey(ctx.request, &key, error)) return false;
  store::Action action;
  store::Status st = ctx.store.GetAction(tenant, key, &action);
  if (!st.ok()) {
    *error = FromStore(st);
    if (error->code == ErrorCode::kNotFound) {
      error->field = "key";
      error->message =
          "no action with this tenant_id and key (an intent without a begin has "
          "none; see lookup)";
    }
    return false;
  }
  reply->Add("action", ActionJson(action));
  return true;
}

bool OpUncertain(const OpContext& ctx, Reply* reply, OpError* error) {
  std::optional<std::string> tenant;
  size_t limit = 0;
  if (!ReadListing(ctx, &tenant, &limit, error)) return false;
  std::vector<store::Action> actions;
  store::Status st = FetchListing(
      ctx, tenant, limit,
      [&](const std::optional<std::string>& t, size_t n, std::vector<store::Action>* out) {
        return ctx.store.Uncertain(t, n, out);
      },
      [](const store::Action& a, const store::Action& b) {
        return a.lease_until_ms < b.lease_until_ms;
      },
      &actions);
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  const int64_t now = ctx.clock.NowMs();
  json list = json::array();
  for (const store::Action& a : actions) {
    list.push_back({{"tenant_id", a.tenant_id},
                    {"key", a.key},
                    {"intent_ref", a.intent_ref},
                    {"action_type", a.action_type},
                    {"attempt", a.attempt},
                    {"lease_token", a.lease_token},
                    {"lease_until_ms", a.lease_until_ms},
                    {"created_at_ms", a.created_at_ms},
                    {"updated_at_ms", a.updated_at_ms},
                    {"expired_for_ms", now - a.lease_until_ms}});
  }
  reply->Add("actions", list);
  return true;
}

bool OpPing(const OpContext& ctx, Reply* reply, OpError* error) {
  reply->Add("version", std::string(kSoftwareVersion));
  reply->Add("protocol", kProtocolVersion);
  reply->Add("rules_version", ctx.rules_version);
  return true;
}

bool OpStats(const OpContext& ctx, Reply* reply, OpError* error) {
  const Stats& s = ctx.stats;
  reply->Add("intents_created", s.intents_created.load());
  reply->Add("intents_reused", s.intents_reused.load());
  reply->Add("diverged", s.diverged.load());
  json decisions = json::object();
  for (size_t i = 0; i < store::kDecisionCount; ++i) {
    decisions[std::string(store::kDecisions[i].name)] = s.decisions[i].load();
  }
  reply->Add("decisions", decisions);
  reply->Add("completed", s.completed.load());
  reply->Add("failed", s.failed.load());
  reply->Add("released", s.released.load());
  reply->Add("lease_lost", s.lease_lost.load());
  reply->Add("seen", json{{"first", s.seen_first.load()},
                          {"duplicates", s.seen_duplicates.load()},
                          {"reclaimed", s.seen_reclaimed.load()},
                          {"released", s.seen_released.load()}});
  reply->Add("prevented", s.prevented.Json());
  json errors = json::object();
  for (size_t i = 0; i < kErrorCodeCount; ++i) {
    errors[std::string(kErrorCodeNames[i])] = s.errors[i].load();
  }
  reply->Add("errors", errors);
  reply->Add("connections", s.connections.load());
  reply->Add("connections_total", s.connections_total.load());
  reply->Add("requests", s.requests.load());
  reply->Add("uptime_ms", ctx.clock.NowMs() - s.started_at_ms);
  return true;
}

}  // namespace intentd::agent
