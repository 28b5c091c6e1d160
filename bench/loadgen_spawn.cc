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

#include "bench/loadgen_io.h"

namespace intentd::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "ended";
}

}  // namespace

std::unique_ptr<SpawnedAgent> SpawnedAgent::Start(const std::string& binary,
                                                  const std::string& sync, std::string* error) {
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
  const std::string data_dir = directory + "/data";
  const std::string log_path = directory + "/log";
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    std::filesystem::remove_all(directory);
    return nullptr;
  }
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (log >= 0) dup2(log, STDERR_FILENO);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
    }
    execl(binary.c_str(), binary.c_str(), "serve", "--socket", socket_path.c_str(), "--data-dir",
          data_dir.c_str(), "--hmac-key-file", key_path.c_str(), "--sync", sync.c_str(),
          "--log-level", "warning", static_cast<char*>(nullptr));
    std::fprintf(stderr, "exec %s: %s\n", binary.c_str(), std::strerror(errno));
    _exit(127);
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

std::string SpawnedAgent::Log() const {
  std::ifstream in(directory_ + "/log");
  std::stringstream text;
  text << in.rdbuf();
  std::string log = text.str();
  if (log.size() > 2000) log = "..." + log.substr(log.size() - 2000);
  return log.empty() ? "(no log)" : log;
}

}  // namespace intentd::bench
