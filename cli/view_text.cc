#include "cli/view_text.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace intentd::cli {

std::string IsoUtc(int64_t epoch_ms) {
  int64_t seconds = epoch_ms / 1000, millis = epoch_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    --seconds;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(epoch_ms) + " ms";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return buf;
}

std::string HumanDuration(long long ms) {
  if (ms < 0) ms = 0;
  const long long s = ms / 1000;
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  return buf;
}

int64_t NowEpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string PlainText(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>()
                           : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Shown(const nlohmann::json& value) {
  const std::string text = PlainText(value);
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f)
      return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return text;
}

}  // namespace intentd::cli
