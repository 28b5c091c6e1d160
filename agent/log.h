// Logging: one line per event on stderr, prefixed with the journald/syslog
// priority ("<3>" error, "<4>" warning, "<6>" info, "<7>" debug) so that
// journald files each line at its level. Thread safe (one write(2) per line).
// Never pass the secret; payloads only at debug level.
#pragma once

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

}  // namespace intentd::agent
