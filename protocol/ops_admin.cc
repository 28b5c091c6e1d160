// Operator ops: metrics (Prometheus text) and backup (an online checkpoint).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "common/log.h"
#include "common/prometheus.h"
#include "protocol/ops.h"

namespace intentd::agent {
namespace {

// The uncertain gauges count the store's expired started leases up to this
// many per scrape (one lease-index entry and one action read each), so that
// a scrape stays cheap when a crash left many behind.
constexpr size_t kUncertainCountLimit = 1000;
constexpr size_t kMaxPathBytes = 4096;

bool Fail(OpError* error, ErrorCode code, std::string field, std::string message) {
  error->code = code;
  error->field = std::move(field);
  error->message = std::move(message);
  return false;
}

void AddCounters(const Stats& s, PrometheusText* p) {
  p->Family("intentd_requests_total", "counter", "Request lines answered, errors included.");
  p->Sample("intentd_requests_total", {}, s.requests.load());
  p->Family("intentd_connections", "gauge", "Client connections open now.");
  p->Sample("intentd_connections", {}, static_cast<int64_t>(s.connections.load()));
  p->Family("intentd_connections_total", "counter", "Client connections accepted.");
  p->Sample("intentd_connections_total", {}, s.connections_total.load());
  p->Family("intentd_intents_created_total", "counter",
            "Intents frozen (freeze or begin wrote them).");
  p->Sample("intentd_intents_created_total", {}, s.intents_created.load());
  p->Family("intentd_intents_reused_total", "counter",
            "freeze or begin calls that found the intent frozen already (redeliveries).");
  p->Sample("intentd_intents_reused_total", {}, s.intents_reused.load());
  p->Family("intentd_diverged_total", "counter",
            "Calls whose payload differed from the frozen one (the frozen payload was used).");
  p->Sample("intentd_diverged_total", {}, s.diverged.load());

  p->Family("intentd_decisions_total", "counter", "begin decisions.");
  for (size_t i = 0; i < store::kDecisionCount; ++i) {
    p->Sample("intentd_decisions_total", {{"decision", std::string(store::kDecisions[i].name)}},
              s.decisions[i].load());
  }
  p->Family("intentd_begins_total", "counter", "begin decisions per action type.");
  for (size_t t = 0; t < s.action_types.size(); ++t) {
    for (size_t i = 0; i < store::kDecisionCount; ++i) {
      p->Sample("intentd_begins_total",
                {{"action_type", s.action_types[t]},
                 {"decision", std::string(store::kDecisions[i].name)}},
                s.begins_by_type[t][i].load());
    }
  }
  p->Family("intentd_actions_completed_total", "counter", "complete calls that succeeded.");
  p->Sample("intentd_actions_completed_total", {}, s.completed.load());
  p->Family("intentd_actions_failed_total", "counter", "Terminal fail calls that succeeded.");
  p->Sample("intentd_actions_failed_total", {}, s.failed.load());
  p->Family("intentd_actions_released_total", "counter",
            "Retriable fail calls that succeeded (the next begin executes).");
  p->Sample("intentd_actions_released_total", {}, s.released.load());
  p->Family("intentd_lease_lost_total", "counter",
            "complete, fail, renew or done calls refused because a newer attempt took the lease.");
  p->Sample("intentd_lease_lost_total", {}, s.lease_lost.load());
  p->Family("intentd_messages_first_total", "counter",
            "Inbound messages seen for the first time (seen answered first: the bot processes "
            "them), per channel (channel=\"\": channels beyond the first 100).");
  const std::vector<ChannelCounters::Row> channels = s.channels.Read();
  for (const ChannelCounters::Row& row : channels) {
    p->Sample("intentd_messages_first_total", {{"channel", row.channel}}, row.first);
  }
  p->Family("intentd_messages_duplicate_total", "counter",
            "Inbound messages seen again (redeliveries dropped before the model), per channel.");
  for (const ChannelCounters::Row& row : channels) {
    p->Sample("intentd_messages_duplicate_total", {{"channel", row.channel}}, row.duplicates);
  }
  p->Family("intentd_reconciled_total", "counter",
            "Uncertain actions resolved by the reconciler from the provider's record (intentd "
            "reconcile, serve --reconcile-every), by what was recorded.");
  for (size_t i = 0; i < s.reconciled.size(); ++i) {
    p->Sample("intentd_reconciled_total", {{"outcome", std::string(Stats::kReconciledNames[i])}},
              s.reconciled[i].load());
  }
  p->Family("intentd_reconcile_passes_total", "counter",
            "Passes of the agent's own reconciler (serve --reconcile-every).");
  p->Sample("intentd_reconcile_passes_total", {}, s.reconcile_passes.load());
  p->Family("intentd_reconcile_provider_errors_total", "counter",
            "Provider answers of the agent's own reconciler that recorded nothing (the action "
            "stays uncertain), by cause.");
  for (const auto& [cause, n] : s.reconcile_errors.Read()) {
    p->Sample("intentd_reconcile_provider_errors_total", {{"cause", cause}}, n);
  }
  p->Family("intentd_policy_refusals_total", "counter",
            "Payloads the policy at freeze refused (nothing frozen), by rule: pix_keys, "
            "max_per_action, per_day.max_total, per_day.max_count, per_payer_per_day.max_total, "
            "per_payer_per_day.max_count.");
  for (const auto& [rule, n] : s.policy_refusals.Read()) {
    p->Sample("intentd_policy_refusals_total", {{"rule", rule}}, n);
  }
  p->Family("intentd_errors_total", "counter", "Error responses per protocol error code.");
  for (size_t i = 0; i < kErrorCodeCount; ++i) {
    p->Sample("intentd_errors_total", {{"code", std::string(kErrorCodeNames[i])}},
              s.errors[i].load());
  }
}

void AddLatency(const Stats& s, PrometheusText* p) {
  p->Family("intentd_request_duration_seconds", "histogram",
            "Time from a request line to its response, per op.");
  for (size_t op = 0; op < kOpCount; ++op) {
    const LatencyHistogram::Snapshot h = s.latency[op].Read();
    const std::string name(kOps[op].name);
    for (size_t b = 0; b <= LatencyHistogram::kBuckets; ++b) {
      const std::string le = b < LatencyHistogram::kBuckets
                                 ? FormatValue(LatencyHistogram::kBoundsSeconds[b])
                                 : "+Inf";
      p->Sample("intentd_request_duration_seconds_bucket", {{"op", name}, {"le", le}},
                h.cumulative[b]);
    }
    p->Sample("intentd_request_duration_seconds_sum", {{"op", name}}, h.sum_seconds);
    p->Sample("intentd_request_duration_seconds_count", {{"op", name}}, h.count);
  }
}

void AddUncertain(const OpContext& ctx, const TenantFilter& with_tenants, PrometheusText* p) {
  std::vector<store::Action> actions;
  store::Status st = ctx.store.Uncertain(std::nullopt, kUncertainCountLimit, &actions);
  if (!st.ok()) {
    LogWarning("metrics: cannot count uncertain actions: " + st.message());
    return;
  }
  const int64_t now = ctx.clock.NowMs();
  p->Family("intentd_uncertain_actions", "gauge",
            "Started actions whose lease expired: the outcome is unknown until a begin recovers "
            "them. Counted up to 1000 (see intentd_uncertain_count_limit_reached).");
  p->Sample("intentd_uncertain_actions", {}, static_cast<uint64_t>(actions.size()));
  p->Family("intentd_uncertain_count_limit_reached", "gauge",
            "1 when intentd_uncertain_actions stopped counting at its limit.");
  p->Sample("intentd_uncertain_count_limit_reached", {},
            static_cast<uint64_t>(actions.size() >= kUncertainCountLimit ? 1 : 0));
  p->Family("intentd_uncertain_oldest_expired_seconds", "gauge",
            "How long ago the oldest uncertain action's lease expired (0 when there is none).");
  p->Sample(
      "intentd_uncertain_oldest_expired_seconds", {},
      actions.empty() ? 0.0 : static_cast<double>(now - actions.front().lease_until_ms) / 1e3);
  if (with_tenants) {
    std::map<std::string, uint64_t> per_tenant;
    for (const store::Action& a : actions) ++per_tenant[a.tenant_id];
    p->Family("intentd_tenant_uncertain_actions", "gauge",
              "intentd_uncertain_actions per tenant (within the same limit).");
    for (const auto& [tenant, n] : per_tenant) {
      if (with_tenants(tenant))
        p->Sample("intentd_tenant_uncertain_actions", {{"tenant", tenant}}, n);
    }
  }
}

// Intents the policy holds for approval (counted up to the same limit).
void AddApprovals(const OpContext& ctx, PrometheusText* p) {
  std::vector<store::Intent> pending;
  store::Status st = ctx.store.PendingApprovals(std::nullopt, kUncertainCountLimit, &pending);
  if (!st.ok()) {
    LogWarning("metrics: cannot count pending approvals: " + st.message());
    return;
  }
  const int64_t now = ctx.clock.NowMs();
  p->Family("intentd_approvals_pending", "gauge",
            "Intents the policy holds for approval (approval_above): no attempt is granted until "
            "an admin approves them. Counted up to 1000.");
  p->Sample("intentd_approvals_pending", {}, static_cast<uint64_t>(pending.size()));
  p->Family("intentd_approval_oldest_pending_seconds", "gauge",
            "How long the oldest intent waiting for approval has waited (0 when none waits).");
  p->Sample("intentd_approval_oldest_pending_seconds", {},
            pending.empty() ? 0.0 : static_cast<double>(now - pending.front().created_at_ms) / 1e3);
}

// A histogram of durations bucketed by store::kSyncBoundsSeconds (store's
// group commits and batches), under `labels` plus "le".
void AddSyncHistogram(std::string_view name, const Labels& labels,
                      const std::array<uint64_t, store::kSyncBuckets + 1>& rounds, double seconds,
                      PrometheusText* p) {
  const std::string base(name);
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= store::kSyncBuckets; ++b) {
    cumulative += rounds[b];
    Labels with_le = labels;
    with_le.emplace_back(
        "le", b < store::kSyncBuckets ? FormatValue(store::kSyncBoundsSeconds[b]) : "+Inf");
    p->Sample(base + "_bucket", with_le, cumulative);
  }
  p->Sample(base + "_sum", labels, seconds);
  p->Sample(base + "_count", labels, cumulative);
}

// PostgreSQL's group commit (store/admin.h, StatementBatchCounts): per kind
// of write, the round trip of each batch's statement and the requests it
// carried. A round trip that grows while the requests per batch stay level
// is the server (its WAL flush or its locks), not the agent.
void AddStatementBatches(const std::vector<store::StatementBatchCounts>& kinds, PrometheusText* p) {
  if (kinds.empty()) return;
  p->Family("intentd_store_batch_duration_seconds", "histogram",
            "PostgreSQL group commit, per kind of write (begin: a fresh intent's; complete: a "
            "started action's): the time from sending a batch's one statement to its commit's "
            "answer. Every request of the batch waits for it.");
  for (const store::StatementBatchCounts& k : kinds) {
    AddSyncHistogram("intentd_store_batch_duration_seconds", {{"kind", k.kind}}, k.rounds,
                     k.seconds, p);
  }
  p->Family("intentd_store_batched_requests_total", "counter",
            "Requests sent in those batches (divide by the duration's _count: requests per "
            "statement).");
  for (const store::StatementBatchCounts& k : kinds) {
    p->Sample("intentd_store_batched_requests_total", {{"kind", k.kind}}, k.requests);
  }
}

// The store's disk space, health and group commit, as far as it has them
// (store/admin.h: the RocksDB store has all three and syncs its own WAL;
// PostgreSQL has its batches of statements).
void AddStorage(const store::Store& store, PrometheusText* p) {
  if (const std::optional<store::StoreSpace> space = store.ReadSpace()) {
    p->Family("intentd_storage_free_bytes", "gauge",
              "Free space on the data directory's file system (for writers that are not root).");
    p->Sample("intentd_storage_free_bytes", {}, space->free_bytes);
    p->Family("intentd_storage_reserve_bytes", "gauge",
              "Writes are refused (storage_error) while intentd_storage_free_bytes is under this "
              "(serve --min-free-space; 0: no reserve).");
    p->Sample("intentd_storage_reserve_bytes", {}, space->reserve_bytes);
  }
  if (const std::optional<store::StoreHealth> health = store.ReadHealth()) {
    const store::StoreHealth& h = *health;
    p->Family("intentd_store_writable", "gauge",
              "1 while the store takes writes; 0 after a storage error until it reopened "
              "(writes are answered storage_error meanwhile).");
    p->Sample("intentd_store_writable", {}, uint64_t{h.writable ? 1u : 0u});
    p->Family("intentd_store_reopens_total", "counter",
              "Times the store reopened itself after a storage error (a failed WAL write or "
              "sync, a failed flush, the data directory moved away and back).");
    p->Sample("intentd_store_reopens_total", {}, h.generations - 1);
    p->Family("intentd_store_voided_writes_total", "counter",
              "Writes made but not yet durable when the store failed: voided (never replayed) "
              "and answered storage_error.");
    p->Sample("intentd_store_voided_writes_total", {}, h.lost_writes);
    p->Family("intentd_store_wal_loss_accepted", "gauge",
              "RocksDB sequence numbers of acknowledged writes dropped at start because the WAL "
              "was damaged and serve --accept-wal-loss was given (0: none). Investigate.");
    p->Sample("intentd_store_wal_loss_accepted", {}, h.wal_loss_accepted);
  }
  AddStatementBatches(store.StatementBatches(), p);
  const std::optional<store::GroupCommitCounts> counts = store.CommitCounts();
  if (!counts) return;
  const store::GroupCommitCounts& c = *counts;
  p->Family("intentd_group_commit_duration_seconds", "histogram",
            "Group commit: the time to write out the WAL buffer and fdatasync it, per sync. "
            "Every durable reply waits for one.");
  AddSyncHistogram("intentd_group_commit_duration_seconds", {}, c.sync_rounds, c.sync_seconds, p);
  p->Family("intentd_group_commit_writes_total", "counter",
            "Writes made durable by the group commit (divide by the duration's _count: writes "
            "per sync).");
  p->Sample("intentd_group_commit_writes_total", {}, c.writes);
}

}  // namespace

