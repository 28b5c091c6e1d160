#include "store/postgres/replication.h"

#include <memory>

#include "store/postgres/conn.h"

namespace intentd::store {
namespace {

// One row, text columns (the simple query protocol).
constexpr char kQuery[] =
    "SELECT pg_is_in_recovery()::text, current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names'), "
    "(SELECT count(*) FROM pg_stat_replication "
    "  WHERE sync_state IN ('sync', 'quorum') AND state = 'streaming')::text, "
    "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL)::text, "
    "coalesce((SELECT string_agg(coalesce(application_name, '?') || ' (' || "
    "  coalesce(sync_state, 'sync_state unreadable') || ', ' || coalesce(state, '?') || ')', "
    "  ', ' ORDER BY application_name) FROM pg_stat_replication), '')";

}  // namespace

Status CheckSyncReplication(const std::string& url, bool sync, std::string* summary) {
  std::string error;
  std::unique_ptr<pg::Connection> c = pg::Connection::Connect(url, sync, &error);
  if (!c) return Status::StorageError("cannot connect to PostgreSQL: " + error);
  pg::Result r;
  if (!c->ExecSimple(kQuery, &r)) {
    return Status::StorageError("reading the replication settings: " + c->error_message());
  }
  if (r.rows() != 1) return Status::StorageError("reading the replication settings: no row");
  const bool in_recovery = r.Bytes(0, 0) == "true";
  const std::string commit = r.Bytes(0, 1);
  const std::string names = r.Bytes(0, 2);
  const long long sync_standbys = std::stoll(r.Bytes(0, 3));
  const long long unreadable = std::stoll(r.Bytes(0, 4));
  const std::string standbys = r.Bytes(0, 5);

  *summary = "synchronous_commit " + commit + ", synchronous_standby_names '" + names + "', " +
             std::to_string(sync_standbys) + " synchronous standby(s) streaming" +
             (standbys.empty() ? "" : ": " + standbys);
  std::string unmet;
  auto add = [&unmet](const std::string& why) { unmet += (unmet.empty() ? "" : "; ") + why; };
  if (in_recovery) {
    add("the server is a standby (in recovery), not the primary");
  }
  if (commit != "on" && commit != "remote_write" && commit != "remote_apply") {
    add("synchronous_commit is " + commit +
        (sync ? "" : " (--sync none sets it off for the agent's sessions)") +
        ": a commit returns before a standby has it (want on, remote_write or remote_apply)");
  }
  if (names.empty()) {
    add("synchronous_standby_names is empty: no standby is synchronous (name at least one, "
        "e.g. 'FIRST 1 (standby_a, standby_b)')");
  }
  if (sync_standbys == 0 && !names.empty() && !in_recovery) {
    std::string why = "no synchronous standby is streaming (pg_stat_replication: " +
                      (standbys.empty() ? std::string("no standby connected") : standbys) + ")";
    if (unreadable > 0) {
      why += "; this role cannot read sync_state: GRANT pg_monitor TO it";
    }
    add(why);
  }
  if (!unmet.empty()) {
    return Status::InvalidState("PostgreSQL does not replicate commits synchronously: " + unmet);
  }
  return Status::Ok();
}

}  // namespace intentd::store
