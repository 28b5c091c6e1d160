// Rows of the PostgreSQL store: the statements, row reads and writes, and
// the read-only operations (one autocommit statement each).
#include <algorithm>
#include <string>
#include <vector>

#include "store/postgres/impl.h"

namespace intentd::store {
namespace {

using pg::Params;
using pg::Result;
using pg::Statement;

#define INTENT_COLS                                                                        \
  "payload, chave, rules_version, created_at_ms, updated_at_ms, retain_until_ms, key_id, " \
  "coalesce(entrada, ''::bytea), " APPROVAL_COLS("")
#define APPROVAL_COLS(t)                                 \
  "coalesce(" t "aprovacao, 'none'), coalesce(" t        \
  "aprovacao_motivo, ''::bytea), "                       \
  "coalesce(" t "aprovacao_por, ''::bytea), coalesce(" t \
  "aprovacao_nota, ''::bytea), "                         \
  "coalesce(" t "aprovacao_em_ms, 0)"
#define ACTION_COLS                                                                         \
  "action_type, intent_ref, status, attempt, lease_token, lease_until_ms, resposta, erro, " \
  "created_at_ms, updated_at_ms, retain_until_ms"
#define INTENT_KEY "tenant_id = $1 AND intent_ref = $2 AND action_type = $3"
#define ACTION_KEY "tenant_id = $1 AND chave = $2"

constexpr Statement kInsertIntent = {
    0,
    "INSERT INTO intencao (tenant_id, intent_ref, action_type, payload, chave, rules_version, "
    "created_at_ms, updated_at_ms, retain_until_ms, key_id, entrada, aprovacao, "
    "aprovacao_motivo, aprovacao_por, aprovacao_nota, aprovacao_em_ms) VALUES ($1, $2, $3, $4, "
    "$5, $6, $7, $8, $9, $10, NULLIF($11, ''::bytea), NULLIF($12, 'none'), NULLIF($13, "
    "''::bytea), NULLIF($14, ''::bytea), NULLIF($15, ''::bytea), NULLIF($16, 0)) ON CONFLICT DO "
    "NOTHING"};
constexpr Statement kLockIntent = {
    1, "SELECT " INTENT_COLS " FROM intencao WHERE " INTENT_KEY " FOR UPDATE"};
constexpr Statement kLockIntentNowait = {
    2, "SELECT " INTENT_COLS " FROM intencao WHERE " INTENT_KEY " FOR UPDATE NOWAIT"};
constexpr Statement kReplaceIntent = {
    3,
    "UPDATE intencao SET payload = $4, chave = $5, rules_version = $6, created_at_ms = $7, "
    "updated_at_ms = $8, retain_until_ms = $9, key_id = $10, entrada = NULLIF($11, ''::bytea), "
    "aprovacao = NULLIF($12, 'none'), aprovacao_motivo = NULLIF($13, ''::bytea), "
    "aprovacao_por = NULLIF($14, ''::bytea), aprovacao_nota = NULLIF($15, ''::bytea), "
    "aprovacao_em_ms = NULLIF($16, 0) WHERE " INTENT_KEY};
constexpr Statement kSetIntentRetention = {
    4, "UPDATE intencao SET retain_until_ms = $4 WHERE " INTENT_KEY};
constexpr Statement kLockAction = {
    5, "SELECT " ACTION_COLS " FROM acao_idempotente WHERE " ACTION_KEY " FOR UPDATE"};
constexpr Statement kShareAction = {
    6, "SELECT " ACTION_COLS " FROM acao_idempotente WHERE " ACTION_KEY " FOR SHARE"};
constexpr Statement kInsertAction = {
    7,
    "INSERT INTO acao_idempotente (tenant_id, chave, action_type, intent_ref, status, attempt, "
    "lease_token, lease_until_ms, resposta, erro, created_at_ms, updated_at_ms, retain_until_ms) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''::bytea), NULLIF($10, ''::bytea), $11, "
    "$12, $13) ON CONFLICT DO NOTHING"};
constexpr Statement kUpdateAction = {
    8,
    "UPDATE acao_idempotente SET action_type = $3, intent_ref = $4, status = $5, attempt = $6, "
    "lease_token = $7, lease_until_ms = $8, resposta = NULLIF($9, ''::bytea), "
    "erro = NULLIF($10, ''::bytea), created_at_ms = $11, updated_at_ms = $12, "
    "retain_until_ms = $13 WHERE " ACTION_KEY};
constexpr Statement kActionCoords = {
    9, "SELECT intent_ref, action_type FROM acao_idempotente WHERE " ACTION_KEY};
constexpr Statement kGetAction = {10,
                                  "SELECT " ACTION_COLS " FROM acao_idempotente WHERE " ACTION_KEY
                                  " AND retain_until_ms > $3"};
constexpr Statement kLookup = {
    11,
    "SELECT i.payload, i.chave, i.rules_version, i.created_at_ms, i.updated_at_ms, "
    "i.retain_until_ms, a.action_type, a.intent_ref, a.status, a.attempt, a.lease_token, "
    "a.lease_until_ms, a.resposta, a.erro, a.created_at_ms, a.updated_at_ms, a.retain_until_ms, "
    "i.key_id, coalesce(i.entrada, ''::bytea), " APPROVAL_COLS("i.")
    " FROM intencao i LEFT JOIN acao_idempotente a ON a.tenant_id = i.tenant_id AND "
    "a.chave = i.chave AND a.retain_until_ms > $4 "
    "WHERE i.tenant_id = $1 AND i.intent_ref = $2 AND i.action_type = $3 AND "
    "i.retain_until_ms > $4"};
constexpr Statement kUncertainAll = {12, "SELECT tenant_id, chave, " ACTION_COLS
                                         " FROM acao_idempotente "
                                         "WHERE status = 'started' AND lease_until_ms <= $1 "
                                         "ORDER BY lease_until_ms, tenant_id, chave LIMIT $2"};
constexpr Statement kUncertainTenant = {
    13, "SELECT tenant_id, chave, " ACTION_COLS
        " FROM acao_idempotente "
        "WHERE status = 'started' AND tenant_id = $1 AND lease_until_ms <= $2 "
        "ORDER BY lease_until_ms, chave LIMIT $3"};
// Only rows that reads already treat as absent, skipping rows that a running
// operation holds (it may be about to reuse them).
constexpr Statement kPurgeActions = {
    14,
    "DELETE FROM acao_idempotente a USING (SELECT tenant_id, chave FROM acao_idempotente "
    "WHERE status <> 'started' AND retain_until_ms <= $1 ORDER BY retain_until_ms LIMIT $2 "
    "FOR UPDATE SKIP LOCKED) d WHERE a.tenant_id = d.tenant_id AND a.chave = d.chave"};
constexpr Statement kPurgeIntents = {
    15,
    "DELETE FROM intencao i USING (SELECT tenant_id, intent_ref, action_type FROM intencao "
    "WHERE retain_until_ms <= $1 AND retain_until_ms < 9223372036854775807 "
    "ORDER BY retain_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED) d "
    "WHERE i.tenant_id = d.tenant_id AND i.intent_ref = d.intent_ref AND "
    "i.action_type = d.action_type"};
constexpr Statement kPurgeMessages = {
    16,
    "DELETE FROM mensagem_vista m USING (SELECT tenant_id, channel, message_id FROM "
    "mensagem_vista WHERE retain_until_ms <= $1 ORDER BY retain_until_ms LIMIT $2 "
    "FOR UPDATE SKIP LOCKED) d WHERE m.tenant_id = d.tenant_id AND m.channel = d.channel AND "
    "m.message_id = d.message_id"};
// messages.cc holds the statements from 17 to 21, key_ids.cc 22 to 26.
// Pending approvals, oldest first (the partial index).
constexpr Statement kPendingAll = {
    30, "SELECT tenant_id, intent_ref, action_type, " INTENT_COLS
        " FROM intencao WHERE aprovacao = 'pending' AND retain_until_ms > $1 "
        "ORDER BY created_at_ms LIMIT $2"};
constexpr Statement kPendingTenant = {
    31, "SELECT tenant_id, intent_ref, action_type, " INTENT_COLS
        " FROM intencao WHERE aprovacao = 'pending' AND tenant_id = $1 AND retain_until_ms > $2 "
        "ORDER BY created_at_ms LIMIT $3"};
// One allowance counted (store.h, Allowance): the row after the count.
constexpr Statement kCountAllowance = {
    27,
    "INSERT INTO contador_politica AS c (tenant_id, dia, nome, total, contagem, retain_until_ms) "
    "VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT (tenant_id, dia, nome) DO UPDATE SET "
    "total = c.total + EXCLUDED.total, contagem = c.contagem + 1, "
    "retain_until_ms = EXCLUDED.retain_until_ms RETURNING total, contagem"};
constexpr Statement kDayCounters = {
    28,
    "SELECT nome, total, contagem FROM contador_politica WHERE tenant_id = $1 AND dia = $2 AND "
    "retain_until_ms > $3 ORDER BY nome"};
constexpr Statement kPurgeCounters = {
    29,
    "DELETE FROM contador_politica c USING (SELECT tenant_id, dia, nome FROM contador_politica "
    "WHERE retain_until_ms <= $1 ORDER BY retain_until_ms LIMIT $2 FOR UPDATE SKIP LOCKED) d "
    "WHERE c.tenant_id = d.tenant_id AND c.dia = d.dia AND c.nome = d.nome"};

// The common cases in one statement, sent alone (autocommit: one round
// trip, one commit). Each writes only in the case it was written for and
// otherwise nothing; the caller then runs the general transaction
// (postgres_store.cc), which decides every case in C++.
//
// A fresh intent and its started action (kBeginFresh): the intent is put if
// absent, and the action is inserted only when the intent was (an intent
// already there: nothing written, no rows). Locks in order: the intent's row
// is inserted first, the action's after. The action insert has no ON
// CONFLICT: a key that already has an action row (another intent's with the
// same payload, or an expired one not purged yet) fails with unique_violation
// (23505), which rolls the intent back too. $1..$16 as kInsertIntent,
// $17..$29 as kInsertAction.
constexpr Statement kBeginFresh = {
    30,
    "WITH i AS (INSERT INTO intencao (tenant_id, intent_ref, action_type, payload, chave, "
    "rules_version, created_at_ms, updated_at_ms, retain_until_ms, key_id, entrada, aprovacao, "
    "aprovacao_motivo, aprovacao_por, aprovacao_nota, aprovacao_em_ms) VALUES ($1, $2, $3, $4, "
    "$5, $6, $7, $8, $9, $10, NULLIF($11, ''::bytea), NULLIF($12, 'none'), NULLIF($13, "
    "''::bytea), NULLIF($14, ''::bytea), NULLIF($15, ''::bytea), NULLIF($16, 0)) ON CONFLICT DO "
    "NOTHING RETURNING 1) "
    "INSERT INTO acao_idempotente (tenant_id, chave, action_type, intent_ref, status, attempt, "
    "lease_token, lease_until_ms, resposta, erro, created_at_ms, updated_at_ms, retain_until_ms) "
    "SELECT $17, $18, $19, $20, $21, $22, $23, $24, NULLIF($25, ''::bytea), "
    "NULLIF($26, ''::bytea), $27, $28, $29 FROM i"};
// complete on a started action under the caller's token ($3), live at $9:
// locks the action's intent first (own: found through the action's row,
// read unlocked), then updates the action only if it still belongs to that
// intent, is started, holds that token and is live; then the intent's
// retention ($10), when it is live and keyed by this action (as Finish).
// Returns the action after the update; no rows when any of that failed.
// The intent's key reaches kept as scalar subqueries of act's one row: as
// a join to act, a generic plan could read the tenant's intents by the
// key's prefix first and filter them.
// act tests the status as `(a.status = 'started') IS TRUE`, which no
// partial index's predicate is proved from, so that no plan reaches the
// action through the lease index of started actions (tenant, lease, key)
// by the tenant alone and filters on the key: a walk over the tenant's
// started actions and every entry left by actions no longer started, until
// vacuum removes them. The batch below took that walk; this statement's
// plans kept the key where measured, and it tests the status alike so
// that no plan can take it.
// Sets exactly the fields DecideFinish sets when it applies a complete:
// status ($4), response ($5), error ($6), updated_at ($7), and the action's
// retention ($8).
constexpr Statement kCompleteStarted = {
    31,
    "WITH own AS MATERIALIZED (SELECT i.intent_ref, i.action_type FROM intencao i "
    "WHERE i.tenant_id = $1 AND (i.intent_ref, i.action_type) = (SELECT a.intent_ref, "
    "a.action_type FROM acao_idempotente a WHERE a.tenant_id = $1 AND a.chave = $2) FOR UPDATE), "
    "act AS (UPDATE acao_idempotente a SET status = $4, resposta = NULLIF($5, ''::bytea), "
    "erro = NULLIF($6, ''::bytea), updated_at_ms = $7, retain_until_ms = $8 FROM own "
    "WHERE a.tenant_id = $1 AND a.chave = $2 AND a.intent_ref = own.intent_ref AND "
    "a.action_type = own.action_type AND (a.status = 'started') IS TRUE AND "
    "a.lease_token = $3 AND "
    "a.retain_until_ms > $9 RETURNING a.action_type, a.intent_ref, a.status, a.attempt, "
    "a.lease_token, a.lease_until_ms, a.resposta, a.erro, a.created_at_ms, a.updated_at_ms, "
    "a.retain_until_ms), "
    "kept AS (UPDATE intencao i SET retain_until_ms = $10 WHERE i.tenant_id = $1 AND "
    "i.intent_ref = (SELECT intent_ref FROM act) AND "
    "i.action_type = (SELECT action_type FROM act) AND i.chave = $2 AND "
    "i.retain_until_ms > $9 AND i.retain_until_ms <> $10) "
    "SELECT * FROM act"};

// The same two statements for many requests at once (batch.h: one round
// trip, one commit for all), each parameter an array holding one element
// per request (Params::Columns; the same columns as the single statement's),
// and unnest turning them back into rows numbered from 1 (n).
//
// kBeginFreshBatch: as kBeginFresh for each row, inserting the intents in
// (tenant, intent_ref, action_type) order and then the actions in (tenant,
// key) order; returns the n of each row whose intent was inserted (the
// others were there: nothing written for them). Any action key already
// taken fails the whole statement (unique_violation): nothing is written,
// and the caller runs each request alone. The rows' coordinates and keys
// are distinct (the caller's batch). ins keeps the rows whose intent was
// inserted by a hashed subplan (IS TRUE keeps it one rather than a join):
// the sessions plan without hash joins (conn.cc), and a nested loop over
// the two CTEs compared every pair (0.4 ms a join for 64 rows, EXPLAIN
// ANALYZE of the batch on a private server).
constexpr Statement kBeginFreshBatch = {
    32,
    "WITH r AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[], "
    "$5::bytea[], $6::int4[], $7::int8[], $8::int8[], $9::int8[], $10::text[], $11::bytea[], "
    "$12::text[], $13::bytea[], $14::bytea[], $15::bytea[], $16::int8[], $17::bytea[], "
    "$18::bytea[], $19::bytea[], $20::bytea[], $21::text[], $22::int8[], $23::int8[], "
    "$24::int8[], $25::bytea[], $26::bytea[], $27::int8[], $28::int8[], $29::int8[]) "
    "WITH ORDINALITY AS r(tenant_id, intent_ref, action_type, payload, chave, rules_version, "
    "created_at_ms, updated_at_ms, retain_until_ms, key_id, entrada, aprovacao, "
    "aprovacao_motivo, aprovacao_por, aprovacao_nota, aprovacao_em_ms, a_tenant_id, a_chave, "
    "a_action_type, a_intent_ref, a_status, a_attempt, a_lease_token, a_lease_until_ms, "
    "a_resposta, a_erro, a_created_at_ms, a_updated_at_ms, a_retain_until_ms, n)), "
    "i AS (INSERT INTO intencao (tenant_id, intent_ref, action_type, payload, chave, "
    "rules_version, created_at_ms, updated_at_ms, retain_until_ms, key_id, entrada, aprovacao, "
    "aprovacao_motivo, aprovacao_por, aprovacao_nota, aprovacao_em_ms) SELECT tenant_id, "
    "intent_ref, action_type, payload, chave, rules_version, created_at_ms, updated_at_ms, "
    "retain_until_ms, key_id, NULLIF(entrada, ''::bytea), NULLIF(aprovacao, 'none'), "
    "NULLIF(aprovacao_motivo, ''::bytea), NULLIF(aprovacao_por, ''::bytea), "
    "NULLIF(aprovacao_nota, ''::bytea), NULLIF(aprovacao_em_ms, 0) FROM r "
    "ORDER BY tenant_id, intent_ref, action_type ON CONFLICT DO NOTHING "
    "RETURNING tenant_id, intent_ref, action_type), "
    "ins AS MATERIALIZED (SELECT * FROM r WHERE ((tenant_id, intent_ref, action_type) IN "
    "(SELECT tenant_id, intent_ref, action_type FROM i)) IS TRUE), "
    "a AS (INSERT INTO acao_idempotente (tenant_id, chave, action_type, intent_ref, status, "
    "attempt, lease_token, lease_until_ms, resposta, erro, created_at_ms, updated_at_ms, "
    "retain_until_ms) SELECT r.a_tenant_id, r.a_chave, r.a_action_type, r.a_intent_ref, "
    "r.a_status, r.a_attempt, r.a_lease_token, r.a_lease_until_ms, "
    "NULLIF(r.a_resposta, ''::bytea), NULLIF(r.a_erro, ''::bytea), r.a_created_at_ms, "
    "r.a_updated_at_ms, r.a_retain_until_ms FROM ins r ORDER BY r.a_tenant_id, r.a_chave "
    "RETURNING 1) "
    "SELECT n FROM ins"};
// kCompleteStartedBatch: as kCompleteStarted for each row, locking the
// rows' intents in (tenant, intent_ref, action_type) order before updating
// any action; returns n and the action after the update (as
// kCompleteStarted) for each row that applied, none for the others (nothing
// written for them). The rows' (tenant, key) are distinct.
// Each step joins the previous step's rows only, on a whole primary key:
// x finds each row's action (a lateral lookup, OFFSET 0 so that it stays
// one), own locks the intents x names, act updates the actions own names,
// kept the intents act names. Joined to r directly, the tenant column
// they share let the planner reach a table by the tenant alone (the
// tenant's prefix of the primary key, then a filter).
// act tests the status as kCompleteStarted does. Written
// `a.status = 'started'`, its plans reached the actions through the lease
// index on some states of the tables: 5-13 pages and 24-41 µs a row
// against 4 and 10-15 by the key on the bench's new databases
// (auto_explain at 64 connections, bench/RESULTS.md "The complete batch
// reaches its action by the key"), 77-126 pages per completed action with
// 30,000 entries in the tenant's range
// (PostgresPlans.ACompleteReadsItsActionByKeyNotTheTenantsLeaseIndex).
// Each array reaches unnest through a sub-select, so that no plan sees its
// length: a custom plan read the length of the arrays (5-6 rows at 16
// connections) and came out cheaper than the generic plan's 10 rows, so
// the server planned every execution again, 0.3-0.4 ms of each complete
// batch (plans and plan_ms of `bench/run.sh --connections 16
// --pg-statements`). Estimated alike, the plan is made once per session
// after the server's five custom ones; its shape is the same (the nested
// loops above).
constexpr Statement kCompleteStartedBatch = {
    33,
    "WITH r AS (SELECT * FROM unnest((SELECT $1::bytea[]), (SELECT $2::bytea[]), "
    "(SELECT $3::int8[]), (SELECT $4::text[]), (SELECT $5::bytea[]), (SELECT $6::bytea[]), "
    "(SELECT $7::int8[]), (SELECT $8::int8[]), (SELECT $9::int8[]), (SELECT $10::int8[])) "
    "WITH ORDINALITY AS r(tenant_id, chave, lease_token, status, resposta, erro, "
    "updated_at_ms, retain_until_ms, now_ms, intent_retain_until_ms, n)), "
    "x AS MATERIALIZED (SELECT r.*, a.intent_ref AS a_intent_ref, "
    "a.action_type AS a_action_type FROM r CROSS JOIN LATERAL (SELECT a.intent_ref, "
    "a.action_type FROM acao_idempotente a WHERE a.tenant_id = r.tenant_id AND "
    "a.chave = r.chave OFFSET 0) a), "
    "own AS MATERIALIZED (SELECT x.* FROM x JOIN intencao i ON i.tenant_id = x.tenant_id AND "
    "i.intent_ref = x.a_intent_ref AND i.action_type = x.a_action_type "
    "ORDER BY i.tenant_id, i.intent_ref, i.action_type FOR UPDATE OF i), "
    "act AS (UPDATE acao_idempotente a SET status = own.status, "
    "resposta = NULLIF(own.resposta, ''::bytea), erro = NULLIF(own.erro, ''::bytea), "
    "updated_at_ms = own.updated_at_ms, retain_until_ms = own.retain_until_ms FROM own "
    "WHERE a.tenant_id = own.tenant_id AND a.chave = own.chave AND "
    "a.intent_ref = own.a_intent_ref AND a.action_type = own.a_action_type AND "
    "(a.status = 'started') IS TRUE AND a.lease_token = own.lease_token AND "
    "a.retain_until_ms > own.now_ms "
    "RETURNING own.n, a.action_type, a.intent_ref, a.status, a.attempt, a.lease_token, "
    "a.lease_until_ms, a.resposta, a.erro, a.created_at_ms, a.updated_at_ms, "
    "a.retain_until_ms, a.tenant_id AS k_tenant_id, a.chave AS k_chave, "
    "own.now_ms AS k_now_ms, own.intent_retain_until_ms AS k_retain_until_ms), "
    "kept AS (UPDATE intencao i SET retain_until_ms = act.k_retain_until_ms FROM act "
    "WHERE i.tenant_id = act.k_tenant_id AND i.intent_ref = act.intent_ref AND "
    "i.action_type = act.action_type AND i.chave = act.k_chave AND "
    "i.retain_until_ms > act.k_now_ms AND i.retain_until_ms <> act.k_retain_until_ms) "
    "SELECT n, action_type, intent_ref, status, attempt, lease_token, lease_until_ms, resposta, "
    "erro, created_at_ms, updated_at_ms, retain_until_ms FROM act"};

bool ParseStatus(const std::string& name, ActionStatus* status) {
  for (ActionStatus s : {ActionStatus::kStarted, ActionStatus::kCompleted, ActionStatus::kFailed,
                         ActionStatus::kReleased}) {
    if (name == ActionStatusName(s)) {
      *status = s;
      return true;
    }
  }
  return false;
}

// Reads ACTION_COLS starting at column `col`. False: unknown status.
bool DecodeAction(const Result& r, int row, int col, Action* a, int64_t* retain_until_ms) {
  a->action_type = r.Bytes(row, col);
  a->intent_ref = r.Bytes(row, col + 1);
  if (!ParseStatus(r.Bytes(row, col + 2), &a->status)) return false;
  a->attempt = r.Int8(row, col + 3);
  a->lease_token = r.Int8(row, col + 4);
  a->lease_until_ms = r.Int8(row, col + 5);
  a->response = r.Bytes(row, col + 6);
  a->error = r.Bytes(row, col + 7);
  a->created_at_ms = r.Int8(row, col + 8);
  a->updated_at_ms = r.Int8(row, col + 9);
  *retain_until_ms = r.Int8(row, col + 10);
  return true;
}

// Reads INTENT_COLS starting at column 0 (key_id at `key_id_col`, the
// input right after it).
void DecodeIntent(const Result& r, int row, Intent* intent, int64_t* retain_until_ms,
                  int key_id_col = 6, int base = 0) {
  intent->payload = r.Bytes(row, base + 0);
  intent->key = r.Bytes(row, base + 1);
  intent->rules_version = r.Int4(row, base + 2);
  intent->created_at_ms = r.Int8(row, base + 3);
  intent->updated_at_ms = r.Int8(row, base + 4);
  *retain_until_ms = r.Int8(row, base + 5);
  intent->key_id = r.Bytes(row, key_id_col);
  intent->input = r.Bytes(row, key_id_col + 1);
  const std::string state = r.Bytes(row, key_id_col + 2);
  Approval& a = intent->approval;
  a = Approval();
  for (ApprovalState s :
       {ApprovalState::kPending, ApprovalState::kApproved, ApprovalState::kDenied}) {
    if (state == ApprovalStateName(s)) a.state = s;
  }
  a.reason = r.Bytes(row, key_id_col + 3);
  a.decided_by = r.Bytes(row, key_id_col + 4);
  a.note = r.Bytes(row, key_id_col + 5);
  a.decided_at_ms = r.Int8(row, key_id_col + 6);
}

void AddApprovalParams(const Intent& intent, Params* p) {
  const Approval& a = intent.approval;
  p->Text(ApprovalStateName(a.state)).Bytes(a.reason).Bytes(a.decided_by).Bytes(a.note);
  p->Int8(a.decided_at_ms);
}

Status BadStatus(const Result& r, int row, int col) {
  return Status::Corruption("acao_idempotente holds an unknown status \"" + r.Bytes(row, col) +
                            "\"");
}

Params IntentParams(const Intent& intent) {
  Params p;
  p.Bytes(intent.tenant_id).Bytes(intent.intent_ref).Bytes(intent.action_type);
  return p;
}

Params ActionParams(const Action& a, int64_t retain_until_ms) {
  Params p;
  p.Bytes(a.tenant_id).Bytes(a.key).Bytes(a.action_type).Bytes(a.intent_ref);
  p.Text(ActionStatusName(a.status)).Int8(a.attempt).Int8(a.lease_token).Int8(a.lease_until_ms);
  p.Bytes(a.response).Bytes(a.error).Int8(a.created_at_ms).Int8(a.updated_at_ms);
  p.Int8(retain_until_ms);
  return p;
}

// kInsertIntent's and kReplaceIntent's parameters ($1..$16).
Params IntentRowParams(const Intent& intent, int64_t retain_until_ms) {
  Params p = IntentParams(intent);
  p.Bytes(intent.payload).Bytes(intent.key).Int4(intent.rules_version);
  p.Int8(intent.created_at_ms).Int8(intent.updated_at_ms).Int8(retain_until_ms);
  p.Text(intent.key_id).Bytes(intent.input);
  AddApprovalParams(intent, &p);
  return p;
}

// kBeginFresh's: the intent's row, then the action's.
Params FreshParams(const Intent& intent, int64_t intent_retain_ms, const Action& action,
                   int64_t action_retain_ms) {
  Params p = IntentRowParams(intent, intent_retain_ms);
  const Params a = ActionParams(action, action_retain_ms);
  for (size_t i = 0; i < a.values().size(); ++i) p.Raw(a.types()[i], a.values()[i]);
  return p;
}

// kCompleteStarted's.
Params CompleteParams(const std::string& tenant, const std::string& key, int64_t lease_token,
                      const Action& next, int64_t retain_ms, int64_t now_ms) {
  Params p;
  p.Bytes(tenant).Bytes(key).Int8(lease_token).Text(ActionStatusName(next.status));
  p.Bytes(next.response).Bytes(next.error).Int8(next.updated_at_ms).Int8(retain_ms);
  p.Int8(now_ms).Int8(retain_ms);
  return p;
}

}  // namespace

Status PostgresStoreImpl::LockIntent(pg::Connection& c, const std::string& tenant,
                                     const std::string& ref, const std::string& type, bool nowait,
                                     std::optional<StoredIntent>* row) {
  row->reset();
  Result r;
  if (!c.Exec(nowait ? kLockIntentNowait : kLockIntent,
              Params().Bytes(tenant).Bytes(ref).Bytes(type), &r)) {
    return c.Failure();
  }
  if (r.rows() == 0) return Status::Ok();
  StoredIntent stored;
  stored.intent.tenant_id = tenant;
  stored.intent.intent_ref = ref;
  stored.intent.action_type = type;
  DecodeIntent(r, 0, &stored.intent, &stored.retain_until_ms);
  *row = std::move(stored);
  return Status::Ok();
}

Status PostgresStoreImpl::InsertIntent(pg::Connection& c, const Intent& intent,
                                       int64_t retain_until_ms, bool* inserted) {
  const Params p = IntentRowParams(intent, retain_until_ms);
  Result r;
  if (!c.Exec(kInsertIntent, p, &r)) return c.Failure();
  *inserted = r.affected() == 1;
  return Status::Ok();
}

Status PostgresStoreImpl::ReplaceIntent(pg::Connection& c, const Intent& intent,
                                        int64_t retain_until_ms) {
  const Params p = IntentRowParams(intent, retain_until_ms);
  c.Defer(kReplaceIntent, p);  // sent with the next statement or COMMIT
  return Status::Ok();
}

Status PostgresStoreImpl::SetIntentRetention(pg::Connection& c, const Intent& intent,
                                             int64_t retain_until_ms) {
  c.Defer(kSetIntentRetention, IntentParams(intent).Int8(retain_until_ms));
  return Status::Ok();
}

Status PostgresStoreImpl::ReadAction(pg::Connection& c, const std::string& tenant,
                                     const std::string& key, bool exclusive,
                                     std::optional<Action>* row, int64_t* retain_until_ms) {
  row->reset();
  Result r;
  if (!c.Exec(exclusive ? kLockAction : kShareAction, Params().Bytes(tenant).Bytes(key), &r)) {
    return c.Failure();
  }
  if (r.rows() == 0) return Status::Ok();
  Action a;
  a.tenant_id = tenant;
  a.key = key;
  if (!DecodeAction(r, 0, 0, &a, retain_until_ms)) return BadStatus(r, 0, 2);
  *row = std::move(a);
  return Status::Ok();
}

Status PostgresStoreImpl::ReadActionCoords(pg::Connection& c, const std::string& tenant,
                                           const std::string& key, std::optional<Coords>* out) {
  out->reset();
  Result r;
  if (!c.Exec(kActionCoords, Params().Bytes(tenant).Bytes(key), &r)) return c.Failure();
  if (r.rows() == 1) *out = Coords{r.Bytes(0, 0), r.Bytes(0, 1)};
  return Status::Ok();
}

Status PostgresStoreImpl::InsertAction(pg::Connection& c, const Action& action, int64_t now_ms,
                                       bool* inserted) {
  Result r;
  if (!c.Exec(kInsertAction,
              ActionParams(action, ActionRetainUntil(action.status, now_ms, options_.retention_ms)),
              &r)) {
    return c.Failure();
  }
  *inserted = r.affected() == 1;
  return Status::Ok();
}

Status PostgresStoreImpl::UpdateAction(pg::Connection& c, const Action& action, int64_t now_ms) {
  const int64_t retain = ActionRetainUntil(action.status, now_ms, options_.retention_ms);
  c.Defer(kUpdateAction, ActionParams(action, retain));
  return Status::Ok();
}

bool PostgresStoreImpl::InsertFresh(pg::Connection& c, const Intent& intent,
                                    int64_t intent_retain_ms, const Action& action,
                                    int64_t action_retain_ms, bool* inserted) {
  Result r;
  if (!c.ExecAutocommit(kBeginFresh,
                        FreshParams(intent, intent_retain_ms, action, action_retain_ms), &r)) {
    return false;
  }
  *inserted = r.affected() == 1;
  return true;
}

bool PostgresStoreImpl::ApplyComplete(pg::Connection& c, const std::string& tenant,
                                      const std::string& key, int64_t lease_token,
                                      const Action& next, int64_t retain_ms, int64_t now_ms,
                                      std::optional<Action>* applied) {
  applied->reset();
  Result r;
  if (!c.ExecAutocommit(kCompleteStarted,
                        CompleteParams(tenant, key, lease_token, next, retain_ms, now_ms), &r)) {
    return false;
  }
  if (r.rows() != 1) return true;
  Action a;
  a.tenant_id = tenant;
  a.key = key;
  int64_t retain = 0;
  // A status this build cannot read was never written by the statement.
  if (DecodeAction(r, 0, 0, &a, &retain)) *applied = std::move(a);
  return true;
}

bool PostgresStoreImpl::InsertFreshBatch(pg::Connection& c, const std::vector<FreshBegin*>& batch) {
  std::vector<Params> rows;
  rows.reserve(batch.size());
  for (const FreshBegin* m : batch) {
    rows.push_back(FreshParams(*m->intent, m->retain_ms, *m->action, m->retain_ms));
  }
  Result r;
  if (!c.ExecAutocommit(kBeginFreshBatch, Params::Columns(rows), &r)) return false;
  for (FreshBegin* m : batch) m->general = true;  // until its row says it was inserted
  for (int row = 0; row < r.rows(); ++row) {
    const int64_t n = r.Int8(row, 0);
    if (n >= 1 && n <= static_cast<int64_t>(batch.size())) batch[n - 1]->general = false;
  }
  return true;
}

bool PostgresStoreImpl::ApplyCompleteBatch(pg::Connection& c,
                                           const std::vector<StartedComplete*>& batch) {
  std::vector<Params> rows;
  rows.reserve(batch.size());
  for (const StartedComplete* m : batch) {
    rows.push_back(
        CompleteParams(*m->tenant, *m->key, m->lease_token, *m->next, m->retain_ms, m->now_ms));
  }
  Result r;
  if (!c.ExecAutocommit(kCompleteStartedBatch, Params::Columns(rows), &r)) return false;
  for (StartedComplete* m : batch) m->applied.reset();
  for (int row = 0; row < r.rows(); ++row) {
    const int64_t n = r.Int8(row, 0);
    if (n < 1 || n > static_cast<int64_t>(batch.size())) continue;
    StartedComplete* m = batch[n - 1];
    Action a;
    a.tenant_id = *m->tenant;
    a.key = *m->key;
    int64_t retain = 0;
    // A status this build cannot read was never written by the statement.
    if (DecodeAction(r, row, 1, &a, &retain)) m->applied = std::move(a);
  }
  return true;
}

Status PostgresStoreImpl::ReadLiveAction(const std::string& tenant_id, const std::string& key,
                                         int64_t now_ms, std::optional<Action>* action) {
  action->reset();
  return Query("status", [&](pg::Connection& c) -> Status {
    Result r;
    if (!c.Exec(kGetAction, Params().Bytes(tenant_id).Bytes(key).Int8(now_ms), &r)) {
      return c.Failure();
    }
    if (r.rows() == 0) return Status::Ok();
    Action a;
    a.tenant_id = tenant_id;
    a.key = key;
    int64_t retain = 0;
    if (!DecodeAction(r, 0, 0, &a, &retain)) return BadStatus(r, 0, 2);
    *action = std::move(a);
    return Status::Ok();
  });
}

Status PostgresStoreImpl::GetAction(const std::string& tenant_id, const std::string& key,
                                    Action* action) {
  std::optional<Action> live;
  Status s = ReadLiveAction(tenant_id, key, clock_->NowMs(), &live);
  if (!s.ok()) return s;
  if (!live) return NoSuchAction();
  *action = std::move(*live);
  return Status::Ok();
}

Status PostgresStoreImpl::ReadLive(const std::string& tenant_id, const std::string& intent_ref,
                                   const std::string& action_type, int64_t now_ms,
                                   std::optional<StoredIntent>* intent,
                                   std::optional<Action>* action) {
  intent->reset();
  action->reset();
  // One statement: the intent and its action as of the same snapshot.
  return Query("lookup", [&](pg::Connection& c) -> Status {
    Result r;
    Params p;
    p.Bytes(tenant_id).Bytes(intent_ref).Bytes(action_type).Int8(now_ms);
    if (!c.Exec(kLookup, p, &r)) return c.Failure();
    if (r.rows() == 0) return Status::Ok();
    StoredIntent stored;
    stored.intent.tenant_id = tenant_id;
    stored.intent.intent_ref = intent_ref;
    stored.intent.action_type = action_type;
    DecodeIntent(r, 0, &stored.intent, &stored.retain_until_ms, /*key_id_col=*/17);
    if (!r.Null(0, 6 + 2)) {
      Action a;
      a.tenant_id = tenant_id;
      a.key = stored.intent.key;
      int64_t retain = 0;
      if (!DecodeAction(r, 0, 6, &a, &retain)) return BadStatus(r, 0, 6 + 2);
      *action = std::move(a);
    }
    *intent = std::move(stored);
    return Status::Ok();
  });
}

Status PostgresStoreImpl::Lookup(const std::string& tenant_id, const std::string& intent_ref,
                                 const std::string& action_type, LookupResult* result) {
  std::optional<StoredIntent> intent;
  std::optional<Action> action;
  Status s = ReadLive(tenant_id, intent_ref, action_type, clock_->NowMs(), &intent, &action);
  if (!s.ok()) return s;
  if (!intent) return NoSuchIntent();
  result->intent = std::move(intent->intent);
  result->action = std::move(action);
  return Status::Ok();
}

Status PostgresStoreImpl::Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                                    std::vector<Action>* actions) {
  actions->clear();
  if (limit == 0) return Status::Ok();
  return Query("uncertain", [&](pg::Connection& c) -> Status {
    Result r;
    const int64_t now = clock_->NowMs();
    const int64_t n = static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX));
    const bool ok = tenant_id
                        ? c.Exec(kUncertainTenant, Params().Bytes(*tenant_id).Int8(now).Int8(n), &r)
                        : c.Exec(kUncertainAll, Params().Int8(now).Int8(n), &r);
    if (!ok) return c.Failure();
    std::vector<Action> out;
    for (int row = 0; row < r.rows(); ++row) {
      Action a;
      a.tenant_id = r.Bytes(row, 0);
      a.key = r.Bytes(row, 1);
      int64_t retain = 0;
      if (!DecodeAction(r, row, 2, &a, &retain)) return BadStatus(r, row, 4);
      out.push_back(std::move(a));
    }
    *actions = std::move(out);
    return Status::Ok();
  });
}

