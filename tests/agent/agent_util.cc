#include "tests/agent/agent_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace intentd::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "intentd-test-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
            int stdout_fd, int stderr_fd) {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    if (s.rfind("IDEMPOTENCY_HMAC_KEY=", 0) == 0 || s.rfind("CREDENTIALS_DIRECTORY=", 0) == 0 ||
        s.rfind("NOTIFY_SOCKET=", 0) == 0 || s.rfind("LISTEN_", 0) == 0 ||
        s.rfind("INTENTD_SOCKET=", 0) == 0) {
      continue;
    }
    envs.push_back(s);
  }
  for (const auto& e : env) envs.push_back(e);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    if (stdout_fd >= 0) dup2(stdout_fd, 1);
    if (stderr_fd >= 0) dup2(stderr_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// The exit status, or 128 + the signal that ended the process.
int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Agent::Agent(const std::string& dir, AgentOptions options)
    : dir_(dir),
      socket_(dir + "/intentd.sock"),
      data_dir_(dir + "/data"),
      log_path_(dir + "/agent.log"),
      options_(std::move(options)) {
  if (options_.wait_ready) started_ = Start();
}

Agent::~Agent() {
  if (pid_ > 0 && Running()) {
    kill(pid_, SIGKILL);
    Wait();
  }
}

bool Agent::Start() {
  const std::string binary = options_.binary.empty() ? INTENTD_BINARY : options_.binary;
  std::vector<std::string> args = {binary,       "serve",   "--socket",    socket_,
                                   "--data-dir", data_dir_, "--log-level", "debug"};
  if (!options_.config_json.empty()) {
    std::string config = dir_ + "/intentd.json";
    std::ofstream(config) << options_.config_json;
    args.push_back("--config");
    args.push_back(config);
  }
  for (const auto& a : options_.extra_args) args.push_back(a);
  std::vector<std::string> env = options_.env;
  if (options_.secret_in_env) env.push_back(std::string("IDEMPOTENCY_HMAC_KEY=") + kTestSecret);
  int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  pid_ = Spawn(args, env, -1, log_fd);
  close(log_fd);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return false;
    Client c(socket_);
    if (c.connected()) {
      json r = c.Call({{"op", "ping"}});
      // Started: answering, and its start-up line written, which serve logs
      // once the socket listens (a test read the log between the two).
      if (r.is_object() && r.value("ok", false) &&
          Log().find(" serving on ") != std::string::npos) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Agent::Kill(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int Agent::Wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  last_exit_ = ExitCode(status);
  return last_exit_;
}

bool Agent::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) {
    pid_ = -1;
    last_exit_ = ExitCode(status);
  }
  return false;
}

std::string Agent::Log() const { return ReadFile(log_path_); }

int RunIntentd(const std::vector<std::string>& args, std::string* output, std::string* error_output,
               const std::vector<std::string>& env) {
  TempDir tmp;
  std::string out_path = tmp.path() + "/out", err_path = tmp.path() + "/err";
  int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  std::vector<std::string> argv = {INTENTD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = Spawn(argv, env, out_fd, err_fd);
  close(out_fd);
  close(err_fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output) *output = ReadFile(out_path);
  if (error_output) *error_output = ReadFile(err_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Client::Client(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

bool Client::SendRaw(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool Client::ReadLine(std::string* line, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      *line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[65536];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

bool Client::ReadEof(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0 && errno != EINTR) return true;
  }
}

json Client::Call(const json& request) {
  if (!SendRaw(request.dump() + "\n")) return nullptr;
  std::string line;
  if (!ReadLine(&line)) return nullptr;
  return json::parse(line, nullptr, false);
}

json PixPayload(const std::string& valor, const std::string& chave) {
  return {{"cliente_id", "01J9ZQ3K8V7M2N4P6R8T0W2Y4A"},
          {"valor", valor},
          {"chave_pix_destino", chave},
          {"referencia_intencao", "FAT-2026-000123"}};
}

json PixBegin(const std::string& ref, const std::string& valor) {
  json payload = PixPayload(valor);
  payload.erase("referencia_intencao");
  return {{"op", "begin"},
          {"tenant_id", "acme"},
          {"intent_ref", ref},
          {"action_type", "pix.cobranca"},
          {"payload", payload}};
}

}  // namespace intentd::testing
