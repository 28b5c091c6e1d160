// Crash torture: the real intentd under 16 concurrent clients, SIGKILLed at
// random moments and restarted on the same data directory; then the checker
// judges the agent from the clients' own logs (tests/torture/checker.h).
//
//   intentd_torture [--clients N] [--min-kills N] [--min-seconds S]
//                   [--max-seconds S] [--seed N] [--keep-logs DIR]
//   intentd_torture --self-test     (the checker against planted violations)
//
// Prints each invariant with its counts and the final line exactly
// "N passed, M failed". Exit status 0 only when nothing failed.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/agent/agent_util.h"
#include "tests/torture/checker.h"
#include "tests/torture/final_state.h"
#include "tests/torture/selftest.h"
#include "tests/torture/workload.h"

namespace intentd::torture {
namespace {

using Clock = std::chrono::steady_clock;
using intentd::testing::Agent;
using intentd::testing::json;
using intentd::testing::TempDir;

struct Options {
  int clients = 16;
  int min_kills = 20;
  double min_seconds = 25;
  double max_seconds = 70;
  uint64_t seed = 0;  // 0: from the clock
  std::string keep_logs;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return false;
    if (a == "--clients")
      o->clients = std::atoi(v);
    else if (a == "--min-kills")
      o->min_kills = std::atoi(v);
    else if (a == "--min-seconds")
      o->min_seconds = std::atof(v);
    else if (a == "--max-seconds")
      o->max_seconds = std::atof(v);
    else if (a == "--seed")
      o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--keep-logs")
      o->keep_logs = v;
    else
      return false;
    ++i;
  }
  return o->clients > 0 && o->min_kills >= 0 && o->max_seconds >= o->min_seconds;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Writes the clients' logs as JSON lines, for a post-mortem.
void WriteLogs(const std::string& dir, const std::vector<ClientLog>& logs, const Agent& agent) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/clients.jsonl");
  for (const ClientLog& log : logs) {
    for (const BeginAck& b : log.begins) {
      out << json{{"c", log.client}, {"begin", b.decision}, {"t", b.tenant},
                  {"ref", b.ref},    {"key", b.key},        {"replay", b.replay_outcome}}
                 .dump()
          << "\n";
    }
    for (const Grant& g : log.grants) {
      out << json{{"c", log.client},       {"grant", g.token},
                  {"recover", g.recover},  {"t", g.tenant},
                  {"key", g.key},          {"prev", g.previous_token},
                  {"at", g.granted_at_ms}, {"until", g.lease_until_ms}}
                 .dump()
          << "\n";
    }
    for (const Finish& f : log.finishes) {
      out << json{{"c", log.client},     {"finish", static_cast<int>(f.kind)},
                  {"t", f.tenant},       {"key", f.key},
                  {"token", f.token},    {"acked", f.acked},
                  {"outcome", f.outcome}}
                 .dump()
          << "\n";
    }
  }
  std::ofstream(dir + "/agent.log") << agent.Log();
}

struct Timing {
  int restarts = 0;
  double total_ms = 0, max_ms = 0;
};

// SIGKILL, wait, start again on the same data directory.
bool KillAndRestart(Agent* agent, RunFacts* facts, Timing* timing) {
  agent->Kill(SIGKILL);
  agent->Wait();
  ++facts->kills;
  ++facts->restarts_attempted;
  const auto start = Clock::now();
  const bool ok = agent->Start();
  const double ms = Seconds(start) * 1000;
  if (ok) {
    ++facts->restarts_succeeded;
    ++timing->restarts;
    timing->total_ms += ms;
    timing->max_ms = std::max(timing->max_ms, ms);
  }
  return ok;
}

int Run(const Options& options) {
  const uint64_t seed =
      options.seed ? options.seed
                   : static_cast<uint64_t>(Clock::now().time_since_epoch().count()) % 1000000;
  std::printf("torture: %d clients, lease 1000 ms, >= %d SIGKILLs, %.0f..%.0f s, seed %llu\n",
              options.clients, options.min_kills, options.min_seconds, options.max_seconds,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  TempDir dir;
  testing::AgentOptions agent_options;
  agent_options.extra_args = {"--log-level", "info"};  // the last --log-level wins
  Agent agent(dir.path(), agent_options);
  if (!agent.started()) {
    std::printf("the agent did not start:\n%s\n0 passed, 1 failed\n", agent.Log().c_str());
    return 1;
  }

  WorkloadOptions workload;
  workload.socket_path = agent.socket_path();
  IntentPool pool;
  std::vector<ClientLog> logs(options.clients);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < options.clients; ++c) {
    threads.emplace_back(RunClient, c, seed, std::cref(workload), &pool, std::cref(stop), &logs[c]);
  }

  RunFacts facts;
  facts.min_kills = options.min_kills;
  Timing timing;
  std::mt19937_64 rng(seed);
  const auto start = Clock::now();
  bool restart_failed = false;
  while (!restart_failed) {
    const double elapsed = Seconds(start);
    if ((facts.kills >= options.min_kills && elapsed >= options.min_seconds) ||
        elapsed >= options.max_seconds) {
      break;
    }
    // A random moment: anywhere from just after the restart to 1.5 s later.
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 1500));
    restart_failed = !KillAndRestart(&agent, &facts, &timing);
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  const double run_seconds = Seconds(start);
  // The records are read after one more crash: nothing may depend on a
  // clean shutdown.
  if (!restart_failed) restart_failed = !KillAndRestart(&agent, &facts, &timing);

