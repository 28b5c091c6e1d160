// Operations on intents: derive, freeze, begin, lookup, amend.
//
// freeze, begin and amend are one store call each: the payload is
// normalized once here (the candidate), and the store reads the intent
// under its own locks, writes the candidate if absent, else acts on the
// intent as frozen (IntentCandidate). Divergence is reported from what the
// store held: no divergence when the frozen payload is the candidate's byte
// for byte (the common redelivery), else field by field under the intent's
// own rules version. begin's on_divergence "reject" asks the store to act
// only on the candidate's own payload; on kConflict the fields are compared
// here and the call comes back with the key compared against
// (expected_key), so the comparison and the write can never disagree.
#include <algorithm>
#include <memory>
#include <vector>

#include "common/policy.h"
#include "protocol/anchor.h"
#include "protocol/ops.h"

namespace intentd::agent {
namespace {

constexpr int kMaxConflictRetries = 8;
constexpr char kRefField[] = "referencia_intencao";
// The payload as sent is kept with the intent (Intent::input): every member,
// bounded so that one intent cannot grow the store without limit.
constexpr size_t kMaxInputBytes = 16 * 1024;

bool Fail(OpError* error, ErrorCode code, std::string field, std::string message) {
  error->code = code;
  error->field = std::move(field);
  error->message = std::move(message);
  return false;
}

OpError FromNormalizers(const normalizers::Error& e) {
  OpError out;
  out.field = e.field;
  out.message = e.message;
  if (e.code == "missing_field")
    out.code = ErrorCode::kMissingField;
  else if (e.code == "unknown_action_type")
    out.code = ErrorCode::kUnknownActionType;
  else
    out.code = ErrorCode::kInvalidField;
  return out;
}

bool ListsField(const normalizers::ActionType& type, std::string_view name) {
  for (const auto& f : type.fields) {
    if (f.name == name) return true;
  }
  return false;
}

// The request's payload (absent or null: *present = false). A payload that is
// not an object is an argument error whatever the intent's state.
bool ReadPayload(const JsonView& request, bool required, JsonView* payload, bool* present,
                 OpError* error) {
  const JsonView value = request.find("payload");
  *present = !value.is_null();
  if (!*present) {
    if (required) {
      return Fail(error, ErrorCode::kMissingField, "payload",
                  "payload is required: a JSON object with the action type's fields");
    }
    return true;
  }
  if (!value.is_object()) {
    return Fail(error, ErrorCode::kInvalidField, "payload",
                "payload must be a JSON object with the action type's fields");
  }
  *payload = value;
  return true;
}

// A request's payload object as the key derivation reads it. With
// `ref_from` set, referencia_intencao reads as that text whatever the
// payload holds (FillIntentRef).
class RequestPayload : public normalizers::PayloadSource {
 public:
  RequestPayload(const JsonView& payload, const std::string* ref_from)
      : payload_(payload), ref_from_(ref_from) {}
  bool Find(std::string_view name, normalizers::FieldValue* out) const override {
    if (ref_from_ != nullptr && name == kRefField) {
      *out = normalizers::FieldValue{};
      out->type = normalizers::FieldValue::Type::kString;
      out->text = *ref_from_;
      return true;
    }
    const JsonView value = payload_.find(name);
    if (value.absent()) return false;
    *out = value.AsField();
    return true;
  }

