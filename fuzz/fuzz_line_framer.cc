// transport::LineFramer against a plain split of the stream. Input: bytes 0-1
// give max_frame_bytes (1..4096), byte 2 the size of the chunks the stream is
// fed in (1..256, varied per chunk), the rest is the stream.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transport/line_framer.h"

using intentd::transport::LineFramer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t limit = 1 + ((static_cast<size_t>(data[0]) << 8 | data[1]) % 4096);
  const size_t chunk_seed = data[2];
  const std::string stream(reinterpret_cast<const char*>(data) + 3, size - 3);

  // Expected: every complete line up to the first one that is too long, then
  // kFrameTooLarge if a line (complete or not) exceeds the limit.
  std::vector<std::string> want;
  bool want_too_large = false;
  size_t pos = 0;
  for (;;) {
    const size_t nl = stream.find('\n', pos);
    const size_t len = (nl == std::string::npos ? stream.size() : nl) - pos;
    if (len > limit) {
      want_too_large = true;
      break;
    }
    if (nl == std::string::npos) break;
    std::string line = stream.substr(pos, len);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    want.push_back(line);
    pos = nl + 1;
  }

  LineFramer framer(limit);
  std::vector<std::string> got;
  bool too_large = false;
  size_t fed = 0, chunk_index = 0;
  while (!too_large) {
    std::string line;
    LineFramer::Next next = framer.NextLine(&line);
    if (next == LineFramer::Next::kLine) {
      got.push_back(line);
      continue;
    }
    if (next == LineFramer::Next::kFrameTooLarge) {
      too_large = true;
      break;
    }
    if (fed == stream.size()) break;
    size_t space = 0;
    char* dst = framer.PrepareWrite(&space);
    if (space < 1024) std::abort();  // "at least a few KiB"
    size_t n = 1 + (chunk_seed * 31 + chunk_index++ * 17) % 256;
    n = std::min({n, space, stream.size() - fed});
    std::memcpy(dst, stream.data() + fed, n);
    framer.Commit(n);
    fed += n;
    if (framer.committed() != fed) std::abort();
  }
  if (got != want || too_large != want_too_large) {
    std::fprintf(stderr, "framer: %zu lines%s, expected %zu lines%s (limit %zu)\n", got.size(),
                 too_large ? " then frame_too_large" : "", want.size(),
                 want_too_large ? " then frame_too_large" : "", limit);
    std::abort();
  }
  if (!too_large && framer.lines_returned() != got.size()) std::abort();
  return 0;
}
