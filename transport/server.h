// A Unix-socket line server: one JSON request per line in, one response line
// out, in request order per connection. It knows nothing of the protocol: it
// hands complete lines to a Handler and writes back what the Handler returns.
//
// Framing: a line ends with '\n'; one '\r' before it is stripped. Bytes are
// passed through unchanged (the Handler validates UTF-8 and JSON). Empty lines
// are passed to the Handler too (the agent answers bad_request). Bytes after
// the last '\n' when the client half-closes are not a line and are dropped.
//
// Per connection: lines are handled one at a time in order (on the
// connection's io thread, or a worker for what the Handler defers) and
// answered in order; a client may pipeline. After its write side is shut
// down (half-close) every line read is still answered, then the server
// closes. A line longer than max_frame_bytes is answered (after the lines
// before it) with TransportErrorLine(kFrameTooLarge), then the connection is
// closed; the limit is enforced while the line is still arriving. A line
// started and not finished within line_timeout drops the connection (idle
// connections stay open). A client that vanishes, resets or stops reading
// never takes the server down (no SIGPIPE; backpressure bounds memory).
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

// A response line and, optionally, the durability it depends on.
struct Reply {
  std::string line;             // without the trailing '\n'
  uint64_t durable_ticket = 0;  // 0: send at once; else see ServerOptions::durability
  std::string line_if_lost;     // sent instead of `line` if the ticket cannot become durable
  // Set (and nothing else) when answering the line may block: the server
  // calls it on a worker thread, still in the connection's order, and sends
  // the Reply it returns (which must not be deferred again).
  std::function<Reply()> deferred;
  // Set (and nothing else) when the answer comes later from a thread that
  // is not the server's and does not block one of them (a store's own):
  // the server calls start(done) where it called Handle, and handles the
  // connection's next line only once done(reply) was called, exactly once,
  // from any thread (possibly inside start). That reply is sent, or run on a
  // worker first when it is deferred; it must not start again. `done` is
  // quick: it sends, or hands the line to a worker.
  std::function<void(std::function<void(Reply)> done)> start;
};

// Where held replies wait (ServerOptions::durability): the agent's store,
// which syncs its writes in groups instead of once per request.
class Durability {
 public:
  virtual ~Durability() = default;
  // Calls done(true) once everything up to `ticket` is durable, or
  // done(false) if it cannot be made durable. From any thread, possibly
  // inline; every call is answered eventually. `done` is quick.
  virtual void WhenDurable(uint64_t ticket, std::function<void(bool durable)> done) = 0;
  // The verdict on one ticket, without waiting: kPending, or final. Tickets
  // are judged one by one: a reply is released with its own verdict, not
  // with that of a later ticket (an earlier one may be lost where a later
  // one is durable: Store::CheckTicket).
  enum class Verdict { kPending, kDurable, kLost };
  virtual Verdict Check(uint64_t ticket) = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // The plain form: called on a worker thread, may block (store I/O).
  // Returns the response without the trailing '\n' (it must contain none).
  // `line` excludes the '\n' (and a trailing '\r'); it may be empty.
  virtual std::string HandleLine(const PeerCredentials& peer, std::string_view line) = 0;
  // What the server calls, for each line in order, one line of a connection
  // at a time (calls for different connections may run concurrently). Runs
  // on the connection's io thread once the connection's `peer.groups` are filled (the
  // first line of a connection on a worker), so it must not block: a line
  // whose answer may wait on the disk or the network returns a Reply with
  // only `deferred` set, which the server runs on a worker. The response may
  // wait for a durability ticket (held replies go out in order, after the
  // ticket is durable, or as line_if_lost). Must not throw (if it does, the
  // connection is closed). `peer` outlives a deferred call and a started
  // one's `done`. Default: defers HandleLine.
  virtual Reply Handle(const PeerCredentials& peer, std::string_view line) {
    Reply reply;
    reply.deferred = [this, &peer, copy = std::string(line)] {
      Reply answer;
      answer.line = HandleLine(peer, copy);
      return answer;
    };
    return reply;
  }
  // The response line to send for a transport-level error. Called on an io
  // thread or a worker; must be quick and must not throw.
  virtual std::string TransportErrorLine(TransportError error) = 0;
  // Connection accounting (for stats); called from the server's threads.
  virtual void OnConnectionOpened() {}
  virtual void OnConnectionClosed() {}
};

