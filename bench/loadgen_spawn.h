// A private intentd for one load-generator run (and the ctest smoke check):
// `intentd serve` on a socket and data directory in a fresh temporary
// directory, with a generated HMAC key file. Stopped with SIGTERM and
// removed when the object dies. With a PostgreSQL store the agent serves
// `--store URL` instead of the data directory, after `intentd migrate`.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace intentd::bench {

struct SpawnOptions {
  std::string sync = "always";  // serve --sync
  // Empty: a RocksDB store in the temporary directory. Otherwise passed as
  // `serve --store` (e.g. postgresql:///db?host=/tmp/pgsock&user=postgres),
  // after `migrate --store` has created or checked the schema.
  std::string store;
  int store_pool = 0;  // serve --store-pool; 0: the agent's default
};

class SpawnedAgent {
 public:
  // Runs `binary migrate` when options.store is set, then starts `binary
  // serve` and waits until its socket accepts (at most 30 s). nullptr with
  // *error (including the agent's log) when migrate fails, or the agent
  // exits or does not listen in time.
  static std::unique_ptr<SpawnedAgent> Start(const std::string& binary, const SpawnOptions& options,
                                             std::string* error);
  ~SpawnedAgent();
  SpawnedAgent(const SpawnedAgent&) = delete;
  SpawnedAgent& operator=(const SpawnedAgent&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }

  // SIGTERM, then waits (10 s, then SIGKILL). True when the agent exited 0
  // as its contract says; otherwise *error says how it ended. Idempotent.
  bool Stop(std::string* error);

 private:
  SpawnedAgent(pid_t pid, std::string directory)
      : pid_(pid), directory_(std::move(directory)), socket_path_(directory_ + "/intentd.sock") {}
  std::string Log() const;

  pid_t pid_;
  std::string directory_;
  std::string socket_path_;
};

}  // namespace intentd::bench
