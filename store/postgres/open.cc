// Opening the PostgreSQL store, the transaction runner and the purge thread.
#include <chrono>
#include <random>
#include <thread>

#include "store/postgres/impl.h"

namespace intentd::store {
namespace {

// Lost races and deadlocks resolve in a few rounds; this bounds a pathology.
constexpr int kMaxAttempts = 50;
// A lost connection is retried on a fresh one once (a restarted server
// leaves every pooled session dead); a second loss means unreachable.
constexpr int kMaxConnectionRetries = 1;
// Purge rounds per background run: bounded work, the rest waits for the next run.
constexpr int kPurgeRoundsPerRun = 10;

void BackoffAfterConflict(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const int cap_us = 200 << std::min(attempt, 5);  // 200 us .. 6.4 ms
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % cap_us));
}

}  // namespace

Status PostgresStore::Open(const PostgresOptions& options, std::unique_ptr<PostgresStore>* store) {
  if (options.url.empty()) return Status::InvalidArgument("the PostgreSQL URL is empty");
  if (options.retention_ms <= 0) return Status::InvalidArgument("retention must be positive");
  if (options.pool_size < 1) return Status::InvalidArgument("the pool size must be at least 1");
  auto impl = std::make_unique<PostgresStoreImpl>(options);
  Status s = impl->Connect();
  if (!s.ok()) return s;
  *store = std::move(impl);
  return Status::Ok();
}

PostgresStoreImpl::PostgresStoreImpl(const PostgresOptions& options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &SystemClock()),
      pool_(options.url, options.sync, options.pool_size) {}

PostgresStoreImpl::~PostgresStoreImpl() {
  {
    std::lock_guard<std::mutex> lock(purge_mu_);
    stopping_ = true;
  }
  purge_cv_.notify_all();
  if (purge_thread_.joinable()) purge_thread_.join();
}

Status PostgresStoreImpl::Connect() {
  pg::Pool::Handle conn;
  Status s = pool_.Acquire(&conn);
  if (!s.ok()) return s;
  s = pg::CheckSchema(&*conn, RedactPostgresUrl(options_.url));
  if (!s.ok()) return s;
  if (options_.purge_interval_ms > 0) purge_thread_ = std::thread([this] { PurgeLoop(); });
  return Status::Ok();
}

Status CommitWarning(const char* what, pg::Connection* c) {
  if (c->warning().empty()) return Status::Ok();
  const std::string warning = c->warning();
  c->ClearWarning();
  return Status::StorageError(std::string(what) + ": PostgreSQL committed with a warning (" +
                              warning +
                              "): the commit may be missing on the synchronous standby; the "
                              "outcome is unknown, nothing is reported as granted");
}

Status PostgresStoreImpl::Transact(const char* what, const TxBody& body) {
  int connection_retries = 0;
  for (int attempt = 0;; ++attempt) {
    if (attempt == kMaxAttempts) {
      return Status::StorageError(std::string(what) + ": gave up after " +
                                  std::to_string(kMaxAttempts) +
                                  " attempts lost to concurrent transactions; nothing was granted");
    }
    pg::Pool::Handle conn;
    Status s = pool_.Acquire(&conn);
    if (!s.ok()) return s;
    pg::Connection& c = *conn;
    TxEnd end = TxEnd::kRollback;
    // BEGIN goes out with the first statement, deferred writes with the
    // next statement or COMMIT (Connection::DeferBegin).
    c.DeferBegin();
    Status result = body(c, &end);
    if (c.failed()) {
      const pg::ErrorKind kind = c.error_kind();
      const std::string message = c.error_message();
      if (kind == pg::ErrorKind::kConnection) {
        // Not committed: the server rolls back a session it lost.
        conn.Discard();
        if (connection_retries++ < kMaxConnectionRetries) continue;
        return Status::StorageError(std::string(what) + ": lost the PostgreSQL connection (" +
                                    message + "); nothing was granted");
      }
      if (!c.Rollback()) conn.Discard();
      if (kind == pg::ErrorKind::kRetry) {
        BackoffAfterConflict(attempt);
        continue;
      }
      return Status::StorageError(std::string(what) + ": " + message);
    }
    if (!result.ok() || end != TxEnd::kCommit) {
      if (!c.Rollback()) conn.Discard();
      if (result.ok() && end == TxEnd::kRetry) continue;
      return result;
    }
    c.ClearWarning();
    if (!c.Commit()) {
      const pg::ErrorKind kind = c.error_kind();
      if (kind == pg::ErrorKind::kConnection) {
        conn.Discard();
        // Lost before COMMIT ran (a deferred write's session ended): retry.
        if (c.not_run() && connection_retries++ < kMaxConnectionRetries) continue;
        return Status::StorageError(
            std::string(what) + ": the PostgreSQL connection was lost during COMMIT (" +
            c.error_message() + "); the outcome is unknown, nothing is reported as granted");
      }
      // A deferred write that failed left the transaction open.
      const std::string message = c.error_message();
      if (!c.Rollback()) conn.Discard();
      if (kind == pg::ErrorKind::kRetry) {  // the server aborted it
        BackoffAfterConflict(attempt);
        continue;
      }
      return Status::StorageError(std::string(what) + ": COMMIT failed: " + message);
    }
    if (Status w = CommitWarning(what, &c); !w.ok()) return w;
    return result;
  }
}

Status PostgresStoreImpl::Query(const char* what, const QueryBody& body) {
  for (int connection_retries = 0;; ++connection_retries) {
    pg::Pool::Handle conn;
    Status s = pool_.Acquire(&conn);
    if (!s.ok()) return s;
    Status result = body(*conn);
    if (!conn->failed()) return result;
    if (conn->error_kind() != pg::ErrorKind::kConnection) {
      return Status::StorageError(std::string(what) + ": " + conn->error_message());
    }
    conn.Discard();
    if (connection_retries == kMaxConnectionRetries) {
      return Status::StorageError(std::string(what) + ": lost the PostgreSQL connection (" +
                                  conn->error_message() + ")");
    }
  }
}

void PostgresStoreImpl::PurgeLoop() {
  std::unique_lock<std::mutex> lock(purge_mu_);
  const auto interval = std::chrono::milliseconds(options_.purge_interval_ms);
  while (!purge_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    for (int round = 0; round < kPurgeRoundsPerRun; ++round) {
      size_t deleted = 0;
      // Errors (e.g. the database is down) are retried at the next run.
      if (!PurgeExpired(options_.purge_batch, &deleted).ok() || deleted < options_.purge_batch) {
        break;
      }
    }
    lock.lock();
  }
}

}  // namespace intentd::store
