// The input side of a connection (io thread): reading into the framer, moving
// lines to the queue within the backpressure budget, and the line timeout.
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <optional>

#include "transport/connection.h"

namespace intentd::transport {

// ---- Reading (io thread) ----

void Connection::Read() {
  if (closed_) return;
  size_t size = 0;
  char* data = framer_.PrepareWrite(&size);
  socket_.async_read_some(boost::asio::buffer(data, size),
                          boost::asio::bind_executor(
                              io_, [self = shared_from_this()](const boost::system::error_code& ec,
                                                               size_t n) { self->OnRead(ec, n); }));
}

void Connection::OnRead(const boost::system::error_code& ec, size_t n) {
  if (closed_) return;
  if (!ec) {
    framer_.Commit(n);
    ProcessInput();
    return;
  }
  if (ec == boost::asio::error::operation_aborted) return;
  if (ec == boost::asio::error::eof) {
    // Half-close: answer what was read, then close. A partial line without
    // its '\n' is not a request and is dropped.
    unsigned kick;
    {
      std::lock_guard<std::mutex> lock(mu_);
      input_done_ = true;
      kick = KickLocked();
    }
    line_timer_.cancel();
    ApplyKick(kick);
    return;
  }
  Close();  // ECONNRESET and the like: the client is gone
}

// Moves complete lines from the framer to the queue, at most up to
// max_pending_lines, and reads on unless over a backpressure limit.
void Connection::ProcessInput() {
  const ServerOptions& options = context_->options;
  for (;;) {
    if (closed_ || input_done_) return;
    size_t budget;
    {
      std::lock_guard<std::mutex> lock(mu_);
      budget =
          unanswered_ < options.max_pending_lines ? options.max_pending_lines - unanswered_ : 0;
    }
    parsed_.clear();
    std::optional<TransportError> error;
    bool need_more = false;
    std::string line;
    while (parsed_.size() < budget) {
      LineFramer::Next next = framer_.NextLine(&line);
      if (next == LineFramer::Next::kNeedMore) {
        need_more = true;
        break;
      }
      if (next == LineFramer::Next::kFrameTooLarge) {
        error = TransportError::kFrameTooLarge;
        break;
      }
      if (draining_ && framer_.consumed() > drain_offset_) {
        // Arrived after Stop began; lines read before are still answered.
        error = TransportError::kShuttingDown;
        break;
      }
      parsed_.push_back(Item{std::move(line), false, TransportError::kFrameTooLarge});
    }

    bool schedule = false;
    bool paused = false;
    unsigned kick = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Item& parsed : parsed_) queue_.push_back(std::move(parsed));
      unanswered_ += parsed_.size();
      if (error) {
        queue_.push_back(Item{std::string(), true, *error});
        ++unanswered_;
        input_done_ = true;
      }
      if (!queue_.empty() && !worker_scheduled_) {
        worker_scheduled_ = true;
        schedule = true;
      }
      held_back_ = !need_more && !error;  // stopped by the budget
      if (!input_done_ && OverLimitLocked()) {
        read_paused_ = true;
        paused = true;
      }
      kick = KickLocked();  // draining with nothing left to answer: finish
    }
    if (schedule) ScheduleWork();
    if (kick & kFinish) {
      ApplyKick(kick);
      return;
    }
    if (input_done_) {
      line_timer_.cancel();
      return;
    }
    if (paused) return;  // a delivered response or a finished write resumes
    if (need_more) {
      UpdateLineTimer();
      Read();
      return;
    }
    // The budget ran out but workers answered meanwhile: take more lines.
  }
}

void Connection::Resume() {
  if (closed_ || input_done_) return;
  // Reading stopped by our own backpressure does not count against the line.
  if (partial_tracking_) partial_started_ = std::chrono::steady_clock::now();
  ProcessInput();
}

// ---- Line timeout (io thread) ----

// Only a started line is timed; an idle connection may stay open forever.
// The timer is armed once per partial line and never cancelled on the hot
// path: when it fires it checks whether that line is still unfinished.
void Connection::UpdateLineTimer() {
  if (!framer_.has_buffered()) {
    partial_tracking_ = false;
    return;
  }
  if (!partial_tracking_ || partial_index_ != framer_.lines_returned()) {
    partial_tracking_ = true;
    partial_index_ = framer_.lines_returned();
    partial_started_ = std::chrono::steady_clock::now();
  }
  if (timer_armed_) return;
  timer_armed_ = true;
  line_timer_.expires_at(partial_started_ + context_->options.line_timeout);
  line_timer_.async_wait(boost::asio::bind_executor(
      io_,
      [self = shared_from_this()](const boost::system::error_code& ec) { self->OnLineTimer(ec); }));
}

void Connection::OnLineTimer(const boost::system::error_code& ec) {
  timer_armed_ = false;
  if (ec || closed_ || input_done_ || !partial_tracking_) return;
  bool paused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused = read_paused_;
  }
  const auto now = std::chrono::steady_clock::now();
  if (paused) partial_started_ = now;
  const auto deadline = partial_started_ + context_->options.line_timeout;
  if (now < deadline) {
    timer_armed_ = true;
    line_timer_.expires_at(deadline);
    line_timer_.async_wait(boost::asio::bind_executor(
        io_, [self = shared_from_this()](const boost::system::error_code& ec) {
          self->OnLineTimer(ec);
        }));
    return;
  }
  context_->Log(LogLevel::kInfo, "dropping connection of pid " + std::to_string(peer_.pid) +
                                     ": a line was not completed within " +
                                     std::to_string(context_->options.line_timeout.count()) +
                                     " ms");
  Close();
}

}  // namespace intentd::transport
