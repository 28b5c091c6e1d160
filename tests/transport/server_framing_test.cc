// Lines in, responses out: order, pipelining, frame limit, odd bytes,
// half-close, clients that vanish mid-response.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "tests/transport/transport_test_util.h"
#include "transport/server.h"

namespace intentd::transport {
namespace {

using testing::Client;
using testing::ErrorLine;
using testing::ServerTest;

using ServerFraming = ServerTest;

TEST_F(ServerFraming, AnswersOneLine) {
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send("{\"op\":\"ping\"}\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "{\"OP\":\"PING\"}");
}

TEST_F(ServerFraming, PipelinedThousandLinesAreAnsweredInOrder) {
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.ok());
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += "line-" + std::to_string(i) + "\n";
  ASSERT_TRUE(client.Send(batch));  // all before reading any response
  for (int i = 0; i < 1000; ++i) {
    std::string line;
    ASSERT_TRUE(client.ReadLine(&line)) << i;
    ASSERT_EQ(line, "LINE-" + std::to_string(i));
  }
  EXPECT_EQ(handler_.calls.load(), 1000);
}

TEST_F(ServerFraming, CarriageReturnBeforeNewlineIsStripped) {
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("abc\r\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "ABC");
}

TEST_F(ServerFraming, EmptyLinesReachTheHandler) {
  handler_.on_line = [](const PeerCredentials&, std::string_view line) {
    return "len=" + std::to_string(line.size());
  };
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("\n\r\nx\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "len=0");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "len=0");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "len=1");
}

TEST_F(ServerFraming, ArbitraryBytesArePassedThroughUnchanged) {
  // Captured by value: the server may outlive this scope on a failed ASSERT.
  auto seen = std::make_shared<std::string>();
  handler_.on_line = [seen](const PeerCredentials&, std::string_view line) {
    seen->assign(line);
    return std::string("ok");
  };
  StartServer(Options());
  Client client(path());
  const std::string bytes("\x00\xff\xc3\x28{\"a\":\x01}", 10);
  ASSERT_TRUE(client.Send(bytes + "\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "ok");
  EXPECT_EQ(*seen, bytes);
}

TEST_F(ServerFraming, LineOverTheLimitGetsFrameTooLargeThenEof) {
  StartServer(Options());  // 65536
  Client client(path());
  ASSERT_TRUE(client.Send("before\n" + std::string(70 * 1024, 'x') + "\nafter\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "BEFORE");  // lines before the bad one are still answered
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, ErrorLine(TransportError::kFrameTooLarge));
  EXPECT_TRUE(client.ReadEof());
  EXPECT_EQ(handler_.calls.load(), 1);
}

TEST_F(ServerFraming, EndlessLineIsCutOffWithoutBufferingIt) {
  StartServer(Options());
  Client client(path());
  // Far more than the limit and never a newline: the server must answer
  // while the client is still sending, not wait for the end of the line.
  std::string chunk(64 * 1024, 'y');
  for (int i = 0; i < 160; ++i) {    // up to 10 MB
    if (!client.Send(chunk)) break;  // EPIPE once the server has closed
  }
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, ErrorLine(TransportError::kFrameTooLarge));
  EXPECT_EQ(handler_.calls.load(), 0);
}

TEST_F(ServerFraming, LineExactlyAtTheLimitIsAnswered) {
  ServerOptions options = Options();
  options.max_frame_bytes = 65536;
  StartServer(options);
  Client client(path());
  ASSERT_TRUE(client.Send(std::string(65536, 'a') + "\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, std::string(65536, 'A'));
  ASSERT_TRUE(client.Send("next\n"));  // the connection goes on
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "NEXT");
}

TEST_F(ServerFraming, HalfCloseAnswersEverythingThenCloses) {
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("a\nb\nc\npartial-without-newline"));
  client.ShutdownWrite();
  std::string line;
  for (const char* expected : {"A", "B", "C"}) {
    ASSERT_TRUE(client.ReadLine(&line));
    EXPECT_EQ(line, expected);
  }
  EXPECT_TRUE(client.ReadEof());
  EXPECT_TRUE(testing::WaitFor([&] { return server_->connection_count() == 0; }));
}

TEST_F(ServerFraming, ClientClosingMidResponseDoesNotHurtTheServer) {
  auto big = std::make_shared<const std::string>(1 << 20, 'r');  // > a socket buffer
  handler_.on_line = [big](const PeerCredentials&, std::string_view line) {
    return line == "big" ? *big : std::string(line);
  };
  StartServer(Options());
  for (int i = 0; i < 20; ++i) {
    Client client(path());
    ASSERT_TRUE(client.Send("big\nbig\nbig\n"));
    std::string line;
    client.ReadLine(&line, std::chrono::milliseconds(1));  // read a little, then vanish
    client.Close();
  }
  // Still alive (SIGPIPE would have killed this process) and serving.
  Client client(path());
  ASSERT_TRUE(client.Send("small\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "small");
  EXPECT_TRUE(testing::WaitFor([&] { return server_->connection_count() == 1; }));
}

TEST_F(ServerFraming, ConnectionCallbacksAndCounters) {
  StartServer(Options());
  {
    Client a(path());
    Client b(path());
    std::string line;
    ASSERT_TRUE(a.Send("x\n") && a.ReadLine(&line));
    ASSERT_TRUE(b.Send("x\n") && b.ReadLine(&line));
    EXPECT_EQ(server_->connection_count(), 2u);
    EXPECT_EQ(handler_.opened.load(), 2);
  }
  EXPECT_TRUE(testing::WaitFor([&] { return handler_.closed.load() == 2; }));
  EXPECT_EQ(server_->connection_count(), 0u);
  EXPECT_EQ(server_->connections_total(), 2u);
}

TEST_F(ServerFraming, PeerCredentialsAreThoseOfTheClientProcess) {
  auto seen = std::make_shared<PeerCredentials>();
  handler_.on_line = [seen](const PeerCredentials& peer, std::string_view) {
    *seen = peer;
    return std::string("ok");
  };
  StartServer(Options());
  Client client(path());
  std::string line;
  ASSERT_TRUE(client.Send("who\n") && client.ReadLine(&line));
  EXPECT_EQ(seen->pid, getpid());
  EXPECT_EQ(seen->uid, getuid());
  EXPECT_EQ(seen->gid, getgid());
  EXPECT_NE(std::find(seen->groups.begin(), seen->groups.end(), getgid()), seen->groups.end());
}

}  // namespace
}  // namespace intentd::transport
