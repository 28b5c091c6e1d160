#include "bench/loadgen_cpu.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

namespace intentd::bench {
namespace {

bool ReadFirstLine(const std::string& path, std::string* line) {
  std::ifstream in(path);
  return static_cast<bool>(std::getline(in, *line));
}

bool SampleAgent(pid_t pid, std::map<std::string, uint64_t>* ns, uint64_t* slices,
                 uint64_t* wait_ns) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return false;
  bool any = false;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = task_dir + "/" + entry->d_name;
    std::string comm, schedstat;
    if (!ReadFirstLine(task + "/comm", &comm) || !ReadFirstLine(task + "/schedstat", &schedstat)) {
      continue;  // the thread ended meanwhile
    }
    // "on-CPU ns, run-queue ns, times on a CPU" (Documentation/scheduler/sched-stats)
    uint64_t on_cpu = 0, waited = 0, times = 0;
    if (std::sscanf(schedstat.c_str(), "%" SCNu64 " %" SCNu64 " %" SCNu64, &on_cpu, &waited,
                    &times) != 3) {
      continue;
    }
    (*ns)[comm] += on_cpu;
    *slices += times;
    *wait_ns += waited;
    any = true;
  }
  closedir(dir);
  return any;
}

// On-CPU nanoseconds of every thread of `pid` (schedstat); false when the
// process is gone.
bool ProcessNs(pid_t pid, uint64_t* ns) {
  std::map<std::string, uint64_t> by_name;
  uint64_t slices = 0, waited = 0;
  if (!SampleAgent(pid, &by_name, &slices, &waited)) return false;
  for (const auto& [name, value] : by_name) *ns += value;
  return true;
}

// /proc/PID/stat's fields after the command name (which may hold spaces and
// parentheses): [0] is the state, [1] the parent, [13] and [14] the reaped
// children's user and system time in ticks (proc(5) fields 3, 4, 16, 17).
bool StatFields(pid_t pid, std::vector<std::string>* fields) {
  std::string line;
  if (!ReadFirstLine("/proc/" + std::to_string(pid) + "/stat", &line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(line.substr(close + 1));
  fields->clear();
  for (std::string field; in >> field;) fields->push_back(field);
  return fields->size() > 14;
}

// The server's tree (loadgen_cpu.h, SampleCpu): its children first, then
// itself with what it has reaped, so that a child reaped in between is
// counted twice rather than missed.
bool SampleServer(pid_t pid, uint64_t* ns) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return false;
  const std::string parent = std::to_string(pid);
  std::vector<std::string> fields;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long child = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || child == pid) continue;
    if (!StatFields(static_cast<pid_t>(child), &fields) || fields[1] != parent) continue;
    ProcessNs(static_cast<pid_t>(child), ns);  // gone meanwhile: its parent's cutime has it
  }
  closedir(proc);
  if (!StatFields(pid, &fields) || !ProcessNs(pid, ns)) return false;
  const long tick = sysconf(_SC_CLK_TCK);
  if (tick <= 0) return false;
  const uint64_t reaped = std::strtoull(fields[13].c_str(), nullptr, 10) +
                          std::strtoull(fields[14].c_str(), nullptr, 10);
  *ns += reaped * (1000000000ull / static_cast<uint64_t>(tick));
  return true;
}

uint64_t PeakKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  uint64_t kib = 0;
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), "VmHWM: %" SCNu64, &kib) == 1) return kib;
  }
  return 0;
}

bool SampleMachine(uint64_t* busy, uint64_t* total) {
  std::string line;
  if (!ReadFirstLine("/proc/stat", &line) || line.rfind("cpu ", 0) != 0) return false;
  std::istringstream in(line.substr(4));
  // user nice system idle iowait irq softirq steal
  uint64_t v[8] = {};
  for (uint64_t& x : v) {
    if (!(in >> x)) return false;
  }
  *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  *total = *busy + v[3] + v[4];
  return true;
}

}  // namespace

