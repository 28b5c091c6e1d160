// Test harness: runs the real intentd binary on a temporary socket and data
// directory, and talks to it with a plain blocking Unix-socket client.
#pragma once

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace intentd::testing {

using nlohmann::json;

// A fresh temporary directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline constexpr char kTestSecret[] = "integration-test-secret-0123456789abcdef";

struct AgentOptions {
  std::string binary;                   // "": the intentd this harness was built with
  std::vector<std::string> extra_args;  // appended to `intentd serve ...`
  std::string config_json;              // written to a file and passed with --config
  std::vector<std::string> env;         // NAME=VALUE added to the environment
  bool secret_in_env = true;            // IDEMPOTENCY_HMAC_KEY=kTestSecret
  bool wait_ready = true;               // wait until ping answers
};

class Agent {
 public:
  // Starts `intentd serve` with its socket and data dir inside `dir`.
  explicit Agent(const std::string& dir, AgentOptions options = {});
  ~Agent();  // SIGKILLs the process if still running
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  bool Start();  // false: did not answer ping and log its serving line within 15 s
  bool started() const { return started_; }
  void Kill(int signal);                        // sends the signal
  int Wait();                                   // waits; returns the exit status (or 128+signal)
  bool Running();                               // not yet exited
  int last_exit() const { return last_exit_; }  // as Wait's; -1 while none was seen
  const std::string& socket_path() const { return socket_; }
  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return pid_; }
  std::string Log() const;  // what the agent wrote on stderr

 private:
  std::string dir_;
  std::string socket_;
  std::string data_dir_;
  std::string log_path_;
  AgentOptions options_;
  pid_t pid_ = -1;
  int last_exit_ = -1;
  bool started_ = false;
};

// Runs the intentd binary with `args`; returns the exit code and fills
// *output (stdout) and *error_output (stderr).
int RunIntentd(const std::vector<std::string>& args, std::string* output, std::string* error_output,
               const std::vector<std::string>& env = {});

// A blocking client.
class Client {
 public:
  explicit Client(const std::string& socket_path);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool SendRaw(const std::string& bytes);
  // Reads one line (without '\n'); false on EOF/error/timeout (10 s).
  bool ReadLine(std::string* line, int timeout_ms = 10000);
  // True when the server closed the connection (EOF) within timeout_ms.
  bool ReadEof(int timeout_ms = 5000);
  // Sends `request` as one line, returns the parsed response (null on failure).
  json Call(const json& request);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string buffer_;
};

// The pix.cobranca payload of the protocol's example, with a CPF whose check
// digits are valid (the example's 111.222.333-44 is rejected by rules v2).
json PixPayload(const std::string& valor = "180.00", const std::string& chave = "111.444.777-35");
// A begin of tenant acme's pix.cobranca `ref` with PixPayload(valor)
// (referencia_intencao taken from intent_ref).
json PixBegin(const std::string& ref, const std::string& valor);

}  // namespace intentd::testing
