#include "transport/listener.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace intentd::transport {
namespace {

std::string Errno(int error) { return std::strerror(error); }

Result Fail(std::string message) { return Result{false, std::move(message)}; }

Result ResolveGroup(const std::string& name, gid_t* gid) {
  long hint = sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 16384);
  struct group entry {};
  struct group* found = nullptr;
  int rc;
  while ((rc = getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < (1u << 22)) {
    buffer.resize(buffer.size() * 2);
  }
  if (rc != 0) return Fail("cannot look up socket_group '" + name + "': " + Errno(rc));
  if (found == nullptr) {
    return Fail("socket_group '" + name + "' does not exist; create it or change socket_group");
  }
  *gid = entry.gr_gid;
  return {};
}

std::string ParentDirectory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// What is at `path` now: nothing (ok), a stale socket (removed, ok), or an error.
Result ClearStaleSocket(const std::string& path, const sockaddr_un& address,
                        const LogFunction& log) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return Fail("cannot stat socket_path '" + path + "': " + Errno(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Fail("socket_path '" + path +
                "' exists and is not a socket; refusing to replace it (move it away or choose "
                "another socket_path)");
  }
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return Fail("socket(AF_UNIX): " + Errno(errno));
  int rc = connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  int error = rc == 0 ? 0 : errno;
  close(probe);
  if (rc == 0 || error == EAGAIN || error == EINPROGRESS) {
    // EAGAIN: a live listener whose backlog is full.
    return Fail("another process is listening on '" + path +
                "' (is another intentd running?); stop it or choose another socket_path");
  }
  if (error == ENOENT) return {};  // removed meanwhile
  if (error != ECONNREFUSED) {
    return Fail("cannot probe existing socket '" + path + "': " + Errno(error));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Fail("cannot remove stale socket '" + path + "': " + Errno(errno));
  }
  log(LogLevel::kInfo, "removed stale socket file " + path + " (nothing was listening)");
  return {};
}

Result AdoptInherited(int fd, ListenSocket* out) {
  int domain = 0, type = 0, listening = 0;
  socklen_t length = sizeof(int);
  bool ok = getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0;
  length = sizeof(int);
  ok = ok && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0;
  length = sizeof(int);
  ok = ok && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0;
  if (!ok) return Fail("inherited fd " + std::to_string(fd) + " is not a socket: " + Errno(errno));
  if (domain != AF_UNIX || type != SOCK_STREAM || !listening) {
    return Fail("inherited fd " + std::to_string(fd) +
                " is not a listening AF_UNIX stream socket (check ListenStream= in the .socket "
                "unit)");
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    return Fail("cannot configure inherited fd " + std::to_string(fd) + ": " + Errno(errno));
  }
  out->fd = fd;
  out->created_path = false;
  return {};
}

}  // namespace

Result OpenListenSocket(const ServerOptions& options, const LogFunction& log, ListenSocket* out) {
  *out = ListenSocket{};
  if (options.inherited_fd >= 0) return AdoptInherited(options.inherited_fd, out);

  const std::string& path = options.socket_path;
  if (path.empty()) return Fail("socket_path is empty");
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return Fail("socket_path '" + path + "' is too long (" + std::to_string(path.size()) +
                " bytes; at most " + std::to_string(sizeof(address.sun_path) - 1) + ")");
  }
  std::memcpy(address.sun_path, path.data(), path.size());

  gid_t gid = static_cast<gid_t>(-1);
  if (!options.socket_group.empty()) {
    Result group = ResolveGroup(options.socket_group, &gid);
    if (!group.ok) return group;
  }
  const std::string parent = ParentDirectory(path);
  struct stat st {};
  if (stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Fail("directory '" + parent +
                  "' of socket_path does not exist; create it (systemd: " + "RuntimeDirectory=)");
    }
    return Fail("cannot stat directory '" + parent + "': " + Errno(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return Fail("'" + parent + "' (parent of socket_path) is not a directory");

  Result cleared = ClearStaleSocket(path, address, log);
  if (!cleared.ok) return cleared;

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Fail("socket(AF_UNIX): " + Errno(errno));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    int error = errno;
    close(fd);
    if (error == EADDRINUSE) {
      return Fail("socket_path '" + path + "' was created by another process while starting");
    }
    return Fail("cannot bind socket_path '" + path + "': " + Errno(error));
  }
  // From here on the file is ours: remove it on any failure. Nobody can
  // connect before listen(), so mode and group are in place before the first
  // client.
  auto fail_bound = [&](std::string message) {
    unlink(path.c_str());
    close(fd);
    return Fail(std::move(message));
  };
  if (lstat(path.c_str(), &st) != 0)
    return fail_bound("cannot stat '" + path + "': " + Errno(errno));
  if (chmod(path.c_str(), options.socket_mode & 07777) != 0) {
    return fail_bound("cannot chmod socket '" + path + "': " + Errno(errno));
  }
  if (!options.socket_group.empty() && chown(path.c_str(), static_cast<uid_t>(-1), gid) != 0) {
    int error = errno;
    return fail_bound("cannot chgrp socket '" + path + "' to '" + options.socket_group +
                      "': " + Errno(error) +
                      (error == EPERM ? " (the process must be a member of that group)" : ""));
  }
  if (listen(fd, SOMAXCONN) != 0) return fail_bound("listen on '" + path + "': " + Errno(errno));
  out->fd = fd;
  out->created_path = true;
  out->path = path;
  out->dev = st.st_dev;
  out->ino = st.st_ino;
  return {};
}

void RemoveSocketFile(const ListenSocket& socket) {
  if (!socket.created_path) return;
  struct stat st {};
  if (lstat(socket.path.c_str(), &st) != 0) return;
  if (st.st_dev != socket.dev || st.st_ino != socket.ino) return;  // a successor's socket
  unlink(socket.path.c_str());
}

}  // namespace intentd::transport
