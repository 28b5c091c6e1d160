// The disk's flush rate: how many write+fdatasync rounds per second a single
// thread gets on a file in a given directory. Durable systems cannot commit
// groups faster than this, so every durable figure should be read against it.
#pragma once

#include <string>

namespace intentd::bench {

struct FsyncProbeResult {
  double per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// Appends `record_bytes` and fdatasyncs, in a loop, for `seconds`, on a
// temporary file in `directory` (removed afterwards). With `busy_cpu`, a
// second thread spins meanwhile: on some virtual machines an idle vCPU makes
// every flush completion slow, and a loaded server never idles. False with
// *error filled when the file cannot be written.
bool ProbeFsync(const std::string& directory, double seconds, int record_bytes, bool busy_cpu,
                FsyncProbeResult* result, std::string* error);

}  // namespace intentd::bench
