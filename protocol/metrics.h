// The pieces behind the agent's Prometheus metrics that the `stats` counters
// do not cover: latency histograms, the in-flight lease gauge and the
// optional per-tenant counters. Each is safe to use from many threads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/decision.h"

namespace intentd::agent {

// Request latency in fixed buckets (upper bounds in seconds, from 100 µs to
// 10 s: a begin is a synced write, a few ms on most disks). Lock-free.
class LatencyHistogram {
 public:
  static constexpr size_t kBuckets = 16;
  static constexpr std::array<double, kBuckets> kBoundsSeconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

  void Observe(int64_t nanoseconds);

  struct Snapshot {
    std::array<uint64_t, kBuckets + 1> cumulative{};  // last: +Inf, equals count
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  // Cumulative counts; `count` is the +Inf bucket, so they always agree.
  Snapshot Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBuckets + 1> counts_{};  // per bucket, not cumulative
  std::atomic<uint64_t> sum_ns_{0};
};

// Leases granted by this agent that are still live: the in-flight gauge.
// Counting started actions with a live lease in the store would scan its
// lease index; this table is exact for leases this process granted and
// misses those a previous process granted (at most one maximal lease, 1 h,
// after a restart). Memory: one entry per started action granted here;
// expired entries are dropped by CountLive and when a shard doubles.
class LeaseGauge {
 public:
  // A grant (execute, recover) or a renewal: the lease runs until
  // lease_until_ms.
  void Granted(std::string_view tenant_id, std::string_view key, int64_t lease_until_ms,
               int64_t now_ms);
  // complete or fail took effect: the action is no longer started.
  void Ended(std::string_view tenant_id, std::string_view key);
  // Leases live at now_ms (lease_until_ms > now_ms); forgets expired ones.
  uint64_t CountLive(int64_t now_ms);

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, int64_t> until;  // guarded by mu
    size_t purge_at = 1024;                          // guarded by mu
  };
  static std::string Key(std::string_view tenant_id, std::string_view key);
  Shard& ShardOf(const std::string& key);
  static size_t PurgeExpired(Shard* shard, int64_t now_ms);

  std::array<Shard, kShards> shards_;
};

// begin decisions per tenant, for the tenant-labelled series (off unless the
// config's "metrics": {"tenant_labels": true}). At most kMaxTenants tenants
// are named; later ones are counted under the empty name, which no tenant
// can have.
class TenantCounters {
 public:
  static constexpr size_t kMaxTenants = 1000;

  void CountDecision(std::string_view tenant_id, size_t decision);

  struct Row {
    std::string tenant_id;  // empty: the tenants beyond kMaxTenants
    std::array<uint64_t, store::kDecisionCount> decisions{};
  };
  std::vector<Row> Read() const;  // sorted by tenant_id

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::array<uint64_t, store::kDecisionCount>>
      rows_;  // guarded by mu_
};

// Message sightings (the `seen` op) per channel: first sightings and
// duplicates dropped, one lock per batch. At most kMaxChannels channels are
// named; later ones are counted under the empty name, which no channel can
// have (a channel is never blank).
class ChannelCounters {
 public:
  static constexpr size_t kMaxChannels = 100;

  void Count(std::string_view channel, uint64_t first, uint64_t duplicates);

  struct Row {
    std::string channel;  // empty: the channels beyond kMaxChannels
    uint64_t first = 0;
    uint64_t duplicates = 0;
  };
  std::vector<Row> Read() const;  // sorted by channel

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::array<uint64_t, 2>> rows_;  // guarded by mu_
};

// Counts by a label whose values come from a small set the agent controls
// (the reconciler's provider error causes). Thread-safe.
class LabelCounters {
 public:
  void Add(std::string_view label, uint64_t n = 1);
  std::vector<std::pair<std::string, uint64_t>> Read() const;  // sorted by label

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> counts_;  // guarded by mu_
};

}  // namespace intentd::agent
