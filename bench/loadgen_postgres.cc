#include "bench/loadgen_postgres.h"

#include <libpq-fe.h>
#include <poll.h>

#include <cstring>

namespace intentd::bench {
namespace {

constexpr char kSchema[] = R"sql(
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS intencao (
  tenant_id     text        NOT NULL,
  intent_ref    text        NOT NULL,
  action_type   text        NOT NULL,
  payload       jsonb       NOT NULL,
  chave         text        NOT NULL,
  rules_version int         NOT NULL,
  created_at    timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, intent_ref, action_type)
);
CREATE TABLE IF NOT EXISTS acao_idempotente (
  tenant_id    text        NOT NULL,
  chave        text        NOT NULL,
  action_type  text        NOT NULL,
  intent_ref   text        NOT NULL,
  status       text        NOT NULL,
  attempt      int         NOT NULL,
  lease_token  bigint      NOT NULL,
  lease_until  timestamptz NOT NULL,
  resposta     jsonb,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, chave)
);
)sql";

struct Statement {
  const char* name;
  const char* sql;
  int params;
};

constexpr Statement kInsertIntent = {
    "insert_intent",
    "INSERT INTO intencao (tenant_id, intent_ref, action_type, payload, chave, rules_version, "
    "created_at) VALUES ($1, $2, $3, $4::jsonb, $5, 2, now()) ON CONFLICT DO NOTHING",
    5};
constexpr Statement kSelectIntent = {
    "select_intent",
    "SELECT chave, payload FROM intencao WHERE tenant_id = $1 AND intent_ref = $2 AND "
    "action_type = $3",
    3};
// The action is keyed by the FROZEN intent's chave, read back in the same
// transaction, never by the key this attempt derived.
constexpr Statement kInsertAction = {
    "insert_action",
    "INSERT INTO acao_idempotente (tenant_id, chave, action_type, intent_ref, status, attempt, "
    "lease_token, lease_until, created_at, updated_at) "
    "SELECT tenant_id, chave, action_type, intent_ref, 'started', 1, 1, "
    "now() + $4::bigint * interval '1 millisecond', now(), now() FROM intencao "
    "WHERE tenant_id = $1 AND intent_ref = $2 AND action_type = $3 "
    "ON CONFLICT DO NOTHING RETURNING chave, lease_token",
    4};
constexpr Statement kSelectAction = {
    "select_action",
    "SELECT a.chave, a.status, a.lease_token, a.lease_until > now() FROM acao_idempotente a "
    "JOIN intencao i ON a.tenant_id = i.tenant_id AND a.chave = i.chave "
    "WHERE i.tenant_id = $1 AND i.intent_ref = $2 AND i.action_type = $3",
    3};
constexpr Statement kComplete = {
    "complete_action",
    "UPDATE acao_idempotente SET status = 'completed', resposta = $4::jsonb, updated_at = now() "
    "WHERE tenant_id = $1 AND chave = $2 AND lease_token = $3::bigint AND status = 'started'",
    4};

constexpr char kLeaseMs[] = "300000";

class PostgresSession : public Session {
 public:
  PostgresSession(PGconn* conn, const ClientKeyDeriver* deriver) : conn_(conn), deriver_(deriver) {}
  ~PostgresSession() override { PQfinish(conn_); }

  int fd() const override { return PQsocket(conn_); }

  bool SendBegin(const Action& action, std::string* error) override {
    std::string key;
    if (!deriver_->Derive(action, &key, error)) return false;
    const char* intent[] = {action.tenant_id.c_str(), action.intent_ref.c_str(),
                            action.action_type.c_str(), action.payload_json.c_str(), key.c_str()};
    const char* with_lease[] = {action.tenant_id.c_str(), action.intent_ref.c_str(),
                                action.action_type.c_str(), kLeaseMs};
    StartRequest(true);
    return Send(kInsertIntent, intent, error) && Send(kSelectIntent, intent, error) &&
           Send(kInsertAction, with_lease, error) && Send(kSelectAction, intent, error) &&
           Sync(error);
  }

  bool SendComplete(const Action& action, const BeginReply& begun, std::string* error) override {
    const std::string token = std::to_string(begun.lease_token);
    const char* values[] = {action.tenant_id.c_str(), begun.key.c_str(), token.c_str(),
                            action.response_json.c_str()};
    StartRequest(false);
    return Send(kComplete, values, error) && Sync(error);
  }

  PollResult Poll(BeginReply* reply, std::string* error, bool* fatal) override {
    *fatal = false;
    if (!PQconsumeInput(conn_)) {
      *error = PQerrorMessage(conn_);
      *fatal = true;
      return PollResult::kFailed;
    }
    while (!PQisBusy(conn_)) {
      PGresult* result = PQgetResult(conn_);
      if (result == nullptr) {
        // End of one statement's results. More than one per statement
        // would mean the pipeline is out of step: do not spin.
        if (++ends_ > statements_ + 1) break;
        continue;
      }
      const ExecStatusType status = PQresultStatus(result);
      if (status == PGRES_PIPELINE_SYNC) {
        PQclear(result);
        if (!error_.empty()) {
          *error = error_;
          return PollResult::kFailed;
        }
        if (begin_) {
          *reply = begun_;
        } else if (!updated_) {
          *error = "complete updated no row (lease lost or not started)";
          return PollResult::kFailed;
        }
        return PollResult::kDone;
      }
      Absorb(result, status);
      PQclear(result);
    }
    return PollResult::kPending;
  }

