// The listening socket: stale files, live servers, other files, mode and
// group, systemd socket activation.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/transport/transport_test_util.h"
#include "transport/server.h"

namespace intentd::transport {
namespace {

using testing::Client;
using testing::ServerTest;

using ServerListen = ServerTest;

bool Answers(const std::string& path) {
  Client client(path);
  std::string line;
  return client.ok() && client.Send("ping\n") && client.ReadLine(&line) && line == "PING";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

TEST_F(ServerListen, StaleSocketFileIsReplaced) {
  ASSERT_TRUE(testing::MakeStaleSocket(path()));
  EXPECT_FALSE(Client(path()).ok());  // nothing listens
  StartServer(Options());
  EXPECT_TRUE(Answers(path()));
  EXPECT_TRUE(log_.Contains("stale")) << log_.All();
}

TEST_F(ServerListen, SocketWhereAnotherServerListensIsRefused) {
  StartServer(Options());
  testing::TestHandler other_handler;
  std::unique_ptr<Server> other;
  Result result = Server::Start(Options(), &other_handler, &other);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("another process is listening"), std::string::npos)
      << result.message;
  EXPECT_EQ(other, nullptr);
  EXPECT_TRUE(Answers(path()));  // the first one is untouched
}

TEST_F(ServerListen, FileThatIsNotASocketIsNeverDeleted) {
  { std::ofstream(path()) << "precious"; }
  std::unique_ptr<Server> server;
  Result result = Server::Start(Options(), &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("not a socket"), std::string::npos) << result.message;
  EXPECT_EQ(ReadFile(path()), "precious");
}

TEST_F(ServerListen, MissingDirectoryIsAnErrorAndIsNotCreated) {
  ServerOptions options = Options();
  options.socket_path = dir_.File("missing/s.sock");
  std::unique_ptr<Server> server;
  Result result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("does not exist"), std::string::npos) << result.message;
  struct stat st {};
  EXPECT_NE(stat(dir_.File("missing").c_str(), &st), 0);
}

TEST_F(ServerListen, TooLongPathIsAnError) {
  ServerOptions options = Options();
  options.socket_path = dir_.path() + "/" + std::string(120, 'p');
  std::unique_ptr<Server> server;
  Result result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("too long"), std::string::npos) << result.message;
}

TEST_F(ServerListen, SocketModeIsApplied) {
  for (unsigned mode : {0660u, 0600u}) {
    ServerOptions options = Options();
    options.socket_mode = mode;
    std::unique_ptr<Server> server;
    Result result = Server::Start(options, &handler_, &server);
    ASSERT_TRUE(result.ok) << result.message;
    struct stat st {};
    ASSERT_EQ(lstat(path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, mode);
    server->Stop(std::chrono::milliseconds(100));
  }
}

TEST_F(ServerListen, SocketGroupIsApplied) {
  struct group* own = getgrgid(getgid());
  ASSERT_NE(own, nullptr);
  ServerOptions options = Options();
  options.socket_group = own->gr_name;
  StartServer(options);
  struct stat st {};
  ASSERT_EQ(lstat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getgid());
}

TEST_F(ServerListen, UnknownGroupIsAnErrorAndLeavesNoFile) {
  ServerOptions options = Options();
  options.socket_group = "no-such-group-intentd";
  std::unique_ptr<Server> server;
  Result result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("no-such-group-intentd"), std::string::npos) << result.message;
  struct stat st {};
  EXPECT_NE(lstat(path().c_str(), &st), 0);
}

TEST_F(ServerListen, InvalidOptionsAreRejected) {
  ServerOptions options = Options();
  options.worker_threads = 0;
  std::unique_ptr<Server> server;
  Result result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("worker_threads"), std::string::npos);
}

int ListeningSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(ServerListen, InheritedListeningSocketIsServedAndItsFileKept) {
  int fd = ListeningSocket(path());
  ASSERT_GE(fd, 0);
  ServerOptions options = Options();
  options.inherited_fd = fd;
  options.socket_path = "";  // systemd owns the path
  StartServer(options);
  EXPECT_TRUE(Answers(path()));
  EXPECT_TRUE(Answers(path()));
  server_->Stop(std::chrono::milliseconds(100));
  struct stat st {};
  EXPECT_EQ(lstat(path().c_str(), &st), 0);  // not unlinked
  EXPECT_FALSE(Client(path()).ok());         // but no longer served
}

TEST_F(ServerListen, InheritedFdThatIsNotAListeningSocketIsAnError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ServerOptions options = Options();
  options.inherited_fd = fds[0];
  std::unique_ptr<Server> server;
  Result result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.message.find("inherited fd"), std::string::npos) << result.message;
  close(fds[0]);
  close(fds[1]);

  int unbound = socket(AF_UNIX, SOCK_STREAM, 0);  // a socket, but not listening
  options.inherited_fd = unbound;
  result = Server::Start(options, &handler_, &server);
  EXPECT_FALSE(result.ok);
  close(unbound);
}

}  // namespace
}  // namespace intentd::transport
