// The agent's counters, for the `stats` and `metrics` ops. Lock-free except
// the lease gauge and the optional per-tenant counters (metrics.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/metrics.h"
#include "protocol/prevented.h"
#include "protocol/protocol.h"
#include "store/decision.h"

namespace intentd::agent {

struct Stats {
  std::atomic<uint64_t> intents_created{0};
  std::atomic<uint64_t> intents_reused{0};
  std::atomic<uint64_t> diverged{0};
  std::array<std::atomic<uint64_t>, store::kDecisionCount> decisions{};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> released{0};
  std::atomic<uint64_t> lease_lost{0};
  // The `seen` op, per message: first sightings (reclaims of an expired claim
  // included, also counted in seen_reclaimed) and duplicates dropped.
  std::atomic<uint64_t> seen_first{0};
  std::atomic<uint64_t> seen_duplicates{0};
  std::atomic<uint64_t> seen_reclaimed{0};
  std::atomic<uint64_t> seen_released{0};  // claims given back (release)
  ChannelCounters channels;
  // Double charges prevented (replays of completed actions, recoveries) and
  // the money they held, per action type; set up once, before serving.
  PreventedCounters prevented;
  // Outcomes recorded by the reconciler (complete or fail carrying
  // "reconciled": true), in kReconciledNames' order.
  static constexpr std::array<std::string_view, 3> kReconciledNames = {"completed", "released",
                                                                       "failed"};
  std::array<std::atomic<uint64_t>, 3> reconciled{};
  // serve --reconcile-every: passes run, and the provider answers that
  // recorded nothing, by cause (reconcile/provider.h).
  std::atomic<uint64_t> reconcile_passes{0};
  LabelCounters reconcile_errors;
  std::array<std::atomic<uint64_t>, kErrorCodeCount> errors{};
  // Payloads the policy at freeze refused, by rule (common/policy.h:
  // PolicyRefusal::rule).
  LabelCounters policy_refusals;
  std::atomic<int64_t> connections{0};
  std::atomic<uint64_t> connections_total{0};
  std::atomic<uint64_t> requests{0};
  int64_t started_at_ms = 0;  // set once, before serving

  // Latency of each op (kOps), parse to response.
  std::array<LatencyHistogram, kOpCount> latency;
  // begin decisions per configured action type; both set once, before
  // serving, from the config's catalog (begins_by_type[i] is action_types[i]).
  std::vector<std::string> action_types;
  std::unique_ptr<std::array<std::atomic<uint64_t>, store::kDecisionCount>[]> begins_by_type;
  LeaseGauge leases;
  bool tenant_labels = false;  // set once, before serving
  TenantCounters tenants;      // only counted when tenant_labels

  void SetActionTypes(std::vector<std::string> names) {
    action_types = std::move(names);
    begins_by_type = std::make_unique<std::array<std::atomic<uint64_t>, store::kDecisionCount>[]>(
        action_types.size());
  }
  // Counts a begin decision (decision: its index in store::kDecisions).
  void CountBegin(std::string_view tenant_id, std::string_view action_type, size_t decision) {
    decisions[decision].fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < action_types.size(); ++i) {
      if (action_types[i] == action_type) {
        begins_by_type[i][decision].fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    if (tenant_labels) tenants.CountDecision(tenant_id, decision);
  }
};

}  // namespace intentd::agent