Status PostgresStoreImpl::PurgeExpired(size_t limit, size_t* deleted) {
  *deleted = 0;
  if (limit == 0) return Status::Ok();
  return Transact("purge", [&](pg::Connection& c, TxEnd* end) -> Status {
    const int64_t now = clock_->NowMs();
    const int64_t n = static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX));
    Result actions, intents, messages, counters;
    if (!c.Exec(kPurgeActions, Params().Int8(now).Int8(n), &actions) ||
        !c.Exec(kPurgeIntents, Params().Int8(now).Int8(n), &intents) ||
        !c.Exec(kPurgeMessages, Params().Int8(now).Int8(n), &messages) ||
        !c.Exec(kPurgeCounters, Params().Int8(now).Int8(n), &counters)) {
      return c.Failure();
    }
    *deleted = static_cast<size_t>(actions.affected() + intents.affected() + messages.affected() +
                                   counters.affected());
    *end = TxEnd::kCommit;
    return Status::Ok();
  });
}

Status PostgresStoreImpl::CountAllowances(pg::Connection& c, const IntentCandidate& request,
                                          int64_t now_ms, AllowanceRefusal* refusal) {
  const std::vector<Allowance>& allowances = request.allowances;
  if (allowances.empty()) return Status::Ok();
  // Counter rows are locked last (after intents and actions) and in name
  // order, so that two transactions never wait on each other's counters.
  std::vector<size_t> order(allowances.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return allowances[a].name < allowances[b].name; });
  const int64_t day = CounterDay(now_ms);
  const int64_t retain = CounterRetainUntil(day, options_.retention_ms);
  for (size_t i : order) {
    const Allowance& a = allowances[i];
    if (a.name.empty() || a.amount < 0 || a.max_total < 0 || a.max_count < 0) {
      return Status::InvalidArgument("an allowance needs a name and no negative amount or maximum");
    }
    Result r;
    Params p;
    p.Bytes(request.tenant_id).Int8(day).Bytes(a.name).Int8(a.amount).Int8(retain);
    if (!c.Exec(kCountAllowance, p, &r)) return c.Failure();
    // The count is written first and judged after: a refusal rolls the
    // whole transaction back, this row's change with it.
    const int64_t total = r.Int8(0, 0) - a.amount;
    const int64_t count = r.Int8(0, 1) - 1;
    if (!WithinAllowance(a, total, count)) {
      refusal->index = i;
      refusal->total = total;
      refusal->count = count;
      return Status::Refused("allowance " + a.name + " would be passed");
    }
  }
  return Status::Ok();
}

