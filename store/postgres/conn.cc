#include "store/postgres/conn.h"

#include <endian.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

namespace intentd::store::pg {
namespace {

// Type OIDs (catalog/pg_type.h, stable across versions).
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt4Oid = 23;
constexpr Oid kTextOid = 25;
// Their array types.
constexpr Oid kByteaArrayOid = 1001;
constexpr Oid kInt4ArrayOid = 1007;
constexpr Oid kTextArrayOid = 1009;
constexpr Oid kInt8ArrayOid = 1016;

Oid ArrayOf(Oid element) {
  switch (element) {
    case kByteaOid:
      return kByteaArrayOid;
    case kInt8Oid:
      return kInt8ArrayOid;
    case kInt4Oid:
      return kInt4ArrayOid;
    default:
      return kTextArrayOid;
  }
}

void PutInt32(std::string* out, uint32_t value) {
  const uint32_t be = htobe32(value);
  out->append(reinterpret_cast<const char*>(&be), sizeof be);
}

std::string Trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

ErrorKind Classify(const std::string& sqlstate) {
  if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03") return ErrorKind::kRetry;
  // Class 08 (connection exception) and the server shutting the session down.
  if (sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03") {
    return ErrorKind::kConnection;
  }
  return ErrorKind::kOther;
}

}  // namespace

Params& Params::Bytes(std::string_view value) {
  values_.emplace_back(value);
  types_.push_back(kByteaOid);
  return *this;
}

Params& Params::Text(std::string_view value) {
  values_.emplace_back(value);
  types_.push_back(kTextOid);
  return *this;
}

Params& Params::Int8(int64_t value) {
  const uint64_t be = htobe64(static_cast<uint64_t>(value));
  values_.emplace_back(reinterpret_cast<const char*>(&be), sizeof be);
  types_.push_back(kInt8Oid);
  return *this;
}

Params& Params::Int4(int32_t value) {
  const uint32_t be = htobe32(static_cast<uint32_t>(value));
  values_.emplace_back(reinterpret_cast<const char*>(&be), sizeof be);
  types_.push_back(kInt4Oid);
  return *this;
}

Params& Params::Raw(Oid type, std::string_view binary) {
  values_.emplace_back(binary);
  types_.push_back(type);
  return *this;
}

// The binary array format (array_send): dimensions, a has-nulls flag, the
// element type, then per dimension its length and lower bound, then each
// element as its length and bytes.
Params Params::Columns(const std::vector<Params>& rows) {
  Params out;
  if (rows.empty()) return out;
  const size_t columns = rows.front().values_.size();
  for (size_t j = 0; j < columns; ++j) {
    const Oid element = rows.front().types_[j];
    std::string array;
    PutInt32(&array, 1);  // one dimension
    PutInt32(&array, 0);  // no NULLs
    PutInt32(&array, element);
    PutInt32(&array, static_cast<uint32_t>(rows.size()));
    PutInt32(&array, 1);  // lower bound
    for (const Params& row : rows) {
      const std::string& value = row.values_[j];
      PutInt32(&array, static_cast<uint32_t>(value.size()));
      array += value;
    }
    out.values_.push_back(std::move(array));
    out.types_.push_back(ArrayOf(element));
  }
  return out;
}

Result& Result::operator=(Result&& other) noexcept {
  if (this != &other) {
    Reset(other.result_);
    other.result_ = nullptr;
  }
  return *this;
}

void Result::Reset(PGresult* result) {
  if (result_ != nullptr) PQclear(result_);
  result_ = result;
}

int64_t Result::affected() const {
  const char* n = result_ ? PQcmdTuples(result_) : "";
  return *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

std::string Result::Bytes(int row, int col) const {
  if (Null(row, col)) return std::string();
  return std::string(PQgetvalue(result_, row, col), PQgetlength(result_, row, col));
}

int64_t Result::Int8(int row, int col) const {
  uint64_t be = 0;
  if (PQgetlength(result_, row, col) == sizeof be) {
    std::memcpy(&be, PQgetvalue(result_, row, col), sizeof be);
  }
  return static_cast<int64_t>(be64toh(be));
}

int32_t Result::Int4(int row, int col) const {
  uint32_t be = 0;
  if (PQgetlength(result_, row, col) == sizeof be) {
    std::memcpy(&be, PQgetvalue(result_, row, col), sizeof be);
  }
  return static_cast<int32_t>(be32toh(be));
}

std::unique_ptr<Connection> Connection::Connect(const std::string& url, bool sync,
                                                std::string* error) {
  // Defaults first: the URI (dbname, expanded) comes last and overrides them.
  const char* keys[] = {"connect_timeout",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "fallback_application_name",
                        "dbname",
                        nullptr};
  const char* values[] = {"5", "30", "10", "3", "intentd", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    *error = "out of memory";
    return nullptr;
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    *error = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return nullptr;
  }
  std::unique_ptr<Connection> c(new Connection(conn));
  // Session settings; NOTICEs (e.g. "already exists, skipping") stay off
  // stderr, WARNINGs are kept for the caller (warning()).
  PQsetNoticeReceiver(conn, &Connection::OnNotice, c.get());
  // A session stuck inside a transaction (its agent host partitioned away)
  // would hold its row locks until the server noticed the dead peer; the
  // server ends it instead (our transactions never idle between statements).
  //
  // Every statement of the store finds its rows by a key or an index. A
  // prepared statement's generic plan is made once, with the tables' sizes
  // of that moment, and kept until an ANALYZE: the batches' plans made while
  // a new database held a few hundred rows joined them by sequential scan,
  // or by the tenant's prefix of a primary key, and kept doing so as the
  // tables grew (the complete batch: 3.2-3.7 ms per execution instead of
  // 0.66-1.00 in pg_stat_statements, intentd_loadgen --connections 16 on a
  // new database).
  // Without sequential scans, hash or merge joins the planner is left with
  // the nested loops over index scans those statements are written for; a
  // statement with no index to use still scans.
  if (!c->ExecSimple(std::string("SET synchronous_commit = ") + (sync ? "on" : "off") +
                     "; SET idle_in_transaction_session_timeout = '30s'"
                     "; SET enable_seqscan = off; SET enable_hashjoin = off"
                     "; SET enable_mergejoin = off")) {
    *error = c->error_message();
    return nullptr;
  }
  return c;
}

Connection::~Connection() { PQfinish(conn_); }

void Connection::OnNotice(void* connection, const PGresult* notice) {
  auto* c = static_cast<Connection*>(connection);
  const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr && std::strcmp(severity, "WARNING") == 0 && c->warning_.empty()) {
    c->warning_ = Trimmed(PQresultErrorMessage(notice));
  }
}

void Connection::ClearError() {
  kind_ = ErrorKind::kNone;
  message_.clear();
  sqlstate_.clear();
}

Status Connection::Failure() const { return Status::StorageError(message_); }

bool Connection::Check(PGresult* result, Result* out) {
  Result owned(result);
  const ExecStatusType st = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    if (out != nullptr) *out = std::move(owned);
    return true;
  }
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  sqlstate_ = state != nullptr ? state : "";
  message_ = Trimmed(result ? PQresultErrorMessage(result) : PQerrorMessage(conn_));
  if (message_.empty()) message_ = Trimmed(PQerrorMessage(conn_));
  if (message_.empty()) message_ = "unknown PostgreSQL error";
  kind_ = PQstatus(conn_) != CONNECTION_OK || sqlstate_.empty() ? ErrorKind::kConnection
                                                                : Classify(sqlstate_);
  if (!sqlstate_.empty()) message_ += " (SQLSTATE " + sqlstate_ + ")";
  return false;
}

