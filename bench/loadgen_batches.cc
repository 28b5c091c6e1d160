#include "bench/loadgen_batches.h"

#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/loadgen_cpu.h"
#include "bench/loadgen_io.h"

namespace intentd::bench {
namespace {

constexpr int kTimeoutMs = 5000;

bool Request(const std::string& socket_path, std::string* line) {
  std::string error;
  const int fd = ConnectUnix(socket_path, &error);
  if (fd < 0) return false;
  bool ok = WriteAll(fd, "{\"op\":\"metrics\"}\n", &error);
  std::string buffer;
  while (ok && buffer.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    ok = poll(&p, 1, kTimeoutMs) == 1 && ReadAvailable(fd, &buffer, &error);
  }
  close(fd);
  if (!ok) return false;
  *line = buffer.substr(0, buffer.find('\n'));
  return true;
}

// `name{kind="begin"} 1.5` or `name{kind="begin",le="+Inf"} 3`: the kind
// and the value, when the line is a sample of `name` with no other label.
bool KindSample(const std::string& line, const std::string& name, std::string* kind,
                double* value) {
  const std::string prefix = name + "{kind=\"";
  if (line.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t close = line.find("\"} ", prefix.size());
  if (close == std::string::npos) return false;
  *kind = line.substr(prefix.size(), close - prefix.size());
  *value = std::strtod(line.c_str() + close + 3, nullptr);
  return true;
}

}  // namespace

BatchSample SampleBatches(const std::string& socket_path) {
  BatchSample sample;
  std::string line;
  if (!Request(socket_path, &line)) return sample;
  const nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
  if (!reply.is_object() || !reply.value("ok", false)) return sample;
  std::istringstream text(reply.value("text", ""));
  std::string kind;
  double value = 0;
  while (std::getline(text, line)) {
    if (KindSample(line, "intentd_store_batched_requests_total", &kind, &value)) {
      sample.kinds[kind].requests = value;
    } else if (KindSample(line, "intentd_store_batch_duration_seconds_count", &kind, &value)) {
      sample.kinds[kind].statements = value;
    } else if (KindSample(line, "intentd_store_batch_duration_seconds_sum", &kind, &value)) {
      sample.kinds[kind].seconds = value;
    }
  }
  sample.ok = true;
  return sample;
}

BatchReport DescribeBatches(const BatchSample& start, const BatchSample& end) {
  BatchReport report;
  if (!start.ok || !end.ok) return report;
  for (const auto& [kind, after] : end.kinds) {
    const auto it = start.kinds.find(kind);
    const BatchKind before = it == start.kinds.end() ? BatchKind{} : it->second;
    const double statements = after.statements - before.statements;
    if (statements <= 0) continue;
    const double requests = (after.requests - before.requests) / statements;
    const double ms = 1e3 * (after.seconds - before.seconds) / statements;
    report.human += (report.human.empty() ? "  PostgreSQL batches: " : "; ") + kind + " " +
                    FormatNumber("%.1f", requests) + " requests, " + FormatNumber("%.2f", ms) +
                    " ms each";
    report.fields += (report.fields.empty() ? "" : " ") + kind +
                     "_batch_requests=" + FormatNumber("%.1f", requests) + " " + kind +
                     "_batch_ms=" + FormatNumber("%.2f", ms);
  }
  if (!report.human.empty()) report.human += "\n";
  return report;
}

}  // namespace intentd::bench
