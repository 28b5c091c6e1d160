// The PostgreSQL schema, its migrations and its version check.
//
// Schema version 1 is the reference design (intencao keyed by tenant, intent
// reference and action type; acao_idempotente keyed by tenant and key, with
// status, response and lease), extended with what the protocol needs.
// Version 2 adds mensagem_vista (the `seen` op's records, keyed by tenant,
// channel and message id) and keyrings: intencao.key_id, intentd_key_ids
// and intentd_keyring. Version 3 adds intencao.entrada (the input).
// Version 4 adds contador_politica (the allowance counters of the policy at
// freeze, store.h: Allowance) and the intents' approval (intencao.aprovacao*). Every identifier and
// opaque value is bytea (exact bytes, NUL allowed); times are bigint milliseconds; retain_until_ms
// = 9223372036854775807 means "never" (a started action and the intents that point at it).
#include <string>
#include <vector>

#include "store/postgres/impl.h"

namespace intentd::store {
namespace {

// migrations[v - 1] brings the schema from version v - 1 to v. Never edit a
// released step: add one.
const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> kMigrations = {
      // 1: the initial schema.
      R"sql(
CREATE TABLE intencao (
  tenant_id       bytea   NOT NULL,
  intent_ref      bytea   NOT NULL,
  action_type     bytea   NOT NULL,
  payload         bytea   NOT NULL,
  chave           bytea   NOT NULL,
  rules_version   integer NOT NULL,
  created_at_ms   bigint  NOT NULL,
  updated_at_ms   bigint  NOT NULL,
  retain_until_ms bigint  NOT NULL,
  PRIMARY KEY (tenant_id, intent_ref, action_type)
);
COMMENT ON TABLE intencao IS
  'intentd: intents frozen before acting (one row per tenant, intent_ref, action_type)';
COMMENT ON COLUMN intencao.payload IS
  'the frozen normalized payload: compact JSON, exactly the bytes the agent froze';
COMMENT ON COLUMN intencao.chave IS 'the idempotency key derived from payload';
COMMENT ON COLUMN intencao.retain_until_ms IS
  'read as absent from this time on; 9223372036854775807 while its action is started';

CREATE TABLE acao_idempotente (
  tenant_id       bytea   NOT NULL,
  chave           bytea   NOT NULL,
  action_type     bytea   NOT NULL,
  intent_ref      bytea   NOT NULL,
  status          text    NOT NULL
                  CHECK (status IN ('started', 'completed', 'failed', 'released')),
  attempt         bigint  NOT NULL,
  lease_token     bigint  NOT NULL,
  lease_until_ms  bigint  NOT NULL,
  resposta        bytea,
  erro            bytea,
  created_at_ms   bigint  NOT NULL,
  updated_at_ms   bigint  NOT NULL,
  retain_until_ms bigint  NOT NULL,
  PRIMARY KEY (tenant_id, chave)
);
COMMENT ON TABLE acao_idempotente IS
  'intentd: one action per tenant and idempotency key, fenced by lease_token';
COMMENT ON COLUMN acao_idempotente.resposta IS 'completed: the response (JSON bytes)';
COMMENT ON COLUMN acao_idempotente.erro IS 'failed or released: the error (JSON bytes)';

-- uncertain: started actions by lease expiry, for every tenant and per tenant.
CREATE INDEX acao_idempotente_lease ON acao_idempotente (lease_until_ms, tenant_id, chave)
  WHERE status = 'started';
CREATE INDEX acao_idempotente_tenant_lease
  ON acao_idempotente (tenant_id, lease_until_ms, chave) WHERE status = 'started';
-- retention: the purge finds expired rows without scanning.
CREATE INDEX acao_idempotente_retain ON acao_idempotente (retain_until_ms)
  WHERE status <> 'started';
CREATE INDEX intencao_retain ON intencao (retain_until_ms)
  WHERE retain_until_ms < 9223372036854775807;
)sql",
      // 2: inbound message sightings (the `seen` op).
      R"sql(
CREATE TABLE mensagem_vista (
  tenant_id        bytea   NOT NULL,
  channel          bytea   NOT NULL,
  message_id       bytea   NOT NULL,
  state            text    NOT NULL CHECK (state IN ('seen', 'processing', 'done')),
  meta             bytea,
  sightings        bigint  NOT NULL,
  first_seen_at_ms bigint  NOT NULL,
  last_seen_at_ms  bigint  NOT NULL,
  lease_token      bigint  NOT NULL,
  lease_until_ms   bigint  NOT NULL,
  retain_until_ms  bigint  NOT NULL,
  PRIMARY KEY (tenant_id, channel, message_id)
);
COMMENT ON TABLE mensagem_vista IS
  'intentd: inbound messages already seen (webhook de-duplication), one row per tenant, channel and message id';
COMMENT ON COLUMN mensagem_vista.meta IS 'the first sighting''s meta (JSON bytes), NULL when none';
COMMENT ON COLUMN mensagem_vista.retain_until_ms IS
  'read as absent from this time on; each sighting moves it to at least now + its ttl';
CREATE INDEX mensagem_vista_retain ON mensagem_vista (retain_until_ms);

-- Keyrings: the id of the secret each intent's key was derived with (rows
-- from before read '0'), the ids that may key live intents, and the current
-- id the agents sharing this database agree on.
ALTER TABLE intencao ADD COLUMN key_id text NOT NULL DEFAULT '0';
COMMENT ON COLUMN intencao.key_id IS 'the keyring id of the secret that derived chave';
CREATE TABLE intentd_key_ids (key_id text PRIMARY KEY);
COMMENT ON TABLE intentd_key_ids IS
  'intentd: keyring ids that may key live intents (each id agents derived new intents with)';
INSERT INTO intentd_key_ids SELECT '0' WHERE EXISTS (SELECT 1 FROM intencao);
CREATE TABLE intentd_keyring (
  singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  current_key_id text    NOT NULL
);
COMMENT ON TABLE intentd_keyring IS
  'intentd: the keyring id every agent on this database derives new intents with';
)sql",
      // 3: the payload as sent (every member), beside the normalized key fields.
      R"sql(
