// The torture clients: each one a bot that begins intents (fresh ones and
// redeliveries of recent ones), acts on what it was granted, and completes,
// fails or abandons it, over its own connection to the agent. It reconnects
// whenever the agent dies and logs everything it was told.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/torture/torture_log.h"

namespace intentd::torture {

// Holds every client between two requests, so that the harness can read their
// logs (and the agent's records) while nothing changes them. A client's log is
// complete at the gate: everything it sent or was told is in it. Thread safe.
class ClientGate {
 public:
  explicit ClientGate(int clients) : clients_(clients) {}

  // Harness side. After Close, clients stop at their next request; WaitAllHeld
  // returns once every client waits at the gate or has ended. Open lets them go.
  void Close();
  void WaitAllHeld();
  void Open();

  // Client side. Pass blocks while the gate is closed, unless `stop` is set
  // (the harness calls Open after setting it). Leave: the client has ended.
  void Pass(const std::atomic<bool>& stop);
  void Leave();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int clients_;
  bool closed_ = false;
  int held_ = 0;
  int left_ = 0;
};

struct WorkloadOptions {
  std::string socket_path;
  ClientGate* gate = nullptr;  // none: clients never pause
  int64_t lease_ms = 1000;     // the protocol's minimum: expiries happen during the run
  int redelivery_percent = 10;
  int abandon_percent = 8;         // granted, then neither completed nor failed
  int fail_retriable_percent = 7;  // fail with retriable:true (released)
  int fail_final_percent = 5;      // fail with retriable:false
  int max_work_ms = 20;            // "acting at the provider" between grant and finish
  // > 1: the client keeps this many requests in flight on its connection
  // (each a step of one of that many bots: a begin, the finish of a grant, a
  // seen), sent as one batch and answered in order (RunClient's pipelined
  // loop). Errors of every kind are then expected: storage_error answers are
  // logged as refusals (ClientLog) and never sent again.
  int pipeline = 1;
  int seen_percent = 0;  // pipelined: of the requests, `seen` of a fresh message id
  // Raised by the harness before each kill. With stall_ms > 0, a request left
  // unanswered that long while it did not move is a stall (ClientLog::stalls).
  const std::atomic<int>* kill_epoch = nullptr;
  int stall_ms = 0;
};

// Intents to redeliver, as a queue would: recent ones (a duplicate delivery
// while the first is being handled: in_flight, or replay once done), and
// abandoned ones (the worker died holding the lease, or its begin got no
// answer), redelivered once the lease has expired (recover). Thread safe.
class IntentPool {
 public:
  using Clock = std::chrono::steady_clock;
  void AddRecent(const std::string& tenant, const std::string& ref);
  void AddAbandoned(const std::string& tenant, const std::string& ref, Clock::time_point ready);
  // An abandoned intent whose time has come (removed from the pool), else a
  // recent one. False when there is none.
  bool PickRedelivery(std::mt19937_64* rng, std::string* tenant, std::string* ref);

 private:
  static constexpr size_t kRecent = 256;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> recent_;  // ring buffer
  size_t next_ = 0;
  // ready -> (tenant, ref)
  std::multimap<Clock::time_point, std::pair<std::string, std::string>> abandoned_;
};

// Runs client `client` until `stop` is set; fills *log. Never throws.
void RunClient(int client, uint64_t seed, const WorkloadOptions& options, IntentPool* pool,
               const std::atomic<bool>& stop, ClientLog* log);

}  // namespace intentd::torture