  FinalState final_state;
  std::string error;
  const bool read_ok =
      !restart_failed && ReadFinalState(agent.socket_path(), logs, &final_state, &error);

  int64_t begins = 0, acked = 0, unanswered = 0, grants = 0, finishes = 0, finish_acked = 0;
  std::map<std::string, int64_t> decisions, errors;
  for (const ClientLog& log : logs) {
    begins += log.begins_sent;
    acked += static_cast<int64_t>(log.begins.size());
    unanswered += log.begins_unanswered;
    grants += static_cast<int64_t>(log.grants.size());
    for (const BeginAck& b : log.begins) ++decisions[b.decision];
    for (const Finish& f : log.finishes) {
      ++finishes;
      finish_acked += f.acked;
    }
    for (const auto& [code, n] : log.errors) errors[code] += n;
  }
  std::printf("run: %.1f s, %d SIGKILLs, restarts %.0f ms on average (max %.0f ms)\n", run_seconds,
              facts.kills, timing.restarts ? timing.total_ms / timing.restarts : 0.0,
              timing.max_ms);
  std::printf(
      "begins: %lld sent, %lld acknowledged (%.0f/s), %lld lost to a kill; grants %lld; "
      "complete/fail %lld sent, %lld acknowledged\n",
      static_cast<long long>(begins), static_cast<long long>(acked), acked / run_seconds,
      static_cast<long long>(unanswered), static_cast<long long>(grants),
      static_cast<long long>(finishes), static_cast<long long>(finish_acked));
  std::string line;
  for (const auto& [d, n] : decisions) line += " " + d + "=" + std::to_string(n);
  std::printf("decisions:%s\n", line.c_str());
  line.clear();
  for (const auto& [code, n] : errors) line += " [" + code + "]=" + std::to_string(n);
  std::printf("error answers:%s\n", line.empty() ? " none" : line.c_str());

  std::vector<InvariantResult> results;
  if (read_ok) {
    results = CheckInvariants(logs, final_state, facts);
  } else {
    InvariantResult r{"the records can be read back after the last restart"};
    r.checked = 1;
    r.violations = 1;
    r.examples.push_back(
        restart_failed
            ? "a restart failed; agent log tail:\n" +
                  agent.Log().substr(agent.Log().size() > 4000 ? agent.Log().size() - 4000 : 0)
            : error);
    results.push_back(r);
  }
  const int failed = PrintResults(results, stdout);
  if (failed > 0 || !options.keep_logs.empty()) {
    const std::string where = options.keep_logs.empty()
                                  ? "/tmp/intentd-torture-" + std::to_string(seed)
                                  : options.keep_logs;
    WriteLogs(where, logs, agent);
    std::printf("logs kept in %s\n", where.c_str());
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace intentd::torture

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 2 && std::strcmp(argv[1], "--self-test") == 0) {
    return intentd::torture::RunCheckerSelfTest(stdout) == 0 ? 0 : 1;
  }
  intentd::torture::Options options;
  if (!intentd::torture::ParseArgs(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: intentd_torture [--clients N] [--min-kills N] [--min-seconds S] "
                 "[--max-seconds S] [--seed N] [--keep-logs DIR]\n"
                 "       intentd_torture --self-test\n");
    return 2;
  }
  return intentd::torture::Run(options);
}
