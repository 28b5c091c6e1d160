#include "agent/systemd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace intentd::agent {
namespace {

constexpr int kListenFdsStart = 3;

bool EnvNumber(const char* name, long long* value) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *value = v;
  return true;
}

}  // namespace

bool TakeActivatedSocket(int* fd, std::string* error) {
  *fd = -1;
  long long pid = 0, count = 0;
  if (!EnvNumber("LISTEN_PID", &pid) || pid != getpid() || !EnvNumber("LISTEN_FDS", &count) ||
      count <= 0) {
    return true;
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (count != 1) {
    *error = "socket activation passed " + std::to_string(count) +
             " sockets; intentd.socket must have exactly one ListenStream=";
    return false;
  }
  int candidate = kListenFdsStart;
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof addr;
  if (getsockopt(candidate, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
      getsockopt(candidate, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(len = sizeof listening)) !=
          0 ||
      !listening || getsockname(candidate, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 ||
      addr.ss_family != AF_UNIX) {
    *error =
        "the socket passed by systemd is not a listening Unix stream socket "
        "(use ListenStream=/run/intentd/intentd.sock)";
    return false;
  }
  fcntl(candidate, F_SETFD, FD_CLOEXEC);
  *fd = candidate;
  return true;
}

bool Notify(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || *path == '\0') return true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::strlen(path);
  if (len >= sizeof addr.sun_path || (path[0] != '/' && path[0] != '@')) return false;
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ssize_t n =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  close(fd);
  return n == static_cast<ssize_t>(state.size());
}

long long WatchdogUsec() {
  long long usec = 0, pid = 0;
  if (!EnvNumber("WATCHDOG_USEC", &usec) || usec <= 0) return 0;
  if (EnvNumber("WATCHDOG_PID", &pid) && pid != getpid()) return 0;
  return usec;
}

}  // namespace intentd::agent
