#include "transport/line_framer.h"

#include <cstring>

namespace intentd::transport {

LineFramer::LineFramer(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

char* LineFramer::PrepareWrite(size_t* size) {
  if (start_ == end_) {
    start_ = scan_ = end_ = 0;
    // A long line grew the buffer; give the memory back once it is consumed.
    if (buffer_.size() > kInitialSize) std::vector<char>().swap(buffer_);
  }
  if (buffer_.empty()) buffer_.resize(kInitialSize);
  if (buffer_.size() - end_ < kMinWrite && start_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + start_, end_ - start_);
    end_ -= start_;
    scan_ -= start_;
    start_ = 0;
  }
  if (buffer_.size() - end_ < kMinWrite) buffer_.resize(buffer_.size() * 2);
  *size = buffer_.size() - end_;
  return buffer_.data() + end_;
}

void LineFramer::Commit(size_t n) {
  end_ += n;
  committed_ += n;
}

LineFramer::Next LineFramer::NextLine(std::string* line) {
  if (spent_) return Next::kFrameTooLarge;
  const char* base = buffer_.data();
  const void* newline = scan_ < end_ ? std::memchr(base + scan_, '\n', end_ - scan_) : nullptr;
  if (newline == nullptr) {
    scan_ = end_;
    if (end_ - start_ > max_frame_bytes_) {
      spent_ = true;
      return Next::kFrameTooLarge;
    }
    return Next::kNeedMore;
  }
  size_t stop = static_cast<const char*>(newline) - base;
  if (stop - start_ > max_frame_bytes_) {
    spent_ = true;
    return Next::kFrameTooLarge;
  }
  size_t length = stop - start_;
  if (length > 0 && base[stop - 1] == '\r') --length;
  line->assign(base + start_, length);
  consumed_ += stop + 1 - start_;
  start_ = scan_ = stop + 1;
  ++lines_returned_;
  return Next::kLine;
}

}  // namespace intentd::transport