std::string FormatNumber(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

CpuSample SampleCpu(pid_t agent_pid, pid_t server_pid) {
  CpuSample sample;
  timespec self{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self) != 0) return sample;
  sample.self_ns =
      static_cast<uint64_t>(self.tv_sec) * 1000000000ull + static_cast<uint64_t>(self.tv_nsec);
  if (!SampleMachine(&sample.machine_busy, &sample.machine_total)) return sample;
  if (agent_pid > 0) {
    if (!SampleAgent(agent_pid, &sample.agent_ns, &sample.agent_slices, &sample.agent_wait_ns))
      return sample;
    sample.agent_peak_kib = PeakKiB(agent_pid);
  }
  if (server_pid > 0) {
    if (!SampleServer(server_pid, &sample.server_ns)) return sample;
    sample.server = true;
  }
  sample.ok = true;
  return sample;
}

CpuReport DescribeCpu(const CpuSample& start, const CpuSample& end, uint64_t requests) {
  CpuReport report;
  if (!start.ok || !end.ok || requests == 0) return report;
  const double per = 1e-3 / static_cast<double>(requests);  // ns -> us per request
  std::vector<std::pair<double, std::string>> threads;
  double agent = 0, io = 0;
  for (const auto& [name, ns] : end.agent_ns) {
    auto it = start.agent_ns.find(name);
    const uint64_t before = it == start.agent_ns.end() ? 0 : it->second;
    const double us = static_cast<double>(ns > before ? ns - before : 0) * per;
    agent += us;
    if (name == "intentd-io") io = us;
    threads.emplace_back(us, name);
  }
  std::sort(threads.rbegin(), threads.rend());
  const double loadgen = static_cast<double>(end.self_ns - start.self_ns) * per;
  const uint64_t total = end.machine_total - start.machine_total;
  const double busy =
      total == 0 ? 0 : 100.0 * static_cast<double>(end.machine_busy - start.machine_busy) / total;
  report.human = "  CPU per request (us):";
  if (!end.agent_ns.empty()) {
    report.human += " agent " + FormatNumber("%.1f", agent) + " (";
    for (size_t i = 0; i < threads.size() && i < 4; ++i) {
      report.human +=
          (i ? ", " : "") + threads[i].second + " " + FormatNumber("%.1f", threads[i].first);
    }
    const double switches = static_cast<double>(end.agent_slices > start.agent_slices
                                                    ? end.agent_slices - start.agent_slices
                                                    : 0) /
                            static_cast<double>(requests);
    const double waiting = static_cast<double>(end.agent_wait_ns > start.agent_wait_ns
                                                   ? end.agent_wait_ns - start.agent_wait_ns
                                                   : 0) *
                           per;
    report.human += "), " + FormatNumber("%.1f", switches) + " switches, " +
                    FormatNumber("%.1f", waiting) + " waiting,";
    report.fields = "agent_cpu_us=" + FormatNumber("%.1f", agent) +
                    " io_cpu_us=" + FormatNumber("%.1f", io) +
                    " agent_switches=" + FormatNumber("%.1f", switches) +
                    " agent_wait_us=" + FormatNumber("%.1f", waiting) + " ";
  }
  report.human += " loadgen " + FormatNumber("%.1f", loadgen);
  report.fields += "loadgen_cpu_us=" + FormatNumber("%.1f", loadgen);
  if (end.server) {
    const double server =
        static_cast<double>(end.server_ns > start.server_ns ? end.server_ns - start.server_ns : 0) *
        per;
    report.human += ", server " + FormatNumber("%.1f", server);
    report.fields += " server_cpu_us=" + FormatNumber("%.1f", server);
  }
  report.human += "; machine " + FormatNumber("%.0f", busy) + "% busy";
  report.fields += " busy_pct=" + FormatNumber("%.0f", busy);
  if (end.agent_peak_kib > 0) {
    const double mib = static_cast<double>(end.agent_peak_kib) / 1024;
    report.human += "; agent peak memory " + FormatNumber("%.1f", mib) + " MiB";
    report.fields += " agent_peak_mib=" + FormatNumber("%.1f", mib);
  }
  report.human += "\n";
  return report;
}

}  // namespace intentd::bench
