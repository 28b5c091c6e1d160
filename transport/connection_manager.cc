#include "transport/connection_manager.h"

#include <vector>

#include "transport/connection.h"

namespace intentd::transport {

bool ConnectionManager::Add(std::shared_ptr<Connection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.insert(std::move(connection));
  size_.store(connections_.size(), std::memory_order_relaxed);
  return draining_;
}

void ConnectionManager::Remove(const std::shared_ptr<Connection>& connection) {
  std::lock_guard<std::mutex> lock(mu_);
  connections_.erase(connection);
  size_.store(connections_.size(), std::memory_order_relaxed);
  if (connections_.empty()) empty_.notify_all();
}

void ConnectionManager::BeginDrainAll() {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    all.assign(connections_.begin(), connections_.end());
  }
  for (const auto& connection : all) connection->BeginDrain();
}

void ConnectionManager::ForceCloseAll() {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.assign(connections_.begin(), connections_.end());
  }
  for (const auto& connection : all) connection->ForceClose();
}

bool ConnectionManager::WaitEmptyUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return empty_.wait_until(lock, deadline, [this] { return connections_.empty(); });
}

}  // namespace intentd::transport
