// intentd_loadgen: the same logical flow (begin = freeze intent + claim
// action, then complete with a ~200-byte response) against intentd, or
// against the anchors PostgreSQL and Redis, so their figures compare.
//
//   intentd_loadgen --system intentd  --socket /run/intentd/intentd.sock
//   intentd_loadgen --system intentd  --spawn-intentd build/agent/intentd
//   intentd_loadgen --spawn-intentd build/agent/intentd
//                   --spawn-store "postgresql:///intentd?host=/tmp/pg&user=postgres"
//   intentd_loadgen --system postgres --pg "host=/tmp/pg dbname=postgres user=postgres"
//   intentd_loadgen --system redis    --redis-socket /tmp/redis.sock
//   intentd_loadgen --fsync-probe DIR [--duration 2]
//   common: --connections C --duration S --warmup S --redeliveries 0.03 --tenants 50
//           --response-bytes 200 --threads 1 --seed N --run-id ID
//
// Prints a human summary, then one line "RESULT key=value ..." for scripts.
// Exit status: 0 clean; 1 when a redelivery came back `execute` (a double
// action), a fresh intent did not, or a request failed; 2 on usage or setup
// errors.
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "bench/loadgen_batches.h"
#include "bench/loadgen_client_key.h"
#include "bench/loadgen_cpu.h"
#include "bench/loadgen_fsync_probe.h"
#include "bench/loadgen_intentd.h"
#include "bench/loadgen_runner.h"
#include "bench/loadgen_spawn.h"
#ifdef INTENTD_LOADGEN_POSTGRES
#include "bench/loadgen_postgres.h"
#endif
#ifdef INTENTD_LOADGEN_REDIS
#include "bench/loadgen_redis.h"
#endif

namespace intentd::bench {
namespace {

constexpr char kUsage[] =
    "usage: intentd_loadgen --system intentd|postgres|redis [options]\n"
    "  --socket PATH          intentd's socket (default $INTENTD_SOCKET or\n"
    "                         /run/intentd/intentd.sock)\n"
    "  --spawn-intentd BIN    start BIN serve on a private temporary socket and data\n"
    "                         directory for this run, stop it after (system intentd)\n"
    "  --spawn-sync MODE      --sync of the spawned agent: always (default) or none\n"
    "                         (on PostgreSQL: its sessions' synchronous_commit on/off)\n"
    "  --spawn-store URL      the spawned agent serves --store URL (a PostgreSQL URI,\n"
    "                         postgresql://...) instead of a private RocksDB directory,\n"
    "                         after `intentd migrate --store URL`; use a database of\n"
    "                         its own (its tables are named like --system postgres's)\n"
    "  --spawn-store-pool N   --store-pool of the spawned agent (default: the agent's)\n"
    "  --pg CONNINFO          libpq connection string (postgres)\n"
    "  --redis-socket PATH    Redis Unix socket (redis)\n"
    "  --connections C        concurrent connections (default 16)\n"
    "  --duration S           measured seconds (default 10)\n"
    "  --warmup S             seconds run before measuring (default 1)\n"
    "  --redeliveries F       share of actions that redeliver an executed intent\n"
    "                         (default 0.03); they must answer replay or in_flight\n"
    "  --tenants N            tenants of the fresh intents (default 50)\n"
    "  --response-bytes N     size of the stored response (default 200)\n"
    "  --threads T            client threads, each multiplexing its connections\n"
    "                         with epoll (default 1)\n"
    "  --seed N               random seed (default: from the clock)\n"
    "  --run-id ID            intent_ref prefix (default: from the clock and pid)\n"
    "  --label TEXT           name printed in the RESULT line (default: the system)\n"
    "  --server-pid PID       also report the CPU per request of the server process PID\n"
    "                         and its children, living and ended (PostgreSQL's\n"
    "                         postmaster, redis-server, an agent started elsewhere)\n"
    "or:    intentd_loadgen --fsync-probe DIR [--duration S]\n"
    "  measures write(4 KiB)+fdatasync rounds per second on a file in DIR, with\n"
    "  an idle and with a busy CPU beside it; prints one line FSYNC key=value...\n"
    "The anchors derive keys on the client with $IDEMPOTENCY_HMAC_KEY (or a fixed\n"
    "bench secret), as a bot using them would.\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "intentd_loadgen: %s\n%s", message.c_str(), kUsage);
  return 2;
}

bool ParseDouble(const std::string& text, double low, double high, double* out) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value >= low && value <= high)) return false;
  *out = value;
  return true;
}

