#include "transport/line_framer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace intentd::transport {
namespace {

// Feeds `data` in chunks of `chunk` bytes and collects lines until the
// framer needs more or reports a frame error.
struct Fed {
  std::vector<std::string> lines;
  bool too_large = false;
};

Fed Feed(LineFramer* framer, const std::string& data, size_t chunk = 1 << 20) {
  Fed fed;
  size_t offset = 0;
  while (offset < data.size() && !fed.too_large) {
    size_t space = 0;
    char* out = framer->PrepareWrite(&space);
    size_t n = std::min({space, chunk, data.size() - offset});
    std::memcpy(out, data.data() + offset, n);
    framer->Commit(n);
    offset += n;
    std::string line;
    for (;;) {
      LineFramer::Next next = framer->NextLine(&line);
      if (next == LineFramer::Next::kLine) {
        fed.lines.push_back(line);
      } else {
        fed.too_large = next == LineFramer::Next::kFrameTooLarge;
        break;
      }
    }
  }
  return fed;
}

TEST(LineFramer, SplitsLinesAndStripsOneCarriageReturn) {
  LineFramer framer(100);
  Fed fed = Feed(&framer, "a\nbc\r\n\n\r\r\nlast");
  EXPECT_EQ(fed.lines, (std::vector<std::string>{"a", "bc", "", "\r"}));
  EXPECT_FALSE(fed.too_large);
  EXPECT_TRUE(framer.has_buffered());  // "last" waits for its '\n'
  EXPECT_EQ(framer.lines_returned(), 4u);
}

TEST(LineFramer, TracksStreamOffsetsOfCommittedAndConsumedBytes) {
  LineFramer framer(100);
  Fed fed = Feed(&framer, "ab\r\ncd\nef");
  EXPECT_EQ(fed.lines.size(), 2u);
  EXPECT_EQ(framer.committed(), 9u);
  EXPECT_EQ(framer.consumed(), 7u);  // "ab\r\n" and "cd\n"
  Feed(&framer, "\n");
  EXPECT_EQ(framer.committed(), 10u);
  EXPECT_EQ(framer.consumed(), 10u);
}

TEST(LineFramer, JoinsALineSplitAcrossReads) {
  LineFramer framer(100);
  Fed fed = Feed(&framer, "hello world\nsecond\n", 3);
  EXPECT_EQ(fed.lines, (std::vector<std::string>{"hello world", "second"}));
  EXPECT_FALSE(framer.has_buffered());
}

TEST(LineFramer, PassesArbitraryBytesThrough) {
  LineFramer framer(100);
  std::string bytes("\x00\xff\xfe{\"a\":1}\x80", 11);
  Fed fed = Feed(&framer, bytes + "\n");
  ASSERT_EQ(fed.lines.size(), 1u);
  EXPECT_EQ(fed.lines[0], bytes);
}

TEST(LineFramer, LineExactlyAtTheLimitIsAccepted) {
  LineFramer framer(10);
  Fed fed = Feed(&framer, std::string(10, 'x') + "\n" + std::string(9, 'y') + "\r\n", 4);
  EXPECT_EQ(fed.lines, (std::vector<std::string>{std::string(10, 'x'), std::string(9, 'y')}));
  EXPECT_FALSE(fed.too_large);
}

TEST(LineFramer, CarriageReturnCountsTowardsTheLimit) {
  LineFramer framer(10);
  Fed fed = Feed(&framer, std::string(10, 'x') + "\r\n");
  EXPECT_TRUE(fed.lines.empty());
  EXPECT_TRUE(fed.too_large);
}

TEST(LineFramer, CompleteLineOverTheLimitIsTooLarge) {
  LineFramer framer(10);
  Fed fed = Feed(&framer, "ok\n" + std::string(11, 'x') + "\nnever\n");
  EXPECT_EQ(fed.lines, (std::vector<std::string>{"ok"}));
  EXPECT_TRUE(fed.too_large);
  std::string line;
  EXPECT_EQ(framer.NextLine(&line), LineFramer::Next::kFrameTooLarge);  // spent
}

TEST(LineFramer, PartialLineOverTheLimitIsDetectedBeforeItsEnd) {
  LineFramer framer(1000);
  LineFramer::Next next = LineFramer::Next::kNeedMore;
  size_t fed = 0;
  std::string line;
  // 10 MB without a newline: the framer must give up right after 1000 bytes.
  while (fed < (10u << 20) && next == LineFramer::Next::kNeedMore) {
    size_t space = 0;
    char* out = framer.PrepareWrite(&space);
    std::memset(out, 'x', space);
    framer.Commit(space);
    fed += space;
    next = framer.NextLine(&line);
  }
  EXPECT_EQ(next, LineFramer::Next::kFrameTooLarge);
  EXPECT_LT(fed, 64u * 1024);
}

TEST(LineFramer, LongLinesWithinTheLimitGrowTheBufferAndWork) {
  LineFramer framer(65536);
  std::string big(65536, 'z');
  Fed fed = Feed(&framer, "a\n" + big + "\nb\n", 5000);
  EXPECT_EQ(fed.lines, (std::vector<std::string>{"a", big, "b"}));
  EXPECT_FALSE(fed.too_large);
}

TEST(LineFramer, ManyLinesInOneReadCanBePulledOneAtATime) {
  LineFramer framer(100);
  std::string data;
  for (int i = 0; i < 1000; ++i) data += std::to_string(i) + "\n";
  size_t offset = 0;
  std::vector<std::string> lines;
  std::string line;
  while (offset < data.size()) {
    size_t space = 0;
    char* out = framer.PrepareWrite(&space);
    size_t n = std::min(space, data.size() - offset);
    std::memcpy(out, data.data() + offset, n);
    framer.Commit(n);
    offset += n;
    // Pull only two lines per read: the rest stays buffered (backpressure).
    for (int k = 0; k < 2 && framer.NextLine(&line) == LineFramer::Next::kLine; ++k) {
      lines.push_back(line);
    }
  }
  while (framer.NextLine(&line) == LineFramer::Next::kLine) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(lines[i], std::to_string(i));
}

}  // namespace
}  // namespace intentd::transport
