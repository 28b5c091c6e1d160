// The CLI's pipelined connection against the real agent: a batch far larger
// than the socket buffers and the agent's backpressure window completes, in
// order; a connection the agent closes mid-batch is an error that keeps the
// answers that came.
#include "cli/agent_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

TEST(AgentConnection, ABatchBeyondEveryBufferCompletesInOrder) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  Client c(agent.socket_path());
  ASSERT_EQ(c.Call({{"op", "begin"},
                    {"tenant_id", "acme"},
                    {"intent_ref", "FAT-2026-000123"},
                    {"action_type", "pix.cobranca"},
                    {"payload", PixPayload()}})["decision"],
            "execute");
  // 20,000 lookups: ~2.6 MB of requests and ~12 MB of answers, far more than
  // the socket buffers hold beside the agent's 1 MiB of unsent answers (it
  // then stops reading): writing them all before reading blocks forever.
  constexpr int kBatch = 20000;
  std::vector<std::string> requests;
  for (int i = 0; i < kBatch; ++i) {
    requests.push_back(json{
        {"id", i},
        {"op", "lookup"},
        {"tenant_id", "acme"},
        {"intent_ref", "FAT-2026-000123"},
        {"action_type",
         "pix.cobranca"}}.dump());
  }
  std::unique_ptr<cli::AgentConnection> connection;
  std::string error;
  ASSERT_TRUE(cli::AgentConnection::Open(agent.socket_path(), &connection, &error)) << error;
  std::vector<std::string> answers;
  ASSERT_TRUE(connection->Exchange(requests, &answers, &error)) << error;
  ASSERT_EQ(answers.size(), requests.size());
  for (int i = 0; i < kBatch; ++i) {
    const json a = json::parse(answers[i]);
    ASSERT_EQ(a["id"], i);
    ASSERT_EQ(a["found"], true);
  }
  // The connection stays usable for the next batch.
  ASSERT_TRUE(connection->Exchange({R"({"op":"ping"})"}, &answers, &error)) << error;
  EXPECT_EQ(json::parse(answers[0])["ok"], true);
}

TEST(AgentConnection, AConnectionClosedMidBatchKeepsTheAnswersThatCame) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  std::unique_ptr<cli::AgentConnection> connection;
  std::string error;
  ASSERT_TRUE(cli::AgentConnection::Open(agent.socket_path(), &connection, &error)) << error;
  // A line over the frame limit: answered frame_too_large, then closed.
  const std::vector<std::string> requests = {R"({"id":1,"op":"ping"})", std::string(70000, 'x'),
                                             R"({"id":3,"op":"ping"})"};
  std::vector<std::string> answers;
  EXPECT_FALSE(connection->Exchange(requests, &answers, &error));
  EXPECT_NE(error.find("closed the connection"), std::string::npos) << error;
  EXPECT_NE(error.find("2 of 3 answers came"), std::string::npos) << error;
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(json::parse(answers[0])["id"], 1);
  EXPECT_EQ(json::parse(answers[1])["error"]["code"], "frame_too_large");

  EXPECT_FALSE(cli::AgentConnection::Open(dir.path() + "/none.sock", &connection, &error));
  EXPECT_NE(error.find("is `intentd serve` running?"), std::string::npos) << error;
}

// A socket file nobody listens on (the agent died, the unit is stopped).
TEST(AgentConnection, NobodyListeningSaysToStartTheAgent) {
  TempDir dir;
  const std::string path = dir.path() + "/dead.sock";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  std::unique_ptr<cli::AgentConnection> connection;
  std::string error;
  EXPECT_FALSE(cli::AgentConnection::Open(path, &connection, &error));
  EXPECT_NE(error.find("nothing listens there: start the agent"), std::string::npos) << error;
}

}  // namespace
}  // namespace intentd::testing
