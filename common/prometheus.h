// A writer for the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): families
// with HELP and TYPE lines, samples with escaped label values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace intentd::agent {

inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

using Labels = std::vector<std::pair<std::string_view, std::string>>;

class PrometheusText {
 public:
  // "# HELP name help" and "# TYPE name type" (type: counter, gauge,
  // histogram). Each family once, before its samples.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // "name{label="value",...} value". Label names are the caller's constants;
  // values are escaped (EscapeLabelValue).
  void Sample(std::string_view name, const Labels& labels, uint64_t value);
  void Sample(std::string_view name, const Labels& labels, int64_t value);
  void Sample(std::string_view name, const Labels& labels, double value);

  const std::string& text() const { return text_; }

 private:
  void Head(std::string_view name, const Labels& labels);
  std::string text_;
};

// A label value as the format wants it: backslash, double quote and line
// feed escaped as \\, \" and \n. The format requires UTF-8, so a byte that
// is not part of valid UTF-8 (tenant ids may hold any byte) is written as the
// four characters \xNN, with its backslash escaped.
std::string EscapeLabelValue(std::string_view value);
// HELP text: backslash and line feed escaped.
std::string EscapeHelp(std::string_view text);
// A sample value: shortest round-trip decimal; +Inf, -Inf, NaN.
std::string FormatValue(double value);

}  // namespace intentd::agent
