#include "common/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "normalizers/utf8.h"

namespace intentd::agent {

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    const char c = value[i];
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else {
      const size_t n = normalizers::Utf8SequenceLength(value, i);
      if (n == 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\\\x%02x", static_cast<unsigned char>(c));
        out += hex;
        ++i;
        continue;
      }
      out.append(value.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

std::string EscapeHelp(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out.push_back(c);
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end);
}

void PrometheusText::Family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += EscapeHelp(help);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void PrometheusText::Head(std::string_view name, const Labels& labels) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += labels[i].first;
      text_ += "=\"";
      text_ += EscapeLabelValue(labels[i].second);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
}

void PrometheusText::Sample(std::string_view name, const Labels& labels, uint64_t value) {
  Head(name, labels);
  text_ += std::to_string(value);
  text_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const Labels& labels, int64_t value) {
  Head(name, labels);
  text_ += std::to_string(value);
  text_ += '\n';
}

void PrometheusText::Sample(std::string_view name, const Labels& labels, double value) {
  Head(name, labels);
  text_ += FormatValue(value);
  text_ += '\n';
}

}  // namespace intentd::agent
