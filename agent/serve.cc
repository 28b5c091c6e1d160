// `intentd serve`: opens the store, listens, serves until SIGTERM/SIGINT.
#include "agent/serve.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "agent/metrics_http.h"
#include "agent/reconcile_loop.h"
#include "agent/systemd.h"
#include "common/config.h"
#include "common/flags.h"
#include "common/keyring.h"
#include "common/log.h"
#include "common/secret.h"
#include "normalizers/key_derivation.h"
#include "protocol/dispatcher.h"
#include "store/open_store.h"
#include "transport/server.h"

namespace intentd::agent {
namespace {

const std::vector<FlagSpec> kServeFlags = {
    {"socket", true, "Unix socket to listen on (default /run/intentd/intentd.sock)"},
    {"data-dir", true, "store directory (default /var/lib/intentd)"},
    {"store", true,
     "rocksdb:DIR (default: --data-dir) or postgresql://... (shared by several hosts)"},
    {"store-pool", true, "PostgreSQL connections (default 16)"},
    {"require-sync-replication", false,
     "PostgreSQL: refuse to start unless the server is a primary that commits synchronously "
     "to a standby (synchronous_commit on, remote_write or remote_apply; "
     "synchronous_standby_names set; a sync or quorum standby streaming), so that a failover "
     "to it loses no acknowledged write"},
    {"config", true, "config file (default /etc/intentd/intentd.json; optional when default)"},
    {"rules-version", true, "key rules for new intents: 1 or 2 (default 2)"},
    {"sync", true, "always (default: acknowledged writes are on disk) or none"},
    {"wal-spares", true,
     "on (default) or off: new WAL files are made from zero-filled files written beforehand, "
     "so that syncs rewrite blocks instead of growing the file (RocksDB with --sync always)"},
    {"retention", true, "keep records at least this long after their last change (default 30d)"},
    {"min-free-space", true,
     "MiB: refuse writes while the store's disk has less free (default: 64, or a tenth of a "
     "smaller disk; 0: none)"},
    {"hmac-key-file", true, "file holding the HMAC secret or keyring (mode 0600)"},
    {"socket-group", true, "group of the socket file (mode 0660)"},
    {"max-connections", true, "connection limit (default 1024, or the config's)"},
    {"workers", true, "threads that run the slow requests and the PostgreSQL store's (default 64)"},
    {"io-threads", true, "threads that run the sockets and the requests (default 2)"},
    {"log-level", true, "error, warning, info (default) or debug"},
    {"metrics-listen", true,
     "also serve GET /metrics over HTTP on this loopback ADDRESS:PORT (default: off)"},
    {"accept-wal-loss", false,
     "start although the WAL lost acknowledged writes (a damaged record or WAL file, which "
     "the start otherwise refuses, naming it): the damaged WAL files are copied to "
     "DATA/wal-damaged-<ms>/ and the store opens without what they lost"},
    {"drop-key-id", true,
     "start although the keyring lost these key ids (comma-separated) while live intents were "
     "keyed with them; other services can then no longer reproduce those keys"},
    {"switch-key-id", false,
     "PostgreSQL: make this keyring's current id the one every agent on the database derives "
     "new intents with, replacing the id the database records"},
    {"reconcile-every", true,
     "resolve uncertain actions from their provider's record this often, e.g. 30s, for the "
     "action types of the config's \"reconcile\" member (default: off)"},
};

constexpr char kServeSummary[] =
    "Runs the agent: bots on this host connect to the Unix socket and speak the intentd\n"
    "protocol (one JSON object per line). Under systemd, the socket may be passed by socket\n"
    "activation (intentd.socket) and readiness is reported with sd_notify (Type=notify).\n"
    "The HMAC secret comes from --hmac-key-file, else $CREDENTIALS_DIRECTORY/hmac-key, else\n"
    "the environment variable IDEMPOTENCY_HMAC_KEY; it must be at least 32 bytes.";

int Usage(const std::string& message) {
  std::fprintf(stderr, "intentd serve: %s\n", message.c_str());
  return kExitUsage;
}

// The keyring against the store (common/keyring.h): a registered key id the
// keyring lost must key no live intent (unless dropped on purpose), the
// current id is registered, and on a store that several agents share
// (Store::AgreeCurrentKeyId) it is the id every agent agreed on. True with
// *error when the agent must not start.
bool CheckKeyring(store::Store* store, const Keyring& keyring, const std::set<std::string>& drop,
                  bool switch_current, std::string* error) {
  std::vector<std::string> registered, missing;
  store::Status st = store->RegisteredKeyIds(&registered);
  if (!st.ok()) {
    *error = "reading the store's key ids: " + st.message();
    return true;
  }
  for (const std::string& id : registered) {
    if (!keyring.Has(id)) missing.push_back(id);
  }
  if (!missing.empty()) {
    std::vector<store::Store::KeyIdUsage> usage;
    st = store->CountKeyIdUsage(missing, &usage);
    if (!st.ok()) {
      *error = "counting the intents of key ids " + missing.front() + "...: " + st.message();
      return true;
    }
    std::string refused;
    for (const store::Store::KeyIdUsage& u : usage) {
      if (u.live_intents == 0) continue;
      std::string tenants;
      for (const std::string& t : u.tenants) tenants += (tenants.empty() ? "" : ", ") + t;
      if (u.tenant_count > u.tenants.size()) tenants += ", ...";
      const std::string line = "key id " + u.key_id + " keys " + std::to_string(u.live_intents) +
                               " live intents of " + std::to_string(u.tenant_count) + " tenants (" +
                               tenants + ")";
      if (drop.count(u.key_id)) {
        LogWarning("the keyring no longer holds " + line + "; dropped as asked (--drop-key-id)");
      } else {
        refused += (refused.empty() ? "" : "; ") + line;
      }
    }
    if (!refused.empty()) {
      *error = "the keyring no longer holds secrets that live intents were keyed with: " + refused +
               ". Put them back in the keyring until those intents' retention has passed, or "
               "start with --drop-key-id ID to accept that other services can no longer "
               "reproduce those keys";
      return true;
    }
    for (const std::string& id : missing) {
      st = store->UnregisterKeyId(id);
      if (!st.ok()) {
        *error = "unregistering key id " + id + ": " + st.message();
        return true;
      }
      LogInfo("key id " + id + " left the keyring and keys no live intent any more: retired");
    }
  }
  std::string recorded;
  st = store->AgreeCurrentKeyId(keyring.current_id(), switch_current, &recorded);
  if (st.code() != store::Status::Code::kNotSupported) {  // a store of one agent: nothing to agree
    if (st.code() == store::Status::Code::kConflict) {
      *error = st.message() +
               ": every agent on this database must derive new intents under one secret. Start "
               "this agent with the database's current id, or, once every agent's keyring holds "
               "the new secret, start one with --switch-key-id to make it current for all";
      return true;
    }
    if (!st.ok()) {
      *error = "recording the current key id: " + st.message();
      return true;
    }
    if (!recorded.empty() && recorded != keyring.current_id()) {
      LogWarning("the database's current key id was " + recorded + "; now " + keyring.current_id() +
                 " (--switch-key-id): restart the other agents with it");
    }
  }
  // Registered once this agent may derive new intents with it.
  st = store->RegisterKeyId(keyring.current_id());
  if (!st.ok()) {
    *error = "registering key id " + keyring.current_id() + ": " + st.message();
    return true;
  }
  return false;
}

int StartupError(const std::string& message) {
  LogError("cannot start: " + message);
  return kExitFailed;
}

bool MakeDirs(const std::string& path, std::string* error) {
  std::error_code ec;
  // A directory we create holds money records: only the agent's user reads it.
  if (std::filesystem::create_directories(path, ec)) {
    std::filesystem::permissions(path, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  if (ec) {
    *error = "cannot create the data directory " + path + ": " + ec.message();
    return false;
  }
  return true;
}

// Pings the systemd watchdog while the store answers reads.
class Watchdog {
 public:
  Watchdog(long long usec, store::Store* store) {
    if (usec <= 0) return;
    thread_ = std::thread([this, usec, store] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::microseconds(usec / 2), [this] { return stop_; })) {
        store::Action ignored;
        store::Status st = store->GetAction("\x01watchdog", "\x01probe", &ignored);
        if (st.ok() || st.code() == store::Status::Code::kNotFound)
          Notify("WATCHDOG=1");
        else
          LogWarning("watchdog: the store does not answer reads: " + st.message());
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The transport holds replies until the store's WAL sync covers them.
class StoreDurability final : public transport::Durability {
 public:
  explicit StoreDurability(store::Store* store) : store_(store) {}
  void WhenDurable(uint64_t ticket, std::function<void(bool)> done) override {
    store_->WhenDurable(ticket, [done = std::move(done)](const store::Status& s) {
      if (!s.ok()) LogStoreFailure(s);  // the client gets line_if_lost
      done(s.ok());
    });
  }
  Verdict Check(uint64_t ticket) override {
    switch (store_->CheckTicket(ticket)) {
      case store::Store::TicketState::kDurable:
        return Verdict::kDurable;
      case store::Store::TicketState::kLost:
        return Verdict::kLost;
      case store::Store::TicketState::kPending:
        break;
    }
    return Verdict::kPending;
  }

 private:
  store::Store* store_;
};

}  // namespace

int RunServe(const std::vector<std::string>& args) {
  Flags flags;
  std::string error;
  if (!flags.Parse(kServeFlags, args, &error)) return Usage(error);
  if (flags.help_requested()) {
    std::fputs(FlagsUsage("serve", "[OPTIONS]", kServeSummary, kServeFlags).c_str(), stdout);
    return kExitOk;
  }
  if (!flags.positional().empty()) return Usage("unexpected argument " + flags.positional()[0]);

  LogLevel level = LogLevel::kInfo;
  if (!ParseLogLevel(flags.GetOr("log-level", "info"), &level)) {
    return Usage("--log-level must be error, warning, info or debug");
  }
  SetLogLevel(level);
  long long rules_version = 2;
  if (!ParseInt(flags.GetOr("rules-version", "2"), 1, 2, &rules_version)) {
    return Usage("--rules-version must be 1 or 2");
  }
  const std::string sync = flags.GetOr("sync", "always");
  if (sync != "always" && sync != "none") return Usage("--sync must be always or none");
  const std::string wal_spares = flags.GetOr("wal-spares", "on");
  if (wal_spares != "on" && wal_spares != "off") return Usage("--wal-spares must be on or off");
  long long retention_ms = 0;
  if (!ParseDurationMs(flags.GetOr("retention", "30d"), &retention_ms)) {
    return Usage(
        "--retention must be a duration with its unit, like 30d, 12h, 90m or 3600s (a "
        "bare number is refused: 30 would be 30 seconds to a machine and 30 days to "
        "whoever wrote it)");
  }
  // Every flag is checked before the config, the secret and the store: a
  // mistyped command line is a usage error whatever else is missing.
  long long reconcile_every_ms = 0;
  if (auto every = flags.Get("reconcile-every")) {
    if (!ParseDurationMs(*every, &reconcile_every_ms) || reconcile_every_ms < 1000) {
      return Usage("--reconcile-every must be a duration of at least 1s, like 30s or 5m");
    }
  }
  long long workers = 64;
  if (!ParseInt(flags.GetOr("workers", "64"), 1, 1024, &workers)) {
    return Usage("--workers must be an integer from 1 to 1024");
  }
  // Two: the parse and the store calls of half the connections run beside
  // the other half's (a request costs an io thread tens of us of CPU, most of
  // it in RocksDB), 8-22% more begin+complete pairs/s at 64 connections than
  // one in alternated runs: bench/RESULTS.md, "One clean fast path".
  long long io_threads = 2;
  if (!ParseInt(flags.GetOr("io-threads", "2"), 1, 64, &io_threads)) {
    return Usage("--io-threads must be an integer from 1 to 64");
  }

  if (auto listen = flags.Get("metrics-listen")) {
    std::string address;
    uint16_t port = 0;
    if (!ParseMetricsListen(*listen, &address, &port, &error)) return Usage(error);
  }

  Config config;
  const bool explicit_config = flags.Has("config");
  if (!LoadConfigFile(flags.GetOr("config", kDefaultConfig), !explicit_config, &config, &error)) {
    return StartupError(error);
  }
  if (auto v = flags.Get("max-connections")) {
    long long n = 0;
    if (!ParseInt(*v, 1, 1 << 20, &n)) return Usage("--max-connections must be a positive integer");
    config.limits.max_connections = static_cast<size_t>(n);
  }
  if (auto g = flags.Get("socket-group")) config.socket_group = *g;

  Keyring keyring;
  std::string secret_source;
  if (!LoadKeyring(flags.GetOr("hmac-key-file", ""), &keyring, &secret_source, &error)) {
    return StartupError(error);
  }
  std::set<std::string> drop_key_ids;
  if (auto drop = flags.Get("drop-key-id")) {
    for (size_t start = 0; start <= drop->size();) {
      const size_t comma = std::min(drop->find(',', start), drop->size());
      const std::string id = drop->substr(start, comma - start);
      if (!Keyring::ValidId(id)) return Usage("--drop-key-id takes key ids separated by commas");
      if (keyring.Has(id)) {
        return Usage("--drop-key-id " + id + ": the keyring still holds that id");
      }
      drop_key_ids.insert(id);
      start = comma + 1;
    }
  }
  if (retention_ms < 7LL * 24 * 3600 * 1000) {
    LogWarning(
        "retention is shorter than 7 days (WhatsApp retries webhooks for 7 days): a late "
        "redelivery may find no record and execute again");
  }

  // Signals are taken synchronously by this thread; every thread started
  // below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  int activated_fd = -1;
  if (!TakeActivatedSocket(&activated_fd, &error)) return StartupError(error);

  store::StoreSpec store_spec;
  store_spec.url = flags.GetOr("store", "");
  store_spec.dir = flags.GetOr("data-dir", kDefaultDataDir);
  store_spec.sync = sync == "always";
  // Group commit by the transport: replies wait for the WAL sync that covers
  // them, handlers never block on the disk (RocksDB; PostgreSQL ignores it).
  store_spec.defer_sync = true;
  // Syncs that rewrite written blocks (store/rocks/wal_spares.h).
  store_spec.wal_spares = wal_spares == "on";
  store_spec.retention_ms = retention_ms;
  store_spec.accept_wal_loss = flags.Has("accept-wal-loss");
  store_spec.log = [](bool error, const std::string& line) {
    if (error) {
      LogError(line);
    } else {
      LogInfo(line);
    }
  };
  if (auto mib = flags.Get("min-free-space")) {
    long long n = 0;
    if (!ParseInt(*mib, 0, 1LL << 30, &n)) {
      return Usage("--min-free-space must be a number of MiB from 0 to 1073741824");
    }
    store_spec.min_free_bytes = n << 20;
  }
  if (auto pool = flags.Get("store-pool")) {
    long long n = 0;
    if (!ParseInt(*pool, 1, 1024, &n))
      return Usage("--store-pool must be an integer from 1 to 1024");
    store_spec.pool_size = static_cast<int>(n);
  }
  store::StoreKind store_kind;
  std::string rocks_dir;
  store::Status st = store::ResolveStore(store_spec, &store_kind, &rocks_dir);
  if (!st.ok()) return Usage(st.message());
  const bool require_sync_replication = flags.Has("require-sync-replication");
  if (require_sync_replication && store_kind != store::StoreKind::kPostgres) {
    return Usage("--require-sync-replication needs a PostgreSQL --store (postgresql://...)");
  }
  if (store_kind == store::StoreKind::kRocksDb && !MakeDirs(rocks_dir, &error)) {
    return StartupError(error);
  }
  const std::string data_dir = store::DescribeStore(store_spec);
  std::unique_ptr<store::Store> store;
  st = store::OpenStore(store_spec, &store);
  if (!st.ok()) return StartupError("cannot open the store " + data_dir + ": " + st.message());
  if (require_sync_replication) {
    // Checked once, at the start: a standby lost later makes commits wait
    // (synchronous_standby_names), it does not make them unsafe.
    std::string replication;
    st = store::CheckSyncReplication(store_spec, &replication);
    if (!st.ok()) {
      return StartupError("--require-sync-replication: " + data_dir + ": " + st.message());
    }
    LogInfo("synchronous replication, as required: " + replication);
  }

  std::unique_ptr<reconcile::Reconciler> reconciler;
  if (flags.Has("reconcile-every")) {
    if (config.reconcile.empty()) {
      return Usage(
          "--reconcile-every needs the config's \"reconcile\" member: which provider "
          "to ask for which action type (see intentd-reconcile(8))");
    }
    if (!reconcile::Reconciler::Create(config.reconcile, &reconciler, &error)) {
      return StartupError(error);
    }
  }

  if (CheckKeyring(store.get(), keyring, drop_key_ids, flags.Has("switch-key-id"), &error)) {
    return StartupError(error);
  }
  DispatcherOptions dispatcher_options;
  dispatcher_options.rules_version = static_cast<int>(rules_version);
  dispatcher_options.quick_store = store_kind == store::StoreKind::kRocksDb;
  Dispatcher dispatcher(config, keyring, store.get(), dispatcher_options);

  std::unique_ptr<MetricsHttpServer> metrics_server;
  if (auto listen = flags.Get("metrics-listen")) {
    if (!MetricsHttpServer::Start(
            *listen, [&dispatcher] { return dispatcher.MetricsText(); }, &metrics_server, &error)) {
      return StartupError(error);
    }
    LogInfo("metrics on http://" + metrics_server->endpoint() + "/metrics");
  }

  transport::ServerOptions server_options;
  server_options.socket_path = flags.GetOr("socket", kDefaultSocket);
  server_options.inherited_fd = activated_fd;
  server_options.socket_group = config.socket_group;
  server_options.max_frame_bytes = config.limits.max_frame_bytes;
  server_options.max_connections = config.limits.max_connections;
  server_options.line_timeout = std::chrono::milliseconds(config.limits.line_timeout_ms);
  server_options.worker_threads = static_cast<int>(workers);
  server_options.io_threads = static_cast<int>(io_threads);
  StoreDurability durability(store.get());
  server_options.durability = &durability;
  server_options.log = [](transport::LogLevel level, std::string_view message) {
    const std::string text = "transport: " + std::string(message);
    if (level == transport::LogLevel::kError) {
      LogError(text);
    } else if (level == transport::LogLevel::kWarning) {
      LogWarning(text);
    } else {
      LogInfo(text);
    }
  };
  std::unique_ptr<transport::Server> server;
  transport::Result started = transport::Server::Start(server_options, &dispatcher, &server);
  if (!started.ok) return StartupError(started.message);

  LogInfo("intentd " + std::string(kSoftwareVersion) + " serving on " +
          (activated_fd >= 0 ? std::string("the socket passed by systemd")
                             : server_options.socket_path) +
          ", store " + data_dir + " (sync " + sync + ", retention " +
          flags.GetOr("retention", "30d") + "), rules version " + std::to_string(rules_version) +
          ", " + std::to_string(config.catalog.types().size()) + " action types (" +
          [&config] {
            std::string names;
            for (const auto& t : config.catalog.types())
              names += (names.empty() ? "" : ", ") + t.name;
            return names;
          }() +
          "), " +
          (config.access.empty() ? std::string("no access rules (socket permissions apply)")
                                 : std::to_string(config.access.size()) + " access rules") +
          ", keyring from " + secret_source + " (current key id " + keyring.current_id() +
          (keyring.ids().size() > 1 ? ", " + std::to_string(keyring.ids().size()) + " secrets"
                                    : std::string()) +
          ")");
  std::unique_ptr<ReconcileLoop> reconcile_loop;
  if (reconciler) {
    reconcile_loop = std::make_unique<ReconcileLoop>(&dispatcher, std::move(reconciler),
                                                     std::chrono::milliseconds(reconcile_every_ms));
    LogInfo("reconciling uncertain actions every " + *flags.Get("reconcile-every") + " for " +
            std::to_string(config.reconcile.size()) + " action types");
  }
  Notify("READY=1\nSTATUS=serving");
  int received = 0;
  {
    Watchdog watchdog(WatchdogUsec(), store.get());
    while (sigwait(&signals, &received) != 0) {
    }
    Notify("STOPPING=1\nSTATUS=stopping");
    LogInfo(std::string("received ") + strsignal(received) + ", stopping");
    if (reconcile_loop) reconcile_loop->RequestStop();
    server->Stop(std::chrono::milliseconds(4000));
    reconcile_loop.reset();
  }
  server.reset();
  metrics_server.reset();
  st = store->Flush();
  if (!st.ok()) LogError("flushing the store at exit: " + st.message());
  store.reset();
  LogInfo("stopped");
  return kExitOk;
}

}  // namespace intentd::agent
