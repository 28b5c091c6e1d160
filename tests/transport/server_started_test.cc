// Replies that another thread gives later (Reply::start): answered from that
// thread in the connection's order, the connection's next line handled only
// after, a started reply that defers to a worker, and Stop waiting for them.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/transport_test_util.h"
#include "transport/server.h"

namespace intentd::transport {
namespace {

using std::chrono::milliseconds;
using testing::Client;
using testing::ServerTest;
using testing::ThreadName;
using testing::Upper;
using testing::WaitFor;

// Lines starting with 'a' are started: their `done` waits in `pending` for
// the test (or Complete) to call it from another thread, with the line
// upper-cased. 'w': started, and done at once with a reply deferred to a
// worker. 'i': started, done inside start. Others: answered by Handle.
class StartedHandler : public testing::TestHandler {
 public:
  Reply Handle(const PeerCredentials& /*peer*/, std::string_view line) override {
    ++calls;
    const std::string copy(line);
    Reply reply;
    if (copy.empty() || (copy[0] != 'a' && copy[0] != 'w' && copy[0] != 'i')) {
      reply.line = Upper(copy);
      return reply;
    }
    reply.start = [this, copy](std::function<void(Reply)> done) {
      if (copy[0] == 'i') {
        Reply answer;
        answer.line = Upper(copy);
        done(std::move(answer));
      } else if (copy[0] == 'w') {
        Reply answer;
        answer.deferred = [copy] {
          Reply r;
          r.line = Upper(copy) + "@" + ThreadName();
          return r;
        };
        done(std::move(answer));
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        pending_.push_back({copy, std::move(done)});
        cv_.notify_all();
      }
    };
    return reply;
  }

  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }
  // Calls the `done` of one waiting line (the oldest, or a random one),
  // from this thread. False when none waits.
  bool Complete(std::mt19937* random = nullptr) {
    Waiting w;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) return false;
      size_t i = random ? (*random)() % pending_.size() : 0;
      w = std::move(pending_[i]);
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    }
    Reply answer;
    answer.line = Upper(w.line);
    w.done(std::move(answer));
    return true;
  }

 private:
  struct Waiting {
    std::string line;
    std::function<void(Reply)> done;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> pending_;
};

class ServerStarted : public ServerTest {
 protected:
  void Start() {
    Result result = Server::Start(Options(), &started_, &server_);
    ASSERT_TRUE(result.ok) << result.message;
  }
  void TearDown() override { server_.reset(); }

  StartedHandler started_;
};

TEST_F(ServerStarted, AnsweredFromAnotherThreadAndTheNextLineWaitsForIt) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.Send("a1\nb\n"));
  ASSERT_TRUE(WaitFor([&] { return started_.pending() == 1; }));
  std::string line;
  EXPECT_FALSE(client.ReadLine(&line, milliseconds(200)));
  EXPECT_EQ(started_.calls.load(), 1) << "the line after a started one was handled before it";
  std::thread other([&] { EXPECT_TRUE(started_.Complete()); });
  other.join();
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "A1");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "B");
  EXPECT_EQ(started_.calls.load(), 2);
}

TEST_F(ServerStarted, AStartedReplyMayBeDeferredToAWorkerOrGivenInsideStart) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.Send("w1\ni2\nq\n"));
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "W1@intentd-worker");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "I2");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "Q");
}

TEST_F(ServerStarted, ManyConnectionsAnsweredInTheirOrderWhateverOrderTheyComplete) {
  Start();
  constexpr int kClients = 8, kLines = 50;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(std::make_unique<Client>(path()));
    ASSERT_TRUE(clients.back()->ok());
    std::string batch;
    for (int i = 0; i < kLines; ++i) {
      batch += (i % 2 ? "a" : "q") + std::to_string(c) + "-" + std::to_string(i) + "\n";
    }
    ASSERT_TRUE(clients.back()->Send(batch));
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> completers;
  for (int t = 0; t < 2; ++t) {
    completers.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t + 1));
      while (!stop.load()) {
        if (!started_.Complete(&random)) std::this_thread::sleep_for(milliseconds(1));
      }
    });
  }
  for (int c = 0; c < kClients; ++c) {
    for (int i = 0; i < kLines; ++i) {
      std::string line;
      ASSERT_TRUE(clients[c]->ReadLine(&line)) << c << " " << i;
      EXPECT_EQ(line, Upper((i % 2 ? "a" : "q") + std::to_string(c) + "-" + std::to_string(i)));
    }
  }
  stop = true;
  for (auto& t : completers) t.join();
}

TEST_F(ServerStarted, StopWaitsForAStartedReplyThenCloses) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.Send("alast\n"));
  ASSERT_TRUE(WaitFor([&] { return started_.pending() == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_->Stop(std::chrono::seconds(5));
    stopped = true;
  });
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(stopped.load()) << "Stop returned with a started reply still out";
  ASSERT_TRUE(started_.Complete());
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "ALAST");
  EXPECT_TRUE(client.ReadEof());
  stopper.join();
}

}  // namespace
}  // namespace intentd::transport
