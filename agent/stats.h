// The agent's counters, for the `stats` op (and later metrics). Lock-free.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

namespace intentd::agent {

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
};
inline constexpr size_t kErrorCodeCount = 15;
std::string_view ErrorCodeName(ErrorCode code);

inline constexpr size_t kDecisionCount = 4;  // execute, in_flight, recover, replay

struct Stats {
  std::atomic<uint64_t> intents_created{0};
  std::atomic<uint64_t> intents_reused{0};
  std::atomic<uint64_t> diverged{0};
  std::array<std::atomic<uint64_t>, kDecisionCount> decisions{};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> released{0};
  std::atomic<uint64_t> lease_lost{0};
  std::array<std::atomic<uint64_t>, kErrorCodeCount> errors{};
  std::atomic<int64_t> connections{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> requests{0};
  int64_t started_at_ms = 0;  // set once, before serving
};

}  // namespace intentd::agent