std::string RenderMetrics(const OpContext& ctx, const TenantFilter& with_tenants) {
  const Stats& s = ctx.stats;
  PrometheusText p;
  p.Family("intentd_build_info", "gauge",
           "The running intentd (value 1): version, protocol, rules version for new intents.");
  p.Sample("intentd_build_info",
           {{"version", std::string(kSoftwareVersion)},
            {"protocol", std::to_string(kProtocolVersion)},
            {"rules_version", std::to_string(ctx.rules_version)}},
           uint64_t{1});
  p.Family("intentd_start_time_seconds", "gauge", "When the agent started, Unix time.");
  p.Sample("intentd_start_time_seconds", {}, static_cast<double>(s.started_at_ms) / 1e3);
  AddCounters(s, &p);
  AddLatency(s, &p);
  p.Family("intentd_leases_in_flight", "gauge",
           "Started actions with a live lease granted by this agent (leases granted before its "
           "start are not counted).");
  p.Sample("intentd_leases_in_flight", {}, ctx.stats.leases.CountLive(ctx.clock.NowMs()));
  AddUncertain(ctx, with_tenants, &p);
  AddApprovals(ctx, &p);
  if (const std::optional<uint64_t> bytes = ctx.store.ApproximateSizeBytes()) {
    p.Family("intentd_store_size_bytes", "gauge",
             "Approximate size of the store on disk (tables and write-ahead log).");
    p.Sample("intentd_store_size_bytes", {}, *bytes);
  }
  AddStorage(ctx.store, &p);
  if (with_tenants && s.tenant_labels) {
    p.Family("intentd_tenant_decisions_total", "counter",
             "begin decisions per tenant (tenant=\"\": tenants beyond the first 1000).");
    for (const TenantCounters::Row& row : s.tenants.Read()) {
      if (!with_tenants(row.tenant_id)) continue;
      for (size_t i = 0; i < store::kDecisionCount; ++i) {
        p.Sample("intentd_tenant_decisions_total",
                 {{"tenant", row.tenant_id}, {"decision", std::string(store::kDecisions[i].name)}},
                 row.decisions[i]);
      }
    }
  }
  return p.text();
}

