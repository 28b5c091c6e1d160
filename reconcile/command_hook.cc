#include "reconcile/command_hook.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "reconcile/support.h"

extern char** environ;

namespace intentd::reconcile {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxStdout = 1 << 20;
constexpr size_t kStderrTail = 4096;  // bytes of stderr kept (the last ones)
// How long the output pipes may stay open after the program exited (a
// background descendant holding them) before the group is killed.
constexpr auto kExitGrace = std::chrono::milliseconds(100);

// Environment variables the hook does not get: the HMAC secret, and the
// service manager's hand-offs that concern the agent's process only.
bool Withheld(std::string_view entry) {
  for (std::string_view prefix :
       {"IDEMPOTENCY_HMAC_KEY=", "NOTIFY_SOCKET=", "WATCHDOG_PID=", "WATCHDOG_USEC=", "LISTEN_FDS=",
        "LISTEN_PID=", "LISTEN_FDNAMES="}) {
    if (entry.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Moves a descriptor to 3 or above (close-on-exec), so that the child's
// dup2s onto 0, 1 and 2 cannot clobber one another when the caller runs with
// a standard descriptor closed.
bool AboveStdio(int* fd) {
  if (*fd > 2) return true;
  int moved = ::fcntl(*fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  ::close(*fd);
  *fd = moved;
  return true;
}

bool MakePipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  if (!AboveStdio(&fds[0]) || !AboveStdio(&fds[1])) {
    CloseFd(&fds[0]);
    CloseFd(&fds[1]);
    return false;
  }
  return true;
}

struct RunResult {
  bool started = false;
  std::string start_error;
  bool timed_out = false;
  bool reaped = false;
  int wait_status = 0;
  std::string out, err;
  bool out_overflow = false;
};

// Reads what is there; false at end of file or on error.
bool Drain(int fd, std::string* into, size_t limit, bool keep_tail, bool* overflow) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    if (n == 0) return false;
    if (keep_tail) {
      into->append(buf, static_cast<size_t>(n));
      if (into->size() > 2 * limit) into->erase(0, into->size() - limit);
    } else if (into->size() + static_cast<size_t>(n) > limit) {
      if (overflow != nullptr) *overflow = true;  // the rest is read and dropped
    } else {
      into->append(buf, static_cast<size_t>(n));
    }
  }
}

RunResult Run(const std::vector<std::string>& args, const std::string& input, int64_t timeout_ms) {
  RunResult r;
  const SteadyClock::time_point deadline =
      SteadyClock::now() + std::chrono::milliseconds(timeout_ms);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!MakePipe(in) || !MakePipe(out) || !MakePipe(err)) {
    r.start_error = std::string("cannot make pipes: ") + std::strerror(errno);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) CloseFd(fd);
    return r;
  }
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (!Withheld(*e)) env.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills all of it
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);  // undoes the agent's SIG_IGN of SIGPIPE
  pid_t pid = -1;
  const int spawn_error = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&in[0]);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  if (spawn_error != 0) {
    r.start_error = std::string("cannot run it: ") + std::strerror(spawn_error);
    CloseFd(&in[1]);
    CloseFd(&out[0]);
    CloseFd(&err[0]);
    return r;
  }
  r.started = true;
  for (int fd : {in[1], out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  ScopedSigpipeBlock no_sigpipe;  // the program may exit without reading its stdin
  const std::string line = input + "\n";
  size_t written = 0;
  bool exited = false;  // a zombie not yet reaped (its pid, so its group id, stays taken)
  bool lost = false;    // reaped by someone else: its pid may name another process by now
  SteadyClock::time_point exited_at{};
  for (;;) {
    const SteadyClock::time_point now = SteadyClock::now();
    if (!exited) {
      siginfo_t info;
      info.si_pid = 0;
      const int w = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if ((w == 0 && info.si_pid == pid) || (w < 0 && errno == ECHILD)) {
        lost = w < 0;
        exited = true;
        exited_at = now;
      }
    }
    const bool output_open = out[0] >= 0 || err[0] >= 0;
    if (exited && (!output_open || now - exited_at >= kExitGrace)) break;
    if (now >= deadline) {
      r.timed_out = !exited;
      break;
    }
    struct pollfd fds[3];
    int n = 0;
    int in_at = -1, out_at = -1, err_at = -1;
    if (in[1] >= 0) fds[in_at = n++] = {in[1], POLLOUT, 0};
    if (out[0] >= 0) fds[out_at = n++] = {out[0], POLLIN, 0};
    if (err[0] >= 0) fds[err_at = n++] = {err[0], POLLIN, 0};
    // Pipes hang up when the program exits (unless a descendant holds them);
    // the tick bounds how late an exit with pipes still open is noticed.
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int64_t tick = output_open && !exited ? 50 : 10;
    if (wait > tick) wait = tick;
    if (::poll(fds, static_cast<nfds_t>(n), static_cast<int>(wait)) < 0 && errno != EINTR) break;
    if (in_at >= 0 && fds[in_at].revents != 0) {
      while (written < line.size()) {
        ssize_t k = ::write(in[1], line.data() + written, line.size() - written);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (k < 0) {
          written = line.size();  // EPIPE: the program does not read its stdin
          break;
        }
        written += static_cast<size_t>(k);
      }
      if (written == line.size()) CloseFd(&in[1]);
    }
    if (out_at >= 0 && fds[out_at].revents != 0 &&
        !Drain(out[0], &r.out, kMaxStdout, false, &r.out_overflow)) {
      CloseFd(&out[0]);
    }
    if (err_at >= 0 && fds[err_at].revents != 0 &&
        !Drain(err[0], &r.err, kStderrTail, true, nullptr)) {
      CloseFd(&err[0]);
    }
  }
  // Whatever is left of the group (the program itself after a timeout, or
  // descendants it left behind) goes. The leader is not reaped yet, so the
  // group id cannot name another group.
  if (!lost) ::kill(-pid, SIGKILL);
  for (;;) {
    if (lost) break;
    pid_t w = ::waitpid(pid, &r.wait_status, 0);
    if (w == pid) {
      r.reaped = true;
      break;
    }
    if (w < 0 && errno == EINTR) continue;
    break;  // ECHILD: reaped elsewhere (SIGCHLD ignored by the process)
  }
  if (out[0] >= 0) Drain(out[0], &r.out, kMaxStdout, false, &r.out_overflow);
  if (err[0] >= 0) Drain(err[0], &r.err, kStderrTail, true, nullptr);
  CloseFd(&in[1]);
  CloseFd(&out[0]);
  CloseFd(&err[0]);
  if (r.err.size() > kStderrTail) r.err.erase(0, r.err.size() - kStderrTail);
  return r;
}

// The last non-empty line of the program's stderr, for a detail.
std::string StderrTail(const std::string& err) {
  size_t end = err.size();
  while (end > 0) {
    const size_t start = err.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = OneLine(std::string_view(err).substr(from, end - from), 200);
    if (!line.empty()) return "; stderr: " + line;
    if (start == std::string::npos) break;
    end = start;
  }
  return "";
}

class CommandProvider : public Provider {
 public:
  explicit CommandProvider(CommandSettings settings) : s_(std::move(settings)) {}

  Answer Ask(const ActionInfo& action) override {
    Answer a;
    a.verdict = Verdict::kUnknown;
    const std::string name = "command " + s_.argv[0];
    json record = json::parse(action.record_json, nullptr, false);
    if (!record.is_object()) {
      a.cause = "config";
      a.detail = name + ": the action record is not a JSON object; the command was not run";
      return a;
    }
    RunResult r =
        Run(s_.argv, record.dump(-1, ' ', false, json::error_handler_t::replace), s_.timeout_ms);
    const std::string tail = StderrTail(r.err);
    auto failed = [&](const std::string& said, const std::string& why) {
      a.cause = "command_failed";
      a.provider_said = "command: " + said;
      a.detail = name + ": " + why + tail;
      return a;
    };
    if (!r.started) return failed("not started", r.start_error);
    if (r.timed_out) {
      a.cause = "command_timeout";
      a.provider_said = "command: timeout";
      a.detail = name + ": still running after " + std::to_string(s_.timeout_ms) +
                 " ms; its process group was killed" + tail;
      return a;
    }
    if (!r.reaped) return failed("lost", "its exit status could not be read (SIGCHLD ignored?)");
    if (WIFSIGNALED(r.wait_status)) {
      return failed("signal " + std::to_string(WTERMSIG(r.wait_status)),
                    std::string("killed by signal ") + strsignal(WTERMSIG(r.wait_status)));
    }
    if (!WIFEXITED(r.wait_status) || WEXITSTATUS(r.wait_status) != 0) {
      const int code = WIFEXITED(r.wait_status) ? WEXITSTATUS(r.wait_status) : -1;
      return failed("exit " + std::to_string(code), "exited with status " + std::to_string(code));
    }
    if (r.out_overflow) {
      return failed("bad output",
                    "wrote more than " + std::to_string(kMaxStdout) + " bytes to stdout");
    }
    std::vector<std::string_view> lines;
    std::string_view rest = r.out;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      if (line.find_first_not_of(" \t\r") != std::string_view::npos) lines.push_back(line);
    }
    if (lines.size() != 1) {
      return failed("bad output", "wrote " + std::to_string(lines.size()) +
                                      " non-empty lines to stdout; expected one JSON line (logs go "
                                      "to stderr)");
    }
    json said = json::parse(lines[0], nullptr, false);
    if (!said.is_object()) {
      return failed("bad output", "its stdout is not a JSON object: " + OneLine(lines[0], 120));
    }
    auto outcome_it = said.find("outcome");
    const std::string outcome =
        outcome_it != said.end() && outcome_it->is_string() ? outcome_it->get<std::string>() : "";
    const char* allowed = nullptr;  // the member an outcome may carry besides outcome and detail
    if (outcome == "completed") {
      allowed = "response";
    } else if (outcome == "failed") {
      allowed = "error";
    } else if (outcome != "not_executed" && outcome != "unknown") {
      return failed(
          "bad output",
          "outcome must be \"completed\", \"failed\", \"not_executed\" or \"unknown\", not " +
              OneLine(outcome_it == said.end() ? std::string("missing") : outcome_it->dump(), 60));
    }
    std::string hook_detail;
    for (auto it = said.begin(); it != said.end(); ++it) {
      const std::string& k = it.key();
      if (k == "outcome" || (!k.empty() && k[0] == '_') || (allowed != nullptr && k == allowed))
        continue;
      if (k == "detail" && it->is_string()) {
        hook_detail = OneLine(it->get<std::string>(), 300);
        continue;
      }
      return failed("bad output",
                    "member \"" + OneLine(k, 60) + "\" does not go with outcome " + outcome);
    }
    a.provider_said = "command: " + outcome;
    a.detail = name + ": " + outcome + (hook_detail.empty() ? "" : ": " + hook_detail);
    if (outcome == "completed") {
      a.verdict = Verdict::kExecuted;
      auto response = said.find("response");
      a.response = response == said.end()
                       ? "null"
                       : response->dump(-1, ' ', false, json::error_handler_t::replace);
    } else if (outcome == "failed") {
      auto error = said.find("error");
      if (error == said.end() || error->is_null()) {
        return failed("bad output", "outcome failed without an error");
      }
      a.verdict = Verdict::kFailed;
      a.error = error->dump(-1, ' ', false, json::error_handler_t::replace);
      if (hook_detail.empty()) a.detail += ": " + OneLine(a.error, 160);
    } else if (outcome == "not_executed") {
      a.verdict = Verdict::kNotExecuted;
      a.error = json{{"reconciled", "not_executed"}, {"provider", "command"}}.dump();
    } else {
      a.cause = "command_unknown";
    }
    return a;
  }

 private:
  const CommandSettings s_;
};

}  // namespace

std::unique_ptr<Provider> MakeCommandProvider(const CommandSettings& settings, std::string* error) {
  if (settings.argv.empty() || settings.argv[0].empty() || settings.argv[0][0] != '/') {
    *error = "the command's argv[0] must be an absolute path";
    return nullptr;
  }
  struct stat st;
  if (::stat(settings.argv[0].c_str(), &st) != 0) {
    *error = "the command " + settings.argv[0] + ": " + std::strerror(errno);
    return nullptr;
  }
  if (!S_ISREG(st.st_mode) || ::access(settings.argv[0].c_str(), X_OK) != 0) {
    *error = "the command " + settings.argv[0] + " is not an executable file";
    return nullptr;
  }
  if (settings.timeout_ms < 1) {
    *error = "the command's timeout_ms must be at least 1";
    return nullptr;
  }
  return std::make_unique<CommandProvider>(settings);
}

}  // namespace intentd::reconcile