 private:
  JsonView payload_;
  const std::string* ref_from_;
};

// Whether referencia_intencao is taken from intent_ref (*fill: the type lists
// it and the payload lacks it or holds null). Returns false when the
// payload's value differs from intent_ref after trimming.
bool FillIntentRef(const normalizers::ActionType& type, const std::string& intent_ref,
                   const JsonView& payload, bool* fill) {
  *fill = false;
  if (!ListsField(type, kRefField)) return true;
  const JsonView value = payload.find(kRefField);
  if (value.is_null()) {
    *fill = true;
    return true;
  }
  std::string given, expected;
  normalizers::Error ignored;
  if (!normalizers::NormalizeField(normalizers::FieldKind::kTrim, 1, value.AsField(), kRefField,
                                   &given, &ignored)) {
    return true;  // the derivation reports the bad value itself
  }
  normalizers::FieldValue ref;
  ref.type = normalizers::FieldValue::Type::kString;
  ref.text = intent_ref;
  normalizers::NormalizeField(normalizers::FieldKind::kTrim, 1, ref, kRefField, &expected,
                              &ignored);
  return given == expected;
}

// The listed fields of `payload` that are missing, invalid or different from
// the frozen intent under the intent's own rules version.
std::vector<std::string> DivergedFields(const normalizers::ActionType& type,
                                        const normalizers::PayloadSource& payload,
                                        bool ref_mismatch, const store::Intent& intent) {
  std::vector<std::string> fields;
  json frozen = json::parse(intent.payload, nullptr, false);
  for (const auto& f : type.fields) {
    if (f.name == kRefField && ref_mismatch) {
      fields.push_back(f.name);
      continue;
    }
    normalizers::FieldValue given;
    std::string normalized;
    normalizers::Error e;
    bool ok =
        payload.Find(f.name, &given) &&
        normalizers::NormalizeField(f.kind, intent.rules_version, given, f.name, &normalized, &e);
    auto fz = frozen.is_object() ? frozen.find(f.name) : frozen.end();
    if (!ok || !frozen.is_object() || fz == frozen.end() || !fz->is_string() ||
        fz->get_ref<const std::string&>() != normalized) {
      fields.push_back(f.name);
    }
  }
  return fields;
}

// What freeze, begin and amend share: the intent's identity and the new payload.
struct IntentArgs {
  std::string tenant_id;
  std::string intent_ref;
  const normalizers::ActionType* type = nullptr;
  JsonView payload;
  bool has_payload = false;
  bool fill_ref = false;  // referencia_intencao is taken from intent_ref
  bool ref_mismatch = false;

