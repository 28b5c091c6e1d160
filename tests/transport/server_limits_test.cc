// Parallelism and limits: connections handled concurrently, connection
// limit, line timeout, backpressure, accept errors.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/transport_test_util.h"
#include "transport/server.h"

namespace intentd::transport {
namespace {

using std::chrono::milliseconds;
using testing::Client;
using testing::ErrorLine;
using testing::ServerTest;
using testing::WaitFor;

using ServerLimits = ServerTest;

// Calls block until `expected` of them are in progress at once (or 5 s).
struct Rendezvous {
  explicit Rendezvous(int expected) : expected(expected) {}
  std::string Arrive() {
    std::unique_lock<std::mutex> lock(mu);
    ++in_progress;
    peak = std::max(peak, in_progress);
    cv.notify_all();
    bool together = cv.wait_for(lock, std::chrono::seconds(5), [&] { return peak >= expected; });
    --in_progress;
    return together ? "together" : "alone";
  }
  const int expected;
  std::mutex mu;
  std::condition_variable cv;
  int in_progress = 0;
  int peak = 0;
};

TEST_F(ServerLimits, FiftyConnectionsAreHandledInParallel) {
  constexpr int kClients = 50;
  auto rendezvous = std::make_shared<Rendezvous>(kClients);
  handler_.on_line = [rendezvous](const PeerCredentials&, std::string_view) {
    return rendezvous->Arrive();
  };
  ServerOptions options = Options();
  options.worker_threads = 64;
  StartServer(options);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Client>(path()));
    ASSERT_TRUE(clients.back()->ok());
    ASSERT_TRUE(clients.back()->Send("go\n"));
  }
  for (auto& client : clients) {
    std::string line;
    ASSERT_TRUE(client->ReadLine(&line, milliseconds(8000)));
    EXPECT_EQ(line, "together");
  }
}

TEST_F(ServerLimits, LinesOfOneConnectionAreNeverHandledConcurrently) {
  auto state = std::make_shared<std::pair<std::atomic<int>, std::atomic<int>>>(0, 0);
  handler_.on_line = [state](const PeerCredentials&, std::string_view line) {
    int now = ++state->first;
    int peak = state->second.load();
    while (now > peak && !state->second.compare_exchange_weak(peak, now)) {
    }
    std::this_thread::yield();
    --state->first;
    return std::string(line);
  };
  ServerOptions options = Options();
  options.worker_threads = 16;
  StartServer(options);
  Client client(path());
  std::string batch;
  for (int i = 0; i < 300; ++i) batch += std::to_string(i) + "\n";
  ASSERT_TRUE(client.Send(batch));
  for (int i = 0; i < 300; ++i) {
    std::string line;
    ASSERT_TRUE(client.ReadLine(&line));
    ASSERT_EQ(line, std::to_string(i));
  }
  EXPECT_EQ(state->second.load(), 1);
}

TEST_F(ServerLimits, ConnectionOverTheLimitGetsOverloadedAndOthersKeepWorking) {
  ServerOptions options = Options();
  options.max_connections = 2;
  StartServer(options);
  Client a(path()), b(path());
  std::string line;
  ASSERT_TRUE(a.Send("a\n") && a.ReadLine(&line));
  ASSERT_TRUE(b.Send("b\n") && b.ReadLine(&line));

  Client over(path());
  ASSERT_TRUE(over.ok());
  ASSERT_TRUE(over.ReadLine(&line));
  EXPECT_EQ(line, ErrorLine(TransportError::kOverloaded));
  EXPECT_TRUE(over.ReadEof());

  ASSERT_TRUE(a.Send("still\n") && a.ReadLine(&line));
  EXPECT_EQ(line, "STILL");
  ASSERT_TRUE(b.Send("here\n") && b.ReadLine(&line));
  EXPECT_EQ(line, "HERE");
  EXPECT_EQ(server_->connection_count(), 2u);

  a.Close();  // frees a slot
  ASSERT_TRUE(WaitFor([&] { return server_->connection_count() == 1; }));
  Client c(path());
  ASSERT_TRUE(c.Send("c\n") && c.ReadLine(&line));
  EXPECT_EQ(line, "C");
}

