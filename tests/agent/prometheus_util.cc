#include "tests/agent/prometheus_util.h"

#include <cmath>
#include <cstdlib>
#include <regex>
#include <set>

namespace intentd::testing {
namespace {

const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = s[i + k];
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

bool ParseValue(const std::string& text, double* value) {
  if (text == "+Inf") return (*value = INFINITY), true;
  if (text == "-Inf") return (*value = -INFINITY), true;
  if (text == "NaN") return (*value = NAN), true;
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*value);
}

bool Fail(std::string* error, size_t line_no, const std::string& message) {
  *error = "line " + std::to_string(line_no) + ": " + message;
  return false;
}

// name{a="b",...} value — sets *sample or an error message.
bool ParseSample(const std::string& line, PromSample* sample, std::string* error) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
  sample->name = line.substr(0, i);
  if (!std::regex_match(sample->name, kMetricName)) return (*error = "bad metric name"), false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      size_t eq = line.find('=', i);
      if (eq == std::string::npos) return (*error = "label without ="), false;
      const std::string name = line.substr(i, eq - i);
      if (!std::regex_match(name, kLabelName)) return (*error = "bad label name " + name), false;
      if (eq + 1 >= line.size() || line[eq + 1] != '"')
        return (*error = "label value not quoted"), false;
      std::string value;
      size_t k = eq + 2;
      for (; k < line.size() && line[k] != '"'; ++k) {
        if (line[k] == '\\') {
          if (k + 1 >= line.size()) return (*error = "dangling backslash"), false;
          const char e = line[++k];
          if (e == '\\')
            value += '\\';
          else if (e == '"')
            value += '"';
          else if (e == 'n')
            value += '\n';
          else
            return (*error = std::string("bad escape \\") + e), false;
        } else {
          value += line[k];
        }
      }
      if (k >= line.size()) return (*error = "unterminated label value"), false;
      if (!ValidUtf8(value)) return (*error = "label value is not UTF-8"), false;
      if (sample->labels.count(name)) return (*error = "label " + name + " twice"), false;
      sample->labels[name] = value;
      i = k + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return (*error = "unterminated label set"), false;
    ++i;  // '}'
  }
  if (i >= line.size() || line[i] != ' ') return (*error = "no space before the value"), false;
  std::string rest = line.substr(i + 1);
  if (size_t sp = rest.find(' '); sp != std::string::npos) {
    const std::string ts = rest.substr(sp + 1);
    if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos) {
      return (*error = "bad timestamp"), false;
    }
    rest.resize(sp);
  }
  if (!ParseValue(rest, &sample->value)) return (*error = "bad value '" + rest + "'"), false;
  return true;
}

bool CheckHistogram(const PromFamily& f, std::string* error) {
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // le, count
    bool inf_last = false;
    std::optional<double> sum, count;
  };
  std::map<std::map<std::string, std::string>, Series> series;
  for (const PromSample& s : f.samples) {
    auto labels = s.labels;
    if (s.name == f.name + "_bucket") {
      auto le = labels.find("le");
      if (le == labels.end()) return (*error = f.name + "_bucket without le"), false;
      double bound = 0;
      if (!ParseValue(le->second, &bound)) return (*error = "bad le " + le->second), false;
      const std::string le_text = le->second;
      labels.erase(le);
      Series& sr = series[labels];
      if (!sr.buckets.empty() && !(bound > sr.buckets.back().first)) {
        return (*error = f.name + ": le not increasing at " + le_text), false;
      }
      if (!sr.buckets.empty() && s.value < sr.buckets.back().second) {
        return (*error = f.name + ": buckets not cumulative at le " + le_text), false;
      }
      sr.buckets.emplace_back(bound, s.value);
      sr.inf_last = le_text == "+Inf";
    } else if (s.name == f.name + "_sum") {
      series[labels].sum = s.value;
    } else if (s.name == f.name + "_count") {
      series[labels].count = s.value;
    }
  }
  for (const auto& [labels, sr] : series) {
    if (sr.buckets.empty() || !sr.inf_last)
      return (*error = f.name + ": no +Inf bucket last"), false;
    if (!sr.sum) return (*error = f.name + ": no _sum"), false;
    if (!sr.count || *sr.count != sr.buckets.back().second) {
      return (*error = f.name + ": _count differs from the +Inf bucket"), false;
    }
  }
  return true;
}

}  // namespace

