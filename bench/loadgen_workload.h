// The workload of the load generator: fresh pix.cobranca intents spread over
// N tenants, and a configurable share of redeliveries of intents that an
// earlier action already executed (they must come back `replay` or
// `in_flight`, never `execute`).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/loadgen_session.h"

namespace intentd::bench {

struct WorkloadOptions {
  int tenants = 50;
  double redelivery_share = 0.03;  // 0..1
  int response_bytes = 200;        // approximate size of the stored response
  std::string run_id;              // makes intent_refs unique across runs
};

// A valid CPF ("ddd.ddd.ddd-dd" with correct check digits) from 9 digits.
std::string FormatCpf(const int digits[9]);

// One stream of actions (one per client thread). Not thread-safe.
class Workload {
 public:
  Workload(const WorkloadOptions& options, int stream_id, uint64_t seed);

  // A redelivery of a remembered action with probability redelivery_share
  // (when one is remembered), else a fresh action with a new intent_ref.
  Action Next();

  // Records an action whose begin answered `execute`: later redeliveries
  // draw from the most recent ones.
  void RememberExecuted(const Action& action);

 private:
  Action Fresh();

  WorkloadOptions options_;
  int stream_id_;
  uint64_t sequence_ = 0;
  std::mt19937_64 rng_;
  std::vector<Action> executed_;  // ring of recent executed actions
  size_t executed_next_ = 0;
};

}  // namespace intentd::bench
