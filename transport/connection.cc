#include "transport/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>

#include "transport/connection_manager.h"

namespace intentd::transport {
namespace {

// Lines one worker job handles before yielding the thread to other
// connections (when workers are fewer than busy connections).
constexpr int kLinesPerJob = 16;
// Reading what a client sent after our last response, before close(), spares
// it an ECONNRESET in place of a clean EOF. Bounded: a client that keeps
// sending just gets the reset.
constexpr size_t kDiscardLimit = 1 << 20;

void DiscardInput(int fd) {
  char sink[16384];
  size_t total = 0;
  while (total < kDiscardLimit) {
    ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
}

}  // namespace

void ServerContext::Log(LogLevel level, std::string_view message) const {
  if (options.log) {
    options.log(level, message);
    return;
  }
  const char* prefix = level == LogLevel::kError     ? "error"
                       : level == LogLevel::kWarning ? "warning"
                                                     : "info";
  std::fprintf(stderr, "transport %s: %.*s\n", prefix, static_cast<int>(message.size()),
               message.data());
}

Connection::Connection(boost::asio::io_context& io, const PeerCredentials& peer,
                       ServerContext* context)
    : context_(context),
      io_(io.get_executor()),
      socket_(io_),
      line_timer_(io_),
      framer_(context->options.max_frame_bytes),
      peer_(peer) {}

Connection::~Connection() = default;

bool Connection::Assign(int fd, std::string* error) {
  boost::system::error_code ec;
  socket_.assign(boost::asio::local::stream_protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    *error = ec.message();
    return false;
  }
  fd_ = fd;
  return true;
}

void Connection::Start() {
  boost::asio::post(io_, [self = shared_from_this()] { self->Read(); });
}

void Connection::BeginDrain() {
  boost::asio::post(io_, [self = shared_from_this()] { self->OnDrain(); });
}

void Connection::ForceClose() {
  boost::asio::post(io_, [self = shared_from_this()] { self->Close(); });
}

// ---- Handling (the io thread; workers for deferred replies) ----

void Connection::ScheduleWork() {
  bool on_io = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || queue_.empty()) {
      // Nothing queued (a bot's one request in flight, answered): the job
      // ends here instead of posting one that would only find the queue
      // empty; a line read later schedules its own (ProcessInput checks
      // worker_scheduled_ under mu_).
      worker_scheduled_ = false;
      return;
    }
    on_io = groups_filled_;
  }
  if (on_io) {
    boost::asio::post(io_, [self = shared_from_this()] { self->Work(/*on_io=*/true); });
  } else {
    boost::asio::post(*context_->workers,
                      [self = shared_from_this()] { self->Work(/*on_io=*/false); });
  }
}

void Connection::Work(bool on_io) {
  if (!groups_filled_) {
    // NSS may block: done on a worker, once per connection (ScheduleWork
    // never posts to the io thread before).
    context_->groups->Fill(&peer_);
    std::lock_guard<std::mutex> lock(mu_);
    groups_filled_ = true;
  }
  Handler* handler = context_->handler;
  for (int i = 0; i < kLinesPerJob; ++i) {
    Item item;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || queue_.empty()) {
        worker_scheduled_ = false;
        return;
      }
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    Reply reply;
    try {
      if (item.is_error) {
        reply.line = handler->TransportErrorLine(item.error);
      } else {
        reply = handler->Handle(peer_, item.line);
        if (reply.deferred && !on_io) reply = reply.deferred();
      }
    } catch (...) {
      HandlerThrew();
      return;
    }
    if (reply.deferred) {
      // worker_scheduled_ stays set: the next line waits for this one.
      boost::asio::post(*context_->workers,
                        [self = shared_from_this(), deferred = std::move(reply.deferred)] {
                          self->RunDeferred(deferred);
                        });
      return;
    }
    if (reply.start) {
      Start(std::move(reply.start));  // likewise, until its done
      return;
    }
    Deliver(std::move(reply));
  }
  ScheduleWork();
}

