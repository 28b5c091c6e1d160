// begin and complete on a store with asynchronous writes
// (Store::SupportsAsyncWrites, as PostgreSQL's): the Dispatcher starts them
// where the line was parsed (transport::Reply::start) and answers from the
// store's thread; the rest of a write that path does not take (a
// redelivery, a stale token) runs on a worker, and bad arguments run the
// whole op there (a deferred reply each), answered as the synchronous path
// answers.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "protocol/dispatcher.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"
#include "tests/store/forwarding_store.h"

namespace intentd::agent {
namespace {

using nlohmann::json;
using testing::PixPayload;
using testing::TempDir;

constexpr int64_t kT0 = 1796000000000;

// Forwards to a RocksDB store; its asynchronous writes run on a thread of
// its own, named "async-store". A write that would not be the fresh case
// (the intent is there; the complete would not apply) writes nothing and
// leaves the synchronous call as its `rest`, as PostgreSQL's does. Counts
// the rests run, and the synchronous Begin and Complete called on it.
class AsyncStore : public store::ForwardingStore {
 public:
  explicit AsyncStore(store::Store* to) : ForwardingStore(to), to_(to) {
    thread_ = std::thread([this] { Run(); });
  }
  ~AsyncStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  bool SupportsAsyncWrites() const override { return true; }
  bool BeginAsync(const store::IntentCandidate& request, int64_t lease_ms,
                  store::BeginResult* result, WriteDone done) override {
    if (!request.candidate) return false;
    // The caller keeps `request` (and `response` below) until `done`
    // returns or its `rest` did (Store::WriteDone).
    Post([this, req = &request, lease_ms, result, done] {
      store::LookupResult there;
      if (to_->Lookup(req->tenant_id, req->intent_ref, req->action_type, &there).ok()) {
        done(store::Status::Ok(), [this, req, lease_ms, result] {
          ++rests;
          return to_->Begin(*req, lease_ms, result);
        });
        return;
      }
      done(to_->Begin(*req, lease_ms, result), nullptr);
    });
    return true;
  }
  bool CompleteAsync(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                     const std::string& response, store::Action* action, WriteDone done) override {
    Post([this, tenant_id, key, lease_token, resp = &response, action, done] {
      store::Action current;
      if (!to_->GetAction(tenant_id, key, &current).ok() ||
          current.status != store::ActionStatus::kStarted || current.lease_token != lease_token) {
        done(store::Status::Ok(), [this, tenant_id, key, lease_token, resp, action] {
          ++rests;
          return to_->Complete(tenant_id, key, lease_token, *resp, action);
        });
        return;
      }
      done(to_->Complete(tenant_id, key, lease_token, *resp, action), nullptr);
    });
    return true;
  }

  store::Status Begin(const store::IntentCandidate& request, int64_t lease_ms,
                      store::BeginResult* result) override {
    ++sync_calls;
    return to_->Begin(request, lease_ms, result);
  }
  store::Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                         const std::string& response, store::Action* action) override {
    ++sync_calls;
    return to_->Complete(tenant_id, key, lease_token, response, action);
  }

  std::atomic<int> started{0};
  std::atomic<int> rests{0};
  std::atomic<int> sync_calls{0};