bool ParseInt(const std::string& text, long low, long high, long* out) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < low || value > high) return false;
  *out = value;
  return true;
}

double Micros(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

void Report(const std::string& label, const RunOptions& options, const CpuReport& cpu,
            const BatchReport& batches, RunStats* stats) {
  std::vector<uint64_t> all = stats->begin_ns;
  all.insert(all.end(), stats->complete_ns.begin(), stats->complete_ns.end());
  const double actions_per_s = static_cast<double>(stats->actions) / stats->window_s;
  const double pairs_per_s = static_cast<double>(stats->pairs) / stats->window_s;
  const double requests_per_s = static_cast<double>(all.size()) / stats->window_s;
  const uint64_t p50 = Percentile(&all, 0.50);
  const uint64_t p99 = Percentile(&all, 0.99);
  const uint64_t p999 = Percentile(&all, 0.999);
  const uint64_t max = all.empty() ? 0 : all.back();
  const uint64_t begin_p50 = Percentile(&stats->begin_ns, 0.50);
  const uint64_t begin_p99 = Percentile(&stats->begin_ns, 0.99);
  const uint64_t complete_p50 = Percentile(&stats->complete_ns, 0.50);
  const uint64_t complete_p99 = Percentile(&stats->complete_ns, 0.99);

  std::printf("%s: %d connections, %.1f s measured after %.1f s warm-up\n", label.c_str(),
              options.connections, stats->window_s, options.warmup_s);
  std::printf(
      "  actions/s %.0f (begin+complete pairs/s %.0f, redeliveries %llu), requests/s %.0f\n",
      actions_per_s, pairs_per_s, static_cast<unsigned long long>(stats->redeliveries),
      requests_per_s);
  std::printf(
      "  latency per request (us): p50 %.0f  p99 %.0f  p99.9 %.0f  max %.0f  (%zu samples)\n",
      Micros(p50), Micros(p99), Micros(p999), Micros(max), all.size());
  std::printf("    begin p50 %.0f p99 %.0f; complete p50 %.0f p99 %.0f\n", Micros(begin_p50),
              Micros(begin_p99), Micros(complete_p50), Micros(complete_p99));
  std::printf("  redelivery decisions: replay %llu, in_flight %llu, execute %llu, recover %llu\n",
              static_cast<unsigned long long>(
                  stats->redelivery_decisions[static_cast<int>(Decision::kReplay)]),
              static_cast<unsigned long long>(
                  stats->redelivery_decisions[static_cast<int>(Decision::kInFlight)]),
              static_cast<unsigned long long>(
                  stats->redelivery_decisions[static_cast<int>(Decision::kExecute)]),
              static_cast<unsigned long long>(
                  stats->redelivery_decisions[static_cast<int>(Decision::kRecover)]));
  std::printf(
      "  violations (redelivery executed) %llu, fresh not executed %llu, errors %llu, "
      "connections lost %llu\n",
      static_cast<unsigned long long>(stats->violations),
      static_cast<unsigned long long>(stats->unexpected),
      static_cast<unsigned long long>(stats->errors),
      static_cast<unsigned long long>(stats->fatal));
  for (const auto& [message, count] : stats->error_messages) {
    std::printf("    %llu x %s\n", static_cast<unsigned long long>(count), message.c_str());
  }
  std::fputs(cpu.human.c_str(), stdout);
  std::fputs(batches.human.c_str(), stdout);
  std::printf(
      "RESULT label=%s connections=%d seconds=%.1f actions_per_s=%.0f pairs_per_s=%.0f "
      "requests_per_s=%.0f p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f "
      "begin_p99_us=%.0f complete_p99_us=%.0f redeliveries=%llu violations=%llu "
      "unexpected=%llu errors=%llu lost=%llu%s%s%s%s\n",
      label.c_str(), options.connections, stats->window_s, actions_per_s, pairs_per_s,
      requests_per_s, Micros(p50), Micros(p99), Micros(p999), Micros(max), Micros(begin_p99),
      Micros(complete_p99), static_cast<unsigned long long>(stats->redeliveries),
      static_cast<unsigned long long>(stats->violations),
      static_cast<unsigned long long>(stats->unexpected),
      static_cast<unsigned long long>(stats->errors), static_cast<unsigned long long>(stats->fatal),
      cpu.fields.empty() ? "" : " ", cpu.fields.c_str(), batches.fields.empty() ? "" : " ",
      batches.fields.c_str());
  std::fflush(stdout);
}

int ProbeMain(const std::string& directory, double seconds) {
  FsyncProbeResult idle, busy;
  std::string error;
  if (!ProbeFsync(directory, seconds, 4096, false, &idle, &error) ||
      !ProbeFsync(directory, seconds, 4096, true, &busy, &error)) {
    std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
    return 2;
  }
  std::printf(
      "fdatasync of 4 KiB appends in %s: %.0f/s (p50 %.0f us, p99 %.0f us) with the CPU "
      "idle, %.0f/s (p50 %.0f us, p99 %.0f us) with a busy CPU beside it\n",
      directory.c_str(), idle.per_second, idle.p50_us, idle.p99_us, busy.per_second, busy.p50_us,
      busy.p99_us);
  std::printf("FSYNC idle_per_s=%.0f idle_p50_us=%.0f busy_per_s=%.0f busy_p50_us=%.0f\n",
              idle.per_second, idle.p50_us, busy.per_second, busy.p50_us);
  return 0;
}

int Main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg.rfind("--", 0) != 0) return Usage("unexpected argument " + arg);
    std::string value;
    const size_t equals = arg.find('=');
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg.resize(equals);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(arg + " needs a value");
    }
    flags[arg.substr(2)] = value;
  }
  auto flag = [&flags](const std::string& name, const std::string& fallback) {
    auto it = flags.find(name);
    std::string value = it == flags.end() ? fallback : it->second;
    flags.erase(name);
    return value;
  };

  RunOptions options;
  long number = 0;
  const std::string probe_dir = flag("fsync-probe", "");
  if (!probe_dir.empty()) {
    double seconds = 2;
    if (!ParseDouble(flag("duration", "2"), 0.1, 60, &seconds)) {
      return Usage("--duration must be 0.1..60 seconds");
    }
    if (!flags.empty()) return Usage("--fsync-probe takes only --duration");
    return ProbeMain(probe_dir, seconds);
  }
  const std::string spawn_binary = flag("spawn-intentd", "");
  SpawnOptions spawn;
  spawn.sync = flag("spawn-sync", "always");
  spawn.store = flag("spawn-store", "");
  const std::string spawn_pool = flag("spawn-store-pool", "");
  const std::string system = flag("system", spawn_binary.empty() ? "" : "intentd");
  if (!ParseInt(flag("connections", "16"), 1, 4096, &number)) {
    return Usage("--connections must be 1..4096");
  }
  options.connections = static_cast<int>(number);
  if (!ParseInt(flag("threads", "1"), 1, 256, &number)) return Usage("--threads must be 1..256");
  options.threads = static_cast<int>(number);
  if (!ParseDouble(flag("duration", "10"), 0.1, 86400, &options.duration_s)) {
    return Usage("--duration must be 0.1..86400 seconds");
  }
  if (!ParseDouble(flag("warmup", "1"), 0, 3600, &options.warmup_s)) {
    return Usage("--warmup must be 0..3600 seconds");
  }
  if (!ParseDouble(flag("redeliveries", "0.03"), 0, 1, &options.workload.redelivery_share)) {
    return Usage("--redeliveries must be a share between 0 and 1");
  }
  if (!ParseInt(flag("tenants", "50"), 1, 1000000, &number)) return Usage("--tenants must be >= 1");
  options.workload.tenants = static_cast<int>(number);
  if (!ParseInt(flag("response-bytes", "200"), 2, 32000, &number)) {
    return Usage("--response-bytes must be 2..32000");
  }
  options.workload.response_bytes = static_cast<int>(number);
  const auto now_ns = std::chrono::system_clock::now().time_since_epoch().count();
  if (!ParseInt(flag("seed", std::to_string(now_ns % 1000000007)), 0, LONG_MAX, &number)) {
    return Usage("--seed must be a non-negative integer");
  }
  options.seed = static_cast<uint64_t>(number);
  options.workload.run_id = flag(
      "run-id", std::to_string(now_ns / 1000000 % 100000000000) + "p" + std::to_string(getpid()));
  const std::string label = flag("label", system);
  if (!ParseInt(flag("server-pid", "0"), 0, INT_MAX, &number)) {
    return Usage("--server-pid must be a process id");
  }
  const pid_t server_pid = static_cast<pid_t>(number);
  if (server_pid > 0 && !SampleCpu(0, server_pid).ok) {
    return Usage("--server-pid " + std::to_string(server_pid) + ": no such process to sample");
  }
  std::string socket_path =
      flag("socket", std::getenv("INTENTD_SOCKET") ? std::getenv("INTENTD_SOCKET")
                                                   : "/run/intentd/intentd.sock");
  const std::string conninfo = flag("pg", "");
  const std::string redis_socket = flag("redis-socket", "");
  if (!flags.empty()) return Usage("unknown flag --" + flags.begin()->first);

  const char* env_secret = std::getenv("IDEMPOTENCY_HMAC_KEY");
  const std::string secret =
      env_secret && std::strlen(env_secret) >= 32 ? env_secret : std::string(40, 'k');
  ClientKeyDeriver deriver(secret);
  std::string error;
  std::unique_ptr<SpawnedAgent> agent;
  if (spawn_binary.empty() && (!spawn.store.empty() || !spawn_pool.empty())) {
    return Usage("--spawn-store and --spawn-store-pool go with --spawn-intentd");
  }
  if (!spawn_binary.empty()) {
    if (system != "intentd") return Usage("--spawn-intentd goes with --system intentd");
    if (spawn.sync != "always" && spawn.sync != "none") {
      return Usage("--spawn-sync must be always or none");
    }
    if (!spawn_pool.empty()) {
      if (spawn.store.empty()) return Usage("--spawn-store-pool goes with --spawn-store");
      if (!ParseInt(spawn_pool, 1, 1024, &number))
        return Usage("--spawn-store-pool must be 1..1024");
      spawn.store_pool = static_cast<int>(number);
    }
    agent = SpawnedAgent::Start(spawn_binary, spawn, &error);
    if (!agent) {
      std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
      return 2;
    }
    socket_path = agent->socket_path();
  }
  if (system == "intentd") {
    options.connect = [&socket_path](std::string* e) { return ConnectIntentd(socket_path, e); };
  } else if (system == "postgres") {
#ifdef INTENTD_LOADGEN_POSTGRES
    if (conninfo.empty()) return Usage("--system postgres needs --pg CONNINFO");
    if (!SetupPostgres(conninfo, &error)) {
      std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
      return 2;
    }
    options.connect = [&conninfo, &deriver](std::string* e) {
      return ConnectPostgres(conninfo, &deriver, e);
    };
#else
    return Usage("built without libpq (install libpq-dev and rebuild)");
#endif
  } else if (system == "redis") {
#ifdef INTENTD_LOADGEN_REDIS
    if (redis_socket.empty()) return Usage("--system redis needs --redis-socket PATH");
    static std::string sha;
    if (!SetupRedis(redis_socket, &sha, &error)) {
      std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
      return 2;
    }
    options.connect = [&redis_socket, &deriver](std::string* e) {
      return ConnectRedis(redis_socket, sha, &deriver, e);
    };
#else
    return Usage("built without hiredis (install libhiredis-dev and rebuild)");
#endif
  } else {
    return Usage("--system must be intentd, postgres or redis");
  }

  // CPU time in the window: the spawned agent's threads (not an agent
  // started elsewhere, which may serve others too), this process, the machine.
  const pid_t agent_pid = agent ? agent->pid() : 0;
  CpuSample cpu_start, cpu_end;
  // And the agent's batches of PostgreSQL statements (none on RocksDB).
  BatchSample batches_start, batches_end;
  const bool batches = system == "intentd";
  options.window_opened = [&] {
    cpu_start = SampleCpu(agent_pid, server_pid);
    if (batches) batches_start = SampleBatches(socket_path);
  };
  options.window_closed = [&] {
    cpu_end = SampleCpu(agent_pid, server_pid);
    if (batches) batches_end = SampleBatches(socket_path);
  };
  RunStats stats;
  if (!Run(options, &stats, &error)) {
    std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
    return 2;
  }
  Report(label, options,
         DescribeCpu(cpu_start, cpu_end, stats.begin_ns.size() + stats.complete_ns.size()),
         DescribeBatches(batches_start, batches_end), &stats);
  if (agent && !agent->Stop(&error)) {
    std::fprintf(stderr, "intentd_loadgen: %s\n", error.c_str());
    return 1;
  }
  if (stats.violations > 0) {
    std::fprintf(stderr, "intentd_loadgen: %llu redeliveries were told to execute again\n",
                 static_cast<unsigned long long>(stats.violations));
    return 1;
  }
  if (stats.unexpected > 0 || stats.errors > 0 || stats.fatal > 0) {
    std::fprintf(stderr, "intentd_loadgen: requests failed; the figures are not clean\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace intentd::bench

int main(int argc, char** argv) { return intentd::bench::Main(argc, argv); }
