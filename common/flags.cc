#include "common/flags.h"

#include <charconv>

namespace intentd::agent {

bool Flags::Parse(const std::vector<FlagSpec>& specs, const std::vector<std::string>& args,
                  std::string* error) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      *error = "unknown flag --" + name + " (see --help)";
      return false;
    }
    if (!spec->takes_value) {
      if (inline_value) {
        *error = "flag --" + name + " takes no value";
        return false;
      }
      values_[name] = "true";
      continue;
    }
    if (inline_value) {
      values_[name] = *inline_value;
    } else if (i + 1 < args.size()) {
      values_[name] = args[++i];
    } else {
      *error = "flag --" + name + " needs a value";
      return false;
    }
  }
  return true;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Flags::GetOr(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string FlagsUsage(const std::string& command, const std::string& synopsis,
                       const std::string& summary, const std::vector<FlagSpec>& specs) {
  std::string out = "Usage: intentd " + command + (synopsis.empty() ? "" : " " + synopsis) +
                    "\n\n" + summary + "\n\nOptions:\n";
  for (const FlagSpec& s : specs) {
    std::string left = "  --" + s.name + (s.takes_value ? " VALUE" : "");
    if (left.size() < 28) left.resize(28, ' ');
    out += left + " " + s.help + "\n";
  }
  out += "  --help                     show this help\n";
  return out;
}

bool ParseInt(const std::string& text, long long min, long long max, long long* out) {
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty() || value < min || value > max) return false;
  *out = value;
  return true;
}

bool ParseDurationMs(const std::string& text, long long* ms) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  long long number = 0;
  if (!ParseInt(text.substr(0, digits), 1, 1LL << 40, &number)) return false;
  const std::string unit = text.substr(digits);
  long long scale = 0;
  // A bare number is refused: "--retention 30" meant 30 days to whoever
  // wrote it, and read as 30 seconds it would drop records after half a
  // minute.
  if (unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m" || unit == "min")
    scale = 60 * 1000;
  else if (unit == "h")
    scale = 3600 * 1000;
  else if (unit == "d")
    scale = 24LL * 3600 * 1000;
  else
    return false;
  *ms = number * scale;
  return true;
}

}  // namespace intentd::agent