ALTER TABLE intencao ADD COLUMN entrada bytea;
COMMENT ON COLUMN intencao.entrada IS
  'the payload as the bot sent it when the intent was frozen or amended (compact JSON, every member); NULL for intents frozen before schema 3';
)sql",
      // 4: allowance counters (the policy at freeze's daily caps).
      R"sql(
CREATE TABLE contador_politica (
  tenant_id       bytea  NOT NULL,
  dia             bigint NOT NULL,
  nome            bytea  NOT NULL,
  total           bigint NOT NULL,
  contagem        bigint NOT NULL,
  retain_until_ms bigint NOT NULL,
  PRIMARY KEY (tenant_id, dia, nome)
);
COMMENT ON TABLE contador_politica IS
  'intentd: what the intents frozen on a day drew on each allowance of the policy (one row per tenant, day and counter)';
COMMENT ON COLUMN contador_politica.dia IS
  'days since 1970-01-01 in Brazil time (UTC-03:00): the day of the freezes counted';
COMMENT ON COLUMN contador_politica.total IS 'the sum of the amounts counted (cents)';
COMMENT ON COLUMN contador_politica.contagem IS 'the number of intents counted';
CREATE INDEX contador_politica_retain ON contador_politica (retain_until_ms);

-- Approval: an intent above the policy's threshold waits for a person.
ALTER TABLE intencao
  ADD COLUMN aprovacao text CHECK (aprovacao IN ('pending', 'approved', 'denied')),
  ADD COLUMN aprovacao_motivo bytea,
  ADD COLUMN aprovacao_por bytea,
  ADD COLUMN aprovacao_nota bytea,
  ADD COLUMN aprovacao_em_ms bigint;
COMMENT ON COLUMN intencao.aprovacao IS
  'NULL: no approval needed; pending: no attempt is granted until approved; approved; denied (its action failed)';
COMMENT ON COLUMN intencao.aprovacao_por IS 'who approved or denied it (the peer, as the agent names it)';
CREATE INDEX intencao_aprovacao_pendente ON intencao (created_at_ms)
  WHERE aprovacao = 'pending';
)sql",
  };
  return kMigrations;
}

// Serializes concurrent `intentd migrate` runs on one database.
constexpr char kMigrateLock[] = "SELECT pg_advisory_xact_lock(7404051931508721)";

Status Fail(pg::Connection* c, const std::string& what) {
  return Status::StorageError(what + ": " + c->error_message());
}

std::string Quote(const std::string& url) { return "`intentd migrate --store " + url + "`"; }

}  // namespace

