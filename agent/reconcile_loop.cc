#include "agent/reconcile_loop.h"

#include "common/log.h"
#include "protocol/stats.h"

namespace intentd::agent {

ReconcileLoop::ReconcileLoop(Dispatcher* dispatcher,
                             std::unique_ptr<reconcile::Reconciler> reconciler,
                             std::chrono::milliseconds every)
    : dispatcher_(dispatcher), reconciler_(std::move(reconciler)), every_(every) {
  // Every cause's series from the start, so that the first error is an
  // increase.
  Stats& stats = dispatcher_->mutable_stats();
  for (const char* cause : reconcile::kCauses) stats.reconcile_errors.Add(cause, 0);
  thread_ = std::thread([this] { Run(); });
}

void ReconcileLoop::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

ReconcileLoop::~ReconcileLoop() {
  RequestStop();
  thread_.join();
}

void ReconcileLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, every_, [this] { return stopping_; })) {
    lock.unlock();
    Pass();
    lock.lock();
  }
}

void ReconcileLoop::Pass() {
  reconcile::PassOptions options;
  options.stop = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  };
  const reconcile::CallFn call = [this](const std::string& request, std::string* response,
                                        std::string* /*error*/) {
    *response = dispatcher_->HandleTrusted(request);
    return true;
  };
  const reconcile::PassResult pass = reconciler_->RunPass(call, options);
  Stats& stats = dispatcher_->mutable_stats();
  stats.reconcile_passes.fetch_add(1);
  if (!pass.agent_error.empty()) LogWarning("reconcile: " + pass.agent_error);
  for (const reconcile::ActionResult& r : pass.actions) {
    const std::string who = "reconcile: " + r.action.tenant_id + " " + r.action.action_type + " " +
                            r.action.intent_ref + " (txid " + r.action.txid + ")";
    if (r.recorded == "completed" || r.recorded == "released" || r.recorded == "failed") {
      LogInfo(who + ": the provider said " + r.provider_said + "; recorded " + r.recorded);
    } else if (r.recorded == "nothing" && reconcile::IsProviderCause(r.cause)) {
      stats.reconcile_errors.Add(r.cause);
      LogWarning(who + ": left uncertain, " + r.cause + ": " + r.detail);
    } else if (r.recorded == "nothing" && r.cause != "backoff" && r.cause != "retry_after" &&
               reported_.insert(r.action.tenant_id + '\0' + r.action.key).second) {
      LogWarning(who + ": left uncertain, " + r.cause + ": " + r.detail);
    }
  }
}

}  // namespace intentd::agent
