#include "reconcile/support.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace intentd::reconcile {

bool ReadWholeFile(const std::string& path, const std::string& what, bool private_file,
                   size_t max_bytes, std::string* content, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *error = "cannot open " + what + " " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *error = what + " " + path + " is not a regular file";
    return false;
  }
  if (private_file && (st.st_mode & 077) != 0) {
    ::close(fd);
    *error = what + " " + path + " is accessible by group or others; run `chmod 600 " + path + "`";
    return false;
  }
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      WipeString(&data);
      *error = "cannot read " + what + " " + path + ": " + std::strerror(err);
      return false;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) {
      ::close(fd);
      WipeString(&data);
      explicit_bzero(buf, sizeof buf);
      *error = what + " " + path + " is larger than " + std::to_string(max_bytes) + " bytes";
      return false;
    }
  }
  ::close(fd);
  explicit_bzero(buf, sizeof buf);
  *content = std::move(data);
  return true;
}

void WipeString(std::string* s) {
  if (!s->empty()) explicit_bzero(s->data(), s->size());
  s->clear();
}

std::string OneLine(std::string_view text, size_t max_chars) {
  std::string out;
  for (unsigned char c : text) {
    const bool space = c < 0x20 || c == 0x7f || c == ' ';
    if (space) {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > max_chars) {
    size_t cut = max_chars;
    // Back to the start of a UTF-8 sequence (a byte that is not 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
    out += "...";
  }
  return out;
}

void Redact(std::string* text, std::string_view secret) {
  if (secret.empty()) return;
  static constexpr std::string_view kRedacted = "[redacted]";
  size_t pos = 0;
  while ((pos = text->find(secret, pos)) != std::string::npos) {
    text->replace(pos, secret.size(), kRedacted);
    pos += kRedacted.size();
  }
}

ScopedSigpipeBlock::ScopedSigpipeBlock() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  was_blocked_ = sigismember(&old, SIGPIPE) == 1;
}

ScopedSigpipeBlock::~ScopedSigpipeBlock() {
  if (!was_pending_) {
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  if (!was_blocked_) {
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  }
}

}  // namespace intentd::reconcile
