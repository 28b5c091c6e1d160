#include "tests/transport/transport_test_util.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace intentd::transport::testing {

TempDir::TempDir() {
  char pattern[] = "/tmp/intentd-transport-XXXXXX";
  const char* made = mkdtemp(pattern);
  path_ = made ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Client::Client(const std::string& path) {
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    connect_errno_ = errno;
    return;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    connect_errno_ = errno;
    close(fd_);
    fd_ = -1;
  }
}

Client::~Client() { Close(); }

void Client::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool Client::Send(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool Client::ReadLine(std::string* line, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      line->assign(buffer_, 0, newline);
      buffer_.erase(0, newline + 1);
      return true;
    }
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[65536];
    ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

bool Client::ReadEof(milliseconds timeout) {
  if (!buffer_.empty()) return false;
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char chunk[256];
  ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
  return n == 0;  // a reset instead of a clean EOF is a failure
}

void Client::ShutdownWrite() { shutdown(fd_, SHUT_WR); }

std::string Upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string ThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

std::string ErrorLine(TransportError error) {
  switch (error) {
    case TransportError::kFrameTooLarge:
      return R"({"error":"frame_too_large"})";
    case TransportError::kOverloaded:
      return R"({"error":"overloaded"})";
    case TransportError::kShuttingDown:
      return R"({"error":"shutting_down"})";
  }
  return "";
}

std::string TestHandler::HandleLine(const PeerCredentials& peer, std::string_view line) {
  ++calls;
  if (on_line) return on_line(peer, line);
  return Upper(line);
}

std::string TestHandler::TransportErrorLine(TransportError error) { return ErrorLine(error); }

std::function<void(LogLevel, std::string_view)> LogCapture::Sink() {
  return [this](LogLevel, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message);
  };
}

bool LogCapture::Contains(std::string_view text) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& line : lines_) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string LogCapture::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string all;
  for (const std::string& line : lines_) all += line + "\n";
  return all;
}

bool WaitFor(const std::function<bool()>& predicate, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

bool MakeStaleSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);  // the file stays; nothing listens
  return ok;
}

}  // namespace intentd::transport::testing
