#include "protocol/metrics.h"

#include <algorithm>
#include <functional>

namespace intentd::agent {

void LatencyHistogram::Observe(int64_t nanoseconds) {
  if (nanoseconds < 0) nanoseconds = 0;
  const double seconds = static_cast<double>(nanoseconds) / 1e9;
  size_t bucket = 0;
  while (bucket < kBuckets && seconds > kBoundsSeconds[bucket]) ++bucket;
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(nanoseconds), std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i <= kBuckets; ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

std::string LeaseGauge::Key(std::string_view tenant_id, std::string_view key) {
  // Length-prefixed: a tenant may hold any byte, so no separator is safe.
  std::string out = std::to_string(tenant_id.size());
  out.push_back(':');
  out.append(tenant_id);
  out.append(key);
  return out;
}

LeaseGauge::Shard& LeaseGauge::ShardOf(const std::string& key) {
  return shards_[std::hash<std::string>()(key) % kShards];
}

size_t LeaseGauge::PurgeExpired(Shard* shard, int64_t now_ms) {
  size_t live = 0;
  for (auto it = shard->until.begin(); it != shard->until.end();) {
    if (it->second > now_ms) {
      ++live;
      ++it;
    } else {
      it = shard->until.erase(it);
    }
  }
  shard->purge_at = std::max<size_t>(1024, 2 * shard->until.size());
  return live;
}

void LeaseGauge::Granted(std::string_view tenant_id, std::string_view key, int64_t lease_until_ms,
                         int64_t now_ms) {
  std::string k = Key(tenant_id, key);
  Shard& shard = ShardOf(k);
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.until[std::move(k)] = lease_until_ms;
  if (shard.until.size() >= shard.purge_at) PurgeExpired(&shard, now_ms);
}

void LeaseGauge::Ended(std::string_view tenant_id, std::string_view key) {
  std::string k = Key(tenant_id, key);
  Shard& shard = ShardOf(k);
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.until.erase(k);
}

uint64_t LeaseGauge::CountLive(int64_t now_ms) {
  uint64_t live = 0;
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    live += PurgeExpired(&shard, now_ms);
  }
  return live;
}

void TenantCounters::CountDecision(std::string_view tenant_id, size_t decision) {
  if (decision >= store::kDecisionCount) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find(std::string(tenant_id));
  if (it == rows_.end()) {
    // kMaxTenants named rows plus the overflow row "".
    const bool full = rows_.size() - rows_.count("") >= kMaxTenants;
    it = rows_.try_emplace(full ? std::string() : std::string(tenant_id)).first;
  }
  ++it->second[decision];
}

std::vector<TenantCounters::Row> TenantCounters::Read() const {
  std::vector<Row> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows.reserve(rows_.size());
    for (const auto& [tenant, counts] : rows_) rows.push_back({tenant, counts});
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.tenant_id < b.tenant_id; });
  return rows;
}

void ChannelCounters::Count(std::string_view channel, uint64_t first, uint64_t duplicates) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find(std::string(channel));
  if (it == rows_.end()) {
    const bool full = rows_.size() - rows_.count("") >= kMaxChannels;
    it = rows_.try_emplace(full ? std::string() : std::string(channel)).first;
  }
  it->second[0] += first;
  it->second[1] += duplicates;
}

std::vector<ChannelCounters::Row> ChannelCounters::Read() const {
  std::vector<Row> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows.reserve(rows_.size());
    for (const auto& [channel, counts] : rows_) rows.push_back({channel, counts[0], counts[1]});
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.channel < b.channel; });
  return rows;
}

void LabelCounters::Add(std::string_view label, uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_[std::string(label)] += n;
}

std::vector<std::pair<std::string, uint64_t>> LabelCounters::Read() const {
  std::vector<std::pair<std::string, uint64_t>> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows.assign(counts_.begin(), counts_.end());
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace intentd::agent