  RequestPayload Payload() const {
    return RequestPayload(payload, fill_ref ? &intent_ref : nullptr);
  }
};

bool HasFieldOfKind(const normalizers::ActionType& type, normalizers::FieldKind kind) {
  return std::any_of(type.fields.begin(), type.fields.end(),
                     [kind](const auto& f) { return f.kind == kind; });
}

bool MovesMoney(const normalizers::ActionType& type) {
  return HasFieldOfKind(type, normalizers::FieldKind::kMoney);
}

bool ReadIntentArgs(const OpContext& ctx, bool payload_required, IntentArgs* args, OpError* error) {
  if (!ReadTenant(ctx, &args->tenant_id, error)) return false;
  if (!ReadIntentRef(ctx.request, &args->intent_ref, error)) return false;
  if (!ReadActionType(ctx, &args->type, error)) return false;
  std::string drawn;
  if (ctx.config.strict_anchors && MovesMoney(*args->type) &&
      LooksDrawnInsideTheAttempt(args->intent_ref, &drawn)) {
    return Fail(error, ErrorCode::kInvalidField, "intent_ref",
                "intent_ref looks like " + drawn +
                    ", drawn inside the attempt: a redelivery would draw another and freeze a "
                    "new intent, with a new key (the double charge intentd prevents). Anchor on "
                    "a reference that exists before the model runs, such as the open invoice "
                    "found by the sender's number (the config's \"anchors\": \"strict\" refuses "
                    "these)");
  }
  if (!ReadPayload(ctx.request, payload_required, &args->payload, &args->has_payload, error)) {
    return false;
  }
  if (args->has_payload) {
    args->ref_mismatch =
        !FillIntentRef(*args->type, args->intent_ref, args->payload, &args->fill_ref);
  }
  return true;
}

// Derives the candidate intent for an absent intent under the agent's rules,
// and the daily allowances (the policy's) that freezing it draws on.
// The policy's part goes to *request: the allowances and the approval reason.
// A policy refusal names its rule in *refused_rule (counted in stats'
// policy_refusals by whoever answers it: see AnswerDeriveError).
bool DeriveCandidate(const OpContext& ctx, const IntentArgs& args, store::Intent* candidate,
                     normalizers::Derivation* derivation, store::IntentCandidate* request,
                     OpError* error, std::string* refused_rule) {
  request->allowances.clear();
  request->approval_reason.clear();
  refused_rule->clear();
  if (args.ref_mismatch) {
    return Fail(error, ErrorCode::kInvalidField, kRefField,
                std::string(kRefField) + " must equal intent_ref (after trimming) or be omitted");
  }
  normalizers::Error e;
  if (!ctx.keyring.current().Derive(args.tenant_id, *args.type, args.Payload(), ctx.rules_version,
                                    derivation, &e)) {
    *error = FromNormalizers(e);
    return false;
  }
  // The policy refuses what would be frozen; it judges only a candidate
  // the store writes (a frozen intent read back by a redelivery is acted on
  // whatever the policy says of the new extraction).
  if (const ActionPolicy* policy = FindPolicy(ctx.config.policy, args.type->name)) {
    PolicyRefusal refusal;
    if (!CheckPolicy(*policy, args.Payload(), *derivation, &refusal)) {
      if (!refusal.invalid_field) *refused_rule = refusal.rule;
      return Fail(error,
                  refusal.invalid_field ? ErrorCode::kInvalidField : ErrorCode::kPolicyRefused,
                  refusal.field, refusal.message);
    }
    PolicyAllowances(*policy, *derivation, &request->allowances);
    request->approval_reason = ApprovalReason(*policy, *derivation);
  }
  candidate->tenant_id = args.tenant_id;
  candidate->intent_ref = args.intent_ref;
  candidate->action_type = args.type->name;
  candidate->payload = PayloadText(*derivation);
  candidate->key = derivation->key;
  candidate->rules_version = derivation->rules_version;
  candidate->key_id = ctx.keyring.current_id();  // new intents: the current secret
  candidate->input.clear();
  AppendJson(args.payload, &candidate->input);
  if (candidate->input.size() > kMaxInputBytes) {
    return Fail(error, ErrorCode::kInvalidField, "payload",
                "payload is " + std::to_string(candidate->input.size()) +
                    " bytes as compact JSON; at most " + std::to_string(kMaxInputBytes) +
                    " are kept with the intent (send what the action needs, not whole "
                    "documents)");
  }
  return true;
}

// The store request of freeze and begin: the intent's identity and, when
// the payload derives, the candidate a new intent is frozen from. A payload
// that does not derive leaves no candidate: a redelivery of a frozen intent
// must work whatever the model extracted this time; *derive_error is
// answered only when the intent turns out to be absent.
void PrepareRequest(const OpContext& ctx, const IntentArgs& args, store::IntentCandidate* request,
                    OpError* derive_error, std::string* refused_rule) {
  request->tenant_id = args.tenant_id;
  request->intent_ref = args.intent_ref;
  request->action_type = args.type->name;
  request->expected_key.reset();
  request->candidate.reset();
  if (!args.has_payload) {
    request->allowances.clear();
    request->approval_reason.clear();
    return;
  }
  store::Intent candidate;
  normalizers::Derivation derivation;
  if (DeriveCandidate(ctx, args, &candidate, &derivation, request, derive_error, refused_rule)) {
    request->candidate = std::move(candidate);
  } else {
    request->allowances.clear();
    request->approval_reason.clear();
  }
}

// The answer when the store found no intent and the request had no
// candidate: why the payload did not derive, or that one is needed.
OpError AnswerDeriveError(const OpContext& ctx, const IntentArgs& args, const OpError& derive_error,
                          const std::string& refused_rule) {
  if (!args.has_payload) {
    OpError e;
    e.code = ErrorCode::kMissingField;
    e.field = "payload";
    e.message =
        "payload is required: this intent does not exist yet, so it must be frozen from a payload";
    return e;
  }
  if (!refused_rule.empty()) ctx.stats.policy_refusals.Add(refused_rule);
  return derive_error;
}

// The listed fields of the request's payload that differ from the frozen
// intent: none when it holds the candidate's payload byte for byte, else
// compared field by field under the intent's rules version.
std::vector<std::string> Divergence(const IntentArgs& args, const store::IntentCandidate& request,
                                    const store::Intent& frozen) {
  if (!args.has_payload || store::SameFrozenPayload(frozen, request)) return {};
  return DivergedFields(*args.type, args.Payload(), args.ref_mismatch, frozen);
}

// The policy_refused error for a store's kRefused answer (an allowance of
// the request would be passed); any other status as FromStore.
OpError FromFreeze(const OpContext& ctx, const store::Status& st,
                   const store::IntentCandidate& request, const store::AllowanceRefusal& refusal) {
  const ActionPolicy* policy = FindPolicy(ctx.config.policy, request.action_type);
  if (st.code() != store::Status::Code::kRefused || policy == nullptr ||
      refusal.index >= request.allowances.size()) {
    return FromStore(st);
  }
  const PolicyRefusal why = AllowanceRefused(*policy, request.allowances[refusal.index], refusal);
  ctx.stats.policy_refusals.Add(why.rule);
  OpError e;
  e.code = ErrorCode::kPolicyRefused;
  e.field = why.field;
  e.message = why.message;
  return e;
}

json ApprovalJson(const store::Approval& a) {
  json j = {{"state", store::ApprovalStateName(a.state)}, {"reason", a.reason}};
  if (a.state == store::ApprovalState::kApproved || a.state == store::ApprovalState::kDenied) {
    j["decided_by"] = a.decided_by;
    j["decided_at_ms"] = a.decided_at_ms;
    j["note"] = a.note;
  }
  return j;
}

// {"FIELD": "180.00", ...}: each money field of the action type in the
// frozen payload, in whole units. Clients hand these to providers, never
// the payload's cents (docs/protocol.md, "Intents": money).
std::string MoneyJson(const normalizers::ActionType& type, const json& frozen) {
  std::string out = "{";
  if (MovesMoney(type)) {
    for (const normalizers::FieldSpec& f : type.fields) {
      if (f.kind != normalizers::FieldKind::kMoney || !frozen.is_object()) continue;
      const auto it = frozen.find(f.name);
      if (it == frozen.end() || !it->is_string()) continue;
      if (out.size() > 1) out += ',';
      normalizers::AppendJsonString(f.name, &out);
      out += ':';
      normalizers::AppendJsonString(CentsAsUnits(it->get_ref<const std::string&>()), &out);
    }
  }
  out += '}';
  return out;
}

void AddIntentMembers(const store::Intent& intent, const normalizers::ActionType& type,
                      Reply* reply) {
  reply->Add("key", intent.key);
  reply->Add("txid", normalizers::TxidOfKey(intent.key));
  reply->AddRaw("payload", intent.payload);
  // null for an intent frozen before inputs were kept.
  reply->AddRaw("input", intent.input.empty() ? std::string_view("null") : intent.input);
  // One parse of the frozen payload for both members, only for action types
  // that have money or pix-key fields.
  json frozen;
  if (MovesMoney(type) || HasFieldOfKind(type, normalizers::FieldKind::kPixKey)) {
    frozen = json::parse(intent.payload, nullptr, /*allow_exceptions=*/false);
  }
  reply->AddRaw("money", MoneyJson(type, frozen));
  std::string key_types;
  AppendPixKeyTypes(type, frozen, intent.rules_version, &key_types);
  reply->AddRaw("pix_key_types", key_types);
  reply->Add("rules_version", intent.rules_version);
  reply->Add("key_id", intent.key_id);
  reply->Add("created_at_ms", intent.created_at_ms);
  // Only for an intent the policy held for approval: nothing changes for
  // the others (and for an agent without a policy).
  if (intent.approval.state != store::ApprovalState::kNone) {
    reply->Add("approval", ApprovalJson(intent.approval));
  }
}

void AddDivergence(const OpContext& ctx, bool created, const std::vector<std::string>& fields,
                   Reply* reply) {
  bool diverged = !created && !fields.empty();
  reply->Add("created", created);
  reply->Add("diverged", diverged);
  reply->Add("diverged_fields", diverged ? json(fields) : json::array());
  (created ? ctx.stats.intents_created : ctx.stats.intents_reused).fetch_add(1);
  if (diverged) ctx.stats.diverged.fetch_add(1);
}

std::string JoinFields(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : ", ") + f;
  return out;
}

}  // namespace

