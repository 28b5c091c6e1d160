// The load generator's view of one connection to a system under test
// (intentd, PostgreSQL or Redis): it sends the two steps of the logical flow,
// `begin` (freeze the intent, claim the action) and `complete` (store the
// response), one request in flight at a time, and parses the replies.
//
// A Session is driven by one thread's epoll loop: Send* writes the whole
// request (requests are small; a full socket buffer is waited out with a
// short poll), then Poll is called whenever fd() is readable until it answers
// kDone or kFailed. Not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace intentd::bench {

// One logical action of the workload. `payload_json` is the pix.cobranca
// payload as a compact JSON object; `response_json` the ~200-byte provider
// response stored by `complete`.
struct Action {
  std::string tenant_id;
  std::string intent_ref;
  std::string action_type;
  std::string payload_json;
  std::string response_json;
  // Fields of payload_json, for clients that derive the key themselves.
  std::string cliente_id;
  std::string valor;
  std::string chave_pix_destino;
  bool redelivery = false;
};

enum class Decision { kExecute, kInFlight, kRecover, kReplay, kUnknown };

struct BeginReply {
  Decision decision = Decision::kUnknown;
  std::string key;          // the frozen intent's key (chave)
  int64_t lease_token = 0;  // meaningful for kExecute / kRecover
};

class Session {
 public:
  enum class PollResult { kPending, kDone, kFailed };

  virtual ~Session() = default;

  virtual int fd() const = 0;

  // Each returns false and fills *error when the request could not be sent
  // (the connection is then unusable).
  virtual bool SendBegin(const Action& action, std::string* error) = 0;
  virtual bool SendComplete(const Action& action, const BeginReply& begun, std::string* error) = 0;

  // Reads what is available. kDone: the outstanding request's reply is in
  // (for a begin, *reply is filled). kFailed: the system answered an error
  // (*error holds its code/message; the session stays usable) or the
  // connection broke (*fatal is set true).
  virtual PollResult Poll(BeginReply* reply, std::string* error, bool* fatal) = 0;
};

}  // namespace intentd::bench
