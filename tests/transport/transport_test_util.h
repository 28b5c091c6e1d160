// Helpers for the transport tests: a temporary directory, a blocking POSIX
// client with timeouts, and a configurable Handler.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "transport/server.h"

namespace intentd::transport::testing {

using std::chrono::milliseconds;

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A client socket. Reads use poll() with a timeout so that a broken server
// fails the test instead of hanging it.
class Client {
 public:
  // Connects to `path`; check ok().
  explicit Client(const std::string& path);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int connect_errno() const { return connect_errno_; }

  bool Send(std::string_view data);
  // The next line without '\n'; false on EOF, error or timeout.
  bool ReadLine(std::string* line, milliseconds timeout = milliseconds(5000));
  // True when the server closed (EOF, or a reset after the data) with no
  // further data within `timeout`.
  // True when the next thing within `timeout` is a clean EOF (not data, not
  // a reset).
  bool ReadEof(milliseconds timeout = milliseconds(5000));
  void ShutdownWrite();
  void Close();

 private:
  int fd_ = -1;
  int connect_errno_ = 0;
  std::string buffer_;
};

// Echoes lines upper-cased unless `on_line` is set; error lines are
// {"error":"frame_too_large"} etc.
class TestHandler : public Handler {
 public:
  std::function<std::string(const PeerCredentials&, std::string_view)> on_line;

  std::string HandleLine(const PeerCredentials& peer, std::string_view line) override;
  std::string TransportErrorLine(TransportError error) override;
  void OnConnectionOpened() override { ++opened; }
  void OnConnectionClosed() override { ++closed; }

  std::atomic<int> calls{0};
  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
};

std::string Upper(std::string_view text);
// The calling thread's name (pthread_getname_np).
std::string ThreadName();
std::string ErrorLine(TransportError error);

// Collects ServerOptions::log messages.
class LogCapture {
 public:
  std::function<void(LogLevel, std::string_view)> Sink();
  bool Contains(std::string_view text) const;
  std::string All() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Polls `predicate` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& predicate, milliseconds timeout = milliseconds(5000));

// A socket file with nothing listening, as a crashed process leaves it.
bool MakeStaleSocket(const std::string& path);

// A server on a temporary socket with a TestHandler.
class ServerTest : public ::testing::Test {
 protected:
  ServerOptions Options() {
    ServerOptions options;
    options.socket_path = dir_.File("s.sock");
    options.worker_threads = 8;
    options.log = log_.Sink();
    return options;
  }
  void StartServer(const ServerOptions& options) {
    Result result = Server::Start(options, &handler_, &server_);
    ASSERT_TRUE(result.ok) << result.message;
  }
  std::string path() const { return dir_.File("s.sock"); }

  TempDir dir_;
  LogCapture log_;
  TestHandler handler_;
  std::unique_ptr<Server> server_;  // declared last: stopped first
};

}  // namespace intentd::transport::testing
