// The socket protocol's vocabulary (docs/protocol.md): its version, the
// error codes, the writer of response lines, and the ops with how the agent
// runs each. tests/docs/protocol_doc_test.py reads the op names and the error
// codes from this file (begin's decisions from store/decision.h) and checks
// that the document describes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "normalizers/key_derivation.h"

namespace intentd::agent {

inline constexpr int kProtocolVersion = 1;

// The protocol's error codes (docs/protocol.md, "Error codes"), in the order
// of its list: each row is the enumerator and the name sent in
// "error":{"code":...}. ErrorCode, kErrorCodeCount and ErrorCodeName are all
// made from this one list, so that they cannot disagree.
#define INTENTD_ERROR_CODES(X)                 \
  X(kBadRequest, "bad_request")                \
  X(kFrameTooLarge, "frame_too_large")         \
  X(kUnknownOp, "unknown_op")                  \
  X(kUnknownActionType, "unknown_action_type") \
  X(kMissingField, "missing_field")            \
  X(kInvalidField, "invalid_field")            \
  X(kPayloadMismatch, "payload_mismatch")      \
  X(kNotFound, "not_found")                    \
  X(kLeaseLost, "lease_lost")                  \
  X(kInvalidState, "invalid_state")            \
  X(kForbidden, "forbidden")                   \
  X(kOverloaded, "overloaded")                 \
  X(kStorageError, "storage_error")            \
  X(kShuttingDown, "shutting_down")            \
  X(kInternal, "internal")                     \
  X(kPolicyRefused, "policy_refused")

enum class ErrorCode {
#define INTENTD_ERROR_CODE_ENUMERATOR(code, name) code,
  INTENTD_ERROR_CODES(INTENTD_ERROR_CODE_ENUMERATOR)
#undef INTENTD_ERROR_CODE_ENUMERATOR
};
inline constexpr std::string_view kErrorCodeNames[] = {
#define INTENTD_ERROR_CODE_NAME(code, name) name,
    INTENTD_ERROR_CODES(INTENTD_ERROR_CODE_NAME)
#undef INTENTD_ERROR_CODE_NAME
};
inline constexpr size_t kErrorCodeCount = std::size(kErrorCodeNames);
constexpr std::string_view ErrorCodeName(ErrorCode code) {
  return kErrorCodeNames[static_cast<size_t>(code)];
}

// begin's decisions and their names belong to the store: store/decision.h
// (kDecisions, in store::Decision's order).

class JsonView;  // protocol/request_line.h

// Appends `value` as compact JSON text, exactly as json::dump with the
// replace error handler writes it (an object's members sorted by name), for
// the request's values that a reply echoes (a payload, a stored response).
void AppendJson(const JsonView& value, std::string* out);
void AppendJson(const nlohmann::json& value, std::string* out);

// Integer cents as decimal text in whole units with two fraction digits:
using normalizers::CentsAsUnits;

// The success members of a response, written as JSON text in order.
class Reply {
 public:
  // begin's members take ~450 bytes (446 for the load generator's begin):
  // one allocation, not five doublings.
  Reply() { body_.reserve(512); }
  void Add(std::string_view key, const nlohmann::json& value);
  // The same text as Add(key, json(value)), without the json temporary.
  void Add(std::string_view key, std::string_view text);
  void Add(std::string_view key, const std::string& text) { Add(key, std::string_view(text)); }
  void Add(std::string_view key, const char* text) { Add(key, std::string_view(text)); }
  void Add(std::string_view key, bool value);
  void Add(std::string_view key, int64_t value);
  void Add(std::string_view key, uint64_t value);
  void Add(std::string_view key, int value) { Add(key, static_cast<int64_t>(value)); }
  void AddRaw(std::string_view key, std::string_view raw_json);
  const std::string& body() const { return body_; }  // ",\"k\":v,..." (leading comma)

