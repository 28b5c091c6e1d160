#include "bench/loadgen_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/loadgen_io.h"

namespace intentd::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "ended";
}

// The last 2000 bytes of a log file.
std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string log = text.str();
  if (log.size() > 2000) log = "..." + log.substr(log.size() - 2000);
  return log.empty() ? "(no log)" : log;
}

// Starts argv[0] with argv, stdin and stdout on /dev/null, stderr appended to
// log_path. The child's pid, or -1 with *error.
pid_t Launch(const std::vector<std::string>& argv, const std::string& log_path,
             std::string* error) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return -1;
  }
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log >= 0) dup2(log, STDERR_FILENO);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
    }
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

}  // namespace

std::unique_ptr<SpawnedAgent> SpawnedAgent::Start(const std::string& binary,
                                                  const SpawnOptions& options, std::string* error) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string directory =
      std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/intentd-loadgen.XXXXXX";
  if (mkdtemp(directory.data()) == nullptr) {
    *error = std::string("mkdtemp: ") + std::strerror(errno);
    return nullptr;
  }
  const std::string key_path = directory + "/hmac-key";
  {
    const int fd = open(key_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const std::string key(64, 'b');  // a bench secret; nothing real is keyed with it
    if (fd < 0 || write(fd, key.data(), key.size()) != static_cast<ssize_t>(key.size())) {
      *error = "cannot write " + key_path;
      if (fd >= 0) close(fd);
      std::filesystem::remove_all(directory);
      return nullptr;
    }
    close(fd);
  }
  const std::string socket_path = directory + "/intentd.sock";
  const std::string log_path = directory + "/log";
  if (!options.store.empty()) {
    int status = 0;
    const pid_t migrate = Launch({binary, "migrate", "--store", options.store}, log_path, error);
    if (migrate < 0 || waitpid(migrate, &status, 0) != migrate || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      if (migrate >= 0) {
        *error = "intentd migrate " + Describe(status) + ": " + ReadLog(log_path);
      }
      std::filesystem::remove_all(directory);
      return nullptr;
    }
  }
  std::vector<std::string> argv = {
      binary,   "serve",  "--socket",   socket_path,   "--hmac-key-file",
      key_path, "--sync", options.sync, "--log-level", "warning"};
  if (options.store.empty()) {
    argv.insert(argv.end(), {"--data-dir", directory + "/data"});
  } else {
    argv.insert(argv.end(), {"--store", options.store});
  }
  if (options.store_pool > 0) {
    argv.insert(argv.end(), {"--store-pool", std::to_string(options.store_pool)});
  }
  const pid_t pid = Launch(argv, log_path, error);
  if (pid < 0) {
    std::filesystem::remove_all(directory);
    return nullptr;
  }
  std::unique_ptr<SpawnedAgent> agent(new SpawnedAgent(pid, directory));
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      agent->pid_ = -1;
      *error = "intentd " + Describe(status) + " before listening: " + agent->Log();
      return nullptr;
    }
    std::string ignored;
    const int fd = ConnectUnix(socket_path, &ignored);
    if (fd >= 0) {
      close(fd);
      return agent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "intentd did not listen within 30 s: " + agent->Log();
  return nullptr;
}

SpawnedAgent::~SpawnedAgent() {
  std::string ignored;
  Stop(&ignored);
  std::error_code ec;
  std::filesystem::remove_all(directory_, ec);
}

bool SpawnedAgent::Stop(std::string* error) {
  if (pid_ < 0) return true;
  kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  for (;;) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) break;
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      *error = "intentd did not exit within 10 s of SIGTERM: " + Log();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  *error = "intentd " + Describe(status) + " after SIGTERM: " + Log();
  return false;
}

std::string SpawnedAgent::Log() const { return ReadLog(directory_ + "/log"); }

}  // namespace intentd::bench
