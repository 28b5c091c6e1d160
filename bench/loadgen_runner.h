// Drives sessions closed-loop: each connection runs one logical action at a
// time (begin, then complete when told to execute), one request in flight,
// for a fixed duration after a warm-up. Each client thread multiplexes its
// share of the connections with epoll.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/loadgen_session.h"
#include "bench/loadgen_workload.h"

namespace intentd::bench {

struct RunOptions {
  int connections = 16;
  int threads = 1;
  double warmup_s = 1;
  double duration_s = 10;
  uint64_t seed = 1;
  WorkloadOptions workload;
  // Opens one session; nullptr with *error on failure.
  std::function<std::unique_ptr<Session>(std::string* error)> connect;
  // Called by Run's own thread when the measurement window opens and when
  // it closes (optional; e.g. to sample CPU time).
  std::function<void()> window_opened;
  std::function<void()> window_closed;
};

// What happened inside the measurement window (after the warm-up, before
// the end), except `violations` and `fatal`, which count the whole run.
struct RunStats {
  double window_s = 0;
  uint64_t actions = 0;  // logical actions finished (pairs + redeliveries)
  uint64_t pairs = 0;    // fresh begin(execute) + complete
  uint64_t redeliveries = 0;
  uint64_t decisions[5] = {};             // every begin, indexed by Decision
  uint64_t redelivery_decisions[5] = {};  // begins of redeliveries
  uint64_t violations = 0;                // a redelivery answered execute or recover
  uint64_t unexpected = 0;                // a fresh intent answered anything but execute
  uint64_t errors = 0;                    // error replies
  uint64_t fatal = 0;                     // connections lost
  std::map<std::string, uint64_t> error_messages;
  std::vector<uint64_t> begin_ns;  // per-request latencies
  std::vector<uint64_t> complete_ns;

  void Merge(RunStats&& other);
};

// Connects every session first, then runs. False with *error when a
// connection cannot be opened; failures during the run are counted instead.
bool Run(const RunOptions& options, RunStats* stats, std::string* error);

// The exact q-quantile (0..1, nearest rank) of `values`, which it sorts;
// 0 when empty.
uint64_t Percentile(std::vector<uint64_t>* values, double q);

}  // namespace intentd::bench
