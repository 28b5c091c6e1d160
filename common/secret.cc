#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace intentd::agent {
namespace {

bool ReadKeyFile(const std::string& path, std::string* secret, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open the HMAC key file " + path + ": " + std::strerror(errno) +
             " (create one with `intentd keygen > FILE && chmod 600 FILE`)";
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *error = "the HMAC key file " + path + " is not a regular file";
    return false;
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    *error = "the HMAC key file " + path + " is accessible by group or others; run `chmod 600 " +
             path + "`";
    return false;
  }
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      *error = "cannot read the HMAC key file " + path + ": " + std::strerror(errno);
      return false;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > (1 << 16)) {
      ::close(fd);
      *error = "the HMAC key file " + path + " is larger than 64 KiB; it should hold one key";
      return false;
    }
  }
  ::close(fd);
  if (!data.empty() && data.back() == '\n') data.pop_back();
  if (!data.empty() && data.back() == '\r') data.pop_back();
  *secret = std::move(data);
  return true;
}

}  // namespace

bool LoadSecret(const std::string& key_file, std::string* secret, std::string* source,
                std::string* error) {
  std::string value;
  if (!key_file.empty()) {
    if (!ReadKeyFile(key_file, &value, error)) return false;
    *source = "--hmac-key-file " + key_file;
  } else if (const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
             dir != nullptr && *dir != '\0' &&
             ::access((std::string(dir) + "/hmac-key").c_str(), F_OK) == 0) {
    const std::string path = std::string(dir) + "/hmac-key";
    if (!ReadKeyFile(path, &value, error)) return false;
    *source = "systemd credential hmac-key";
  } else if (const char* env = std::getenv("IDEMPOTENCY_HMAC_KEY"); env != nullptr) {
    value = env;
    *source = "environment variable IDEMPOTENCY_HMAC_KEY";
  } else {
    *error =
        "no HMAC secret: pass --hmac-key-file PATH, or set IDEMPOTENCY_HMAC_KEY, or provide the "
        "systemd credential hmac-key (LoadCredential=hmac-key:PATH); generate one with "
        "`intentd keygen`";
    return false;
  }
  if (value.size() < kMinSecretBytes) {
    *error = "the HMAC secret from " + *source + " is " + std::to_string(value.size()) +
             " bytes; it must be at least " + std::to_string(kMinSecretBytes) +
             " (generate one with `intentd keygen`)";
    return false;
  }
  *secret = std::move(value);
  return true;
}

bool GenerateKeyHex(std::string* hex, std::string* error) {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string("getrandom failed: ") + std::strerror(errno);
      return false;
    }
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  hex->clear();
  for (unsigned char b : bytes) {
    hex->push_back(kHex[b >> 4]);
    hex->push_back(kHex[b & 15]);
  }
  return true;
}

}  // namespace intentd::agent
