// One client connection (internal to the transport library). Modeled on the
// Asio HTTP server example: the connection owns itself through
// shared_from_this, the ConnectionManager reaches every open one, and a stop
// is cancellation plus draining.
//
// Threads: a connection stays on the io thread it was given at accept (the
// server's io threads take connections in turn), which runs its socket, its
// timers and Handler::Handle, one line at a time in order; different
// connections run in parallel on different io threads. A line the Handler
// defers (Reply::deferred), and the first line of a connection, run on the
// worker pool, still one job per connection at a time. So does a line whose
// answer another thread gives later (Reply::start): the next line waits for
// it. Replies that wait on a durability ticket are held and written in
// order once it is judged.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/line_framer.h"
#include "transport/peer_credentials.h"
#include "transport/server.h"

namespace intentd::transport {

class ConnectionManager;

// What every connection of one server shares; owned by the server, outlives
// every connection.
struct ServerContext {
  ServerOptions options;
  Handler* handler = nullptr;
  boost::asio::io_context* workers = nullptr;  // run by the worker threads
  ConnectionManager* manager = nullptr;
  GroupCache* groups = nullptr;
  // WhenDurable calls not answered yet, and started replies (Reply::start)
  // whose `done` was not called yet: the server outlives them.
  std::atomic<int> durability_pending{0};
  std::atomic<int> started_pending{0};

  void Log(LogLevel level, std::string_view message) const;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::io_context& io, const PeerCredentials& peer, ServerContext* context);
  ~Connection();

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Takes ownership of the accepted fd. False (fd closed) when Asio cannot
  // register it.
  bool Assign(int fd, std::string* error);
  // Starts reading. Any thread, once.
  void Start();
  // Stop() began: answer what was read, answer the next line with
  // kShuttingDown, close when idle. Any thread.
  void BeginDrain();
  // Closes now; queued lines are dropped, a Handler call in progress finishes
  // and its response is discarded. Any thread.
  void ForceClose();

 private:
  struct Item {
    std::string line;
    bool is_error = false;
    TransportError error = TransportError::kFrameTooLarge;
  };
  enum Kick : unsigned { kResume = 1, kFinish = 2 };

  // On the io thread.
  void Read();
  void OnRead(const boost::system::error_code& ec, size_t n);
  void ProcessInput();
  void UpdateLineTimer();
  void OnLineTimer(const boost::system::error_code& ec);
  void OnDrain();
  void Resume();
  void StartWrite();
  void OnWrite(const boost::system::error_code& ec);
  void Finish();  // graceful: FIN after the last response, then Close
  void Close();

  // Handles queued lines: on the io thread, or on a worker for the first
  // line of a connection (its peer's groups are looked up there).
  void Work(bool on_io);
  // Posts the next Work job when lines are queued (on the io thread once
  // the groups are filled), else clears worker_scheduled_. mu_ not held;
  // worker_scheduled_ is set.
  void ScheduleWork();
  // On a worker: a reply the Handler deferred, then ScheduleWork.
  void RunDeferred(const std::function<Reply()>& deferred);
  // Calls a started reply's start (Reply::start); its `done` delivers the
  // answer (or defers it to a worker), then ScheduleWork.
  void Start(std::function<void(std::function<void(Reply)>)> start);
  // The Handler threw: closes the connection.
  void HandlerThrew();
  void Deliver(Reply reply);
  // From the durability callback: sends the held replies up to `ticket`.
  void Release(uint64_t ticket, bool durable);

  struct Outcome {
    unsigned kick = 0;
    bool start_write = false;
    bool broken = false;
  };
  // mu_ held: sends (or queues) one response line, ending in '\n'.
  void SendLocked(std::string response, Outcome* outcome);
  void ApplyOutcome(const Outcome& outcome);

  // mu_ held.
  bool OverLimitLocked() const;
  unsigned KickLocked();
  // Acts on KickLocked's result (mu_ not held).
  void ApplyKick(unsigned kick);

  ServerContext* const context_;
  // The io thread's: one thread runs it, so handlers posted here are
  // serialized without a strand.
  boost::asio::io_context::executor_type io_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::asio::steady_timer line_timer_;
  int fd_ = -1;

  // io thread only.
  LineFramer framer_;
  std::vector<Item> parsed_;
  std::string write_buffer_;   // the write in flight
  uint64_t drain_offset_ = 0;  // framer_.committed() when the drain began
  bool timer_armed_ = false;
  bool partial_tracking_ = false;  // a partial line is being timed
  uint64_t partial_index_ = 0;
  std::chrono::steady_clock::time_point partial_started_;

  // Worker only (one job per connection at a time); set before the first job.
  PeerCredentials peer_;
  bool groups_filled_ = false;

  std::mutex mu_;
  std::deque<Item> queue_;         // read, not yet handed to the Handler
  size_t unanswered_ = 0;          // read and not yet answered (queue_ + in the Handler)
  bool worker_scheduled_ = false;  // a Work job is posted or running
  // Answered but waiting for durability (and every reply after the first
  // such one, to keep the order). Counted in unanswered_.
  std::deque<Reply> held_;
  uint64_t registered_ticket_ = 0;  // highest ticket a WhenDurable was asked for
  std::string output_;              // answered, not yet in a write
  size_t output_bytes_ = 0;         // output_ + write_buffer_
  bool writing_ = false;            // a write is in flight or posted; output_ goes after it
  bool read_paused_ = false;        // backpressure: no read posted
  bool held_back_ = false;          // complete lines may wait in framer_ (budget)
  bool input_done_ = false;         // EOF, frame error or shutdown answer: no more lines
  bool draining_ = false;           // Stop() began
  bool finishing_ = false;          // Finish posted
  bool closed_ = false;             // written under mu_ on the io thread; read there freely
};

}  // namespace intentd::transport
