// Graceful stop: drain, deadline, idempotence, socket file removal.
#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tests/transport/transport_test_util.h"
#include "transport/server.h"

namespace intentd::transport {
namespace {

using std::chrono::milliseconds;
using testing::Client;
using testing::ErrorLine;
using testing::ServerTest;
using testing::WaitFor;

using ServerStop = ServerTest;

// Lines "slow" block until Open() is called.
struct Gate {
  std::string Pass(std::string_view line) {
    std::unique_lock<std::mutex> lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
    return "done:" + std::string(line);
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return entered >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  int entered = 0;
  bool open = false;
};

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// Bytes this client sent that the server has not read yet.
int Unread(const Client& client) {
  int queued = -1;
  ioctl(client.fd(), SIOCOUTQ, &queued);
  return queued;
}

TEST_F(ServerStop, LineInProgressIsAnsweredAndLaterLinesGetShuttingDown) {
  auto gate = std::make_shared<Gate>();
  handler_.on_line = [gate](const PeerCredentials&, std::string_view line) {
    return gate->Pass(line);
  };
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("first\n"));
  ASSERT_TRUE(gate->WaitEntered(1));

  std::thread stopper([&] { server_->Stop(milliseconds(5000)); });
  // Stop began once new connections are refused.
  ASSERT_TRUE(WaitFor([&] { return !Client(path()).ok(); }));
  ASSERT_TRUE(client.Send("late\n"));
  ASSERT_TRUE(WaitFor([&] { return Unread(client) == 0; }));  // the server read it
  gate->Open();

  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "done:first");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, ErrorLine(TransportError::kShuttingDown));
  EXPECT_TRUE(client.ReadEof());
  stopper.join();
  EXPECT_EQ(handler_.calls.load(), 1);
  EXPECT_FALSE(Exists(path()));
}

TEST_F(ServerStop, PipelinedLinesReadBeforeStopAreAllAnswered) {
  auto gate = std::make_shared<Gate>();
  handler_.on_line = [gate](const PeerCredentials&, std::string_view line) {
    return gate->Pass(line);
  };
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("1\n2\n3\n"));
  ASSERT_TRUE(gate->WaitEntered(1));
  ASSERT_TRUE(WaitFor([&] { return Unread(client) == 0; }));
  std::thread stopper([&] { server_->Stop(milliseconds(5000)); });
  ASSERT_TRUE(WaitFor([&] { return !Client(path()).ok(); }));
  gate->Open();
  std::string line;
  for (const char* expected : {"done:1", "done:2", "done:3"}) {
    ASSERT_TRUE(client.ReadLine(&line));
    EXPECT_EQ(line, expected);
  }
  EXPECT_TRUE(client.ReadEof());
  stopper.join();
}

TEST_F(ServerStop, LinesHeldBackByBackpressureBeforeStopAreAnswered) {
  auto gate = std::make_shared<Gate>();
  handler_.on_line = [gate](const PeerCredentials&, std::string_view line) {
    return gate->Pass(line);
  };
  ServerOptions options = Options();
  options.max_pending_lines = 2;  // the server takes up 2, holds back 4
  StartServer(options);
  Client client(path());
  ASSERT_TRUE(client.Send("1\n2\n3\n4\n5\n6\n"));
  ASSERT_TRUE(gate->WaitEntered(1));
  ASSERT_TRUE(WaitFor([&] { return Unread(client) == 0; }));
  std::thread stopper([&] { server_->Stop(milliseconds(5000)); });
  ASSERT_TRUE(WaitFor([&] { return !Client(path()).ok(); }));
  gate->Open();
  std::string line;
  for (int i = 1; i <= 6; ++i) {
    ASSERT_TRUE(client.ReadLine(&line));
    EXPECT_EQ(line, "done:" + std::to_string(i));
  }
  EXPECT_TRUE(client.ReadEof());
  stopper.join();
  EXPECT_EQ(handler_.calls.load(), 6);
}

TEST_F(ServerStop, IdleConnectionsAreClosedAtOnce) {
  StartServer(Options());
  Client a(path()), b(path());
  std::string line;
  ASSERT_TRUE(a.Send("x\n") && a.ReadLine(&line));
  ASSERT_TRUE(WaitFor([&] { return server_->connection_count() == 2; }));
  const auto started = std::chrono::steady_clock::now();
  server_->Stop(milliseconds(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(1000));
  EXPECT_TRUE(a.ReadEof());
  EXPECT_TRUE(b.ReadEof());
  EXPECT_EQ(handler_.closed.load(), 2);
}

TEST_F(ServerStop, ReturnsByTheDeadlineWhenAClientDoesNotRead) {
  const std::string big(1 << 20, 'b');
  handler_.on_line = [big](const PeerCredentials&, std::string_view) { return big; };
  StartServer(Options());
  Client client(path());
  ASSERT_TRUE(client.Send("1\n2\n3\n4\n"));
  ASSERT_TRUE(WaitFor([&] { return handler_.calls.load() >= 1; }));
  const auto started = std::chrono::steady_clock::now();
  server_->Stop(milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_GE(took, milliseconds(250));  // it did wait for the drain
  EXPECT_LT(took, milliseconds(1500));
  EXPECT_EQ(server_->connection_count(), 0u);
  EXPECT_FALSE(Exists(path()));
}

TEST_F(ServerStop, StopTwiceAndDestroyAreSafe) {
  StartServer(Options());
  ASSERT_TRUE(Exists(path()));
  server_->Stop(milliseconds(100));
  server_->Stop(milliseconds(100));
  EXPECT_FALSE(Exists(path()));
  server_.reset();
}

TEST_F(ServerStop, DestructorStopsARunningServer) {
  StartServer(Options());
  Client client(path());
  std::string line;
  ASSERT_TRUE(client.Send("x\n") && client.ReadLine(&line));
  server_.reset();
  EXPECT_TRUE(client.ReadEof());
  EXPECT_FALSE(Exists(path()));
}

TEST_F(ServerStop, NeverRemovesASocketFileThatIsNotItsOwn) {
  StartServer(Options());
  // Someone replaced our socket file (e.g. a successor after a takeover).
  ASSERT_EQ(unlink(path().c_str()), 0);
  ASSERT_TRUE(testing::MakeStaleSocket(path()));
  server_->Stop(milliseconds(100));
  EXPECT_TRUE(Exists(path()));
}

}  // namespace
}  // namespace intentd::transport
