// Begins that kept a payment from being made twice, per action type, with
// the money their frozen payloads held: what `intentd stats` and `intentd
// cost` report as double charges prevented (the `stats` op's "prevented").
//
// Counted, from the begin's decision and the action after it:
//   replayed:  `replay` of a completed action. The provider acted; a bot
//              whose key came from the attempt would have acted again.
//   recovered: `recover`. The earlier attempt's outcome is unknown; this one
//              repeats with the same key, so a provider that acted already
//              deduplicates it: a double charge prevented if it had acted.
// Not counted: `in_flight` (a client polling a live action counts once per
// poll) and `replay` of a failed action (nothing was charged).
// The money: per field the action type declares "money", the sum of the
// frozen normalized values (integer cents).
//
// Thread safety: Count and Json may run concurrently; SetActionTypes runs
// once, before serving.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "normalizers/key_derivation.h"
#include "store/store.h"

namespace intentd::agent {

class PreventedCounters {
 public:
  void SetActionTypes(const std::vector<normalizers::ActionType>& types);

  // `payload`: the frozen normalized payload (a compact JSON object), read
  // only when the begin counts and its type has money fields. An action type
  // outside the catalog is not counted.
  void Count(std::string_view action_type, store::Decision decision, store::ActionStatus status,
             std::string_view payload);

  // {"TYPE": {"replayed": N, "recovered": N,
  //           "replayed_cents": {"FIELD": CENTS, ...}, "recovered_cents": {...}}, ...}
  // with every configured action type (money fields listed even at 0).
  nlohmann::json Json() const;

 private:
  struct Field {
    std::string name;
    std::atomic<uint64_t> cents[2]{};  // [0] replayed, [1] recovered
  };
  struct Type {
    std::string name;
    std::atomic<uint64_t> count[2]{};
    std::vector<std::unique_ptr<Field>> money;
  };
  std::vector<std::unique_ptr<Type>> types_;
};

}  // namespace intentd::agent
