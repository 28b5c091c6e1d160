#include "transport/connection.h"

#include <sys/socket.h>
#include <unistd.h>

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
      strand_(boost::asio::make_strand(io)),
      socket_(strand_),
      line_timer_(strand_),
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
  boost::asio::post(strand_, [self = shared_from_this()] { self->Read(); });
}

void Connection::BeginDrain() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->OnDrain(); });
}

void Connection::ForceClose() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->Close(); });
}

// ---- Handling (worker) ----

void Connection::Work() {
  if (!groups_filled_) {
    // NSS may block: done here, off the io threads, once per connection.
    context_->groups->Fill(&peer_);
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
    std::string response;
    try {
      response = item.is_error ? handler->TransportErrorLine(item.error)
                               : handler->HandleLine(peer_, item.line);
    } catch (...) {
      // The Handler must not throw; if it does, this connection cannot be
      // answered in order any more.
      context_->Log(LogLevel::kError, "the line handler threw; closing the connection");
      {
        std::lock_guard<std::mutex> lock(mu_);
        worker_scheduled_ = false;
      }
      ForceClose();
      return;
    }
    Deliver(std::move(response));
  }
  boost::asio::post(*context_->workers, [self = shared_from_this()] { self->Work(); });
}

void Connection::Deliver(std::string response) {
  response.push_back('\n');
  unsigned kick = 0;
  bool start_write = false;
  bool broken = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --unanswered_;
    if (closed_) return;  // Close() sets closed_ under mu_ before closing the fd
    if (!writing_) {
      ssize_t n = ::send(fd_, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        broken = true;  // EPIPE, ECONNRESET: the client is gone
      } else if (sent < response.size()) {
        response.erase(0, sent);
        output_.swap(response);  // output_ is empty while no write is in flight
        output_bytes_ += output_.size();
        writing_ = true;
        start_write = true;
      }
    } else {
      output_bytes_ += response.size();
      if (output_.empty()) {
        output_.swap(response);
      } else {
        output_.append(response);
      }
    }
    if (!broken) kick = KickLocked();
  }
  if (broken) {
    ForceClose();
    return;
  }
  if (start_write) {
    boost::asio::post(strand_, [self = shared_from_this()] { self->StartWrite(); });
  }
  ApplyKick(kick);
}

// ---- Writing (strand) ----

void Connection::StartWrite() {
  if (closed_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_buffer_.swap(output_);
  }
  boost::asio::async_write(
      socket_, boost::asio::buffer(write_buffer_),
      boost::asio::bind_executor(
          strand_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
            self->OnWrite(ec);
          }));
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
            strand_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
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
    boost::asio::dispatch(strand_, [self = shared_from_this()] { self->Finish(); });
  } else if (kick & kResume) {
    boost::asio::dispatch(strand_, [self = shared_from_this()] { self->Resume(); });
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
    unanswered_ -= queue_.size();
    queue_.clear();
    output_.clear();
  }
  boost::system::error_code ec;
  line_timer_.cancel();
  socket_.close(ec);
  context_->manager->Remove(shared_from_this());
  context_->handler->OnConnectionClosed();
}

}  // namespace intentd::transport
