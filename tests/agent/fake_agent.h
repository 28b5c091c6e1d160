// A fake agent for the CLI's views: listens on a Unix socket, accepts one
// connection and answers each request line with what `answer` returns for
// it (so that times, counts and amounts in a view are exact). Records the
// request lines it read.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace intentd::testing {

class FakeAgent {
 public:
  using Answer = std::function<std::string(const nlohmann::json& request)>;

  FakeAgent(const std::string& path, Answer answer) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(fd_, 4);
    thread_ = std::thread([this, answer] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string line;
      char ch;
      while (read(c, &ch, 1) == 1) {
        if (ch != '\n') {
          line.push_back(ch);
          continue;
        }
        requests_.push_back(line);
        const std::string out = answer(nlohmann::json::parse(line, nullptr, false)) + "\n";
        if (write(c, out.data(), out.size()) != static_cast<ssize_t>(out.size())) break;
        line.clear();
      }
      close(c);
    });
  }
  // Answers every request with `response`.
  FakeAgent(const std::string& path, const std::string& response)
      : FakeAgent(path, [response](const nlohmann::json&) { return response; }) {}
  ~FakeAgent() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  FakeAgent(const FakeAgent&) = delete;
  FakeAgent& operator=(const FakeAgent&) = delete;

  const std::string& path() const { return path_; }
  // The request lines read on the one connection (waits for it to close).
  std::vector<std::string> requests() {
    if (thread_.joinable()) thread_.join();
    return requests_;
  }
  std::string request() {
    const std::vector<std::string> all = requests();
    return all.empty() ? std::string() : all.front();
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::vector<std::string> requests_;
};

}  // namespace intentd::testing