bool ParsePrometheusText(const std::string& text, std::vector<PromFamily>* families,
                         std::string* error) {
  families->clear();
  if (text.empty() || text.back() != '\n')
    return (*error = "the text does not end with \\n"), false;
  std::set<std::string> closed;  // families whose samples ended
  std::set<std::string> series;
  // Indexes into *families (which grows, so no pointers are kept).
  int current_index = -1;
  auto family = [&](const std::string& name) -> int {
    for (size_t i = 0; i < families->size(); ++i) {
      if ((*families)[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const bool help = line[2] == 'H';
      const std::string rest = line.substr(7);
      const size_t sp = rest.find(' ');
      const std::string name = rest.substr(0, sp);
      const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
      if (!std::regex_match(name, kMetricName)) return Fail(error, line_no, "bad family name");
      int index = family(name);
      if (index < 0) {
        if (closed.count(name)) return Fail(error, line_no, name + " declared again");
        families->push_back(PromFamily{name, "", "", {}});
        index = static_cast<int>(families->size()) - 1;
      } else if (index != current_index) {
        return Fail(error, line_no, name + " declared again, after another family");
      }
      if (current_index >= 0 && current_index != index) {
        closed.insert((*families)[current_index].name);
      }
      current_index = index;
      PromFamily* f = &(*families)[index];
      if (help) {
        if (!f->help.empty()) return Fail(error, line_no, "second HELP for " + name);
        std::string unescaped;
        for (size_t k = 0; k < arg.size(); ++k) {
          if (arg[k] == '\\') {
            if (k + 1 >= arg.size() || (arg[k + 1] != '\\' && arg[k + 1] != 'n')) {
              return Fail(error, line_no, "bad escape in HELP");
            }
            unescaped += arg[++k] == 'n' ? '\n' : '\\';
          } else {
            unescaped += arg[k];
          }
        }
        f->help = unescaped.empty() ? " " : unescaped;
      } else {
        if (!f->type.empty()) return Fail(error, line_no, "second TYPE for " + name);
        if (!f->samples.empty()) return Fail(error, line_no, "TYPE after samples of " + name);
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                     "untyped"};
        if (!kTypes.count(arg)) return Fail(error, line_no, "unknown type " + arg);
        f->type = arg;
      }
      continue;
    }
    if (line[0] == '#') continue;  // a comment
    PromSample sample;
    std::string why;
    if (!ParseSample(line, &sample, &why)) return Fail(error, line_no, why + ": " + line);
    if (current_index < 0) return Fail(error, line_no, "sample before any family");
    PromFamily* current = &(*families)[current_index];
    const std::string& f = current->name;
    const bool belongs = current->type == "histogram"
                             ? sample.name == f + "_bucket" || sample.name == f + "_sum" ||
                                   sample.name == f + "_count"
                             : sample.name == f;
    if (!belongs)
      return Fail(error, line_no, sample.name + " outside its family (after " + f + ")");
    if (current->type == "counter") {
      if (f.size() < 6 || f.compare(f.size() - 6, 6, "_total") != 0) {
        return Fail(error, line_no, "counter " + f + " is not named *_total");
      }
      if (!(sample.value >= 0)) return Fail(error, line_no, "negative counter");
    }
    std::string id = sample.name;
    for (const auto& [k, v] : sample.labels) id += "\x01" + k + "\x02" + v;
    if (!series.insert(id).second) return Fail(error, line_no, "series twice: " + line);
    current->samples.push_back(std::move(sample));
  }
  for (const PromFamily& f : *families) {
    if (f.help.empty() || f.type.empty()) {
      *error = f.name + " lacks HELP or TYPE";
      return false;
    }
    if (f.type == "histogram" && !CheckHistogram(f, error)) return false;
  }
  return true;
}

std::optional<double> PromValue(const std::vector<PromFamily>& families, const std::string& name,
                                const std::map<std::string, std::string>& labels) {
  for (const PromFamily& f : families) {
    for (const PromSample& s : f.samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
  }
  return std::nullopt;
}

}  // namespace intentd::testing
