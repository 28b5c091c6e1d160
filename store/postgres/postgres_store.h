// The PostgreSQL backend of Store: the agents of several hosts share one
// database, so that a redelivery landing on another host still finds the
// intent and the lease.
//
// Schema (created by MigratePostgres, i.e. `intentd migrate`; see
// schema.cc): `intencao` keyed by (tenant_id, intent_ref,
// action_type) and `acao_idempotente` keyed by (tenant_id, chave),
// `mensagem_vista` keyed by (tenant_id, channel, message_id) (the `seen`
// op), plus `intentd_schema_version`. Tenant ids, intent refs, action types, keys,
// payloads, responses and errors are `bytea`: stored and returned byte for
// byte, NUL included (PostgreSQL `text` cannot hold NUL, and `jsonb` would
// reorder the canonical payload). Times are bigint milliseconds by the
// agents' clocks (keep the hosts' clocks in sync: a lease is live while
// now < lease_until_ms on whichever host asks).
//
// Atomicity: each operation is one READ COMMITTED transaction that locks the
// rows it decides on (SELECT ... FOR UPDATE / FOR SHARE, put-if-absent with
// INSERT ... ON CONFLICT DO NOTHING), applies the pure decision functions of
// decision.h and writes the result. Locks are always taken intents first
// (in byte order when two), then actions, so operations do not deadlock;
// deadlocks and lost races that still happen are rolled back and retried.
// A lost connection before COMMIT is retried on a fresh connection (the
// server rolled the transaction back); a connection lost during COMMIT has
// an unknown outcome and answers kStorageError (nothing is reported as
// granted; a later begin sees whatever was committed). The common begin and
// complete are one autocommit statement each (one round trip): a session
// lost during it has that same unknown outcome, unless the server said it
// ended the session before the statement ran (then it is retried). While
// the database is unreachable every operation answers kStorageError and the pool
// reconnects with backoff (50 ms doubling to 2 s). Sessions set
// idle_in_transaction_session_timeout = 30 s, so an agent host cut off in the
// middle of a transaction holds its row locks for at most that long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "store/store.h"

namespace intentd::store {

// The schema version this build reads and writes.
inline constexpr int kPostgresSchemaVersion = 4;

struct PostgresOptions {
  // A libpq connection URI: postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]
  // (e.g. ?host=/run/postgresql for a Unix socket, ?options=-csearch_path%3Dintentd for a schema).
  std::string url;
  // true: synchronous_commit=on (an acknowledged write is in the server's
  // flushed WAL, and on its synchronous standbys if configured).
  // false: synchronous_commit=off (a server crash may lose the last
  // acknowledged writes; never corrupts).
  bool sync = true;
  // Records are kept at least this long after their last change; a started
  // action (and its intent) never expires.
  int64_t retention_ms = 30LL * 24 * 3600 * 1000;
  const Clock* clock = nullptr;  // nullptr: SystemClock()
  // Connections opened on demand, at most this many; callers beyond wait.
  int pool_size = 16;
  // A background thread deletes expired rows this often (bounded batches);
  // 0: never (call PurgeExpired).
  int64_t purge_interval_ms = 60'000;
  size_t purge_batch = 1000;
};

class PostgresStore : public Store {
 public:
  // Connects and checks the schema. kStorageError: cannot connect (the
  // message says why). kIncompatible: no intentd schema, or one older or
  // newer than kPostgresSchemaVersion (the message says to run `intentd
  // migrate` or to upgrade intentd). kInvalidArgument: bad options.
  static Status Open(const PostgresOptions& options, std::unique_ptr<PostgresStore>* store);

  // Deletes up to `limit` each of expired intents, expired non-started
  // actions and expired message records (rows that reads already treat as
  // absent), skipping rows that another operation holds. *deleted: rows
  // deleted.
  virtual Status PurgeExpired(size_t limit, size_t* deleted) = 0;

  // Of Store's optional features (store/admin.h) it has AgreeCurrentKeyId:
  // the agents sharing the database derive new intents under the one
  // keyring id recorded in it; and StatementBatches, the group commit of the
  // hot pair (a fresh intent's begin, a started action's complete), whose
  // concurrent requests of one kind go to the server as one statement, one
  // commit for all (kinds "begin" and "complete").
};

// Creates or upgrades the intentd schema in the database of `url` (in the
// first schema of its search_path). Idempotent; concurrent runs serialize.
// kIncompatible: the database holds a newer schema version.
// kStorageError: cannot connect, or a statement failed (e.g. a table named
// intencao that intentd did not create); nothing is changed then.
Status MigratePostgres(const std::string& url, MigrateResult* result);

// Runs `sql` (one or more statements, simple query protocol) on a new
// connection to `url`. For tooling and tests.
Status PostgresExecute(const std::string& url, const std::string& sql);

// `url` with the password of its user info and any password= parameter
// replaced by "***" (for logs and messages).
std::string RedactPostgresUrl(const std::string& url);

}  // namespace intentd::store