bool Connection::Prepare(const Statement& statement, const Params& params, std::string* name) {
  *name = "s" + std::to_string(statement.id);
  if (prepared_[statement.id]) return true;
  if (!Check(PQprepare(conn_, name->c_str(), statement.sql, params.size(), params.types().data()),
             nullptr)) {
    return false;
  }
  prepared_[statement.id] = true;
  return true;
}

namespace {

struct Values {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  explicit Values(const Params& params) : formats(params.size(), 1) {
    for (const std::string& v : params.values()) {
      values.push_back(v.data());
      lengths.push_back(static_cast<int>(v.size()));
    }
  }
};

}  // namespace

bool Connection::Exec(const Statement& statement, const Params& params, Result* out) {
  if (!deferred_.empty()) {
    std::vector<Deferred> items = std::move(deferred_);
    deferred_.clear();
    items.push_back({&statement, params, nullptr});
    return RunPipeline(items, out);
  }
  std::string name;
  if (!Prepare(statement, params, &name)) return false;
  const Values v(params);
  return Check(PQexecPrepared(conn_, name.c_str(), params.size(), v.values.data(), v.lengths.data(),
                              v.formats.data(), /*resultFormat=*/1),
               out);
}

bool Connection::ExecAutocommit(const Statement& statement, const Params& params, Result* out) {
  not_run_ = true;
  std::string name;
  // Preparing commits nothing: a failure there leaves not_run_ set.
  if (!Prepare(statement, params, &name)) return false;
  const Values v(params);
  if (PQsendQueryPrepared(conn_, name.c_str(), params.size(), v.values.data(), v.lengths.data(),
                          v.formats.data(), /*resultFormat=*/1) != 1) {
    return Check(nullptr, nullptr);  // not sent
  }
  // Each result on its own (PQexec would hide a result followed by a
  // FATAL error): what arrived before an error decides whether the
  // statement may have committed.
  bool ok = true;
  bool any_result = false;
  for (PGresult* r; (r = PQgetResult(conn_)) != nullptr;) {
    const ExecStatusType st = PQresultStatus(r);
    if (!ok) {
      PQclear(r);  // only the first error counts
      continue;
    }
    const bool success = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!success) {
      // An error the server sent (SQLSTATE set) before any result: it ended
      // the statement, and its transaction, without committing. A lost
      // session after a result, or without an ErrorResponse: unknown.
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      not_run_ = !any_result && state != nullptr && *state != '\0';
    }
    any_result = true;
    ok = Check(r, success ? out : nullptr);
  }
  if (ok) not_run_ = false;
  return ok;
}

