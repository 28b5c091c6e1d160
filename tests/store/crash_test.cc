// SIGKILL under load: a child process (this binary, re-executed) runs
// begin/complete/fail on fresh and repeated intents with sync=true and logs
// every acknowledged result; the parent kills it at random points, reopens
// the store and checks that every acknowledged write survived and that no
// lease token was ever granted twice. A second form runs the store as the
// agent does (deferred sync: the WAL waits in RocksDB's buffer until the
// group commit writes and syncs it) while another thread flushes the
// memtables, so that WAL files are switched with records still buffered.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "tests/store/store_test_util.h"

extern char** environ;

namespace intentd::store::testing {
namespace {

using Code = Status::Code;
constexpr int64_t kChildLeaseMs = 150;  // real time: recoveries happen within and across runs
const char* const kTenants[] = {"acme", "globex"};

// --- child ----------------------------------------------------------------

class AckLog {
 public:
  explicit AckLog(const char* path) : fd_(open(path, O_WRONLY | O_APPEND | O_CREAT, 0644)) {}
  ~AckLog() { close(fd_); }
  // One write(2) per line: the kill never leaves half a line before a whole one.
  void Line(const std::string& line) {
    const std::string text = line + "\n";
    if (write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
  }

 private:
  int fd_;
};

// Deferred sync (the agent's way): an operation returns at once and is
// acknowledged once its ticket is durable.
bool Durable(RocksStore* store, bool deferred) {
  if (!deferred) return true;  // the call itself waited for the sync
  std::promise<bool> durable;
  std::future<bool> answer = durable.get_future();
  store->WhenDurable(store->DurabilityTicket(),
                     [&durable](const Status& s) { durable.set_value(s.ok()); });
  return answer.get();
}

void Workload(RocksStore* store, AckLog* log, int thread, unsigned seed, bool deferred) {
  std::mt19937 rng(seed * 131 + thread);
  const std::string tenant = kTenants[thread % 2];
  for (uint64_t n = 0;; ++n) {
    BeginResult r;
    Status s;
    const bool fresh = rng() % 10 < 5;
    if (fresh) {
      const std::string id =
          std::to_string(seed) + "-" + std::to_string(thread) + "-" + std::to_string(n);
      s = store->Begin(NewIntentRequest(tenant, "f-" + id, "fk-" + id), kChildLeaseMs, &r);
    } else {
      const std::string id = std::to_string(rng() % 12);
      s = AgentBegin(store, tenant, "s-" + id, "sk-" + id, &r, kChildLeaseMs);
    }
    if (!s.ok() || !Durable(store, deferred)) std::abort();
    log->Line("I " + tenant + " " + r.intent.intent_ref + " " + r.intent.key);
    if (r.decision != Decision::kExecute && r.decision != Decision::kRecover) continue;
    const int64_t token = r.action.lease_token;
    log->Line("G " + tenant + " " + r.intent.key + " " + std::to_string(token));
    Action a;
    const std::string response = "resp-" + r.intent.key + "-" + std::to_string(token);
    switch (rng() % 3) {
      case 0:
        s = store->Complete(tenant, r.intent.key, token, response, &a);
        if (s.ok() && !Durable(store, deferred)) std::abort();
        if (s.ok())
          log->Line("C " + tenant + " " + r.intent.key + " " + std::to_string(token) + " " +
                    response);
        break;
      case 1:
        s = store->Fail(tenant, r.intent.key, token, "\"retry\"", true, &a);
        if (s.ok() && !Durable(store, deferred)) std::abort();
        if (s.ok()) log->Line("F " + tenant + " " + r.intent.key + " " + std::to_string(token));
        break;
      default:  // the worker vanishes; its lease expires
        break;
    }
    if (!s.ok() && s.code() != Code::kLeaseLost && s.code() != Code::kInvalidState) std::abort();
  }
}

// Run only as the child of Crash.AcknowledgedWritesSurviveSigkill.
TEST(CrashChild, DISABLED_Workload) {
  const char* dir = std::getenv("INTENTD_CRASH_STORE");
  const char* log_path = std::getenv("INTENTD_CRASH_LOG");
  const char* ready_fd = std::getenv("INTENTD_CRASH_READY_FD");
  const char* seed = std::getenv("INTENTD_CRASH_SEED");
  const bool deferred = std::getenv("INTENTD_CRASH_DEFERRED") != nullptr;
  const bool spares = std::getenv("INTENTD_CRASH_WAL_SPARES") != nullptr;
  if (dir == nullptr || log_path == nullptr || ready_fd == nullptr || seed == nullptr) {
    GTEST_SKIP() << "runs only as the crash test's child";
  }
  RocksOptions options;
  options.path = dir;
  options.sync = true;
  options.defer_sync = deferred;
  // Deferred: the agent's configuration. Blocking: the default (hash
  // memtables, ordered writes) in even rounds, skip lists with unordered
  // writes in odd ones, so that both write paths are killed and each
  // reopen also replays a WAL the other kind wrote.
  options.hash_memtables = deferred || std::atoi(seed) % 2 == 0;
  options.wal_spares = spares;
  std::unique_ptr<RocksStore> store;
  Status s = RocksStore::Open(options, &store);
  if (!s.ok()) {
    std::fprintf(stderr, "child open: %s\n", s.message().c_str());
    std::abort();
  }
  AckLog log(log_path);
  const int fd = std::atoi(ready_fd);
  if (write(fd, "r", 1) != 1) std::abort();
  close(fd);
  std::vector<std::thread> threads;
  // More writers than RocksStoreImpl::kQueueFromCommitters: the store's
  // writer thread writes some batches, the callers the others.
  for (int t = 0; t < 12; ++t) {
    threads.emplace_back(Workload, store.get(), &log, t, static_cast<unsigned>(std::atoi(seed)),
                         deferred);
  }
  if (deferred) {
    // Memtable flushes switch WAL files while records wait in the buffer.
    threads.emplace_back([&store, &log] {
      uint64_t spare_wals = 0;
      for (;;) {
        if (!store->Flush().ok()) std::abort();
        log.Line("S");
        // The new WAL file was made from a spare (RocksOptions::wal_spares).
        if (const uint64_t taken = store->CommitCounts()->wal_spares_taken; taken > spare_wals) {
          spare_wals = taken;
          log.Line("W");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
      }
    });
  }
  for (auto& t : threads) t.join();  // never: the parent kills us
}

// --- parent ---------------------------------------------------------------

pid_t SpawnChild(const std::string& store_dir, const std::string& log, int seed, bool deferred,
                 bool spares, int* ready_fd) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("INTENTD_CRASH_STORE=" + store_dir);
  env_strings.push_back("INTENTD_CRASH_LOG=" + log);
  env_strings.push_back("INTENTD_CRASH_READY_FD=" + std::to_string(pipe_fds[1]));
  env_strings.push_back("INTENTD_CRASH_SEED=" + std::to_string(seed));
  if (deferred) env_strings.push_back("INTENTD_CRASH_DEFERRED=1");
  if (spares) env_strings.push_back("INTENTD_CRASH_WAL_SPARES=1");
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "intentd_tests", arg1 = "--gtest_filter=CrashChild.DISABLED_Workload",
              arg2 = "--gtest_also_run_disabled_tests";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  *ready_fd = pipe_fds[0];
  return pid;
}

struct Acks {
  std::set<std::tuple<std::string, std::string, int64_t>> grants;
  std::map<std::pair<std::string, std::string>, int64_t> max_grant;
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::string>> completions;
  std::map<std::pair<std::string, std::string>, int64_t> releases;      // latest released token
  std::map<std::tuple<std::string, std::string>, std::string> intents;  // (tenant, ref) -> key
  int duplicate_grants = 0;
  int flushes = 0;     // memtable flushes the child completed ("S")
  int spare_wals = 0;  // of which the new WAL file was made from a spare ("W")
  size_t lines = 0;
};

// Reads the acknowledgement log's new whole lines.
void ReadAcks(const std::string& path, Acks* acks) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return;
  std::istringstream lines(text.substr(0, end + 1));
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    if (n++ < acks->lines) continue;
    std::istringstream f(line);
    std::string kind, tenant, a, b;
    f >> kind >> tenant >> a;
    if (kind == "S") {
      ++acks->flushes;
      continue;
    }
    if (kind == "W") {
      ++acks->spare_wals;
      continue;
    }
    if (kind == "I") {
      f >> b;
      acks->intents[{tenant, a}] = b;
      continue;
    }
    int64_t token = 0;
    f >> token;
    const auto id = std::make_pair(tenant, a);
    if (kind == "G") {
      if (!acks->grants.insert({tenant, a, token}).second) ++acks->duplicate_grants;
      acks->max_grant[id] = std::max(acks->max_grant[id], token);
    } else if (kind == "C") {
      f >> b;
      acks->completions[id] = {token, b};
    } else if (kind == "F") {
      acks->releases[id] = std::max(acks->releases[id], token);
    }
  }
  acks->lines = n;
}

void VerifyStore(const std::string& dir, const Acks& acks) {
  std::unique_ptr<RocksStore> store;
  RocksOptions options;
  options.path = dir;
  Status s = RocksStore::Open(options, &store);
  ASSERT_TRUE(s.ok()) << "reopen after kill: " << s.message();
  for (const auto& [id, key] : acks.intents) {
    LookupResult l;
    s = store->Lookup(std::get<0>(id), std::get<1>(id), "pix.cobranca", &l);
    ASSERT_TRUE(s.ok()) << std::get<1>(id) << ": " << s.message();
    ASSERT_EQ(l.intent.key, key);
  }
  for (const auto& [id, token] : acks.max_grant) {
    Action a;
    s = store->GetAction(id.first, id.second, &a);
    ASSERT_TRUE(s.ok()) << id.second << ": " << s.message();
    ASSERT_GE(a.lease_token, token) << id.second << ": an acknowledged grant was lost";
    ASSERT_EQ(a.attempt, a.lease_token);
  }
  for (const auto& [id, done] : acks.completions) {
    Action a;
    ASSERT_TRUE(store->GetAction(id.first, id.second, &a).ok());
    ASSERT_EQ(a.status, ActionStatus::kCompleted) << id.second;
    ASSERT_EQ(a.lease_token, done.first) << id.second;
    ASSERT_EQ(a.response, done.second) << id.second;
  }
  for (const auto& [id, token] : acks.releases) {
    Action a;
    ASSERT_TRUE(store->GetAction(id.first, id.second, &a).ok());
    ASSERT_GE(a.lease_token, token);
    if (a.lease_token == token) {
      ASSERT_EQ(a.status, ActionStatus::kReleased) << id.second;
    }
  }
  // The lease index survived consistently: Uncertain reports a corrupt entry.
  for (const char* tenant : kTenants) {
    std::vector<Action> uncertain;
    s = store->Uncertain(std::string(tenant), 100000, &uncertain);
    ASSERT_TRUE(s.ok()) << s.message();
  }
}

void KillRounds(bool deferred, int seconds) {
  TempDir dir;
  const std::string store_dir = dir.Sub("store"), log = dir.Sub("acks.log");
  Acks acks;
  std::mt19937 rng(std::random_device{}());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int kills = 0;
  // At least 10 kills however slow the machine (a sanitizer build next to other
  // tests needs several seconds a round); more while the time lasts.
  for (int round = 0; round < 30 && (kills < 10 || std::chrono::steady_clock::now() < deadline);
       ++round) {
    int ready = -1;
    // Deferred: WAL files made from zero-filled spares in even rounds, so
    // that a reopen also replays a WAL that ends in zeros (wal_spares.h) and
    // the next one made without.
    const bool spares = deferred && round % 2 == 0;
    const pid_t child = SpawnChild(store_dir, log, round, deferred, spares, &ready);
    ASSERT_GT(child, 0);
    char c = 0;
    const bool started = read(ready, &c, 1) == 1;
    close(ready);
    if (started) {
      if (spares) {
        // Killed while the WAL made from a spare is written, or just after
        // the next switch: its first "W" (up to 10 s), then 0-40 ms.
        const int before = acks.spare_wals;
        for (int i = 0; i < 1000 && acks.spare_wals == before; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          ReadAcks(log, &acks);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
      } else {
        // Killed once the round has done some work (a loaded machine or a
        // sanitizer build opens the store slowly and writes slowly), then
        // 0-300 ms later.
        const size_t before = acks.grants.size();
        for (int i = 0; i < 1000 && acks.grants.size() < before + 20; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          ReadAcks(log, &acks);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
      }
      kill(child, SIGKILL);
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(started && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child died on its own (status " << status << ") in round " << round;
    ++kills;
    ReadAcks(log, &acks);
    ASSERT_EQ(acks.duplicate_grants, 0) << "a lease token was granted twice";
    VerifyStore(store_dir, acks);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GE(kills, 10);
  EXPECT_GT(acks.grants.size(), 100u) << "the workload did too little to mean anything";
  if (deferred) {
    EXPECT_GT(acks.flushes, 0) << "no memtable flush (WAL switch) happened";
    EXPECT_GT(acks.spare_wals, 0) << "no WAL file was made from a spare";
  }
  ::testing::Test::RecordProperty("kills", kills);
  ::testing::Test::RecordProperty("acknowledged_grants", static_cast<int>(acks.grants.size()));
  std::printf(
      "crash test%s: %d kills, %zu acknowledged grants, %zu completions, %d flushes, %d WAL "
      "files made from spares\n",
      deferred ? " (deferred sync)" : "", kills, acks.grants.size(), acks.completions.size(),
      acks.flushes, acks.spare_wals);
}

TEST(Crash, AcknowledgedWritesSurviveSigkill) { KillRounds(/*deferred=*/false, 20); }

// The agent's mode: writes acknowledged after the group commit wrote out the
// WAL buffer and synced it, with memtable flushes switching WAL files.
TEST(Crash, AcknowledgedDeferredWritesSurviveSigkillAcrossWalSwitches) {
  KillRounds(/*deferred=*/true, 10);
}

}  // namespace
}  // namespace intentd::store::testing
