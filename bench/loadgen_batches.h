// The agent's PostgreSQL batches during the measurement window, from its
// `metrics` op (intentd_store_batch_duration_seconds and
// intentd_store_batched_requests_total, per kind of write): how many
// requests each statement carried and how long its round trip took, commit
// included. At a fixed number of connections each with one request in
// flight, throughput is connections / latency, and a request waits for about
// one and a half such round trips; these say whether that time is the
// server's.
#pragma once

#include <map>
#include <string>

namespace intentd::bench {

struct BatchKind {
  double requests = 0;
  double statements = 0;
  double seconds = 0;
};

struct BatchSample {
  bool ok = false;
  std::map<std::string, BatchKind> kinds;  // empty: the store batches nothing
};

// One `metrics` request on its own connection to the agent at socket_path;
// not ok when it cannot be had (the window's figures then go without it).
BatchSample SampleBatches(const std::string& socket_path);

// "  PostgreSQL batches: begin 4.3 requests, 2.66 ms each; complete ..." and
// the RESULT fields "begin_batch_requests=4.3 begin_batch_ms=2.66 ...".
// Both empty when either sample failed or no statement was sent.
struct BatchReport {
  std::string human;
  std::string fields;
};
BatchReport DescribeBatches(const BatchSample& start, const BatchSample& end);

}  // namespace intentd::bench
