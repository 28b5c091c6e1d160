// The socket protocol's vocabulary (docs/protocol.md): its version, the ops
// and how the agent runs each, the error codes, begin's decisions, and the
// writer of response lines. tests/docs/protocol_doc_test.py reads the op
// names, decisions and error codes from this file and checks that the
// document describes each.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "normalizers/key_derivation.h"

namespace intentd::agent {

inline constexpr int kProtocolVersion = 1;

// Protocol error codes, in the order of the protocol's list.
enum class ErrorCode {
  kBadRequest,
  kFrameTooLarge,
  kUnknownOp,
  kUnknownActionType,
  kMissingField,
  kInvalidField,
  kPayloadMismatch,
  kNotFound,
  kLeaseLost,
  kInvalidState,
  kForbidden,
  kOverloaded,
  kStorageError,
  kShuttingDown,
  kInternal,
  kPolicyRefused,
};
inline constexpr size_t kErrorCodeCount = 16;
std::string_view ErrorCodeName(ErrorCode code);

// begin's decisions, indexed by store::Decision.
inline constexpr size_t kDecisionCount = 5;
inline constexpr std::array<std::string_view, kDecisionCount> kDecisionNames = {
    "execute", "in_flight", "recover", "replay", "pending_approval"};

// How the agent runs an op.
struct OpSpec {
  std::string_view name;
  // Reads or writes the store's records, so its reply waits for the WAL sync
  // that covers them. The others (counters, sizes, key derivation) answer
  // without one, e.g. while the disk is full.
  bool on_records;
  // May take long (a scan, a backup) or reads every counter: always run on a
  // worker thread. The other ops run where the request was parsed (the io
  // thread) when the store never blocks (DispatcherOptions::quick_store).
  bool slow;
};

// The protocol's ops; an op's index here is its index in the latency
// histograms and in the Dispatcher's table of functions.
inline constexpr std::array<OpSpec, 22> kOps = {{
    {"ping", false, false},   {"derive", false, false},  {"freeze", true, false},
    {"begin", true, false},   {"complete", true, false}, {"fail", true, false},
    {"renew", true, false},   {"status", true, false},   {"lookup", true, false},
    {"amend", true, false},   {"uncertain", true, true}, {"stats", false, true},
    {"metrics", false, true}, {"backup", true, true},    {"seen", true, false},
    {"done", true, false},    {"forget", true, false},   {"keys", true, true},
    {"release", true, false}, {"approve", true, false},  {"deny", true, false},
    {"pending", true, true},
}};
inline constexpr size_t kOpCount = kOps.size();
// The index of op `name` in kOps, or kOpCount when there is none.
size_t FindOp(std::string_view name);
// "ping, derive, ...": for the unknown_op message.
std::string OpList();

class JsonView;  // agent/request_line.h

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

}  // namespace intentd::agent