TEST_F(ServerLimits, UnfinishedLineIsDroppedAfterTheTimeoutButIdleConnectionsStay) {
  ServerOptions options = Options();
  options.line_timeout = milliseconds(200);
  StartServer(options);
  Client idle(path());
  Client slow(path());
  std::string line;
  // (The clock starts before the send: the server's timer cannot start earlier.)
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.Send("done\n{\"op\":") && slow.ReadLine(&line));
  EXPECT_TRUE(slow.ReadEof(milliseconds(3000)));
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(200));
  EXPECT_TRUE(log_.Contains("not completed within 200 ms")) << log_.All();

  // The idle connection outlived the timeout and is still served.
  ASSERT_TRUE(idle.Send("x\n") && idle.ReadLine(&line));
  EXPECT_EQ(line, "X");
}

TEST_F(ServerLimits, EachLineGetsItsOwnTimeout) {
  ServerOptions options = Options();
  options.line_timeout = milliseconds(200);
  StartServer(options);
  Client client(path());
  std::string line;
  // Four lines, each taking ~120 ms to arrive in two pieces: 480 ms in all,
  // but no single line is slower than the timeout.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(client.Send("part"));
    std::this_thread::sleep_for(milliseconds(120));
    ASSERT_TRUE(client.Send(std::to_string(i) + "\n"));
    ASSERT_TRUE(client.ReadLine(&line)) << i;
    EXPECT_EQ(line, "PART" + std::to_string(i));
  }
}

TEST_F(ServerLimits, ClientThatNeverReadsCannotMakeTheServerBufferWithoutBound) {
  const std::string response(16 * 1024, 'r');
  handler_.on_line = [response](const PeerCredentials&, std::string_view) { return response; };
  ServerOptions options = Options();
  options.max_pending_lines = 4;
  options.max_pending_output_bytes = 64 * 1024;
  StartServer(options);
  Client client(path());
  constexpr int kLines = 500;
  std::string batch;
  for (int i = 0; i < kLines; ++i) batch += "q\n";
  ASSERT_TRUE(client.Send(batch));

  // Wait until the server stops handling lines (its buffers are full).
  int previous = -1;
  for (int i = 0; i < 50 && handler_.calls.load() != previous; ++i) {
    previous = handler_.calls.load();
    std::this_thread::sleep_for(milliseconds(100));
  }
  const int handled = handler_.calls.load();
  RecordProperty("handled_while_not_reading", handled);
  // What the kernel socket buffer holds (~13 responses) + the output limit
  // (4) + the pending-lines limit (4): far below the 500 sent.
  EXPECT_LT(handled, 60);
  EXPECT_GT(handled, 0);

  // Reading resumes the connection: every response arrives, in order.
  std::string line;
  for (int i = 0; i < kLines; ++i) {
    ASSERT_TRUE(client.ReadLine(&line)) << i;
    ASSERT_EQ(line.size(), response.size());
  }
  EXPECT_EQ(handler_.calls.load(), kLines);
}

int HighestOpenFd() {
  int highest = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* entry = readdir(dir)) highest = std::max(highest, std::atoi(entry->d_name));
  closedir(dir);
  return highest;
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

TEST_F(ServerLimits, AcceptFailingWithEmfileBacksOffAndRecovers) {
  StartServer(Options());
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);

  // Exhaust this process's descriptors, so the server's accept gets EMFILE.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = HighestOpenFd() + 8;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);

  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path().c_str(), sizeof(address.sun_path) - 1);
  int connected = connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  bool logged = WaitFor([&] { return log_.Contains("accept failed"); }, milliseconds(2000));
  const double cpu_before = CpuSeconds();
  std::this_thread::sleep_for(milliseconds(300));
  const double cpu_used = CpuSeconds() - cpu_before;

  for (int fd : fillers) close(fd);
  setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_EQ(connected, 0);
  EXPECT_TRUE(logged) << log_.All();
  EXPECT_LT(cpu_used, 0.05) << "the accept loop spins";

  // Once descriptors are free again the waiting connection is served.
  const char request[] = "back\n";
  ASSERT_EQ(send(client, request, 5, MSG_NOSIGNAL), 5);
  char reply[16] = {};
  ASSERT_TRUE(WaitFor([&] { return recv(client, reply, sizeof(reply), MSG_DONTWAIT) == 5; }));
  EXPECT_EQ(std::string(reply, 5), "BACK\n");
  close(client);
}

}  // namespace
}  // namespace intentd::transport
