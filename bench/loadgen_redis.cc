#include "bench/loadgen_redis.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <vector>

#include "bench/loadgen_io.h"

namespace intentd::bench {
namespace {

// KEYS[1] intent key; ARGV: chave, payload, lease ms, action key prefix.
// The action key is built from the FROZEN chave read back from the intent.
constexpr char kBeginScript[] = R"lua(
redis.call('SET', KEYS[1], ARGV[1] .. '\n' .. ARGV[2], 'NX')
local intent = redis.call('GET', KEYS[1])
local chave = string.sub(intent, 1, string.find(intent, '\n', 1, true) - 1)
local action = ARGV[4] .. chave
if redis.call('SET', action, 'started:1', 'NX', 'PX', ARGV[3]) then
  return {'execute', chave, 1}
end
local record = redis.call('GET', action)
if not record then return {'unknown', chave, 0} end
if string.sub(record, 1, 10) == 'completed:' then return {'replay', chave, 0} end
return {'in_flight', chave, 0}
)lua";

constexpr char kLeaseMs[] = "300000";

std::string Format(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* command = nullptr;
  const int length =
      redisFormatCommandArgv(&command, static_cast<int>(args.size()), argv.data(), lengths.data());
  std::string formatted(command, static_cast<size_t>(length));
  redisFreeCommand(command);
  return formatted;
}

class RedisSession : public Session {
 public:
  RedisSession(int fd, std::string sha, const ClientKeyDeriver* deriver)
      : fd_(fd), sha_(std::move(sha)), deriver_(deriver), reader_(redisReaderCreate()) {}
  ~RedisSession() override {
    redisReaderFree(reader_);
    close(fd_);
  }

  int fd() const override { return fd_; }

  bool SendBegin(const Action& action, std::string* error) override {
    std::string key;
    if (!deriver_->Derive(action, &key, error)) return false;
    begin_ = true;
    return WriteAll(
        fd_,
        Format({"EVALSHA", sha_, "1",
                "i:" + action.tenant_id + ":" + action.action_type + ":" + action.intent_ref, key,
                action.payload_json, kLeaseMs, "a:" + action.tenant_id + ":"}),
        error);
  }

  bool SendComplete(const Action& action, const BeginReply& begun, std::string* error) override {
    begin_ = false;
    return WriteAll(fd_,
                    Format({"SET", "a:" + action.tenant_id + ":" + begun.key,
                            "completed:" + action.response_json}),
                    error);
  }

  PollResult Poll(BeginReply* reply, std::string* error, bool* fatal) override {
    *fatal = false;
    input_.clear();
    if (!ReadAvailable(fd_, &input_, error)) {
      *fatal = true;
      return PollResult::kFailed;
    }
    if (!input_.empty() && redisReaderFeed(reader_, input_.data(), input_.size()) != REDIS_OK) {
      *error = "redis reader: feed failed";
      *fatal = true;
      return PollResult::kFailed;
    }
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      *error = std::string("redis protocol error: ") + reader_->errstr;
      *fatal = true;
      return PollResult::kFailed;
    }
    if (raw == nullptr) return PollResult::kPending;
    redisReply* r = static_cast<redisReply*>(raw);
    PollResult result = PollResult::kDone;
    if (r->type == REDIS_REPLY_ERROR) {
      *error = std::string("redis: ") + std::string(r->str, r->len);
      result = PollResult::kFailed;
    } else if (begin_) {
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        *error = "redis: unexpected begin reply";
        result = PollResult::kFailed;
      } else {
        const std::string decision(r->element[0]->str, r->element[0]->len);
        reply->decision = decision == "execute"     ? Decision::kExecute
                          : decision == "in_flight" ? Decision::kInFlight
                          : decision == "replay"    ? Decision::kReplay
                                                    : Decision::kUnknown;
        reply->key.assign(r->element[1]->str, r->element[1]->len);
        reply->lease_token = r->element[2]->integer;
      }
    } else if (r->type != REDIS_REPLY_STATUS) {
      *error = "redis: unexpected SET reply";
      result = PollResult::kFailed;
    }
    freeReplyObject(r);
    return result;
  }

 private:
  int fd_;
  std::string sha_;
  const ClientKeyDeriver* deriver_;
  redisReader* reader_;
  bool begin_ = false;
  std::string input_;
};

}  // namespace

bool SetupRedis(const std::string& socket_path, std::string* sha, std::string* error) {
  redisContext* context = redisConnectUnix(socket_path.c_str());
  if (context == nullptr || context->err) {
    *error = "redis connect " + socket_path + ": " + (context ? context->errstr : "out of memory");
    if (context) redisFree(context);
    return false;
  }
  redisReply* reply =
      static_cast<redisReply*>(redisCommand(context, "SCRIPT LOAD %s", kBeginScript));
  bool ok = reply != nullptr && reply->type == REDIS_REPLY_STRING;
  if (ok) {
    sha->assign(reply->str, reply->len);
  } else {
    *error = std::string("redis SCRIPT LOAD: ") +
             (reply && reply->type == REDIS_REPLY_ERROR ? reply->str : context->errstr);
  }
  if (reply) freeReplyObject(reply);
  redisFree(context);
  return ok;
}

std::unique_ptr<Session> ConnectRedis(const std::string& socket_path, const std::string& sha,
                                      const ClientKeyDeriver* deriver, std::string* error) {
  const int fd = ConnectUnix(socket_path, error);
  if (fd < 0) return nullptr;
  return std::make_unique<RedisSession>(fd, sha, deriver);
}

}  // namespace intentd::bench
