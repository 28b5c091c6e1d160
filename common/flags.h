// A small command-line flag parser for the subcommands: `--name value`,
// `--name=value` and boolean `--name`. Unknown flags and missing values are
// errors that name the flag.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace intentd::agent {

struct FlagSpec {
  std::string name;  // without the leading "--"
  bool takes_value = true;
  std::string help;  // "--name VALUE  what it does"
};

class Flags {
 public:
  // Parses args (after the subcommand). Returns false with *error set.
  // "--help" / "-h" sets help_requested() and always succeeds.
  bool Parse(const std::vector<FlagSpec>& specs, const std::vector<std::string>& args,
             std::string* error);

  bool help_requested() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// "Usage: intentd NAME SYNOPSIS\n\nSUMMARY\n\nOptions:\n  --flag ..."
std::string FlagsUsage(const std::string& command, const std::string& synopsis,
                       const std::string& summary, const std::vector<FlagSpec>& specs);

// Parses "30d", "12h", "15m" (or "15min"), "90s" or "500ms" into
// milliseconds. Returns false when the text is not a positive duration with
// its unit: a bare number is refused, whatever unit its writer meant.
bool ParseDurationMs(const std::string& text, long long* ms);

// Parses a whole decimal integer in [min, max].
bool ParseInt(const std::string& text, long long min, long long max, long long* out);

}  // namespace intentd::agent
