// Every open connection of a server, so that Stop() can reach them all (the
// Asio HTTP server example's connection_manager). Thread safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace intentd::transport {

class Connection;

class ConnectionManager {
 public:
  ConnectionManager() = default;
  ConnectionManager(const ConnectionManager&) = delete;
  ConnectionManager& operator=(const ConnectionManager&) = delete;

  // Registers a connection. Returns true when draining already began (the
  // caller then asks the connection to drain too).
  bool Add(std::shared_ptr<Connection> connection);
  // Called by a connection once it has closed.
  void Remove(const std::shared_ptr<Connection>& connection);

  size_t size() const { return size_.load(std::memory_order_relaxed); }

  // Every connection, present and future: BeginDrain.
  void BeginDrainAll();
  // Every connection: ForceClose.
  void ForceCloseAll();
  // True once empty; false when `deadline` passed first.
  bool WaitEmptyUntil(std::chrono::steady_clock::time_point deadline);

 private:
  mutable std::mutex mu_;
  std::condition_variable empty_;
  std::unordered_set<std::shared_ptr<Connection>> connections_;  // guarded by mu_
  bool draining_ = false;                                        // guarded by mu_
  std::atomic<size_t> size_{0};
};

}  // namespace intentd::transport