bool OpDerive(const OpContext& ctx, Reply* reply, OpError* error) {
  std::string tenant;
  const normalizers::ActionType* type = nullptr;
  JsonView payload;
  bool has_payload = false;
  if (!ReadTenant(ctx, &tenant, error) || !ReadActionType(ctx, &type, error) ||
      !ReadPayload(ctx.request, true, &payload, &has_payload, error)) {
    return false;
  }
  int version = ctx.rules_version;
  if (const JsonView given = ctx.request.find("rules_version"); !given.is_null()) {
    int64_t v = 0;
    if (!given.Int64(&v) || (v != 1 && v != 2)) {
      return Fail(error, ErrorCode::kInvalidField, "rules_version", "rules_version must be 1 or 2");
    }
    version = static_cast<int>(v);
  }
  // Any secret of the keyring, so that another service can reproduce the
  // key of an intent frozen before a rotation; the current one by default.
  std::string key_id = ctx.keyring.current_id();
  if (const JsonView given = ctx.request.find("key_id"); !given.is_null()) {
    if (!given.is_string() || !ctx.keyring.Has(given.string())) {
      std::string ids;
      for (const std::string& id : ctx.keyring.ids()) ids += (ids.empty() ? "" : ", ") + id;
      return Fail(error, ErrorCode::kInvalidField, "key_id",
                  "key_id must be the id of a secret in the agent's keyring (" + ids + ")");
    }
    key_id = std::string(given.string());
  }
  normalizers::Derivation d;
  normalizers::Error e;
  if (!ctx.keyring.Find(key_id)->Derive(tenant, *type, RequestPayload(payload, nullptr), version,
                                        &d, &e)) {
    *error = FromNormalizers(e);
    return false;
  }
  reply->Add("key", d.key);
  reply->Add("txid", d.txid);
  reply->AddRaw("payload", PayloadText(d));
  reply->Add("rules_version", d.rules_version);
  reply->Add("key_id", key_id);
  return true;
}