bool OpMetrics(const OpContext& ctx, Reply* reply, OpError* error) {
  // Per-tenant series for admins, of the tenants their rules name.
  TenantFilter with_tenants;
  if (ctx.config.metrics.tenant_labels && ctx.access.admin()) {
    with_tenants = [&access = ctx.access](const std::string& tenant) {
      return access.MayUseTenant(tenant);
    };
  }
  reply->Add("content_type", kPrometheusContentType);
  reply->Add("text", RenderMetrics(ctx, with_tenants));
  return true;
}

// Admins of every tenant only (kOps).
bool OpKeys(const OpContext& ctx, Reply* reply, OpError* error) {
  std::vector<std::string> registered;
  std::vector<store::Store::KeyIdUsage> usage;
  store::Status st = ctx.store.RegisteredKeyIds(&registered);
  if (st.ok()) st = ctx.store.CountKeyIdUsage({}, &usage);
  if (!st.ok()) {
    *error = FromStore(st);
    return false;
  }
  // Every id the keyring, the registry or a live intent names.
  std::map<std::string, json> rows;
  auto row = [&](const std::string& id) -> json& {
    json& r = rows[id];
    if (r.is_null()) {
      r = {{"key_id", id},
           {"in_keyring", ctx.keyring.Has(id)},
           {"current", id == ctx.keyring.current_id()},
           {"registered", false},
           {"live_intents", 0},
           {"tenant_count", 0},
           {"tenants", json::array()}};
    }
    return r;
  };
  for (const std::string& id : ctx.keyring.ids()) row(id);
  for (const std::string& id : registered) row(id)["registered"] = true;
  for (const store::Store::KeyIdUsage& u : usage) {
    json& r = row(u.key_id);
    r["live_intents"] = u.live_intents;
    r["tenant_count"] = u.tenant_count;
    r["tenants"] = u.tenants;
  }
  json list = json::array();
  for (auto& [id, r] : rows) list.push_back(std::move(r));
  reply->Add("current", ctx.keyring.current_id());
  reply->Add("keys", list);
  return true;
}

