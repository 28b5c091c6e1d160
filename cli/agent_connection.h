// A client connection to the agent's socket, for the commands that send
// more than one request (`intentd uncertain` looks up every row's intent).
// CallAgent (cli/commands.h) is its one-request form.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace intentd::cli {

class AgentConnection {
 public:
  // Connects to the agent at `socket_path`. False with *error, which says
  // what to check, when it cannot be reached.
  static bool Open(const std::string& socket_path, std::unique_ptr<AgentConnection>* out,
                   std::string* error);
  ~AgentConnection();
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;

  // Sends `requests` (one JSON object each, no newline) pipelined and
  // returns their answer lines in the same order: the agent answers a
  // connection's lines in order (docs/protocol.md, "Pipelining and
  // ordering"). It writes and reads at once, so a batch larger than the
  // socket buffers cannot block on the agent's backpressure. False with
  // *error when the connection fails or closes before every answer came;
  // *responses then holds the answers that did come.
  bool Exchange(const std::vector<std::string>& requests, std::vector<std::string>* responses,
                std::string* error);

 private:
  explicit AgentConnection(int fd) : fd_(fd) {}

  int fd_;
  std::string buffer_;  // bytes read past the last answer returned
};

}  // namespace intentd::cli
