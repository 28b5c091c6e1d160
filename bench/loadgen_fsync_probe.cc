#include "bench/loadgen_fsync_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace intentd::bench {

bool ProbeFsync(const std::string& directory, double seconds, int record_bytes, bool busy_cpu,
                FsyncProbeResult* result, std::string* error) {
  using Clock = std::chrono::steady_clock;
  std::string path = directory + "/fsync-probe.XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) {
    *error = "cannot create a file in " + directory + ": " + std::strerror(errno);
    return false;
  }
  std::atomic<bool> stop{false};
  std::thread spinner;
  if (busy_cpu) {
    spinner = std::thread([&stop] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  }
  const std::string record(static_cast<size_t>(record_bytes), 'r');
  std::vector<double> latencies_us;
  const auto start = Clock::now();
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  bool ok = true;
  for (auto now = start; now < end;) {
    if (write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        fdatasync(fd) != 0) {
      *error = std::string("write/fdatasync: ") + std::strerror(errno);
      ok = false;
      break;
    }
    const auto done = Clock::now();
    latencies_us.push_back(std::chrono::duration<double, std::micro>(done - now).count());
    now = done;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  if (spinner.joinable()) spinner.join();
  close(fd);
  unlink(path.c_str());
  if (!ok) return false;
  std::sort(latencies_us.begin(), latencies_us.end());
  result->per_second = static_cast<double>(latencies_us.size()) / elapsed;
  if (!latencies_us.empty()) {
    result->p50_us = latencies_us[latencies_us.size() / 2];
    result->p99_us =
        latencies_us[std::min(latencies_us.size() - 1, latencies_us.size() * 99 / 100)];
  }
  return true;
}

}  // namespace intentd::bench
