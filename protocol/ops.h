// Internal to the agent: the request context, argument readers and the
// operations behind the Dispatcher. Includes nlohmann/json.hpp, so only the
// few files that implement operations include it.
#pragma once

#include <algorithm>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/keyring.h"
#include "normalizers/key_derivation.h"
#include "protocol/access.h"
#include "protocol/dispatcher.h"
#include "protocol/protocol.h"
#include "protocol/request_line.h"
#include "protocol/stats.h"
#include "store/clock.h"
#include "store/store.h"

namespace intentd::agent {

using nlohmann::json;

struct OpError {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string field;
};

// An op's outcome when its write ran without a thread waiting (StartFn).
struct AsyncAnswer {
  bool ok = false;
  Reply reply;    // ok
  OpError error;  // !ok
};

// What an op that threw answers (its message goes to the log only).
OpError InternalError(std::string_view op, const std::exception& e);

// The store's callback for a StartFn (dispatcher.cc): fill(status, answer)
// writes the op's outcome, then done(nullptr). When the store left the
// rest of the write to a thread that may block (Store::WriteDone's
// `rest`), done(job) instead; job() calls finish(rest, answer), or
// fill(rest(), answer) when `finish` is empty. An internal error if either
// throws.
using FillAnswer = std::function<void(const store::Status& status, AsyncAnswer* answer)>;
using FinishAnswer = std::function<void(const store::Store::Rest& rest, AsyncAnswer* answer)>;
store::Store::WriteDone AnswerWhenWritten(std::string_view op, AsyncAnswer* answer, StartDone done,
                                          FillAnswer fill, FinishAnswer finish = nullptr);

// Everything an operation needs. One per request.
struct OpContext {
  const JsonView& request;
  const Access& access;
  const Config& config;
  const Keyring& keyring;
  store::Store& store;
  const store::Clock& clock;
  Stats& stats;
  int rules_version;  // the agent's, for new intents and amend
};

// The metrics text (ops_admin.cc). Tenant-labelled series only when
// `with_tenants` (the config enables them and the caller is an admin).
// Which tenants' per-tenant series a reader may see; empty: none.
using TenantFilter = std::function<bool(const std::string& tenant_id)>;
std::string RenderMetrics(const OpContext& ctx, const TenantFilter& with_tenants);

// Argument readers (arguments.cc). Each reports the argument's name as the
// error field and says what to send instead.
bool ReadTenant(const OpContext& ctx, std::string* out, OpError* error);  // also checks access
bool ReadIntentRef(const JsonView& request, std::string* out, OpError* error);
bool ReadActionType(const OpContext& ctx, const normalizers::ActionType** out, OpError* error);
bool ReadKey(const JsonView& request, std::string* out, OpError* error);
bool ReadLeaseToken(const JsonView& request, int64_t* out, OpError* error);
bool ReadLeaseMs(const JsonView& request, int64_t* out, OpError* error);

// A listing's arguments (uncertain, pending): tenant_id (absent: every
// tenant, admin only) and limit (1..1000, default 100).
bool ReadListing(const OpContext& ctx, std::optional<std::string>* tenant, size_t* limit,
                 OpError* error);
// Runs fetch(tenant, limit, &rows) for the listing: once for one tenant or,
// for an admin of every tenant, for all (nullopt); for an admin of some
// tenants, once per tenant, merged by `older` (oldest first) and cut to
// limit.
template <typename Row, typename Fetch, typename Older>
store::Status FetchListing(const OpContext& ctx, const std::optional<std::string>& tenant,
                           size_t limit, Fetch fetch, Older older, std::vector<Row>* rows) {
  if (tenant || ctx.access.all_tenants()) return fetch(tenant, limit, rows);
  for (const std::string& t : ctx.access.tenants()) {
    std::vector<Row> some;
    store::Status st = fetch(t, limit, &some);
    if (!st.ok()) return st;
    rows->insert(rows->end(), some.begin(), some.end());
  }
  std::stable_sort(rows->begin(), rows->end(), older);
  if (rows->size() > limit) rows->resize(limit);
  return store::Status::Ok();
}
bool ReadOptionalBool(const JsonView& request, const char* name, bool fallback, bool* out,
                      OpError* error);
// A required JSON value of any type (null too) whose compact form is at most
// 32 KiB; *out is that compact form.
bool ReadResultValue(const JsonView& request, const char* name, std::string* out, OpError* error);

// Maps a store status to a protocol error (storage errors are logged).
OpError FromStore(const store::Status& status);

// The action record as the protocol shows it.
json ActionJson(const store::Action& action);
// The normalized payload as a JSON object.
json PayloadJson(const normalizers::Derivation& derivation);

// True when `text` is empty or only code points of the contract's strip set.
bool IsBlank(std::string_view text);

}  // namespace intentd::agent
