#include "bench/loadgen_runner.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace intentd::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  std::unique_ptr<Session> session;
  Action action;
  BeginReply begun;
  bool in_begin = false;
  bool alive = true;
  Clock::time_point sent;
};

class ClientThread {
 public:
  ClientThread(std::vector<std::unique_ptr<Session>> sessions, const RunOptions& options,
               int stream_id, Clock::time_point warm_end, Clock::time_point end)
      : workload_(options.workload, stream_id, options.seed * 7919 + stream_id),
        warm_end_(warm_end),
        end_(end) {
    for (auto& session : sessions) {
      connections_.push_back(Connection{});
      connections_.back().session = std::move(session);
    }
  }

  void Run() {
    const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    for (size_t i = 0; i < connections_.size(); ++i) {
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u64 = i;
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, connections_[i].session->fd(), &event);
    }
    stats_.begin_ns.reserve(1 << 20);
    stats_.complete_ns.reserve(1 << 20);
    for (Connection& connection : connections_) StartAction(&connection);
    std::vector<epoll_event> events(std::max<size_t>(connections_.size(), 1));
    for (;;) {
      const auto now = Clock::now();
      if (now >= end_) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - now).count();
      const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()),
                               static_cast<int>(left) + 1);
      for (int i = 0; i < n; ++i) {
        Connection& connection = connections_[events[i].data.u64];
        if (connection.alive) OnReadable(&connection, epoll_fd);
      }
    }
    close(epoll_fd);
  }

  RunStats& stats() { return stats_; }

 private:
  void StartAction(Connection* connection) {
    connection->action = workload_.Next();
    connection->in_begin = true;
    connection->sent = Clock::now();
    std::string error;
    if (!connection->session->SendBegin(connection->action, &error)) Lose(connection, error);
  }

  void Lose(Connection* connection, const std::string& error) {
    connection->alive = false;
    ++stats_.fatal;
    ++stats_.error_messages["connection lost: " + error];
  }

  void OnReadable(Connection* connection, int epoll_fd) {
    BeginReply reply;
    std::string error;
    bool fatal = false;
    const Session::PollResult result = connection->session->Poll(&reply, &error, &fatal);
    if (result == Session::PollResult::kPending) return;
    const auto done = Clock::now();
    const bool in_window = connection->sent >= warm_end_ && done <= end_;
    if (result == Session::PollResult::kFailed) {
      if (fatal) {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, connection->session->fd(), nullptr);
        Lose(connection, error);
        return;
      }
      if (in_window) {
        ++stats_.errors;
        ++stats_.error_messages[(connection->in_begin ? "begin: " : "complete: ") + error];
      }
      StartAction(connection);
      return;
    }
    const uint64_t latency_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(done - connection->sent).count());
    if (!connection->in_begin) {
      if (in_window) {
        stats_.complete_ns.push_back(latency_ns);
        ++stats_.actions;
        ++stats_.pairs;
      }
      StartAction(connection);
      return;
    }
    const int decision = static_cast<int>(reply.decision);
    if (in_window) {
      stats_.begin_ns.push_back(latency_ns);
      ++stats_.decisions[decision];
    }
    if (connection->action.redelivery) {
      // Counted over the whole run: one wrong decision is one too many.
      if (reply.decision != Decision::kReplay && reply.decision != Decision::kInFlight) {
        ++stats_.violations;
      }
      if (in_window) {
        ++stats_.redelivery_decisions[decision];
        ++stats_.actions;
        ++stats_.redeliveries;
      }
      StartAction(connection);
      return;
    }
    if (reply.decision != Decision::kExecute) {
      if (in_window) ++stats_.unexpected;
      StartAction(connection);
      return;
    }
    workload_.RememberExecuted(connection->action);
    connection->begun = std::move(reply);
    connection->in_begin = false;
    connection->sent = Clock::now();
    if (!connection->session->SendComplete(connection->action, connection->begun, &error)) {
      Lose(connection, error);
    }
  }

  Workload workload_;
  Clock::time_point warm_end_;
  Clock::time_point end_;
  std::vector<Connection> connections_;
  RunStats stats_;
};

}  // namespace

void RunStats::Merge(RunStats&& other) {
  actions += other.actions;
  pairs += other.pairs;
  redeliveries += other.redeliveries;
  for (int i = 0; i < 5; ++i) {
    decisions[i] += other.decisions[i];
    redelivery_decisions[i] += other.redelivery_decisions[i];
  }
  violations += other.violations;
  unexpected += other.unexpected;
  errors += other.errors;
  fatal += other.fatal;
  for (auto& [message, count] : other.error_messages) error_messages[message] += count;
  begin_ns.insert(begin_ns.end(), other.begin_ns.begin(), other.begin_ns.end());
  complete_ns.insert(complete_ns.end(), other.complete_ns.begin(), other.complete_ns.end());
}

uint64_t Percentile(std::vector<uint64_t>* values, double q) {
  if (values->empty()) return 0;
  std::sort(values->begin(), values->end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values->size())));
  rank = std::clamp<size_t>(rank, 1, values->size());
  return (*values)[rank - 1];
}

bool Run(const RunOptions& options, RunStats* stats, std::string* error) {
  const int threads = std::clamp(options.threads, 1, std::max(options.connections, 1));
  std::vector<std::vector<std::unique_ptr<Session>>> shares(threads);
  for (int i = 0; i < options.connections; ++i) {
    std::unique_ptr<Session> session = options.connect(error);
    if (!session) return false;
    shares[i % threads].push_back(std::move(session));
  }
  const auto start = Clock::now();
  const auto warm_end = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options.warmup_s));
  const auto end = warm_end + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(options.duration_s));
  std::vector<std::unique_ptr<ClientThread>> clients;
  for (int t = 0; t < threads; ++t) {
    clients.push_back(
        std::make_unique<ClientThread>(std::move(shares[t]), options, t, warm_end, end));
  }
  std::vector<std::thread> running;
  for (auto& client : clients) running.emplace_back([&client] { client->Run(); });
  if (options.window_opened) {
    std::this_thread::sleep_until(warm_end);
    options.window_opened();
  }
  if (options.window_closed) {
    std::this_thread::sleep_until(end);
    options.window_closed();
  }
  for (std::thread& thread : running) thread.join();
  for (auto& client : clients) stats->Merge(std::move(client->stats()));
  stats->window_s = std::chrono::duration<double>(end - warm_end).count();
  return true;
}

}  // namespace intentd::bench
