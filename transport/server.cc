// Server: the accept loop, the threads and the stop sequence. Connections do
// the rest (connection.cc).
#include "transport/server.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "transport/connection.h"
#include "transport/connection_manager.h"
#include "transport/listener.h"
#include "transport/peer_credentials.h"

namespace intentd::transport {
namespace {

constexpr int kAcceptBatch = 64;  // accepts before yielding the io thread
constexpr std::chrono::milliseconds kAcceptBackoff{100};
constexpr std::chrono::seconds kAcceptLogInterval{10};
constexpr std::chrono::seconds kGroupCacheTtl{30};
constexpr std::chrono::milliseconds kDestructorDrain{1000};

Result ValidateOptions(const ServerOptions& options, Handler* handler,
                       std::unique_ptr<Server>* server) {
  auto fail = [](std::string message) { return Result{false, std::move(message)}; };
  if (handler == nullptr || server == nullptr)
    return fail("Server::Start needs a handler and an out pointer");
  if (options.max_frame_bytes == 0) return fail("max_frame_bytes must be at least 1");
  if (options.max_connections == 0) return fail("max_connections must be at least 1");
  if (options.line_timeout.count() <= 0) return fail("line_timeout must be positive");
  if (options.max_pending_lines == 0) return fail("max_pending_lines must be at least 1");
  if (options.max_pending_output_bytes == 0)
    return fail("max_pending_output_bytes must be at least 1");
  if (options.worker_threads < 1) return fail("worker_threads must be at least 1");
  if (options.io_threads < 1 || options.io_threads > 64) {
    return fail("io_threads must be from 1 to 64");
  }
  if (options.socket_mode > 07777) return fail("socket_mode must be a permission mode (<= 07777)");
  return {};
}

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, Handler* handler)
      : workers_(options.worker_threads),
        groups_(
            kGroupCacheTtl, [] { return std::chrono::steady_clock::now(); }, LookupUserGroups) {
    context_.options = options;
    context_.handler = handler;
    context_.workers = &workers_;
    context_.manager = &manager_;
    context_.groups = &groups_;
  }

  ~ServerImpl() override {
    if (running_) Stop(kDestructorDrain);
  }

  Result Run() {
    Result opened = OpenListenSocket(
        context_.options, [this](LogLevel level, std::string_view m) { context_.Log(level, m); },
        &listen_);
    if (!opened.ok) return opened;
    boost::system::error_code ec;
    acceptor_.assign(boost::asio::local::stream_protocol(), listen_.fd, ec);
    if (ec) {
      ::close(listen_.fd);
      RemoveSocketFile(listen_);
      return Result{false, "cannot register the listening socket: " + ec.message()};
    }
    // Before the first io thread runs: it reads extra_io_ when it admits.
    for (int i = 1; i < context_.options.io_threads; ++i) {
      auto extra = std::make_unique<ExtraIo>();
      extra->thread = std::thread([this, io = &extra->io] { Run(*io, "intentd-io"); });
      extra_io_.push_back(std::move(extra));
    }
    boost::asio::post(io_, [this] { AcceptReady(); });
    for (int i = 0; i < context_.options.worker_threads; ++i) {
      worker_threads_.emplace_back([this] { Run(workers_, "intentd-worker"); });
    }
    io_thread_ = std::thread([this] { Run(io_, "intentd-io"); });
    running_ = true;
    return {};
  }

