// A private intentd for one load-generator run (and the ctest smoke check):
// `intentd serve` on a socket and data directory in a fresh temporary
// directory, with a generated HMAC key file. Stopped with SIGTERM and
// removed when the object dies.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace intentd::bench {

class SpawnedAgent {
 public:
  // Starts `binary serve ... --sync sync` and waits until its socket accepts
  // (at most 30 s). nullptr with *error (including the agent's log) when it
  // exits or does not listen in time.
  static std::unique_ptr<SpawnedAgent> Start(const std::string& binary, const std::string& sync,
                                             std::string* error);
  ~SpawnedAgent();
  SpawnedAgent(const SpawnedAgent&) = delete;
  SpawnedAgent& operator=(const SpawnedAgent&) = delete;

  const std::string& socket_path() const { return socket_path_; }

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