// Admins of every tenant only (kOps).
bool OpBackup(const OpContext& ctx, Reply* reply, OpError* error) {
  const JsonView dest_value = ctx.request.find("dest");
  if (dest_value.is_null()) {
    return Fail(error, ErrorCode::kMissingField, "dest",
                "dest is required: an absolute path that does not exist yet, in a directory "
                "the agent may write");
  }
  if (!dest_value.is_string())
    return Fail(error, ErrorCode::kInvalidField, "dest", "dest must be a string");
  const std::string dest(dest_value.string());
  if (dest.empty() || dest[0] != '/' || dest.size() > kMaxPathBytes ||
      dest.find('\0') != std::string::npos) {
    return Fail(error, ErrorCode::kInvalidField, "dest",
                "dest must be an absolute path (as the agent sees it) of at most 4096 bytes");
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path path(dest);
  if (fs::exists(fs::symlink_status(path, ec))) {
    return Fail(error, ErrorCode::kInvalidField, "dest",
                dest + " already exists; name a new directory (a backup never overwrites)");
  }
  const fs::path parent = path.parent_path();
  if (!fs::is_directory(parent, ec)) {
    return Fail(error, ErrorCode::kInvalidField, "dest",
                "the parent directory " + parent.string() + " does not exist (for the agent)");
  }
  if (access(parent.c_str(), W_OK | X_OK) != 0) {
    return Fail(error, ErrorCode::kInvalidField, "dest",
                "the agent (uid " + std::to_string(geteuid()) + ") cannot write to " +
                    parent.string() +
                    "; choose a directory it may write (under the packaged "
                    "unit: below /var/lib/intentd)");
  }
  const auto started = std::chrono::steady_clock::now();
  store::Status st = ctx.store.Checkpoint(dest);
  if (st.code() == store::Status::Code::kNotSupported) {
    return Fail(error, ErrorCode::kInvalidState, "",
                "this store does not support online backups (back up a PostgreSQL store with "
                "its own tools, e.g. pg_dump)");
  }
  if (!st.ok()) {
    *error = FromStore(st);
    if (st.code() == store::Status::Code::kInvalidArgument) error->field = "dest";
    error->message = "the backup into " + dest + " failed: " + st.message();
    return false;
  }
  const int64_t elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
  // The copy holds money records: only the agent's user reads it. (Only the
  // directory: the files are hard links to the live store's.)
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace, ec);
  uint64_t files = 0, bytes = 0;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    ++files;
    bytes += entry.file_size(ec);
  }
  LogInfo("backup written to " + dest + ": " + std::to_string(files) + " files, " +
          std::to_string(bytes) + " bytes, in " + std::to_string(elapsed_ms) + " ms");
  reply->Add("dest", dest);
  reply->Add("files", files);
  reply->Add("bytes", bytes);
  reply->Add("duration_ms", elapsed_ms);
  return true;
}

}  // namespace intentd::agent