  // Stop sequence: no new connections; every connection drains (answers what
  // it read, then closes); at the deadline the rest are closed by force;
  // then the workers finish their current Handler calls and every thread is
  // joined. The io_context is never stopped with work in flight: its threads
  // end because nothing is left to do.
  void Stop(std::chrono::milliseconds drain) override {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (!running_ || stopped_) return;
    const auto deadline = std::chrono::steady_clock::now() + drain;
    stopping_.store(true);
    // Drain notices are posted right after the listener closes, on the io
    // thread, so a line that arrives once connects are refused is already
    // one that "arrived after Stop began".
    boost::asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      backoff_timer_.cancel();
      manager_.BeginDrainAll();
    });
    if (!manager_.WaitEmptyUntil(deadline)) {
      manager_.ForceCloseAll();
      manager_.WaitEmptyUntil(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    }
    // Handler calls in progress finish; the worker threads end once no job
    // is left, then the io thread once no operation is left.
    workers_guard_.reset();
    for (std::thread& thread : worker_threads_) thread.join();
    worker_threads_.clear();
    io_guard_.reset();
    io_thread_.join();
    for (auto& extra : extra_io_) {
      extra->guard.reset();
      extra->thread.join();
    }
    // Durability callbacks and started replies still out hold connections
    // bound to io_: wait for them (the Durability answers every call, a
    // sync takes ms; a started reply's thread calls its done).
    while (context_.durability_pending.load() > 0 || context_.started_pending.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    RemoveSocketFile(listen_);
    stopped_ = true;
  }

  size_t connection_count() const override { return manager_.size(); }
  uint64_t connections_total() const override { return connections_total_.load(); }

 private:
  // Runs `context` until it has no work left. Handlers catch what they can;
  // only a throwing Handler::OnConnection* callback or an allocation failure
  // gets here, and the thread goes on serving.
  void Run(boost::asio::io_context& context, const char* name) {
    pthread_setname_np(pthread_self(), name);  // shown by top -H, ps -L
    for (;;) {
      try {
        context.run();
        return;
      } catch (const std::exception& e) {
        context_.Log(LogLevel::kError,
                     std::string("exception on thread ") + name + ": " + e.what());
      } catch (...) {
        context_.Log(LogLevel::kError, std::string("unknown exception on thread ") + name);
      }
    }
  }

  void WaitAcceptable() {
    acceptor_.async_wait(
        boost::asio::socket_base::wait_read,
        boost::asio::bind_executor(io_, [this](const boost::system::error_code& ec) {
          if (stopping_.load()) return;
          if (ec) {
            OnAcceptError(ec.value());
            return;
          }
          AcceptReady();
        }));
  }

  // accept4 until the queue is empty, so that close-on-exec is set atomically
  // and a burst costs one wakeup.
  void AcceptReady() {
    for (int i = 0; i < kAcceptBatch; ++i) {
      if (stopping_.load()) return;
      int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        int error = errno;
        if (error == EAGAIN || error == EWOULDBLOCK) {
          WaitAcceptable();
          return;
        }
        if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;
        OnAcceptError(error);
        return;
      }
      if (accept_errno_ != 0) {
        context_.Log(LogLevel::kInfo, "accepting connections again");
        accept_errno_ = 0;
      }
      Admit(fd);
    }
    boost::asio::post(io_, [this] { AcceptReady(); });
  }

  // EMFILE, ENFILE, ENOBUFS...: the pending connection stays in the backlog;
  // retry after a pause rather than spin on an fd that stays readable.
  void OnAcceptError(int error) {
    const auto now = std::chrono::steady_clock::now();
    if (error != accept_errno_ || now - last_accept_log_ >= kAcceptLogInterval) {
      context_.Log(LogLevel::kError, std::string("accept failed: ") + std::strerror(error) +
                                         "; retrying every " +
                                         std::to_string(kAcceptBackoff.count()) + " ms");
      last_accept_log_ = now;
    }
    accept_errno_ = error;
    backoff_timer_.expires_after(kAcceptBackoff);
    backoff_timer_.async_wait(
        boost::asio::bind_executor(io_, [this](const boost::system::error_code& ec) {
          if (ec || stopping_.load()) return;
          AcceptReady();
        }));
  }

  void Admit(int fd) {
    if (manager_.size() >= context_.options.max_connections) {
      Reject(fd);
      return;
    }
    PeerCredentials peer;
    std::string error;
    if (!ReadPeerCredentials(fd, &peer, &error)) {
      context_.Log(LogLevel::kWarning, "closing a new connection: " + error);
      ::close(fd);
      return;
    }
    // Connections take the io threads in turn; each connection stays on its
    // thread, which runs its socket and its Handler calls.
    const size_t pick = next_io_++ % (extra_io_.size() + 1);
    boost::asio::io_context& io = pick == 0 ? io_ : extra_io_[pick - 1]->io;
    auto connection = std::make_shared<Connection>(io, peer, &context_);
    if (!connection->Assign(fd, &error)) {
      context_.Log(LogLevel::kWarning, "closing a new connection: " + error);
      return;
    }
    connections_total_.fetch_add(1);
    context_.handler->OnConnectionOpened();
    bool draining = manager_.Add(connection);
    connection->Start();
    if (draining) connection->BeginDrain();
  }

  // Over max_connections: one error line, then close. The socket buffer of a
  // new connection is empty, so a non-blocking send of one line fits.
  void Reject(int fd) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_reject_log_ >= kAcceptLogInterval) {
      context_.Log(LogLevel::kWarning, "connection limit (" +
                                           std::to_string(context_.options.max_connections) +
                                           ") reached; refusing new connections");
      last_reject_log_ = now;
    }
    std::string line;
    try {
      line = context_.handler->TransportErrorLine(TransportError::kOverloaded);
      line.push_back('\n');
    } catch (...) {
      line.clear();  // the Handler must not throw; the client still gets closed
    }
    (void)::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    char sink[4096];
    while (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }

  // Destroyed last: everything below may hold handlers bound to io_.
  ServerContext context_;
  // Run by one thread: connections and the acceptor need no strands. Two io
  // threads, alternated with one (intentd_loadgen --connections 64), were
  // slower in three comparisons, 7-21% more pairs for 50% more CPU in one
  // (--sync none), mixed in two; the agent never used them.
  boost::asio::io_context io_{1};
  // The Handler runs here, never on io_: the worker threads may block.
  boost::asio::io_context workers_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> io_guard_{
      io_.get_executor()};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> workers_guard_{
      workers_.get_executor()};
  boost::asio::local::stream_protocol::acceptor acceptor_{io_};
  boost::asio::steady_timer backoff_timer_{io_};
  GroupCache groups_;
  ConnectionManager manager_;
  std::thread io_thread_;
  // ServerOptions::io_threads beyond the first (which also accepts).
  struct ExtraIo {
    boost::asio::io_context io{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{
        io.get_executor()};
    std::thread thread;
  };
  std::vector<std::unique_ptr<ExtraIo>> extra_io_;
  size_t next_io_ = 0;  // io_ thread only
  std::vector<std::thread> worker_threads_;
  ListenSocket listen_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> connections_total_{0};
  // io thread only.
  int accept_errno_ = 0;
  std::chrono::steady_clock::time_point last_accept_log_;
  std::chrono::steady_clock::time_point last_reject_log_;

  std::mutex stop_mu_;
  bool running_ = false;  // guarded by stop_mu_ (set before Start returns)
  bool stopped_ = false;  // guarded by stop_mu_
};

}  // namespace

Result Server::Start(const ServerOptions& options, Handler* handler,
                     std::unique_ptr<Server>* server) {
  Result valid = ValidateOptions(options, handler, server);
  if (!valid.ok) return valid;
  auto impl = std::make_unique<ServerImpl>(options, handler);
  Result run = impl->Run();
  if (!run.ok) return run;
  *server = std::move(impl);
  return {};
}

}  // namespace intentd::transport
