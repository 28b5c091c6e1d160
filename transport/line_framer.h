// Splits a byte stream into '\n'-terminated lines with a frame limit. Pure:
// no I/O, no clock, no threads; the connection reads into WriteSpace() and
// pulls lines one at a time, so it can stop pulling (backpressure) and leave
// the rest buffered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace intentd::transport {

class LineFramer {
 public:
  enum class Next {
    kLine,           // *line holds the next line
    kNeedMore,       // no complete line buffered; read more
    kFrameTooLarge,  // the next line exceeds the limit; the framer is spent
  };

  // `max_frame_bytes` counts the bytes before '\n' (a '\r' before it included).
  explicit LineFramer(size_t max_frame_bytes);

  LineFramer(const LineFramer&) = delete;
  LineFramer& operator=(const LineFramer&) = delete;

  // Free space at the end of the buffer to read into (*size: at least a few
  // KiB); then Commit the number of bytes written there.
  char* PrepareWrite(size_t* size);
  void Commit(size_t n);

  // The next complete line, without its '\n' and one trailing '\r'. Reports
  // kFrameTooLarge as soon as more than max_frame_bytes are buffered without a
  // '\n', so a 10 MB line costs at most one limit's worth of memory.
  Next NextLine(std::string* line);

  // Bytes buffered that NextLine has not returned (a partial line, or whole
  // lines not yet pulled).
  bool has_buffered() const { return end_ > start_; }
  // Number of lines returned so far: tells a new partial line from an old one.
  uint64_t lines_returned() const { return lines_returned_; }
  // Stream offsets: bytes committed so far, and the end (after its '\n') of
  // the last line returned. A line returned with consumed() <= an earlier
  // committed() had fully arrived by then.
  uint64_t committed() const { return committed_; }
  uint64_t consumed() const { return consumed_; }

 private:
  static constexpr size_t kInitialSize = 16 * 1024;
  static constexpr size_t kMinWrite = 4 * 1024;

  size_t max_frame_bytes_;
  std::vector<char> buffer_;
  size_t start_ = 0;  // first byte not yet returned
  size_t scan_ = 0;   // bytes in [start_, scan_) hold no '\n'
  size_t end_ = 0;    // end of data
  uint64_t lines_returned_ = 0;
  uint64_t committed_ = 0;
  uint64_t consumed_ = 0;
  bool spent_ = false;
};

}  // namespace intentd::transport