void Connection::Start(std::function<void(std::function<void(Reply)>)> start) {
  // Shared by every copy of `done`. Counted out once the last copy is gone,
  // called or not (dropped uncalled is a Handler's bug: that connection then
  // never answers, but the server may still go).
  struct Pending {
    Pending(std::shared_ptr<Connection> c, ServerContext* ctx)
        : connection(std::move(c)), context(ctx) {
      context->started_pending.fetch_add(1);
    }
    ~Pending() {
      connection.reset();  // before the server may go: it waits for the count only
      context->started_pending.fetch_sub(1);
    }
    std::shared_ptr<Connection> connection;
    ServerContext* context;
    std::atomic<bool> called{false};
  };
  auto pending = std::make_shared<Pending>(shared_from_this(), context_);
  auto done = [pending](Reply reply) {
    if (pending->called.exchange(true)) return;  // called twice: a Handler's bug
    const std::shared_ptr<Connection>& self = pending->connection;
    if (reply.deferred) {
      boost::asio::post(*self->context_->workers, [self, deferred = std::move(reply.deferred)] {
        self->RunDeferred(deferred);
      });
    } else {
      self->Deliver(std::move(reply));
      self->ScheduleWork();
    }
  };
  try {
    start(std::move(done));
  } catch (...) {
    // start threw (the Handler must not throw): the line cannot be answered
    // in order.
    HandlerThrew();
  }
}

void Connection::RunDeferred(const std::function<Reply()>& deferred) {
  Reply reply;
  try {
    reply = deferred();
  } catch (...) {
    HandlerThrew();
    return;
  }
  Deliver(std::move(reply));
  ScheduleWork();
}

void Connection::HandlerThrew() {
  // The Handler must not throw; if it does, this connection cannot be
  // answered in order any more.
  context_->Log(LogLevel::kError, "the line handler threw; closing the connection");
  {
    std::lock_guard<std::mutex> lock(mu_);
    worker_scheduled_ = false;
  }
  ForceClose();
}

void Connection::SendLocked(std::string response, Outcome* outcome) {
  --unanswered_;
  if (closed_ || outcome->broken) return;
  if (!writing_) {
    ssize_t n = ::send(fd_, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      outcome->broken = true;  // EPIPE, ECONNRESET: the client is gone
    } else if (sent < response.size()) {
      response.erase(0, sent);
      output_.swap(response);  // output_ is empty while no write is in flight
      output_bytes_ += output_.size();
      writing_ = true;
      outcome->start_write = true;
    }
  } else {
    output_bytes_ += response.size();
    if (output_.empty()) {
      output_.swap(response);
    } else {
      output_.append(response);
    }
  }
}

void Connection::ApplyOutcome(const Outcome& outcome) {
  if (outcome.broken) {
    ForceClose();
    return;
  }
  if (outcome.start_write) {
    boost::asio::post(io_, [self = shared_from_this()] { self->StartWrite(); });
  }
  ApplyKick(outcome.kick);
}

void Connection::Deliver(Reply reply) {
  Outcome outcome;
  uint64_t await = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      --unanswered_;
      return;  // Close() sets closed_ under mu_ before closing the fd
    }
    const bool hold =
        context_->options.durability != nullptr && (reply.durable_ticket != 0 || !held_.empty());
    if (!hold) {
      reply.line.push_back('\n');
      SendLocked(std::move(reply.line), &outcome);
      if (!outcome.broken) outcome.kick = KickLocked();
    } else {
      // Every held reply needs a WhenDurable call for its ticket or a higher
      // one still to come. When nothing is held, earlier calls have all
      // answered (they release in order), so even an equal ticket needs a
      // new call.
      if (reply.durable_ticket != 0 &&
          (held_.empty() || reply.durable_ticket > registered_ticket_)) {
        registered_ticket_ = std::max(registered_ticket_, reply.durable_ticket);
        await = reply.durable_ticket;
      }
      held_.push_back(std::move(reply));
    }
  }
  if (await != 0) {
    // Outside mu_: the answer may come inline.
    context_->durability_pending.fetch_add(1);
    context_->options.durability->WhenDurable(
        await, [self = shared_from_this(), context = context_, await](bool durable) mutable {
          self->Release(await, durable);
          self.reset();  // before the server may go: it waits for the count only
          context->durability_pending.fetch_sub(1);
        });
  }
  ApplyOutcome(outcome);
}

