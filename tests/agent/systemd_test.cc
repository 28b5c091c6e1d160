// systemd integration (socket activation, sd_notify readiness) and peer
// credentials with a second uid, on the real binary.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/agent/agent_util.h"

namespace intentd::testing {
namespace {

int BindUnix(const std::string& path, int type) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  if (type == SOCK_STREAM && listen(fd, 64) != 0) return -1;
  return fd;
}

// Receives one datagram from the notify socket (empty on timeout).
std::string ReceiveNotify(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(Systemd, SocketActivationAndNotifyReadiness) {
  TempDir dir;
  const std::string sock = dir.path() + "/activated.sock";
  int listen_fd = BindUnix(sock, SOCK_STREAM);
  ASSERT_GE(listen_fd, 0);
  int notify_fd = BindUnix(dir.path() + "/notify", SOCK_DGRAM);
  ASSERT_GE(notify_fd, 0);
  const std::string data = dir.path() + "/data";
  pid_t pid = fork();
  if (pid == 0) {
    if (listen_fd == 3)
      fcntl(3, F_SETFD, 0);
    else
      dup2(listen_fd, 3);  // dup2 clears FD_CLOEXEC on the copy
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    setenv("NOTIFY_SOCKET", (dir.path() + "/notify").c_str(), 1);
    setenv("IDEMPOTENCY_HMAC_KEY", kTestSecret, 1);
    execl(INTENTD_BINARY, INTENTD_BINARY, "serve", "--socket", "/nonexistent/ignored.sock",
          "--data-dir", data.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(listen_fd);
  std::string ready;
  for (int i = 0; i < 10 && ready.find("READY=1") == std::string::npos; ++i) {
    ready += ReceiveNotify(notify_fd, 1500);
  }
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  {
    Client c(sock);
    ASSERT_TRUE(c.connected());
    json r = c.Call({{"op", "begin"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "FAT-2026-000123"},
                     {"action_type", "pix.cobranca"},
                     {"payload", PixPayload("10.00")}});
    EXPECT_EQ(r["decision"], "execute") << r.dump();
  }
  kill(pid, SIGTERM);
  std::string stopping = ReceiveNotify(notify_fd, 5000);
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << stopping;
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // An activated socket belongs to systemd: the agent leaves the file alone.
  struct stat st;
  EXPECT_EQ(stat(sock.c_str(), &st), 0);
  close(notify_fd);
}

TEST(Systemd, SocketFileIsCreatedWithMode0660) {
  TempDir dir;
  Agent agent(dir.path());
  ASSERT_TRUE(agent.started()) << agent.Log();
  struct stat st;
  ASSERT_EQ(stat(agent.socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

// Runs `fn` in a child process as `uid`/`gid`; returns its exit code.
template <class Fn>
int RunAs(uid_t uid, gid_t gid, Fn fn) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(90);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(Access, PeerCredentialsOfASecondUidAreEnforced) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as a second uid";
  struct passwd* nobody = getpwnam("nobody");
  struct group* nogroup = getgrnam("nogroup");
  if (nobody == nullptr || nogroup == nullptr) GTEST_SKIP() << "no nobody/nogroup here";
  const uid_t bot_uid = nobody->pw_uid;
  const gid_t bot_gid = nogroup->gr_gid;
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  AgentOptions options;
  options.config_json = R"({"access": [{"user": "nobody", "tenants": ["acme"]},
                                      {"uid": 0, "tenants": ["*"], "admin": true}],
                          "socket_group": "nogroup"})";
  Agent agent(dir.path(), options);
  ASSERT_TRUE(agent.started()) << agent.Log();
  const std::string sock = agent.socket_path();
  auto begin = [](const std::string& tenant) {
    return json{{"op", "begin"},
                {"tenant_id", tenant},
                {"intent_ref", "FAT-2026-000123"},
                {"action_type", "pix.cobranca"},
                {"payload", PixPayload()}};
  };
  // The bot may use its tenant, not another, and may not list every tenant.
  EXPECT_EQ(RunAs(bot_uid, bot_gid,
                  [&] {
                    Client c(sock);
                    if (!c.connected()) return 10;
                    json ok = c.Call(begin("acme"));
                    json other = c.Call(begin("globex"));
                    json all = c.Call({{"op", "uncertain"}});
                    if (!ok.value("ok", false)) return 11;
                    if (other["error"].value("code", "") != "forbidden") return 12;
                    if (all["error"].value("code", "") != "forbidden") return 13;
                    return 0;
                  }),
            0);
  // Another uid in the socket's group but named by no rule gets nothing.
  EXPECT_EQ(RunAs(bot_uid + 1, bot_gid,
                  [&] {
                    Client c(sock);
                    if (!c.connected()) return 10;
                    json r = c.Call(begin("acme"));
                    return r["error"].value("code", "") == "forbidden" ? 0 : 14;
                  }),
            0);
  // A uid outside the socket's group cannot even connect (mode 0660).
  EXPECT_EQ(RunAs(bot_uid + 1, bot_gid + 1, [&] { return Client(sock).connected() ? 15 : 0; }), 0);
  // Root is admin.
  Client admin(sock);
  EXPECT_TRUE(admin.Call({{"op", "uncertain"}})["ok"].get<bool>());
  EXPECT_EQ(admin.Call(begin("globex"))["decision"], "execute");
}

}  // namespace
}  // namespace intentd::testing
