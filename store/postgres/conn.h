// libpq plumbing of the PostgreSQL store (internal: includes libpq-fe.h).
//
// Every statement is sent with binary parameters and binary results, so
// bytea values travel as raw bytes (no escaping) and bigints exactly.
// Statements are prepared once per connection, on first use.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/status.h"

namespace intentd::store::pg {

// Parameters of one statement, in binary format.
class Params {
 public:
  Params& Bytes(std::string_view value);           // bytea
  Params& Text(std::string_view value);            // text
  Params& Int8(int64_t value);                     // bigint
  Params& Int4(int32_t value);                     // integer
  Params& Raw(Oid type, std::string_view binary);  // an encoded value of `type`

  // The columns of `rows` (each with the same types, none empty), each as
  // one array parameter: rows[i]'s j-th value is the i-th element of the
  // j-th array (bytea[], text[], bigint[], integer[]), for a statement that
  // takes many rows in one execution (unnest).
  static Params Columns(const std::vector<Params>& rows);

  int size() const { return static_cast<int>(values_.size()); }
  const std::vector<Oid>& types() const { return types_; }
  const std::vector<std::string>& values() const { return values_; }

 private:
  std::vector<std::string> values_;
  std::vector<Oid> types_;
};

// A statement result (owns the PGresult). Column accessors expect the
// binary format and the column's type.
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* result) : result_(result) {}
  ~Result() { Reset(nullptr); }
  Result(Result&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  Result& operator=(Result&& other) noexcept;
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  void Reset(PGresult* result);
  int rows() const { return result_ ? PQntuples(result_) : 0; }
  int64_t affected() const;  // rows inserted/updated/deleted
  bool Null(int row, int col) const { return PQgetisnull(result_, row, col) != 0; }
  std::string Bytes(int row, int col) const;  // bytea or text; "" when NULL
  int64_t Int8(int row, int col) const;
  int32_t Int4(int row, int col) const;

 private:
  PGresult* result_ = nullptr;
};

enum class ErrorKind {
  kNone,
  kRetry,       // serialization failure, deadlock, lock not available: roll back and retry
  kConnection,  // the session is gone (or never answered): the transaction did not commit
  kOther,
};

// A statement the store sends, prepared per connection under "s<id>".
struct Statement {
  int id;
  const char* sql;
};
inline constexpr int kMaxStatements = 34;

class Connection {
 public:
  // Connects to `url` (libpq URI; connect_timeout 5 s and TCP keepalives
  // unless the URI sets them). nullptr with *error on failure.
  static std::unique_ptr<Connection> Connect(const std::string& url, bool sync, std::string* error);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs a prepared statement. False on error: see failed()/Failure().
  bool Exec(const Statement& statement, const Params& params, Result* out = nullptr);
  // Runs SQL with the simple query protocol (BEGIN, COMMIT, DDL, ...).
  bool ExecSimple(const std::string& sql, Result* out = nullptr);
  // Runs a prepared statement as a transaction of its own (autocommit: one
  // round trip, committed when it succeeds). False on error, as Exec; then
  // not_run() tells whether the server surely did not commit it: it failed
  // with an error of its own (constraint, lock, serialization, ...), or the
  // session was gone before the statement was sent or ended by the server
  // (an ErrorResponse such as 57P01) before any of its results. A session
  // lost without a word after sending (EOF), or after a result arrived,
  // leaves the outcome unknown.
  bool ExecAutocommit(const Statement& statement, const Params& params, Result* out);
  bool not_run() const { return not_run_; }
  // Whether an idle session looks usable without a round trip: a healthy
  // idle session has nothing to read, while one the server ended (a restart,
  // pg_terminate_backend) has its FATAL message and EOF waiting. False:
  // discard it.
  bool LooksAlive();

  // A general transaction (the store's Transact): its BEGIN, and its writes
  // whose results the caller does not need, wait here and go with the next
  // statement that needs a result (Exec), or with COMMIT, in one pipeline
  // (libpq pipeline mode: one round trip). The server runs them in order
  // and, after an error, nothing more until the end of the pipeline; an
  // error of a deferred write is the error of the call that sent it.
  void DeferBegin();
  void Defer(const Statement& statement, const Params& params);
  // Sends what is deferred and COMMIT. False on error; then not_run() tells
  // whether the transaction surely did not commit (an error the server sent
  // before COMMIT ran, or COMMIT refused with a SQLSTATE of its own, e.g. a
  // serialization failure). After a failed deferred write the transaction
  // is still open and aborted: Rollback.
  bool Commit();
  // Drops what is deferred and rolls back what the server began (nothing
  // to send while BEGIN has not gone out). False: the session is unusable.
  bool Rollback();

  bool failed() const { return kind_ != ErrorKind::kNone; }
  ErrorKind error_kind() const { return kind_; }
  const std::string& error_message() const { return message_; }
  const std::string& sqlstate() const { return sqlstate_; }
  void ClearError();
  // A kStorageError carrying the last error (for the caller to return).
  Status Failure() const;
  // The first WARNING the server sent since ClearWarning ("": none). A
  // COMMIT that returns with one may not have done all it should: a wait
  // for a synchronous standby that was cancelled commits locally only.
  const std::string& warning() const { return warning_; }
  void ClearWarning() { warning_.clear(); }

 private:
  explicit Connection(PGconn* conn) : conn_(conn), prepared_(kMaxStatements, false) {}
  bool Check(PGresult* result, Result* out);
  static void OnNotice(void* connection, const PGresult* notice);
  bool Prepare(const Statement& statement, const Params& params, std::string* name);
  struct Deferred {
    const Statement* statement;  // nullptr: `sql`, without parameters
    Params params;
    const char* sql;
  };
  // Sends `items` in one pipeline and reads every result; *out: the last
  // item's. Sets not_run_ as Commit says of the last item.
  bool RunPipeline(const std::vector<Deferred>& items, Result* out);

  PGconn* conn_;
  std::vector<bool> prepared_;
  ErrorKind kind_ = ErrorKind::kNone;
  std::string message_;
  std::string sqlstate_;
  std::string warning_;
  bool not_run_ = false;
  std::vector<Deferred> deferred_;
};

// Up to `size` connections, opened on demand. While the server cannot be
// reached, Acquire answers kStorageError at once until the next attempt is
// due (backoff 50 ms doubling to 2 s), so callers never queue behind a dead
// server. Thread safe.
class Pool {
 public:
  Pool(std::string url, bool sync, int size);
  ~Pool();

  class Handle {
   public:
    Handle() = default;
    ~Handle() { Release(); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }
    // The connection is broken: close it instead of returning it, and close
    // the idle ones too (they share its fate, e.g. a server restart).
    void Discard();
    void Release();

   private:
    friend class Pool;
    Pool* pool_ = nullptr;
    std::unique_ptr<Connection> conn_;
    bool discard_ = false;
  };

  // Blocks while every connection is in use. kStorageError: cannot connect.
  Status Acquire(Handle* handle);

 private:
  void Return(std::unique_ptr<Connection> conn, bool discard);

  const std::string url_;
  const bool sync_;
  const size_t size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t open_ = 0;  // connections in use, idle, or being opened
  int failures_ = 0;
  std::chrono::steady_clock::time_point next_attempt_;
  std::string last_error_;
};

}  // namespace intentd::store::pg