namespace pg {

Status CheckSchema(Connection* conn, const std::string& redacted_url) {
  Result r;
  if (!conn->ExecSimple("SELECT max(version) FROM intentd_schema_version", &r)) {
    if (conn->sqlstate() == "42P01") {  // undefined_table
      return Status::Incompatible("the database has no intentd schema: run " + Quote(redacted_url) +
                                  " first");
    }
    return Fail(conn, "reading the schema version");
  }
  // Simple query protocol: text results.
  const int version = r.rows() == 1 && !r.Null(0, 0) ? std::atoi(r.Bytes(0, 0).c_str()) : 0;
  if (version < kPostgresSchemaVersion) {
    return Status::Incompatible("the database's intentd schema is version " +
                                std::to_string(version) + ", older than this intentd's (" +
                                std::to_string(kPostgresSchemaVersion) + "): run " +
                                Quote(redacted_url));
  }
  if (version > kPostgresSchemaVersion) {
    return Status::Incompatible("the database's intentd schema is version " +
                                std::to_string(version) + ", newer than this intentd's (" +
                                std::to_string(kPostgresSchemaVersion) +
                                "): upgrade intentd on this host");
  }
  return Status::Ok();
}

}  // namespace pg

Status MigratePostgres(const std::string& url, MigrateResult* result) {
  std::string error;
  std::unique_ptr<pg::Connection> c = pg::Connection::Connect(url, /*sync=*/true, &error);
  if (!c) return Status::StorageError("cannot connect to PostgreSQL: " + error);
  if (!c->ExecSimple("BEGIN") || !c->ExecSimple(kMigrateLock) ||
      !c->ExecSimple("CREATE TABLE IF NOT EXISTS intentd_schema_version ("
                     " version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")) {
    return Fail(c.get(), "preparing the migration");
  }
  pg::Result r;
  if (!c->ExecSimple("SELECT coalesce(max(version), 0) FROM intentd_schema_version", &r)) {
    return Fail(c.get(), "reading the schema version");
  }
  const int from = std::atoi(r.Bytes(0, 0).c_str());
  result->from_version = from;
  result->to_version = from;
  if (from > kPostgresSchemaVersion) {
    return Status::Incompatible("the database's intentd schema is version " + std::to_string(from) +
                                ", newer than this intentd's (" +
                                std::to_string(kPostgresSchemaVersion) + "): upgrade intentd");
  }
  const auto& steps = Migrations();
  for (int v = from + 1; v <= kPostgresSchemaVersion; ++v) {
    if (!c->ExecSimple(steps[v - 1])) {
      Status s = Fail(c.get(), "migrating to schema version " + std::to_string(v));
      if (c->sqlstate() != "42P07") return s;  // duplicate_table
      return Status::StorageError(s.message() +
                                  "; intentd did not create it: migrate into an empty database "
                                  "or schema (e.g. ?options=-csearch_path%3Dintentd)");
    }
    if (!c->ExecSimple("INSERT INTO intentd_schema_version (version) VALUES (" + std::to_string(v) +
                       ")")) {
      return Fail(c.get(), "recording schema version " + std::to_string(v));
    }
  }
  // Leaving without COMMIT (any failure above) rolls everything back.
  if (!c->ExecSimple("COMMIT")) return Fail(c.get(), "committing the migration");
  result->to_version = kPostgresSchemaVersion;
  return Status::Ok();
}

Status PostgresExecute(const std::string& url, const std::string& sql) {
  std::string error;
  std::unique_ptr<pg::Connection> c = pg::Connection::Connect(url, /*sync=*/true, &error);
  if (!c) return Status::StorageError("cannot connect to PostgreSQL: " + error);
  if (!c->ExecSimple(sql)) return c->Failure();
  return Status::Ok();
}

std::string RedactPostgresUrl(const std::string& url) {
  std::string out = url;
  // postgresql://user:password@host -> postgresql://user:***@host
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t end = out.find_first_of("/?", start);
    const std::string authority = out.substr(start, end == std::string::npos ? end : end - start);
    const size_t at = authority.rfind('@');
    if (at != std::string::npos) {
      const size_t colon = authority.find(':');
      if (colon != std::string::npos && colon < at) {
        out.replace(start + colon + 1, at - colon - 1, "***");
      }
    }
  }
  // ...?password=secret&... -> ...?password=***&...
  for (size_t pos = out.find('?'); pos != std::string::npos; pos = out.find('&', pos + 1)) {
    const size_t name = pos + 1;
    if (out.compare(name, 9, "password=") == 0) {
      const size_t value = name + 9;
      const size_t end = out.find('&', value);
      out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
    }
  }
  return out;
}

}  // namespace intentd::store