bool OpFreeze(const OpContext& ctx, Reply* reply, OpError* error) {
  IntentArgs args;
  if (!ReadIntentArgs(ctx, /*payload_required=*/true, &args, error)) return false;
  store::IntentCandidate request;
  OpError derive_error;
  std::string refused_rule;
  PrepareRequest(ctx, args, &request, &derive_error, &refused_rule);
  store::FreezeResult result;
  const store::Status st = ctx.store.Freeze(request, &result);
  if (st.code() == store::Status::Code::kNotFound && !request.candidate) {
    *error = AnswerDeriveError(ctx, args, derive_error, refused_rule);
    return false;
  }
  if (!st.ok()) {
    *error = FromFreeze(ctx, st, request, result.refusal);
    return false;
  }
  AddIntentMembers(result.intent, *args.type, reply);
  AddDivergence(
      ctx, result.created,
      result.created ? std::vector<std::string>() : Divergence(args, request, result.intent),
      reply);
  return true;
}

namespace {

// A begin, from its arguments to its answer.
struct BeginCall {
  IntentArgs args;
  int64_t lease_ms = 0;
  store::IntentCandidate request;
  OpError derive_error;
  std::string refused_rule;
  std::vector<std::string> diverged;
  bool compared = false;  // diverged holds the comparison with result.intent
  store::BeginResult result;
};

bool ReadBegin(const OpContext& ctx, BeginCall* call, OpError* error) {
  if (!ReadIntentArgs(ctx, /*payload_required=*/false, &call->args, error)) return false;
  if (!ReadLeaseMs(ctx.request, &call->lease_ms, error)) return false;
  bool reject = false;
  if (const JsonView given = ctx.request.find("on_divergence"); !given.is_null()) {
    if (!given.is_string() || (given.string() != "use_frozen" && given.string() != "reject")) {
      return Fail(error, ErrorCode::kInvalidField, "on_divergence",
                  "on_divergence must be \"use_frozen\" (the default) or \"reject\"");
    }
    reject = given.string() == "reject";
  }
  PrepareRequest(ctx, call->args, &call->request, &call->derive_error, &call->refused_rule);
  call->request.require_same_payload = reject;
  return true;
}

// The answer to a begin the store decided (call->result).
void AnswerBegin(const OpContext& ctx, BeginCall* call, Reply* reply) {
  const IntentArgs& args = call->args;
  const store::BeginResult& result = call->result;
  if (!call->compared && !result.created) {
    call->diverged = Divergence(args, call->request, result.intent);
  }
  const store::Action& a = result.action;
  reply->Add("decision", store::DecisionName(result.decision));
  AddIntentMembers(result.intent, *args.type, reply);
  AddDivergence(ctx, result.created, call->diverged, reply);
  reply->Add("attempt", a.attempt);
  ctx.stats.CountBegin(args.tenant_id, result.intent.action_type,
                       static_cast<size_t>(result.decision));
  ctx.stats.prevented.Count(result.intent.action_type, result.decision, a.status,
                            result.intent.payload);
  if (result.decision == store::Decision::kExecute ||
      result.decision == store::Decision::kRecover) {
    ctx.stats.leases.Granted(args.tenant_id, result.intent.key, a.lease_until_ms,
                             ctx.clock.NowMs());
  }
  switch (result.decision) {
    case store::Decision::kExecute:
      reply->Add("lease_token", a.lease_token);
      reply->Add("lease_until_ms", a.lease_until_ms);
      break;
    case store::Decision::kRecover:
      reply->Add("lease_token", a.lease_token);
      reply->Add("lease_until_ms", a.lease_until_ms);
      reply->Add("previous_lease_token", result.previous_lease_token);
      break;
    case store::Decision::kInFlight:
      reply->Add("retry_after_ms", result.retry_after_ms);
      reply->Add("lease_until_ms", a.lease_until_ms);
      break;
    case store::Decision::kReplay:
      reply->Add("status", store::ActionStatusName(a.status));
      if (a.status == store::ActionStatus::kCompleted)
        reply->AddRaw("response", a.response);
      else
        reply->AddRaw("error", a.error.empty() ? "null" : a.error);
      break;
    case store::Decision::kPendingApproval:
      break;  // nothing granted; "approval" says why and who may decide
  }
}

// The store's decision on call->request (call->result), through OpBegin's
// retries; `first`, when set, makes the first store call instead of Begin
// (the rest of a started write: Store::WriteDone). False with *error when
// the op fails.
bool DecideBegin(const OpContext& ctx, BeginCall* call, const store::Store::Rest& first,
                 OpError* error) {
  const IntentArgs& args = call->args;
  store::IntentCandidate& request = call->request;
  store::BeginResult& result = call->result;
  for (int attempt = 0;; ++attempt) {
    const store::Status st =
        attempt == 0 && first ? first() : ctx.store.Begin(request, call->lease_ms, &result);
    if (st.ok()) return true;
    if (st.code() == store::Status::Code::kNotFound && !request.candidate) {
      *error = AnswerDeriveError(ctx, args, call->derive_error, call->refused_rule);
      return false;
    }
    if (st.code() != store::Status::Code::kConflict || attempt == kMaxConflictRetries) {
      *error = FromFreeze(ctx, st, request, result.refusal);
      return false;
    }
    // "reject": the frozen payload is not the candidate's (or it changed
    // since it was compared). Compare it field by field; act on it only
    // when no listed field differs (a payload frozen under older rules).
    if (result.intent.key.empty()) {  // gone meanwhile (retention): freeze anew
      request.expected_key.reset();
      continue;
    }
    call->diverged = DivergedFields(*args.type, args.Payload(), args.ref_mismatch, result.intent);
    if (!call->diverged.empty()) {
      return Fail(error, ErrorCode::kPayloadMismatch, "payload",
                  "the payload differs from the frozen intent in: " + JoinFields(call->diverged) +
                      "; nothing was changed (use amend to correct a frozen intent, or "
                      "on_divergence \"use_frozen\")");
    }
    request.expected_key = result.intent.key;
    call->compared = true;
  }
}

}  // namespace