 private:
  void Post(std::function<void()> job) {
    ++started;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  void Run() {
    pthread_setname_np(pthread_self(), "async-store");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  store::Store* to_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

std::string ThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

class DispatcherAsync : public ::testing::Test {
 protected:
  void SetUp() override { Open(Config()); }
  void Open(Config config) {
    dispatcher_.reset();
    async_.reset();
    rocks_.reset();
    config_ = std::move(config);
    store::RocksOptions options;
    options.path = dir_.path() + "/data" + std::to_string(opened_++);
    options.sync = false;
    options.clock = &clock_;
    ASSERT_TRUE(store::RocksStore::Open(options, &rocks_).ok());
    async_ = std::make_unique<AsyncStore>(rocks_.get());
    DispatcherOptions d;
    d.clock = &clock_;
    dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, async_.get(), d);
  }

  // How the line was answered, as the transport would run it.
  struct Answer {
    bool started = false;   // Reply::start
    bool deferred = false;  // its done gave a deferred reply (run here)
    std::string thread;     // where done was called
    json reply;
  };
  Answer Send(const json& request) {
    Answer out;
    transport::Reply reply = dispatcher_->Handle(peer_, request.dump());
    if (reply.start) {
      out.started = true;
      std::promise<transport::Reply> answered;
      reply.start([&](transport::Reply r) {
        out.thread = ThreadName();
        answered.set_value(std::move(r));
      });
      reply = answered.get_future().get();
    }
    if (reply.deferred) {
      out.deferred = true;
      reply = reply.deferred();
    }
    EXPECT_FALSE(reply.start || reply.deferred) << request.dump();
    out.reply = json::parse(reply.line, nullptr, false);
    return out;
  }
  json BeginRequest(const std::string& ref = "FAT-1") {
    json payload = PixPayload();
    payload["referencia_intencao"] = ref;
    return {{"op", "begin"},      {"tenant_id", "acme"},
            {"intent_ref", ref},  {"action_type", "pix.cobranca"},
            {"payload", payload}, {"lease_ms", 60000}};
  }
  json CompleteRequest(const json& begun, int64_t token) {
    return {{"op", "complete"},
            {"tenant_id", "acme"},
            {"key", begun["key"]},
            {"lease_token", token},
            {"response", {{"txid", "e2e"}}}};
  }
  static std::string Code(const json& r) {
    return r.contains("error") ? r["error"].value("code", "") : "";
  }

  TempDir dir_;
  int opened_ = 0;
  store::ManualClock clock_{kT0};
  normalizers::KeyDeriver deriver_{testing::kTestSecret};
  Config config_;
  std::unique_ptr<store::RocksStore> rocks_;
  std::unique_ptr<AsyncStore> async_;
  std::unique_ptr<Dispatcher> dispatcher_;
  transport::PeerCredentials peer_{1, 1000, 1000, {1000}};
};

TEST_F(DispatcherAsync, ANewIntentAndItsCompleteAreAnsweredFromTheStoresThread) {
  const Answer begun = Send(BeginRequest());
  EXPECT_TRUE(begun.started);
  EXPECT_FALSE(begun.deferred);
  EXPECT_EQ(begun.thread, "async-store");
  EXPECT_EQ(begun.reply["decision"], "execute") << begun.reply.dump();
  EXPECT_EQ(begun.reply["created"], true);
  EXPECT_EQ(begun.reply["lease_token"], 1);
  const Answer done = Send(CompleteRequest(begun.reply, 1));
  EXPECT_TRUE(done.started);
  EXPECT_FALSE(done.deferred);
  EXPECT_EQ(done.thread, "async-store");
  EXPECT_EQ(done.reply["status"], "completed") << done.reply.dump();
  EXPECT_EQ(async_->started.load(), 2);
  // Counted as the synchronous path counts them.
  const json stats = Send({{"op", "stats"}}).reply;
  EXPECT_EQ(stats["completed"], 1) << stats.dump();
}

TEST_F(DispatcherAsync, WhatThePathDoesNotTakeRunsOnAWorkerAndAnswersTheSame) {
  const Answer begun = Send(BeginRequest());
  ASSERT_EQ(begun.reply["decision"], "execute");
  // A redelivery: the store leaves the rest of the write, which runs on a
  // worker, without the op (or the store's synchronous Begin) again.
  const Answer again = Send(BeginRequest());
  EXPECT_TRUE(again.started);
  EXPECT_TRUE(again.deferred);
  EXPECT_EQ(again.reply["decision"], "in_flight") << again.reply.dump();
  EXPECT_EQ(again.reply["created"], false);
  EXPECT_EQ(async_->rests.load(), 1);
  EXPECT_EQ(async_->sync_calls.load(), 0);
  // A token never granted: the rest refuses it.
  const Answer stale = Send(CompleteRequest(begun.reply, 7));
  EXPECT_TRUE(stale.deferred);
  EXPECT_EQ(Code(stale.reply), "invalid_state") << stale.reply.dump();
  EXPECT_EQ(async_->rests.load(), 2);
  EXPECT_EQ(async_->sync_calls.load(), 0);
  // Under "reject", a redelivery with another amount: the rest's conflict
  // is compared field by field, as the whole op compares it.
  json diverged = BeginRequest();
  diverged["payload"]["valor"] = "200.00";
  diverged["on_divergence"] = "reject";
  const Answer mismatch = Send(diverged);
  EXPECT_TRUE(mismatch.deferred);
  EXPECT_EQ(Code(mismatch.reply), "payload_mismatch") << mismatch.reply.dump();
  EXPECT_EQ(async_->rests.load(), 3);
  EXPECT_EQ(async_->sync_calls.load(), 0);
  // Bad arguments: nothing started; the whole op reports them.
  json bad = BeginRequest();
  bad.erase("tenant_id");
  const int before = async_->started.load();
  const Answer refused = Send(bad);
  EXPECT_TRUE(refused.deferred);
  EXPECT_EQ(Code(refused.reply), "missing_field") << refused.reply.dump();
  EXPECT_EQ(async_->started.load(), before);
  // The complete that applies still does, then replays as completed.
  EXPECT_EQ(Send(CompleteRequest(begun.reply, 1)).reply["status"], "completed");
  const Answer replay = Send(BeginRequest());
  EXPECT_EQ(replay.reply["decision"], "replay") << replay.reply.dump();
}

TEST_F(DispatcherAsync, AForbiddenLineIsAnsweredWithoutTheStore) {
  Config config;
  config.access.push_back({1000, std::nullopt, {"acme"}, false});
  Open(std::move(config));
  json other = BeginRequest();
  other["tenant_id"] = "globex";
  const Answer forbidden = Send(other);
  EXPECT_EQ(Code(forbidden.reply), "forbidden") << forbidden.reply.dump();
  peer_ = {3, 4000, 4000, {4000}};  // no rule names it
  EXPECT_EQ(Code(Send(BeginRequest()).reply), "forbidden");
  EXPECT_EQ(async_->started.load(), 0);
}

TEST_F(DispatcherAsync, HandleLineWaitsForTheStartedAnswer) {
  const json begun =
      json::parse(dispatcher_->HandleLine(peer_, BeginRequest("FAT-9").dump()), nullptr, false);
  EXPECT_EQ(begun["decision"], "execute") << begun.dump();
  EXPECT_EQ(async_->started.load(), 1);
}

}  // namespace
}  // namespace intentd::agent
