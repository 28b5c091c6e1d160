// Helpers shared by the providers (not part of the library's interface).
#pragma once

#include <signal.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace intentd::reconcile {

// Reads a whole file of at most `max_bytes`. `what` names it in *error
// ("the client secret file"), with the path and the reason. With `private_file`
// the file must be a regular file that neither group nor others may access
// (like the HMAC key file, common/secret.cc). *error never holds the content.
bool ReadWholeFile(const std::string& path, const std::string& what, bool private_file,
                   size_t max_bytes, std::string* content, std::string* error);

// Overwrites a string's bytes before it is released (secrets in memory).
void WipeString(std::string* s);

// `text` as one line for a human: control characters and newlines become
// spaces, runs of spaces one space, trimmed, cut to `max_chars` bytes (at a
// UTF-8 boundary) with "..." when longer.
std::string OneLine(std::string_view text, size_t max_chars);

// Replaces every occurrence of `secret` (when not empty) in *text with
// "[redacted]": a last guard on lines that quote what a server or a program
// said.
void Redact(std::string* text, std::string_view secret);

// Blocks SIGPIPE in the calling thread for its lifetime, and discards a
// SIGPIPE raised meanwhile (a write to a closed pipe or socket), so that
// neither curl's TLS writes nor a command's stdin raise it in the caller,
// whatever the process's disposition. The write then fails with EPIPE.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock();
  ~ScopedSigpipeBlock();
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  bool was_pending_ = false;  // a SIGPIPE already pending is left alone
  bool was_blocked_ = false;
};

}  // namespace intentd::reconcile