bool Connection::LooksAlive() {
  if (PQstatus(conn_) != CONNECTION_OK) return false;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

bool Connection::ExecSimple(const std::string& sql, Result* out) {
  if (!deferred_.empty()) {  // one statement: the extended protocol takes it
    std::vector<Deferred> items = std::move(deferred_);
    deferred_.clear();
    items.push_back({nullptr, Params(), sql.c_str()});
    return RunPipeline(items, out);
  }
  return Check(PQexec(conn_, sql.c_str()), out);
}

void Connection::DeferBegin() { deferred_.push_back({nullptr, Params(), "BEGIN"}); }

void Connection::Defer(const Statement& statement, const Params& params) {
  deferred_.push_back({&statement, params, nullptr});
}

bool Connection::Commit() {
  if (deferred_.size() == 1 && deferred_[0].statement == nullptr &&
      PQtransactionStatus(conn_) == PQTRANS_IDLE) {
    deferred_.clear();  // only BEGIN, never sent: nothing to commit
    return true;
  }
  std::vector<Deferred> items = std::move(deferred_);
  deferred_.clear();
  items.push_back({nullptr, Params(), "COMMIT"});
  return RunPipeline(items, nullptr);
}

bool Connection::Rollback() {
  deferred_.clear();
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return true;  // nothing began
  const ErrorKind kind = kind_;
  const std::string message = message_, sqlstate = sqlstate_;
  const bool ok = Check(PQexec(conn_, "ROLLBACK"), nullptr);
  if (ok) {  // the caller still reads the error that made it roll back
    kind_ = kind;
    message_ = message;
    sqlstate_ = sqlstate;
  }
  return ok;
}

bool Connection::RunPipeline(const std::vector<Deferred>& items, Result* out) {
  not_run_ = true;
  if (PQenterPipelineMode(conn_) != 1) return Check(nullptr, nullptr);
  // The commands sent, in order: the prepares of statements not prepared
  // yet on this session, and the items.
  struct Sent {
    int prepares = -1;  // statement id, for a prepare
    bool last = false;  // the last item
  };
  std::vector<Sent> sent;
  std::vector<bool> preparing(kMaxStatements, false);
  bool sending = true;
  for (size_t i = 0; i < items.size() && sending; ++i) {
    const Deferred& d = items[i];
    const bool last = i + 1 == items.size();
    if (d.statement == nullptr) {
      sending = PQsendQueryParams(conn_, d.sql, 0, nullptr, nullptr, nullptr, nullptr, 1) == 1;
      if (sending) sent.push_back({-1, last});
      continue;
    }
    const int id = d.statement->id;
    const std::string name = "s" + std::to_string(id);
    if (!prepared_[id] && !preparing[id]) {
      sending = PQsendPrepare(conn_, name.c_str(), d.statement->sql, d.params.size(),
                              d.params.types().data()) == 1;
      if (!sending) break;
      preparing[id] = true;
      sent.push_back({id, false});
    }
    const Values v(d.params);
    sending = PQsendQueryPrepared(conn_, name.c_str(), d.params.size(), v.values.data(),
                                  v.lengths.data(), v.formats.data(), /*resultFormat=*/1) == 1;
    if (sending) sent.push_back({-1, last});
  }
  const bool last_sent = sending;
  if (sending) sending = PQpipelineSync(conn_) == 1;
  if (!sending) {
    // The last item never went out when an earlier one could not be
    // queued; a failed sync may have flushed it.
    not_run_ = !last_sent;
    Check(nullptr, nullptr);
    kind_ = ErrorKind::kConnection;
    return false;
  }
  bool ok = true;
  for (const Sent& c : sent) {
    for (PGresult* r; (r = PQgetResult(conn_)) != nullptr;) {
      const ExecStatusType st = PQresultStatus(r);
      const bool success = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
      if (!ok || st == PGRES_PIPELINE_ABORTED) {
        PQclear(r);  // skipped after the first error, which counts
        continue;
      }
      if (success) {
        if (c.prepares >= 0) prepared_[c.prepares] = true;
        Check(r, c.last ? out : nullptr);
        continue;
      }
      // The first error. The server ran nothing after it: the last item
      // did not run when the error is an earlier command's and the server
      // sent it (a SQLSTATE; a session lost without a word may have run
      // everything), nor when the last item itself was refused with an
      // error that is not the session ending.
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      const bool said = state != nullptr && *state != '\0';
      ok = Check(r, nullptr);
      not_run_ = said && (!c.last || kind_ != ErrorKind::kConnection);
    }
    if (PQstatus(conn_) == CONNECTION_BAD) break;
  }
  if (PQstatus(conn_) == CONNECTION_BAD) {
    if (ok) {  // lost after every result arrived, before the end: unknown
      Check(nullptr, nullptr);
      not_run_ = false;
    }
    kind_ = ErrorKind::kConnection;
    return false;
  }
  // The end of the pipeline (its Sync), then back to one query at a time.
  for (PGresult* r; (r = PQgetResult(conn_)) != nullptr;) {
    const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (sync) break;
  }
  if (PQexitPipelineMode(conn_) != 1 && ok) {
    ok = Check(nullptr, nullptr);
    kind_ = ErrorKind::kConnection;
    not_run_ = false;
  }
  if (ok) not_run_ = false;
  return ok;
}

Pool::Pool(std::string url, bool sync, int size)
    : url_(std::move(url)), sync_(sync), size_(static_cast<size_t>(std::max(size, 1))) {}

Pool::~Pool() = default;

void Pool::Handle::Discard() { discard_ = true; }

void Pool::Handle::Release() {
  if (pool_ != nullptr && conn_) pool_->Return(std::move(conn_), discard_);
  pool_ = nullptr;
  conn_.reset();
  discard_ = false;
}

Status Pool::Acquire(Handle* handle) {
  handle->Release();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !idle_.empty() || open_ < size_; });
  if (!idle_.empty()) {
    handle->conn_ = std::move(idle_.back());
    idle_.pop_back();
    handle->pool_ = this;
    return Status::Ok();
  }
  const auto now = std::chrono::steady_clock::now();
  if (failures_ > 0 && now < next_attempt_) {
    const auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_attempt_ - now).count();
    return Status::StorageError("PostgreSQL is unreachable (" + last_error_ +
                                "); next connection attempt in " + std::to_string(wait) + " ms");
  }
  ++open_;
  lock.unlock();
  std::string error;
  std::unique_ptr<Connection> conn = Connection::Connect(url_, sync_, &error);
  lock.lock();
  if (!conn) {
    --open_;
    ++failures_;
    const int64_t backoff_ms = std::min<int64_t>(2000, 50LL << std::min(failures_ - 1, 6));
    next_attempt_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms);
    last_error_ = error;
    cv_.notify_one();
    return Status::StorageError("cannot connect to PostgreSQL: " + error);
  }
  failures_ = 0;
  handle->conn_ = std::move(conn);
  handle->pool_ = this;
  return Status::Ok();
}

void Pool::Return(std::unique_ptr<Connection> conn, bool discard) {
  std::vector<std::unique_ptr<Connection>> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (discard) {
      --open_;
      closing.push_back(std::move(conn));
      // A broken session usually means a restarted or unreachable server:
      // the idle sessions are dead too, and each would fail one request.
      open_ -= idle_.size();
      for (auto& c : idle_) closing.push_back(std::move(c));
      idle_.clear();
    } else {
      conn->ClearError();
      idle_.push_back(std::move(conn));
    }
  }
  // One returned session serves one waiter: waking them all (64 workers on
  // 16 sessions) costs more CPU than the statement. After a discard each
  // waiter may open a session of its own.
  if (discard) {
    cv_.notify_all();
  } else {
    cv_.notify_one();
  }
  // PQfinish outside the lock (it may wait on the socket).
}

}  // namespace intentd::store::pg
