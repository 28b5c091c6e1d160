#include "cli/agent_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cli/commands.h"

namespace intentd::cli {

bool AgentConnection::Open(const std::string& socket_path, std::unique_ptr<AgentConnection>* out,
                           std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    *error = "socket path too long: " + socket_path;
    return false;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    // What to do depends on why: say it for the one who runs the command.
    const char* hint =
        e == EACCES ? "your user may not use the socket: add it to group intentd (sudo usermod "
                      "-aG intentd $USER, then log in again), or run the command with sudo"
        : e == ECONNREFUSED ? "nothing listens there: start the agent (sudo systemctl start "
                              "intentd.socket, or intentd serve)"
                            : "is `intentd serve` running? pass --socket or set INTENTD_SOCKET";
    *error = "cannot connect to the agent at " + socket_path + ": " + std::strerror(e) + " (" +
             hint + ")";
    if (fd >= 0) close(fd);
    return false;
  }
  out->reset(new AgentConnection(fd));
  return true;
}

AgentConnection::~AgentConnection() { close(fd_); }

bool AgentConnection::Exchange(const std::vector<std::string>& requests,
                               std::vector<std::string>* responses, std::string* error) {
  std::string out;
  for (const std::string& r : requests) out += r + "\n";
  responses->clear();
  size_t sent = 0;
  char buf[65536];
  // Answers already read are taken first; then poll for room to write and
  // for answers to read.
  auto take_lines = [&] {
    size_t nl;
    while (responses->size() < requests.size() && (nl = buffer_.find('\n')) != std::string::npos) {
      responses->push_back(buffer_.substr(0, nl));
      buffer_.erase(0, nl + 1);
    }
  };
  take_lines();
  while (responses->size() < requests.size()) {
    pollfd p{fd_, static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      *error = std::string("cannot wait for the agent: ") + std::strerror(errno);
      return false;
    }
    if ((p.revents & POLLOUT) && sent < out.size()) {
      const ssize_t n =
          send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        // The agent closed its side (after a frame_too_large, say): stop
        // writing, and read the answers it sent before that.
        sent = out.size();
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        *error = "the agent closed the connection without answering";
        if (requests.size() > 1) {
          *error += " (" + std::to_string(responses->size()) + " of " +
                    std::to_string(requests.size()) + " answers came)";
        }
        return false;
      }
      if (n > 0) buffer_.append(buf, static_cast<size_t>(n));
      take_lines();
    }
  }
  return true;
}

std::string DefaultClientSocket() {
  const char* env = std::getenv("INTENTD_SOCKET");
  return env != nullptr && *env != '\0' ? env : kDefaultSocket;
}

bool CallAgent(const std::string& socket_path, const std::string& request, std::string* response,
               std::string* error) {
  std::unique_ptr<AgentConnection> connection;
  if (!AgentConnection::Open(socket_path, &connection, error)) return false;
  std::vector<std::string> responses;
  if (!connection->Exchange({request}, &responses, error)) return false;
  *response = std::move(responses[0]);
  return true;
}

}  // namespace intentd::cli
