// Logging: one line per event on stderr, prefixed with the journald/syslog
// priority ("<3>" error, "<4>" warning, "<6>" info, "<7>" debug) so that
// journald files each line at its level. Thread safe (one write(2) per line).
// Never pass the secret; payloads only at debug level.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace intentd::agent {

enum class LogLevel { kError = 3, kWarning = 4, kInfo = 6, kDebug = 7 };

bool ParseLogLevel(std::string_view text, LogLevel* level);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, std::string_view message);

inline void LogError(std::string_view m) { Log(LogLevel::kError, m); }
inline void LogWarning(std::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogInfo(std::string_view m) { Log(LogLevel::kInfo, m); }

// At most one line per `interval` for an event that may repeat at request
// rate (every request refused while the disk is full): the lines in between
// are counted, not written, and the next line written says how many.
class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(Clock::duration interval) : interval_(interval) {}

  void Log(LogLevel level, std::string_view message);
  // The decision behind Log at `now`: true to write the line, with *skipped
  // the lines not written since the last one; false when it is skipped.
  bool Admit(Clock::time_point now, uint64_t* skipped);

 private:
  const Clock::duration interval_;
  std::mutex mu_;
  bool any_ = false;        // guarded by mu_
  Clock::time_point last_;  // guarded by mu_: when the last line was written
  uint64_t skipped_ = 0;    // guarded by mu_
};

}  // namespace intentd::agent
