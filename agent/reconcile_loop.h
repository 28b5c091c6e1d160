// serve --reconcile-every: the agent's own reconciler, a thread that runs a
// reconcile pass (reconcile/pass.h) over every tenant at a fixed interval,
// through the dispatcher with every right (Dispatcher::HandleTrusted). It
// counts its passes and the provider errors that left actions uncertain in
// the agent's stats (the metrics), and logs what it recorded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "protocol/dispatcher.h"
#include "reconcile/pass.h"

namespace intentd::agent {

class ReconcileLoop {
 public:
  // Starts the thread; the first pass runs one interval after the start.
  ReconcileLoop(Dispatcher* dispatcher, std::unique_ptr<reconcile::Reconciler> reconciler,
                std::chrono::milliseconds every);
  // Asks a pass in progress to end after the action it is on (its provider
  // call runs to its end or its timeout). Returns at once.
  void RequestStop();
  // RequestStop, then waits for the thread.
  ~ReconcileLoop();
  ReconcileLoop(const ReconcileLoop&) = delete;
  ReconcileLoop& operator=(const ReconcileLoop&) = delete;

 private:
  void Run();
  void Pass();

  Dispatcher* dispatcher_;
  std::unique_ptr<reconcile::Reconciler> reconciler_;
  const std::chrono::milliseconds every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  // Actions already logged as left for a person (no provider, amended):
  // logged once, not at every pass. Only the loop's thread uses it.
  std::set<std::string> reported_;
  std::thread thread_;
};

}  // namespace intentd::agent