// Severity of a message the server reports through ServerOptions::log.
enum class LogLevel { kError, kWarning, kInfo };

struct ServerOptions {
  std::string socket_path;         // bound unless inherited_fd >= 0
  int inherited_fd = -1;           // a listening socket from systemd (LISTEN_FDS)
  unsigned socket_mode = 0660;     // applied to a socket file we create
  std::string socket_group;        // "" keeps the process's group
  size_t max_frame_bytes = 65536;  // bytes before '\n'
  size_t max_connections = 1024;
  std::chrono::milliseconds line_timeout{10000};  // a started line must end within this
  // Backpressure: a connection stops being read while it has this many lines
  // read but not yet answered, or this many response bytes not yet sent.
  // Per connection the server then holds at most max_pending_lines lines,
  // max_pending_output_bytes plus the responses to those lines, and one read
  // buffer (16 KiB, up to about twice max_frame_bytes while a long line is
  // arriving).
  size_t max_pending_lines = 256;
  size_t max_pending_output_bytes = 1 << 20;
  int worker_threads = 64;  // threads that run deferred replies (Reply::deferred)
  // Threads that run the sockets and Handler::Handle, each for its share of
  // the connections (taken in turn), 1 to 64.
  int io_threads = 1;
  // Holds replies with a durable_ticket until it is durable; nullptr: such
  // replies are sent at once. Must outlive the server.
  Durability* durability = nullptr;
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

// Threads: `io_threads` threads ("intentd-io") run the sockets, the timers
// and Handler::Handle, each connection on one of them for its whole life;
// `worker_threads` threads ("intentd-worker") run the deferred replies
// (Reply::deferred) and the first line of each connection. The accessors are
// thread safe. Destroying a running server stops it with a 1 s
// drain.
class Server {
 public:
  virtual ~Server() = default;

  // Binds (or adopts the inherited fd), listens and starts serving. A stale
  // socket file with nothing listening is replaced; a socket where another
  // process listens is an error. The handler must outlive the server.
  // Errors (nothing is left behind, *server untouched): invalid options; the
  // socket path's directory is missing (it is not created); the path exists
  // and is not a socket (it is never removed); another process listens there;
  // socket_group does not exist or cannot be applied; the inherited fd is not
  // a listening AF_UNIX stream socket. An inherited socket's file is neither
  // chmod'ed nor removed. The socket file gets socket_mode and socket_group
  // before the first client can connect.
  static Result Start(const ServerOptions& options, Handler* handler,
                      std::unique_ptr<Server>* server);

  // Graceful stop: stops accepting, answers every line already read, closes
  // connections, and returns within `drain` (connections still busy then are
  // closed). Removes the socket file it created. Idempotent.
  // In detail: a connection with nothing in progress is closed at once. One
  // with lines in progress stays open until every line that had reached the
  // server before Stop began (including lines held back by backpressure) is
  // answered and written, then closes. A line that arrives meanwhile is
  // answered with TransportErrorLine(kShuttingDown), after which the
  // connection closes; bytes still unread then get no answer (the client
  // sees the connection close). At the deadline every connection left is
  // closed and queued lines are dropped unanswered; a Handler call already
  // running is waited for (it cannot be interrupted), so Stop returns after
  // `drain` plus at most the longest such call. All threads are joined. Must
  // not be called from a Handler callback.
  virtual void Stop(std::chrono::milliseconds drain) = 0;

  virtual size_t connection_count() const = 0;
  virtual uint64_t connections_total() const = 0;
};

}  // namespace intentd::transport