bool OpBegin(const OpContext& ctx, Reply* reply, OpError* error) {
  BeginCall call;
  if (!ReadBegin(ctx, &call, error) || !DecideBegin(ctx, &call, nullptr, error)) return false;
  AnswerBegin(ctx, &call, reply);
  return true;
}

bool StartBegin(const OpContext& ctx, AsyncAnswer* answer, StartDone done) {
  auto call = std::make_shared<BeginCall>();
  OpError error;
  if (!ReadBegin(ctx, call.get(), &error)) return false;  // OpBegin answers the error
  // A new intent's first attempt, written by the store's statement...
  auto written = [&ctx, call](const store::Status& st, AsyncAnswer* out) {
    if (!st.ok()) {
      out->error = FromFreeze(ctx, st, call->request, call->result.refusal);
      return;
    }
    AnswerBegin(ctx, call.get(), &out->reply);
    out->ok = true;
  };
  // ...or, when the store leaves the rest (a redelivery), OpBegin's retries
  // after it (a conflict under "reject").
  auto rest = [&ctx, call](const store::Store::Rest& first, AsyncAnswer* out) {
    if (!DecideBegin(ctx, call.get(), first, &out->error)) return;
    AnswerBegin(ctx, call.get(), &out->reply);
    out->ok = true;
  };
  return ctx.store.BeginAsync(call->request, call->lease_ms, &call->result,
                              AnswerWhenWritten("begin", answer, std::move(done), written, rest));
}