 private:
  void StartRequest(bool begin) {
    begin_ = begin;
    results_ = 0;
    ends_ = 0;
    statements_ = begin ? 4 : 1;
    error_.clear();
    begun_ = BeginReply{};
    updated_ = false;
  }

  bool Send(const Statement& statement, const char* const* values, std::string* error) {
    if (PQsendQueryPrepared(conn_, statement.name, statement.params, values, nullptr, nullptr, 0) !=
        1) {
      *error = PQerrorMessage(conn_);
      return false;
    }
    return true;
  }

  bool Sync(std::string* error) {
    if (PQpipelineSync(conn_) != 1) {
      *error = PQerrorMessage(conn_);
      return false;
    }
    for (;;) {
      const int flushed = PQflush(conn_);
      if (flushed == 0) return true;
      if (flushed < 0) {
        *error = PQerrorMessage(conn_);
        return false;
      }
      pollfd waiting{PQsocket(conn_), POLLOUT | POLLIN, 0};
      poll(&waiting, 1, 1000);
      if ((waiting.revents & POLLIN) && !PQconsumeInput(conn_)) {
        *error = PQerrorMessage(conn_);
        return false;
      }
    }
  }

  // One statement's result, in pipeline order.
  void Absorb(PGresult* result, ExecStatusType status) {
    const int index = results_++;
    if (status == PGRES_FATAL_ERROR) {
      if (error_.empty()) {
        const char* code = PQresultErrorField(result, PG_DIAG_SQLSTATE);
        error_ =
            std::string("postgres ") + (code ? code : "?") + ": " + PQresultErrorMessage(result);
      }
      return;
    }
    if (status == PGRES_PIPELINE_ABORTED) return;
    if (!begin_) {
      updated_ = std::strcmp(PQcmdTuples(result), "1") == 0;
      return;
    }
    if (index == 1 && PQntuples(result) == 1) {
      begun_.key = PQgetvalue(result, 0, 0);
    } else if (index == 2 && PQntuples(result) == 1) {
      begun_.decision = Decision::kExecute;
      begun_.lease_token = std::atoll(PQgetvalue(result, 0, 1));
    } else if (index == 3 && begun_.decision != Decision::kExecute && PQntuples(result) == 1) {
      const std::string status_text = PQgetvalue(result, 0, 1);
      const bool live = PQgetvalue(result, 0, 3)[0] == 't';
      if (status_text == "completed" || status_text == "failed") {
        begun_.decision = Decision::kReplay;
      } else if (status_text == "started") {
        // The reference flow has no takeover statement; an expired lease is
        // reported as recover (it never expires within a benchmark run).
        begun_.decision = live ? Decision::kInFlight : Decision::kRecover;
      }
    }
  }

  PGconn* conn_;
  const ClientKeyDeriver* deriver_;
  bool begin_ = false;
  int results_ = 0;
  int ends_ = 0;
  int statements_ = 0;
  std::string error_;
  BeginReply begun_;
  bool updated_ = false;
};

PGconn* Open(const std::string& conninfo, std::string* error) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    *error = std::string("postgres connect: ") + PQerrorMessage(conn);
    PQfinish(conn);
    return nullptr;
  }
  return conn;
}

}  // namespace

bool SetupPostgres(const std::string& conninfo, std::string* error) {
  PGconn* conn = Open(conninfo, error);
  if (conn == nullptr) return false;
  PGresult* result = PQexec(conn, kSchema);
  const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  if (!ok) *error = std::string("postgres schema: ") + PQerrorMessage(conn);
  PQclear(result);
  PQfinish(conn);
  return ok;
}

std::unique_ptr<Session> ConnectPostgres(const std::string& conninfo,
                                         const ClientKeyDeriver* deriver, std::string* error) {
  PGconn* conn = Open(conninfo, error);
  if (conn == nullptr) return nullptr;
  for (const Statement* statement :
       {&kInsertIntent, &kSelectIntent, &kInsertAction, &kSelectAction, &kComplete}) {
    PGresult* result = PQprepare(conn, statement->name, statement->sql, statement->params, nullptr);
    const bool ok = PQresultStatus(result) == PGRES_COMMAND_OK;
    PQclear(result);
    if (!ok) {
      *error = std::string("postgres prepare ") + statement->name + ": " + PQerrorMessage(conn);
      PQfinish(conn);
      return nullptr;
    }
  }
  if (PQsetnonblocking(conn, 1) != 0 || PQenterPipelineMode(conn) != 1) {
    *error = std::string("postgres pipeline mode: ") + PQerrorMessage(conn);
    PQfinish(conn);
    return nullptr;
  }
  return std::make_unique<PostgresSession>(conn, deriver);
}

}  // namespace intentd::bench
