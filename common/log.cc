#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <utility>

namespace intentd::agent {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "error")
    *level = LogLevel::kError;
  else if (text == "warning")
    *level = LogLevel::kWarning;
  else if (text == "info")
    *level = LogLevel::kInfo;
  else if (text == "debug")
    *level = LogLevel::kDebug;
  else
    return false;
  return true;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line = "<" + std::to_string(static_cast<int>(level)) + ">";
  // One event, one line: newlines inside a message would split it.
  for (char c : message) line.push_back(c == '\n' ? ' ' : c);
  line.push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool LogThrottle::Admit(Clock::time_point now, uint64_t* skipped) {
  std::lock_guard<std::mutex> lock(mu_);
  if (any_ && now - last_ < interval_) {
    ++skipped_;
    return false;
  }
  any_ = true;
  last_ = now;
  *skipped = std::exchange(skipped_, 0);
  return true;
}

void LogThrottle::Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  uint64_t skipped = 0;
  if (!Admit(Clock::now(), &skipped)) return;
  if (skipped == 0) {
    agent::Log(level, message);
    return;
  }
  agent::Log(level, std::string(message) + " (and " + std::to_string(skipped) +
                        " more like it since the last such line, not logged)");
}

}  // namespace intentd::agent
