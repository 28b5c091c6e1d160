// A Unix-socket line server: one JSON request per line in, one response line
// out, in request order per connection. It knows nothing of the protocol: it
// hands complete lines to a Handler and writes back what the Handler returns.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace intentd::transport {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups of uid (gid included)
};

enum class TransportError {
  kFrameTooLarge,  // sent, then the connection is closed
  kOverloaded,     // connection limit reached: sent, then closed
  kShuttingDown,   // a line read after Stop() began
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on a worker thread; may block (store I/O). Must not throw. Lines of
  // one connection are handled one at a time, in order. Returns the response
  // without the trailing '\n'. `line` excludes the '\n' (and a trailing '\r').
  virtual std::string HandleLine(const PeerCredentials& peer, std::string_view line) = 0;
  // The response line to send for a transport-level error.
  virtual std::string TransportErrorLine(TransportError error) = 0;
  // Connection accounting (for stats); called from the server's threads.
  virtual void OnConnectionOpened() {}
  virtual void OnConnectionClosed() {}
};

// Severity of a message the server reports through ServerOptions::log.
enum class LogLevel { kError, kWarning, kInfo };

struct ServerOptions {
  std::string socket_path;      // bound unless inherited_fd >= 0
  int inherited_fd = -1;        // a listening socket from systemd (LISTEN_FDS)
  unsigned socket_mode = 0660;  // applied to a socket file we create
  std::string socket_group;     // "" keeps the process's group
  size_t max_frame_bytes = 65536;  // bytes before '\n'
  size_t max_connections = 1024;
  std::chrono::milliseconds line_timeout{10000};  // a started line must end within this
  // Backpressure: a connection stops being read while it has this many lines
  // read but not yet answered, or this many response bytes not yet sent.
  size_t max_pending_lines = 256;
  size_t max_pending_output_bytes = 1 << 20;
  int worker_threads = 64;  // threads that run Handler::HandleLine
  int io_threads = 1;
  // What the server cannot return as a Result: accept errors (EMFILE...), a
  // stale socket file replaced, a connection dropped for a line timeout.
  // Called from any of the server's threads (and from Start). Empty: one line
  // on stderr per message.
  std::function<void(LogLevel, std::string_view)> log;
};

struct Result {
  bool ok = true;
  std::string message;  // what went wrong and what to do
};

class Server {
 public:
  virtual ~Server() = default;

  // Binds (or adopts the inherited fd), listens and starts serving. A stale
  // socket file with nothing listening is replaced; a socket where another
  // process listens is an error. The handler must outlive the server.
  static Result Start(const ServerOptions& options, Handler* handler,
                      std::unique_ptr<Server>* server);

  // Graceful stop: stops accepting, answers every line already read, closes
  // connections, and returns within `drain` (connections still busy then are
  // closed). Removes the socket file it created. Idempotent.
  virtual void Stop(std::chrono::milliseconds drain) = 0;

  virtual size_t connection_count() const = 0;
  virtual uint64_t connections_total() const = 0;
};

}  // namespace intentd::transport
