// A strict reader of the Prometheus text exposition format 0.0.4, for tests:
// it checks the rules a scraper relies on and returns the samples.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace intentd::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;  // values unescaped
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::string help;  // unescaped
  std::vector<PromSample> samples;
};

// Parses `text`; false with *error naming the first violation of:
// - lines end with '\n'; "# HELP name text" and "# TYPE name type" at most
//   once per family, TYPE before the family's samples, a known type;
// - metric and label names match the format's grammar; label values use only
//   the escapes \\, \" and \n, and are valid UTF-8; values are floats or
//   +Inf, -Inf, NaN;
// - a family's samples are contiguous and belong to it (histogram: NAME_bucket
//   with "le", NAME_sum, NAME_count); no series appears twice; every sample
//   has a family with HELP and TYPE;
// - counters are named *_total and are >= 0;
// - histogram series: le strictly increasing, ending with "+Inf", cumulative
//   counts non-decreasing, NAME_count equal to the +Inf bucket, NAME_sum present.
bool ParsePrometheusText(const std::string& text, std::vector<PromFamily>* families,
                         std::string* error);

// The value of the one sample `name` with exactly `labels`; nullopt if absent.
std::optional<double> PromValue(const std::vector<PromFamily>& families, const std::string& name,
                                const std::map<std::string, std::string>& labels = {});

}  // namespace intentd::testing