Status PostgresStoreImpl::DayCounters(const std::string& tenant_id, int64_t day,
                                      std::vector<Counter>* counters) {
  counters->clear();
  return Query("counters", [&](pg::Connection& c) -> Status {
    Result r;
    if (!c.Exec(kDayCounters, Params().Bytes(tenant_id).Int8(day).Int8(clock_->NowMs()), &r)) {
      return c.Failure();
    }
    std::vector<Counter> out;
    for (int row = 0; row < r.rows(); ++row) {
      Counter counter;
      counter.tenant_id = tenant_id;
      counter.day = day;
      counter.name = r.Bytes(row, 0);
      counter.total = r.Int8(row, 1);
      counter.count = r.Int8(row, 2);
      out.push_back(std::move(counter));
    }
    *counters = std::move(out);
    return Status::Ok();
  });
}

Status PostgresStoreImpl::PendingApprovals(const std::optional<std::string>& tenant_id,
                                           size_t limit, std::vector<Intent>* intents) {
  intents->clear();
  if (limit == 0) return Status::Ok();
  return Query("pending", [&](pg::Connection& c) -> Status {
    Result r;
    const int64_t now = clock_->NowMs();
    const int64_t n = static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX));
    const bool ok = tenant_id
                        ? c.Exec(kPendingTenant, Params().Bytes(*tenant_id).Int8(now).Int8(n), &r)
                        : c.Exec(kPendingAll, Params().Int8(now).Int8(n), &r);
    if (!ok) return c.Failure();
    std::vector<Intent> out;
    for (int row = 0; row < r.rows(); ++row) {
      Intent intent;
      intent.tenant_id = r.Bytes(row, 0);
      intent.intent_ref = r.Bytes(row, 1);
      intent.action_type = r.Bytes(row, 2);
      int64_t retain = 0;
      DecodeIntent(r, row, &intent, &retain, /*key_id_col=*/3 + 6, /*base=*/3);
      out.push_back(std::move(intent));
    }
    *intents = std::move(out);
    return Status::Ok();
  });
}

}  // namespace intentd::store