bool OpLookup(const OpContext& ctx, Reply* reply, OpError* error) {
  std::string tenant, ref;
  const normalizers::ActionType* type = nullptr;
  if (!ReadTenant(ctx, &tenant, error) || !ReadIntentRef(ctx.request, &ref, error) ||
      !ReadActionType(ctx, &type, error)) {
    return false;
  }
  store::LookupResult result;
  store::Status st = ctx.store.Lookup(tenant, ref, type->name, &result);
  if (st.code() == store::Status::Code::kNotFound) {
    reply->Add("found", false);
    return true;
  }
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  reply->Add("found", true);
  AddIntentMembers(result.intent, *type, reply);
  reply->Add("action", result.action ? ActionJson(*result.action) : json(nullptr));
  return true;
}

bool OpAmend(const OpContext& ctx, Reply* reply, OpError* error) {
  IntentArgs args;
  if (!ReadIntentArgs(ctx, /*payload_required=*/true, &args, error)) return false;
  bool force = false;
  if (!ReadOptionalBool(ctx.request, "force", false, &force, error)) return false;
  if (!ctx.access.admin()) {
    return Fail(error, ErrorCode::kForbidden, "",
                "amend needs admin rights; ask the operator to mark your user admin in the "
                "access rules");
  }
  store::IntentCandidate request;
  request.tenant_id = args.tenant_id;
  request.intent_ref = args.intent_ref;
  request.action_type = args.type->name;
  normalizers::Derivation derivation;
  store::Intent candidate;
  std::string refused_rule;
  if (!DeriveCandidate(ctx, args, &candidate, &derivation, &request, error, &refused_rule)) {
    if (!refused_rule.empty()) ctx.stats.policy_refusals.Add(refused_rule);
    return false;
  }
  request.candidate = std::move(candidate);
  // One store call: it amends whatever intent is frozen (no expected_key).
  store::AmendResult result;
  const store::Status st = ctx.store.Amend(request, force, &result);
  if (!st.ok()) {
    *error = FromFreeze(ctx, st, request, result.refusal);
    if (st.code() == store::Status::Code::kNotFound) {
      error->message =
          "no intent with this tenant_id, intent_ref and action_type; use freeze "
          "or begin to create it";
    } else if (st.code() == store::Status::Code::kInvalidState) {
      error->message = st.message() +
                       "; amend only intents whose charge has not started or completed, or pass "
                       "force true after reconciling with the provider";
    }
    return false;
  }
  reply->Add("previous_key", result.previous_key);
  AddIntentMembers(result.intent, *args.type, reply);
  return true;
}

