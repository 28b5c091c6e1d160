// CPU time spent during the measurement window, per thread name of the
// spawned agent, by the load generator itself and by the whole machine.
// Throughput on a shared 2-core VM swings with its neighbours; CPU time per
// request moves much less, so it is what an optimisation is judged by.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace intentd::bench {

struct CpuSample {
  bool ok = false;
  // Nanoseconds on a CPU so far, per thread name (threads of one name
  // added up), from /proc/PID/task/TID/schedstat. Threads that ended
  // before the sample are missing (the agent's threads live all run long).
  std::map<std::string, uint64_t> agent_ns;
  // Times the agent's threads were put on a CPU so far (schedstat's third
  // field, all threads added up): each is a wake-up or a preemption, which
  // on this project's paravirtualized machines costs more than most of the
  // request's own work (perf record of the agent: 42% of its samples in
  // pvm_irq_enable, under task switches and wake-ups).
  uint64_t agent_slices = 0;
  // Nanoseconds the agent's threads spent runnable but waiting for a CPU
  // (schedstat's second field, added up): what each hand-off costs in
  // latency on a machine whose cores are busy.
  uint64_t agent_wait_ns = 0;
  // The agent's peak resident memory so far (VmHWM of /proc/PID/status),
  // KiB; 0 when there is no agent or it could not be read.
  uint64_t agent_peak_kib = 0;
  // The server's CPU so far, when a server process was named: its threads,
  // its living children's threads, and the children it has reaped (with
  // theirs), in nanoseconds (see SampleCpu).
  bool server = false;
  uint64_t server_ns = 0;
  uint64_t self_ns = 0;  // this process (CLOCK_PROCESS_CPUTIME_ID)
  // Machine-wide jiffies from /proc/stat: busy (user, nice, system, irq,
  // softirq, steal) and all of them.
  uint64_t machine_busy = 0;
  uint64_t machine_total = 0;
};

// agent_pid <= 0: no agent (only the loadgen and the machine are sampled).
// server_pid > 0: also the server whose requests the run measures
// (PostgreSQL's postmaster, redis-server, an intentd started elsewhere), as
// one process tree: a PostgreSQL session is a child process that ends with
// its connection, and an ended child's CPU is still counted once its parent
// has reaped it (the parent's cutime and cstime, which include what the
// child had reaped in turn; in scheduler ticks). Living grandchildren are
// not counted (neither server has any). A child that ends at the moment of
// a sample may be counted twice by it (its threads, then its parent's
// cutime): the window opens and closes while the measured connections are
// open, so only the server's own short-lived workers (autovacuum) can.
CpuSample SampleCpu(pid_t agent_pid, pid_t server_pid = 0);

// "CPU per request (us): agent 61.2 (intentd-io 40.1, intentd 17.0, ...),
// 2.1 switches, 80.3 waiting, loadgen 14.3; machine 83% busy; agent peak
// memory 52.1 MiB" and the RESULT fields "agent_cpu_us=... io_cpu_us=...
// agent_switches=... agent_wait_us=... loadgen_cpu_us=... busy_pct=...
// agent_peak_mib=..." and, with a server, ", server 250.1" after the
// loadgen's figure and "server_cpu_us=..." (the peak as of the end sample; switches: the agent's
// times on a CPU per request; waiting: its threads' time runnable without a
// CPU, per request).
// Empty when either sample failed or nothing was requested.
struct CpuReport {
  std::string human;
  std::string fields;
};
CpuReport DescribeCpu(const CpuSample& start, const CpuSample& end, uint64_t requests);

// `value` printed with a printf `format` of one double ("%.1f"): the
// reports' numbers.
std::string FormatNumber(const char* format, double value);

}  // namespace intentd::bench
