// Crash torture: the real intentd under 16 concurrent clients, SIGKILLed at
// random moments and restarted on the same data directory. The checker
// judges the agent from the clients' own logs (tests/torture/checker.h): after
// each restart, with the clients held between two requests, on every key
// written since the previous check; after the run, on everything.
//
//   intentd_torture [--clients N] [--min-kills N] [--min-seconds S]
//                   [--max-seconds S] [--seed N] [--keep-logs DIR]
//                   [--intentd PATH] [--data-dir DIR] [--after-kill CMD]
//                   [--serve-arg ARG]... [--pipeline N] [--seen-percent P]
//                   [--kill-every-ms MS] [--stall-ms MS] [--on-stop CMD]
//                   [--fault CMD --fault-at S]
//   intentd_torture --self-test     (the checker against planted violations)
//
// --intentd: the agent's binary (default: the one built with this program).
// --data-dir: the agent's data directory (default: inside a temporary
//   directory). Whoever creates it makes its entry durable: the store never
//   syncs the parent of its directory.
// --after-kill: a shell command (sh -c) run after each SIGKILL, once the
//   agent is dead and the clients are held, before the restart; the number of
//   the kill (from 1) is in $INTENTD_TORTURE_KILL. Its failure fails the run.
//   tests/powerloss/run.sh cuts the power of the data directory's file system.
// --serve-arg: one more argument of `intentd serve` (repeatable), e.g.
//   --serve-arg --sync --serve-arg none.
// --pipeline: each client keeps N requests in flight on its connection
//   (workload.h); with it, --seen-percent of them are `seen` of new message
//   ids, and answers storage_error are checked to have changed nothing.
// --kill-every-ms: kills come at random moments up to this long apart
//   (default 1500).
// --stall-ms: a request left unanswered this long while the agent was not
//   killed fails the run (default 0: not checked; needs kills further apart).
// --on-stop: a shell command run once the clients have stopped, before the
//   last kill and the final read-back (e.g. to end injected faults).
// --fault, --fault-at: a shell command run once, at the first kill due S
//   seconds or more into the run, while the agent serves and the clients go
//   on (tests/torture/failover.sh fails the PostgreSQL primary over to its
//   standby). The kills wait for it; then the agent is killed and restarted
//   and every key written since the previous check is checked, as after any
//   kill. Its failure, or a run that ends before it, fails the run.
//
// Prints each invariant with its counts, the failed invariants of a restart
// as soon as they fail (the run then stops), a line "checked: ..." with the
// counts of kills and of acknowledged operations checked, and the final line
// exactly "N passed, M failed" (N, M: invariants). Exit status 0 only when
// nothing failed.
#include <signal.h>
#include <sys/wait.h>

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
#include <unordered_set>
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
  std::string intentd;   // "": the binary this harness was built with
  std::string data_dir;  // "": the agent's default, inside the temporary directory
  std::string after_kill;
  std::vector<std::string> serve_args;
  int pipeline = 1;
  int seen_percent = 0;
  int kill_every_ms = 1500;
  int stall_ms = 0;
  std::string on_stop;
  std::string fault;
  double fault_at = 0;
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
    else if (a == "--intentd")
      o->intentd = v;
    else if (a == "--data-dir")
      o->data_dir = v;
    else if (a == "--after-kill")
      o->after_kill = v;
    else if (a == "--serve-arg")
      o->serve_args.push_back(v);
    else if (a == "--pipeline")
      o->pipeline = std::atoi(v);
    else if (a == "--seen-percent")
      o->seen_percent = std::atoi(v);
    else if (a == "--kill-every-ms")
      o->kill_every_ms = std::atoi(v);
    else if (a == "--stall-ms")
      o->stall_ms = std::atoi(v);
    else if (a == "--on-stop")
      o->on_stop = v;
    else if (a == "--fault")
      o->fault = v;
    else if (a == "--fault-at")
      o->fault_at = std::atof(v);
    else
      return false;
    ++i;
  }
  return o->clients > 0 && o->min_kills >= 0 && o->max_seconds >= o->min_seconds &&
         o->pipeline >= 1 && o->pipeline <= 128 && o->seen_percent >= 0 && o->seen_percent <= 100 &&
         o->kill_every_ms > 0 && o->stall_ms >= 0 && o->fault_at >= 0;
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

// The agent under torture and what happened to it.
struct Harness {
  Harness(const Options& options_, Agent& agent_) : options(options_), agent(agent_) {}