namespace {

// approve and deny: an admin's decision on a pending intent.
bool DecideOp(const OpContext& ctx, bool approve, Reply* reply, OpError* error) {
  std::string tenant, ref;
  const normalizers::ActionType* type = nullptr;
  if (!ReadTenant(ctx, &tenant, error) || !ReadIntentRef(ctx.request, &ref, error) ||
      !ReadActionType(ctx, &type, error)) {
    return false;
  }
  std::string note;
  if (const JsonView given = ctx.request.find("note"); !given.is_null()) {
    if (!given.is_string() || given.string().size() > 1024) {
      return Fail(error, ErrorCode::kInvalidField, "note",
                  "note must be a string of at most 1024 bytes (why, for the record)");
    }
    note = std::string(given.string());
  }
  if (!ctx.access.admin()) {
    return Fail(error, ErrorCode::kForbidden, "",
                std::string(approve ? "approve" : "deny") +
                    " needs admin rights: a bot must not decide its own approvals; ask the "
                    "operator");
  }
  const std::string who = ctx.access.who();
  json failure = {{"code", "denied"},
                  {"message", "denied by " + who + (note.empty() ? "" : ": " + note)}};
  store::LookupResult result;
  store::Status st = ctx.store.DecideApproval(tenant, ref, type->name, approve, who, note,
                                              failure.dump(), &result);
  if (!st.ok()) {
    *error = FromStore(st);
    if (st.code() == store::Status::Code::kNotFound) {
      error->message = "no intent with this tenant_id, intent_ref and action_type";
    }
    return false;
  }
  AddIntentMembers(result.intent, *type, reply);
  reply->Add("action", result.action ? ActionJson(*result.action) : json(nullptr));
  return true;
}

}  // namespace

bool OpApprove(const OpContext& ctx, Reply* reply, OpError* error) {
  return DecideOp(ctx, /*approve=*/true, reply, error);
}

bool OpDeny(const OpContext& ctx, Reply* reply, OpError* error) {
  return DecideOp(ctx, /*approve=*/false, reply, error);
}

bool OpPending(const OpContext& ctx, Reply* reply, OpError* error) {
  std::optional<std::string> tenant;
  size_t limit = 0;
  if (!ReadListing(ctx, &tenant, &limit, error)) return false;
  std::vector<store::Intent> intents;
  store::Status st = FetchListing(
      ctx, tenant, limit,
      [&](const std::optional<std::string>& t, size_t n, std::vector<store::Intent>* out) {
        return ctx.store.PendingApprovals(t, n, out);
      },
      [](const store::Intent& a, const store::Intent& b) {
        return a.created_at_ms < b.created_at_ms;
      },
      &intents);
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  const int64_t now = ctx.clock.NowMs();
  json list = json::array();
  for (const store::Intent& i : intents) {
    const normalizers::ActionType* type = ctx.config.catalog.Find(i.action_type);
    json frozen = json::parse(i.payload, nullptr, /*allow_exceptions=*/false);
    list.push_back(
        {{"tenant_id", i.tenant_id},
         {"intent_ref", i.intent_ref},
         {"action_type", i.action_type},
         {"key", i.key},
         {"money", type ? json::parse(MoneyJson(*type, frozen)) : json::object()},
         {"input", i.input.empty() ? json(nullptr) : json::parse(i.input, nullptr, false)},
         {"reason", i.approval.reason},
         {"created_at_ms", i.created_at_ms},
         {"waiting_ms", now - i.created_at_ms}});
  }
  reply->Add("intents", list);
  return true;
}

}  // namespace intentd::agent