 private:
  void AppendKey(std::string_view key);
  std::string body_;
};

// Response lines (without the '\n'). `id_text` is the request's id as
// echoed (AppendJson, or its source text), empty for none.
std::string SuccessLine(const std::string& id_text, const Reply& reply);
std::string ErrorLine(const std::string& id_text, ErrorCode code, const std::string& message,
                      const std::string& field);

// ---- The ops ----------------------------------------------------------------

struct OpContext;  // protocol/ops.h
struct OpError;    // protocol/ops.h
// An op's function: false with *error filled, or true with *reply filled.
using OpFn = bool (*)(const OpContext& ctx, Reply* reply, OpError* error);
bool OpPing(const OpContext&, Reply*, OpError*);  // ops_action.cc
bool OpStats(const OpContext&, Reply*, OpError*);
bool OpComplete(const OpContext&, Reply*, OpError*);
bool OpFail(const OpContext&, Reply*, OpError*);
bool OpRenew(const OpContext&, Reply*, OpError*);
bool OpStatus(const OpContext&, Reply*, OpError*);
bool OpUncertain(const OpContext&, Reply*, OpError*);
bool OpDerive(const OpContext&, Reply*, OpError*);  // ops_intent.cc
bool OpFreeze(const OpContext&, Reply*, OpError*);
bool OpBegin(const OpContext&, Reply*, OpError*);
bool OpLookup(const OpContext&, Reply*, OpError*);
bool OpAmend(const OpContext&, Reply*, OpError*);
bool OpApprove(const OpContext&, Reply*, OpError*);
bool OpDeny(const OpContext&, Reply*, OpError*);
bool OpPending(const OpContext&, Reply*, OpError*);
bool OpMetrics(const OpContext&, Reply*, OpError*);  // ops_admin.cc
bool OpKeys(const OpContext&, Reply*, OpError*);
bool OpBackup(const OpContext&, Reply*, OpError*);
bool OpSeen(const OpContext&, Reply*, OpError*);  // ops_messages.cc
bool OpDone(const OpContext&, Reply*, OpError*);
bool OpRelease(const OpContext&, Reply*, OpError*);
bool OpForget(const OpContext&, Reply*, OpError*);

// An op's store write without a thread waiting on it (Store::BeginAsync,
// CompleteAsync), for a store that has them (Store::SupportsAsyncWrites):
// reads the arguments and starts the write. False: nothing started (bad
// arguments, or not the store's case): run the op (OpSpec::run), which
// answers. True: done(job) is called once, from the store's thread: with
// an empty `job` once the op's outcome is in *answer (ok: answer->reply,
// else answer->error); else when the store left the rest of the write to a
// thread that may block: run job() on one, and the outcome is in *answer
// when it returns. `ctx` and `answer` must live until then.
struct AsyncAnswer;  // protocol/ops.h
using StartDone = std::function<void(std::function<void()> job)>;
using StartFn = bool (*)(const OpContext& ctx, AsyncAnswer* answer, StartDone done);
bool StartComplete(const OpContext&, AsyncAnswer*, StartDone);  // ops_action.cc
bool StartBegin(const OpContext&, AsyncAnswer*, StartDone);     // ops_intent.cc

// Who may run an op (docs/protocol.md, "Access"). The Dispatcher checks it
// before the op reads any argument, except for kAdminByOp.
enum class OpAccess {
  kAnyone,   // every connection, whether an access rule matches it or not
  kMatched,  // a connection that an access rule matches (the op checks tenants)
  kAdmin,    // an admin
  // An admin of every tenant (an op on the whole store); OpSpec::whole_store
  // says what the op does with every tenant's records.
  kAdminOfAll,
  // An admin, checked by the op itself once its arguments are read (a bad
  // argument is reported first, as documented); the Dispatcher checks
  // kMatched.
  kAdminByOp,
};

// One op of the protocol and how the agent runs it.
struct OpSpec {
  std::string_view name;
  OpFn run;
  OpAccess access;
  // Reads or writes the store's records, so its reply waits for the WAL sync
  // that covers them. The others (counters, sizes, key derivation) answer
  // without one, e.g. while the disk is full.
  bool on_records;
  // May take long (a scan, a backup) or reads every counter: always run on a
  // worker thread. The other ops run where the request was parsed (the io
  // thread) when the store never blocks (DispatcherOptions::quick_store).
  bool slow;
  // Not empty: the request's array member of this name is a batch that the
  // op locks and reads one record per element of; a batch of more than
  // kQuickBatchElements runs on a worker, not to hold up the io thread's
  // other connections.
  std::string_view batch = {};
  // kAdminOfAll: what the op does with every tenant's records, for the
  // forbidden message ("keys counts every tenant's intents: ...").
  std::string_view whole_store = {};
  // Set: the op's write may run without a thread waiting on it (StartFn).
  StartFn start = nullptr;
};
inline constexpr size_t kQuickBatchElements = 64;

// The protocol's ops: adding one is a row here and its function. An op's
// index here is its index in the latency histograms; metrics and the
// unknown_op message list the ops in this order.
inline constexpr OpSpec kOps[] = {
    // name, function, access, on_records, slow[, batch[, whole_store[, start]]]
    {"ping", OpPing, OpAccess::kAnyone, false, false},
    {"derive", OpDerive, OpAccess::kMatched, false, false},
    {"freeze", OpFreeze, OpAccess::kMatched, true, false},
    {"begin", OpBegin, OpAccess::kMatched, true, false, {}, {}, StartBegin},
    {"complete", OpComplete, OpAccess::kMatched, true, false, {}, {}, StartComplete},
    {"fail", OpFail, OpAccess::kMatched, true, false},
    {"renew", OpRenew, OpAccess::kMatched, true, false},
    {"status", OpStatus, OpAccess::kMatched, true, false},
    {"lookup", OpLookup, OpAccess::kMatched, true, false},
    {"amend", OpAmend, OpAccess::kAdminByOp, true, false},
    {"uncertain", OpUncertain, OpAccess::kMatched, true, true},
    {"stats", OpStats, OpAccess::kMatched, false, true},
    {"metrics", OpMetrics, OpAccess::kMatched, false, true},
    {"backup", OpBackup, OpAccess::kAdminOfAll, true, true, {}, "copies every tenant's records"},
    {"seen", OpSeen, OpAccess::kMatched, true, false, "messages"},
    {"done", OpDone, OpAccess::kMatched, true, false},
    {"forget", OpForget, OpAccess::kAdmin, true, false},
    {"keys", OpKeys, OpAccess::kAdminOfAll, true, true, {}, "counts every tenant's intents"},
    {"release", OpRelease, OpAccess::kMatched, true, false},
    {"approve", OpApprove, OpAccess::kAdminByOp, true, false},
    {"deny", OpDeny, OpAccess::kAdminByOp, true, false},
    {"pending", OpPending, OpAccess::kMatched, true, true},
};
inline constexpr size_t kOpCount = std::size(kOps);
// The index of op `name` in kOps, or kOpCount when there is none.
size_t FindOp(std::string_view name);
// "ping, derive, ...": for the unknown_op message.
std::string OpList();

}  // namespace intentd::agent
