// Whether a PostgreSQL server keeps every commit on a synchronous standby:
// what `intentd serve --require-sync-replication` checks before it serves,
// so that a failover to that standby loses no acknowledged write
// (docs/operations.md, "Failover without loss").
#pragma once

#include <string>

#include "store/status.h"

namespace intentd::store {

// Connects to `url` as the agent's sessions do (`sync`: the agent's
// synchronous_commit, on or off) and checks that the server
//   - is a primary (not in recovery),
//   - commits the session's transactions synchronously to a standby:
//     synchronous_commit is on, remote_write or remote_apply, and
//     synchronous_standby_names is not empty,
//   - has at least one standby streaming as `sync` or `quorum` in
//     pg_stat_replication (the role needs pg_monitor or pg_read_all_stats to
//     read sync_state; the message says so when it cannot).
// Ok with *summary describing what was found (for the log). kInvalidState
// with a message naming each unmet condition and the setting to change;
// kStorageError when the server cannot be reached or queried.
Status CheckSyncReplication(const std::string& url, bool sync, std::string* summary);

}  // namespace intentd::store
