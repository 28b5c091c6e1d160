// Replies held for durability (ServerOptions::durability, Reply tickets) and
// lines answered by Handle on the io thread, deferred ones on workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
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
using testing::ServerTest;
using testing::ThreadName;
using testing::Upper;
using testing::WaitFor;

// Answers a durability ticket only when the test says so.
class ManualDurability : public Durability {
 public:
  void WhenDurable(uint64_t ticket, std::function<void(bool)> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back({ticket, std::move(done)});
  }
  // Answers every call for a ticket up to `through`: the tickets up to it
  // not decided yet get `durable` as their verdict.
  void Answer(uint64_t through, bool durable) {
    std::vector<std::function<void(bool)>> ready;
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers_.emplace_back(through, durable);
      auto it = std::stable_partition(waiting_.begin(), waiting_.end(),
                                      [&](const Waiting& w) { return w.ticket > through; });
      for (auto r = it; r != waiting_.end(); ++r) ready.push_back(std::move(r->done));
      waiting_.erase(it, waiting_.end());
    }
    for (auto& done : ready) done(durable);
  }
  Verdict Check(uint64_t ticket) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [through, durable] : answers_) {
      if (ticket <= through) return durable ? Verdict::kDurable : Verdict::kLost;
    }
    return Verdict::kPending;
  }
  size_t waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_.size();
  }

 private:
  struct Waiting {
    uint64_t ticket;
    std::function<void(bool)> done;
  };
  std::mutex mu_;
  std::vector<Waiting> waiting_;
  std::vector<std::pair<uint64_t, bool>> answers_;  // in order
};

// "N:text" -> "TEXT" held for ticket N ("LOST:TEXT" if lost). Lines starting
// with 'q' are answered by Handle; the others are deferred to a worker.
// Records the thread that answered each line.
class TicketHandler : public testing::TestHandler {
 public:
  Reply Handle(const PeerCredentials& /*peer*/, std::string_view line) override {
    ++calls;
    if (!line.empty() && line[0] == 'q') return Answer(line);
    Reply reply;
    reply.deferred = [this, copy = std::string(line)] { return Answer(copy); };
    return reply;
  }

  std::mutex mu;
  std::vector<std::string> threads;

 private:
  Reply Answer(std::string_view line) {
    Reply reply;
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.push_back(std::string(line.substr(0, 1)) + "@" + ThreadName());
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      reply.line = Upper(line);
      return reply;
    }
    reply.durable_ticket = std::stoull(std::string(line.substr(0, colon)));
    reply.line = Upper(line.substr(colon + 1));
    reply.line_if_lost = "LOST:" + reply.line;
    return reply;
  }
};

class ServerDurability : public ServerTest {
 protected:
  void Start() {
    ServerOptions options = Options();
    options.durability = &durability_;
    Result result = Server::Start(options, &tickets_, &server_);
    ASSERT_TRUE(result.ok) << result.message;
  }
  // The server calls tickets_ and durability_ until it stops: stop it before
  // they are destroyed (they are members of this class, the server of the
  // base, whose members go last).
  void TearDown() override { server_.reset(); }
  bool NoLineWithin(Client* client, milliseconds wait) {
    std::string line;
    return !client->ReadLine(&line, wait);
  }

  ManualDurability durability_;
  TicketHandler tickets_;
};

TEST_F(ServerDurability, HeldRepliesWaitForTheirTicketAndGoOutInOrder) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.Send("5:a\nb\n7:c\n"));
  ASSERT_TRUE(WaitFor([&] { return tickets_.calls.load() == 3; }));
  EXPECT_TRUE(NoLineWithin(&client, milliseconds(200)));  // a waits; b waits behind it
  durability_.Answer(5, true);
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "A");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "B");
  EXPECT_TRUE(NoLineWithin(&client, milliseconds(200)));  // c still waits for 7
  durability_.Answer(7, true);
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "C");
  // Nothing held: a ticket-less line goes out at once.
  ASSERT_TRUE(client.Send("d\n"));
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "D");
}

TEST_F(ServerDurability, LostTicketSendsTheLostLineAndTheConnectionGoesOn) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.Send("3:a\nb\n"));
  ASSERT_TRUE(WaitFor([&] { return durability_.waiting() == 1; }));
  durability_.Answer(3, false);
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "LOST:A");
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "B");  // needed no durability
  ASSERT_TRUE(client.Send("4:e\n"));
  ASSERT_TRUE(WaitFor([&] { return durability_.waiting() == 1; }));
  durability_.Answer(4, true);
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "E");
}

TEST_F(ServerDurability, AnEqualTicketAfterAnAnsweredOneIsStillAnswered) {
  Start();
  Client client(path());
  std::string line;
  for (int i = 0; i < 3; ++i) {  // the same ticket, one request at a time
    ASSERT_TRUE(client.Send("9:x" + std::to_string(i) + "\n"));
    ASSERT_TRUE(WaitFor([&] { return durability_.waiting() == 1; })) << i;
    durability_.Answer(9, true);
    ASSERT_TRUE(client.ReadLine(&line)) << i;
    EXPECT_EQ(line, "X" + std::to_string(i));
  }
}

TEST_F(ServerDurability, DeferredLinesRunOnWorkersOthersOnTheIoThreadInOrder) {
  Start();
  Client client(path());
  auto name = [](int i, bool quick) { return (quick ? "quick-" : "slow-") + std::to_string(i); };
  // All answered by Handle, then mixed: a deferred line goes to a worker,
  // and the lines after it wait for its answer.
  std::string batch;
  for (int i = 0; i < 300; ++i) batch += name(i, true) + "\n";
  for (int i = 300; i < 600; ++i) batch += name(i, i % 3 != 0) + "\n";
  ASSERT_TRUE(client.Send(batch));
  for (int i = 0; i < 600; ++i) {
    std::string line;
    ASSERT_TRUE(client.ReadLine(&line)) << i;
    ASSERT_EQ(line, Upper(name(i, i < 300 || i % 3 != 0)));
  }
  std::lock_guard<std::mutex> lock(tickets_.mu);
  ASSERT_EQ(tickets_.threads.size(), 600u);
  int quick_on_io = 0, slow_on_workers = 0;
  for (size_t i = 0; i < tickets_.threads.size(); ++i) {
    if (i < 300 && tickets_.threads[i] == "q@intentd-io") ++quick_on_io;
    if (tickets_.threads[i] == "s@intentd-worker") ++slow_on_workers;
  }
  EXPECT_EQ(slow_on_workers, 100);  // every deferred line, never the io thread
  // Only the first job runs on a worker (it looks up the peer's groups).
  EXPECT_GE(quick_on_io, 300 - 16);
}

TEST_F(ServerDurability, StopWaitsForHeldRepliesThenCloses) {
  Start();
  Client client(path());
  ASSERT_TRUE(client.Send("11:last\n"));
  ASSERT_TRUE(WaitFor([&] { return durability_.waiting() == 1; }));
  std::thread stopper([&] { server_->Stop(std::chrono::seconds(5)); });
  std::this_thread::sleep_for(milliseconds(100));
  durability_.Answer(11, true);
  std::string line;
  ASSERT_TRUE(client.ReadLine(&line));
  EXPECT_EQ(line, "LAST");
  EXPECT_TRUE(client.ReadEof());
  stopper.join();
}

}  // namespace
}  // namespace intentd::transport