void Connection::Release(uint64_t ticket, bool durable) {
  Outcome outcome;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Replies are held in order and tickets only grow along the queue
    // (each covers every write before it), so the released ones are a
    // prefix. Each goes with its own ticket's verdict: `durable` is only the
    // verdict on `ticket`, and an earlier ticket may have been lost while a
    // later one (written after the store reopened) is durable.
    (void)durable;
    while (!held_.empty() && held_.front().durable_ticket <= ticket) {
      Reply& reply = held_.front();
      Durability::Verdict verdict = Durability::Verdict::kDurable;
      if (reply.durable_ticket != 0) {
        verdict = context_->options.durability->Check(reply.durable_ticket);
      }
      if (verdict == Durability::Verdict::kPending) break;  // its own answer comes later
      std::string line = (verdict == Durability::Verdict::kDurable || reply.line_if_lost.empty())
                             ? std::move(reply.line)
                             : std::move(reply.line_if_lost);
      held_.pop_front();
      line.push_back('\n');
      SendLocked(std::move(line), &outcome);
    }
    if (!closed_ && !outcome.broken) outcome.kick = KickLocked();
  }
  ApplyOutcome(outcome);
}

// ---- Writing (io thread) ----

void Connection::StartWrite() {
  if (closed_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_buffer_.swap(output_);
  }
  boost::asio::async_write(socket_, boost::asio::buffer(write_buffer_),
                           boost::asio::bind_executor(
                               io_, [self = shared_from_this()](const boost::system::error_code& ec,
                                                                size_t) { self->OnWrite(ec); }));
}

void Connection::OnWrite(const boost::system::error_code& ec) {
  if (closed_) return;
  if (ec) {
    Close();  // EPIPE, ECONNRESET: the client is gone
    return;
  }
  unsigned kick = 0;
  bool more = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    output_bytes_ -= write_buffer_.size();
    write_buffer_.clear();
    if (!output_.empty()) {
      write_buffer_.swap(output_);
      more = true;
    } else {
      writing_ = false;
      kick = KickLocked();
    }
  }
  if (more) {
    boost::asio::async_write(
        socket_, boost::asio::buffer(write_buffer_),
        boost::asio::bind_executor(
            io_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
              self->OnWrite(ec);
            }));
    return;
  }
  ApplyKick(kick);
}

// ---- State ----

bool Connection::OverLimitLocked() const {
  return unanswered_ >= context_->options.max_pending_lines ||
         output_bytes_ >= context_->options.max_pending_output_bytes;
}

unsigned Connection::KickLocked() {
  unsigned kick = 0;
  if (closed_) return 0;
  if (read_paused_ && !OverLimitLocked()) {
    read_paused_ = false;
    kick |= kResume;
  }
  if ((input_done_ || draining_) && unanswered_ == 0 && !writing_ && !held_back_ && !finishing_) {
    finishing_ = true;
    kick |= kFinish;
  }
  return kick;
}

void Connection::ApplyKick(unsigned kick) {
  if (kick & kFinish) {
    boost::asio::dispatch(io_, [self = shared_from_this()] { self->Finish(); });
  } else if (kick & kResume) {
    boost::asio::dispatch(io_, [self = shared_from_this()] { self->Resume(); });
  }
}

void Connection::OnDrain() {
  if (closed_) return;
  unsigned kick;
  drain_offset_ = framer_.committed();
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    kick = KickLocked();
  }
  ApplyKick(kick);
}

void Connection::Finish() {
  if (closed_) return;
  boost::system::error_code ec;
  socket_.shutdown(boost::asio::socket_base::shutdown_send, ec);
  DiscardInput(fd_);
  Close();
}

void Connection::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    unanswered_ -= queue_.size() + held_.size();
    queue_.clear();
    held_.clear();
    output_.clear();
  }
  boost::system::error_code ec;
  line_timer_.cancel();
  socket_.close(ec);
  context_->manager->Remove(shared_from_this());
  context_->handler->OnConnectionClosed();
}

}  // namespace intentd::transport
