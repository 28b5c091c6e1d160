#include "bench/loadgen_intentd.h"

#include <unistd.h>

#include <cstdlib>

#include "bench/loadgen_io.h"

namespace intentd::bench {
namespace {

// Skips whitespace from *pos.
void SkipSpace(std::string_view text, size_t* pos) {
  while (*pos < text.size() &&
         (text[*pos] == ' ' || text[*pos] == '\t' || text[*pos] == '\r' || text[*pos] == '\n')) {
    ++*pos;
  }
}

// Skips a string literal starting at *pos (on its opening quote).
bool SkipString(std::string_view text, size_t* pos) {
  for (size_t i = *pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      *pos = i + 1;
      return true;
    }
  }
  return false;
}

// Skips one JSON value starting at *pos. The parse is lenient (a load
// generator reading a well-formed server's output), but never reads past
// the end of `text`.
bool SkipValue(std::string_view text, size_t* pos) {
  if (*pos >= text.size()) return false;
  if (text[*pos] == '"') return SkipString(text, pos);
  if (text[*pos] == '{' || text[*pos] == '[') {
    int depth = 0;
    while (*pos < text.size()) {
      const char c = text[*pos];
      if (c == '"') {
        if (!SkipString(text, pos)) return false;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') --depth;
      ++*pos;
      if (depth == 0) return true;
    }
    return false;
  }
  while (*pos < text.size() && text[*pos] != ',' && text[*pos] != '}' && text[*pos] != ']') ++*pos;
  return true;
}

std::string_view Unquote(std::string_view raw) {
  if (raw.size() >= 2 && raw.front() == '"' && raw.back() == '"') {
    return raw.substr(1, raw.size() - 2);
  }
  return {};
}

class IntentdSession : public Session {
 public:
  explicit IntentdSession(int fd) : fd_(fd) {}
  ~IntentdSession() override { close(fd_); }

  int fd() const override { return fd_; }

  bool SendBegin(const Action& action, std::string* error) override {
    request_.clear();
    request_ += R"({"id":)";
    request_ += std::to_string(++id_);
    request_ += R"(,"op":"begin","tenant_id":")";
    request_ += action.tenant_id;
    request_ += R"(","intent_ref":")";
    request_ += action.intent_ref;
    request_ += R"(","action_type":")";
    request_ += action.action_type;
    request_ += R"(","payload":)";
    request_ += action.payload_json;
    request_ += "}\n";
    outstanding_begin_ = true;
    return WriteAll(fd_, request_, error);
  }

  bool SendComplete(const Action& action, const BeginReply& begun, std::string* error) override {
    request_.clear();
    request_ += R"({"id":)";
    request_ += std::to_string(++id_);
    request_ += R"(,"op":"complete","tenant_id":")";
    request_ += action.tenant_id;
    request_ += R"(","key":")";
    request_ += begun.key;
    request_ += R"(","lease_token":)";
    request_ += std::to_string(begun.lease_token);
    request_ += R"(,"response":)";
    request_ += action.response_json;
    request_ += "}\n";
    outstanding_begin_ = false;
    return WriteAll(fd_, request_, error);
  }

  PollResult Poll(BeginReply* reply, std::string* error, bool* fatal) override {
    *fatal = false;
    if (!ReadAvailable(fd_, &input_, error)) {
      *fatal = true;
      return PollResult::kFailed;
    }
    const size_t newline = input_.find('\n');
    if (newline == std::string::npos) return PollResult::kPending;
    const std::string line = input_.substr(0, newline);
    input_.erase(0, newline + 1);

    if (TopLevelMember(line, "ok") != "true") {
      const std::string_view error_member = TopLevelMember(line, "error");
      *error = std::string(Unquote(TopLevelMember(error_member, "code")));
      if (error->empty()) *error = "unparsable reply: " + line.substr(0, 200);
      return PollResult::kFailed;
    }
    if (outstanding_begin_) {
      const std::string_view decision = Unquote(TopLevelMember(line, "decision"));
      reply->decision = decision == "execute"     ? Decision::kExecute
                        : decision == "in_flight" ? Decision::kInFlight
                        : decision == "replay"    ? Decision::kReplay
                        : decision == "recover"   ? Decision::kRecover
                                                  : Decision::kUnknown;
      reply->key = std::string(Unquote(TopLevelMember(line, "key")));
      reply->lease_token = std::atoll(std::string(TopLevelMember(line, "lease_token")).c_str());
    }
    return PollResult::kDone;
  }

 private:
  int fd_;
  uint64_t id_ = 0;
  bool outstanding_begin_ = false;
  std::string request_;
  std::string input_;
};

}  // namespace

std::string_view TopLevelMember(std::string_view line, std::string_view name) {
  size_t pos = 0;
  SkipSpace(line, &pos);
  if (pos >= line.size() || line[pos] != '{') return {};
  ++pos;
  for (;;) {
    SkipSpace(line, &pos);
    if (pos >= line.size() || line[pos] != '"') return {};
    const size_t key_start = pos;
    if (!SkipString(line, &pos)) return {};
    const std::string_view key = line.substr(key_start + 1, pos - key_start - 2);
    SkipSpace(line, &pos);
    if (pos >= line.size() || line[pos] != ':') return {};
    ++pos;
    SkipSpace(line, &pos);
    const size_t value_start = pos;
    if (!SkipValue(line, &pos)) return {};
    if (key == name) {
      std::string_view value = line.substr(value_start, pos - value_start);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      return value;
    }
    SkipSpace(line, &pos);
    if (pos >= line.size() || line[pos] != ',') return {};
    ++pos;
  }
}

std::unique_ptr<Session> ConnectIntentd(const std::string& socket_path, std::string* error) {
  const int fd = ConnectUnix(socket_path, error);
  if (fd < 0) return nullptr;
  return std::make_unique<IntentdSession>(fd);
}

}  // namespace intentd::bench