  const Options& options;
  Agent& agent;
  std::atomic<int> kill_epoch{0};  // raised before each kill (WorkloadOptions)
  RunFacts facts;
  Timing timing;
  bool restart_failed = false;
  std::string restart_failure;  // how the failed restart failed
  std::vector<std::string> after_kill_failures;
  bool fault_ran = false;
  std::string fault_failure;  // how --fault failed ("": it did not)
};

// Acknowledged begins, completes and fails in the logs: the facts the
// invariants hold the agent to.
int64_t AcknowledgedOperations(const std::vector<ClientLog>& logs) {
  int64_t n = 0;
  for (const ClientLog& log : logs) {
    n += static_cast<int64_t>(log.begins.size());
    for (const Finish& f : log.finishes) n += f.acked;
  }
  return n;
}

// Runs --after-kill (if any) for kill number `kill`; false when it failed.
bool RunAfterKill(Harness* h, int kill) {
  if (h->options.after_kill.empty()) return true;
  std::fflush(stdout);
  const std::string command =
      "export INTENTD_TORTURE_KILL=" + std::to_string(kill) + "; " + h->options.after_kill;
  const int status = std::system(command.c_str());
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  h->after_kill_failures.push_back(
      "after kill " + std::to_string(kill) + ": exit status " +
      std::to_string(status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return false;
}

// The first line of a file ("" when unreadable).
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Each thread of a running process: name, kernel wait channel, system call,
// and the top of its kernel stack (readable by root): where a restart hangs.
std::string ThreadStates(pid_t pid) {
  std::string out;
  std::error_code ec;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& entry : std::filesystem::directory_iterator(task, ec)) {
    const std::string dir = entry.path().string();
    std::ifstream stack(dir + "/stack");
    std::string frames, frame;
    for (int i = 0; i < 4 && std::getline(stack, frame); ++i) frames += " " + frame;
    out += "  thread " + entry.path().filename().string() + " " + FirstLine(dir + "/comm") +
           ": wchan " + FirstLine(dir + "/wchan") + ", syscall " + FirstLine(dir + "/syscall") +
           ", stack" + frames + "\n";
  }
  return out;
}

// Why agent.Start() failed: the agent exited (with which status), or it
// still runs without answering (with its threads' states).
std::string DescribeFailedStart(Agent& agent, double ms) {
  const std::string took = " after " + std::to_string(static_cast<int>(ms)) + " ms";
  if (!agent.Running()) {
    return "the agent exited" + took + " with status " + std::to_string(agent.last_exit()) +
           " (128+N: signal N)";
  }
  return "the agent did not answer ping" + took + "; its threads:\n" + ThreadStates(agent.pid());
}

// SIGKILL, wait, hold the clients (gate, when given), run --after-kill, start
// again on the same data directory. False when the command or the restart
// failed.
bool KillAndRestart(Harness* h, ClientGate* gate) {
  h->kill_epoch.fetch_add(1);
  if (!h->agent.Running()) {
    // It died before this kill: an abort or a crash, never expected.
    h->agent.Wait();
    const std::string log = h->agent.Log();
    const size_t assertion = log.find("Assertion");
    h->facts.unexpected_exits.push_back(
        "before kill " + std::to_string(h->facts.kills + 1) + " the agent had exited with status " +
        std::to_string(h->agent.last_exit()) + " (128+N: signal N)" +
        (assertion == std::string::npos ? "" : ": " + log.substr(assertion, 200)));
    std::printf("the agent died on its own: %s\n", h->facts.unexpected_exits.back().c_str());
    std::fflush(stdout);
  }
  h->agent.Kill(SIGKILL);
  h->agent.Wait();
  ++h->facts.kills;
  if (gate) {
    gate->Close();
    gate->WaitAllHeld();
  }
  if (!RunAfterKill(h, h->facts.kills)) return false;
  ++h->facts.restarts_attempted;
  const auto start = Clock::now();
  const bool ok = h->agent.Start();
  const double ms = Seconds(start) * 1000;
  if (ok) {
    ++h->facts.restarts_succeeded;
    ++h->timing.restarts;
    h->timing.total_ms += ms;
    h->timing.max_ms = std::max(h->timing.max_ms, ms);
  } else {
    h->restart_failure = "restart after kill " + std::to_string(h->facts.kills) + ": " +
                         DescribeFailedStart(h->agent, ms);
    std::printf("%s\n", h->restart_failure.c_str());
    std::fflush(stdout);
  }
  h->restart_failed = !ok;
  return ok;
}

// Runs --fault once, the clients going on. False when it failed.
bool RunFault(Harness* h, double at_seconds) {
  std::printf("fault at %.1f s: %s\n", at_seconds, h->options.fault.c_str());
  std::fflush(stdout);
  const auto start = Clock::now();
  const int status = std::system(h->options.fault.c_str());
  h->fault_ran = true;
  const bool ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) {
    h->fault_failure = "exit status " +
                       std::to_string(status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::printf("fault %s in %.1f s; the agent is killed and restarted next\n",
              ok ? "done" : "FAILED", Seconds(start));
  std::fflush(stdout);
  return ok;
}

InvariantResult FaultResult(const Harness& h) {
  InvariantResult r{"the --fault command ran during the load and succeeded"};
  r.checked = 1;
  if (!h.fault_ran) {
    r.violations = 1;
    r.examples.push_back("the run ended before --fault-at " +
                         std::to_string(static_cast<int>(h.options.fault_at)) + " s");
  } else if (!h.fault_failure.empty()) {
    r.violations = 1;
    r.examples.push_back("--fault failed: " + h.fault_failure);
  }
  r.figures = h.fault_ran ? "ran once" : "did not run";
  return r;
}

InvariantResult ReadBackFailure(const std::string& why) {
  InvariantResult r{"the records can be read back after the restart"};
  r.checked = 1;
  r.violations = 1;
  r.examples.push_back(why);
  return r;
}

std::string AgentLogTail(const Agent& agent) {
  const std::string log = agent.Log();
  return log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
}

// The invariants against the records read back now. `facts` with min_kills 0
// judges a restart in the middle of the run.
std::vector<InvariantResult> Check(const Agent& agent, const std::vector<ClientLog>& logs,
                                   const RunFacts& facts) {
  FinalState final_state;
  std::string error;
  if (!ReadFinalState(agent.socket_path(), logs, &final_state, &error)) {
    return {ReadBackFailure(error)};
  }
  return CheckInvariants(logs, final_state, facts);
}

// Where one client's log stood at the previous check.
struct LogMark {
  size_t begins = 0, grants = 0, finishes = 0;
};

// The keys that the entries logged after `marks` name. (A key is an HMAC of
// the tenant among the rest: it names one action.)
std::unordered_set<std::string> KeysSince(const std::vector<ClientLog>& logs,
                                          const std::vector<LogMark>& marks) {
  std::unordered_set<std::string> keys;
  for (size_t c = 0; c < logs.size(); ++c) {
    const ClientLog& log = logs[c];
    for (size_t i = marks[c].begins; i < log.begins.size(); ++i) {
      keys.insert(log.begins[i].key);
    }
    for (size_t i = marks[c].grants; i < log.grants.size(); ++i) {
      keys.insert(log.grants[i].key);
    }
    for (size_t i = marks[c].finishes; i < log.finishes.size(); ++i) {
      keys.insert(log.finishes[i].key);
    }
  }
  return keys;
}

// Every entry, old or new, of `keys`. The checker judges a key (and an
// intent, which has one key) from its entries alone, so its verdicts on
// these keys are those of a check of the whole logs.
std::vector<ClientLog> Restrict(const std::vector<ClientLog>& logs,
                                const std::unordered_set<std::string>& keys) {
  std::vector<ClientLog> out(logs.size());
  for (size_t c = 0; c < logs.size(); ++c) {
    out[c].client = logs[c].client;
    for (const BeginAck& b : logs[c].begins) {
      if (keys.count(b.key)) out[c].begins.push_back(b);
    }
    for (const Grant& g : logs[c].grants) {
      if (keys.count(g.key)) out[c].grants.push_back(g);
    }
    for (const Finish& f : logs[c].finishes) {
      if (keys.count(f.key)) out[c].finishes.push_back(f);
    }
  }
  return out;
}

// The checks after each restart during the run.
struct RestartChecks {
  explicit RestartChecks(size_t clients) : marks(clients) {}

  int rounds = 0;
  int failed_rounds = 0;
  int64_t acked_examined = 0;         // summed over the rounds
  std::vector<LogMark> marks;         // the logs as of the previous check
  std::vector<std::string> failures;  // "after kill K: invariant: example"
};

// Checks, after a restart and with the clients held at the gate, every key
// written since the previous check: what the kill (and --after-kill) could
// have lost. Earlier keys are checked again at the end. Prints the failed
// invariants; false when one failed.
bool CheckAfterRestart(const Harness& h, const std::vector<ClientLog>& logs,
                       RestartChecks* checks) {
  RunFacts facts = h.facts;
  facts.min_kills = 0;
  const auto start = Clock::now();
  const std::unordered_set<std::string> keys = KeysSince(logs, checks->marks);
  const std::vector<ClientLog> recent = Restrict(logs, keys);
  const std::vector<InvariantResult> results = Check(h.agent, recent, facts);
  const int64_t acked = AcknowledgedOperations(recent);
  ++checks->rounds;
  checks->acked_examined += acked;
  for (size_t c = 0; c < logs.size(); ++c) {
    checks->marks[c] = {logs[c].begins.size(), logs[c].grants.size(), logs[c].finishes.size()};
  }
  const std::string when = "after kill " + std::to_string(h.facts.kills);
  int failed = 0;
  for (const InvariantResult& r : results) failed += !r.passed();
  std::printf(
      "%s: %s (%lld acknowledged operations on the %zu keys written since the previous "
      "check, checked in %.2f s)\n",
      when.c_str(), failed ? "INVARIANTS FAILED" : "all invariants held",
      static_cast<long long>(acked), keys.size(), Seconds(start));
  if (failed == 0) return true;
  ++checks->failed_rounds;
  for (const InvariantResult& r : results) {
    if (r.passed()) continue;
    PrintResult(r, "  ", stdout);
    checks->failures.push_back(when + ": " + r.name +
                               (r.examples.empty() ? "" : ": " + r.examples.front()));
  }
  std::fflush(stdout);
  return false;
}

InvariantResult RestartChecksResult(const RestartChecks& checks) {
  InvariantResult r{"the invariants held after every restart during the run"};
  r.checked = checks.rounds;
  r.violations = checks.failed_rounds;
  r.examples = checks.failures;
  if (r.examples.size() > 5) r.examples.resize(5);
  r.figures = std::to_string(checks.rounds) + " restarts checked, " +
              std::to_string(checks.acked_examined) + " acknowledged operations examined in all";
  return r;
}

InvariantResult AfterKillResult(const Harness& h) {
  InvariantResult r{"the --after-kill command succeeded after every kill"};
  r.checked = h.facts.kills;
  r.violations = static_cast<int64_t>(h.after_kill_failures.size());
  r.examples = h.after_kill_failures;
  r.figures = std::to_string(h.facts.kills - r.violations) + "/" + std::to_string(h.facts.kills) +
              " runs succeeded";
  return r;
}

void PrintLoadFigures(const std::vector<ClientLog>& logs, const Harness& h, double run_seconds) {
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
              h.facts.kills, h.timing.restarts ? h.timing.total_ms / h.timing.restarts : 0.0,
              h.timing.max_ms);
  std::printf(
      "begins: %lld sent, %lld acknowledged (%.0f/s), %lld lost to a kill; grants %lld; "
      "complete/fail %lld sent, %lld acknowledged\n",
      static_cast<long long>(begins), static_cast<long long>(acked), acked / run_seconds,
      static_cast<long long>(unanswered), static_cast<long long>(grants),
      static_cast<long long>(finishes), static_cast<long long>(finish_acked));
  int64_t batches = 0, slow = 0, slowest = 0, seen = 0;
  for (const ClientLog& log : logs) {
    batches += log.batches;
    slow += log.batches_over_1s;
    slowest = std::max(slowest, log.batch_ms_max);
    seen += log.seen_sent;
  }
  if (batches > 0) {
    std::printf(
        "pipelined: %lld batches answered in full, %lld of them in over 1 s, the slowest "
        "in %lld ms; %lld seen sent\n",
        static_cast<long long>(batches), static_cast<long long>(slow),
        static_cast<long long>(slowest), static_cast<long long>(seen));
  }
  std::string line;
  for (const auto& [d, n] : decisions) line += " " + d + "=" + std::to_string(n);
  std::printf("decisions:%s\n", line.c_str());
  line.clear();
  for (const auto& [code, n] : errors) line += " [" + code + "]=" + std::to_string(n);
  std::printf("error answers:%s\n", line.empty() ? " none" : line.c_str());
}

testing::AgentOptions MakeAgentOptions(const Options& options) {
  testing::AgentOptions agent_options;
  agent_options.binary = options.intentd;
  agent_options.extra_args = {"--log-level", "info"};  // the last --log-level wins
  if (!options.data_dir.empty()) {
    // The last --data-dir wins over the harness's own.
    agent_options.extra_args.push_back("--data-dir");
    agent_options.extra_args.push_back(options.data_dir);
  }
  for (const std::string& a : options.serve_args) agent_options.extra_args.push_back(a);
  return agent_options;
}

int Run(const Options& options) {
  const uint64_t seed =
      options.seed ? options.seed
                   : static_cast<uint64_t>(Clock::now().time_since_epoch().count()) % 1000000;
  std::printf("torture: %d clients%s, lease 1000 ms, >= %d SIGKILLs, %.0f..%.0f s, seed %llu\n",
              options.clients,
              options.pipeline > 1 ? (" pipelining " + std::to_string(options.pipeline) + " (" +
                                      std::to_string(options.seen_percent) + "% seen)")
                                         .c_str()
                                   : "",
              options.min_kills, options.min_seconds, options.max_seconds,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  TempDir dir;
  Agent agent(dir.path(), MakeAgentOptions(options));
  if (!agent.started()) {
    std::printf("the agent did not start:\n%s\n0 passed, 1 failed\n", agent.Log().c_str());
    return 1;
  }

  ClientGate gate(options.clients);
  WorkloadOptions workload;
  workload.socket_path = agent.socket_path();
  workload.gate = &gate;
  workload.pipeline = options.pipeline;
  workload.seen_percent = options.seen_percent;
  workload.stall_ms = options.stall_ms;
  Harness h{options, agent};
  h.facts.min_kills = options.min_kills;
  workload.kill_epoch = &h.kill_epoch;
  IntentPool pool;
  std::vector<ClientLog> logs(options.clients);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < options.clients; ++c) {
    threads.emplace_back(RunClient, c, seed, std::cref(workload), &pool, std::cref(stop), &logs[c]);
  }

  RestartChecks checks(logs.size());
  std::mt19937_64 rng(seed);
  const auto start = Clock::now();
  bool broken = false;  // a restart, the --after-kill command or a check failed
  while (!broken) {
    const double elapsed = Seconds(start);
    if ((h.facts.kills >= options.min_kills && elapsed >= options.min_seconds) ||
        elapsed >= options.max_seconds) {
      break;
    }
    // A random moment: anywhere from just after the restart to
    // --kill-every-ms later.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(rng() % static_cast<uint64_t>(options.kill_every_ms)));
    if (!options.fault.empty() && !h.fault_ran && Seconds(start) >= options.fault_at &&
        !RunFault(&h, Seconds(start))) {
      break;
    }
    broken = !KillAndRestart(&h, &gate) || !CheckAfterRestart(h, logs, &checks);
    gate.Open();
  }
  stop.store(true);
  gate.Open();
  for (auto& t : threads) t.join();
  if (!options.on_stop.empty()) {
    std::fflush(stdout);
    if (std::system(options.on_stop.c_str()) != 0) {
      h.after_kill_failures.push_back("the --on-stop command failed");
    }
  }
  const double run_seconds = Seconds(start);
  // The records are read after one more crash: nothing may depend on a
  // clean shutdown.
  const bool restarted = h.after_kill_failures.empty() && !h.restart_failed &&
                         h.fault_failure.empty() && KillAndRestart(&h, nullptr);
  const int64_t acked = AcknowledgedOperations(logs);

  PrintLoadFigures(logs, h, run_seconds);
  std::vector<InvariantResult> results;
  if (restarted) {
    results = Check(agent, logs, h.facts);
  } else if (h.restart_failed) {
    results = {ReadBackFailure(h.restart_failure + "\nagent log tail:\n" + AgentLogTail(agent))};
  }
  results.push_back(RestartChecksResult(checks));
  if (!options.after_kill.empty()) results.push_back(AfterKillResult(h));
  if (!options.fault.empty()) results.push_back(FaultResult(h));
  std::printf(
      "checked: %d kills (%s), %d restarts checked during the run; %lld acknowledged operations "
      "checked after the last restart, %lld examined in all\n",
      h.facts.kills,
      options.after_kill.empty() ? "no --after-kill" : "each followed by --after-kill",
      checks.rounds, static_cast<long long>(restarted ? acked : 0),
      static_cast<long long>(checks.acked_examined + (restarted ? acked : 0)));
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
                 "                       [--intentd PATH] [--data-dir DIR] [--after-kill CMD] "
                 "[--serve-arg ARG]...\n"
                 "                       [--fault CMD --fault-at S]\n"
                 "       intentd_torture --self-test\n");
    return 2;
  }
  return intentd::torture::Run(options);
}
