// The listening socket: bound to a path (replacing a stale socket file, never
// anything else) or adopted from systemd. Plain POSIX; no Asio.
#pragma once

#include <sys/types.h>

#include <string>

#include "transport/server.h"

namespace intentd::transport {

struct ListenSocket {
  int fd = -1;                // non-blocking, close-on-exec, listening
  bool created_path = false;  // we bound `path`: remove it when done
  std::string path;
  dev_t dev = 0;  // identity of the file we created, so that we never remove
  ino_t ino = 0;  // a successor's socket
};

using LogFunction = std::function<void(LogLevel, std::string_view)>;

// Binds options.socket_path (mode socket_mode, group socket_group) and
// listens, or adopts options.inherited_fd when >= 0. On failure nothing is
// left behind (no fd, no file) and the message says what to fix:
//  - the parent directory does not exist (it is not created);
//  - the path exists and is not a socket (it is never removed);
//  - another process accepts connections on the path;
//  - socket_group does not exist, or chgrp to it is not permitted;
//  - the inherited fd is not a listening AF_UNIX stream socket.
// A socket file with nothing listening (connect: ECONNREFUSED) is replaced.
Result OpenListenSocket(const ServerOptions& options, const LogFunction& log, ListenSocket* out);

// Removes the socket file if we created it and it is still the same file.
void RemoveSocketFile(const ListenSocket& socket);

}  // namespace intentd::transport
