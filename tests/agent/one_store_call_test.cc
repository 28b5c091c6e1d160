// freeze, begin and amend are one store call each (ops_intent.cc): a
// redelivered begin, the request intentd exists for, reads the frozen intent
// back inside the store's own step instead of a Lookup and a second Begin.
// The store here counts the calls the Dispatcher makes on a real RocksDB
// store.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "protocol/dispatcher.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"

namespace intentd::agent {
namespace {

using nlohmann::json;
using store::Status;

// Forwards every call to `inner` and counts the calls by name.
class CountingStore : public store::Store {
 public:
  explicit CountingStore(store::Store* inner) : inner_(inner) {}
  std::map<std::string, int> calls;
  int Total() const {
    int n = 0;
    for (const auto& [name, count] : calls) n += count;
    return n;
  }

  Status Freeze(const store::IntentCandidate& r, store::FreezeResult* out) override {
    ++calls["Freeze"];
    return inner_->Freeze(r, out);
  }
  Status Begin(const store::IntentCandidate& r, int64_t lease_ms,
               store::BeginResult* out) override {
    ++calls["Begin"];
    return inner_->Begin(r, lease_ms, out);
  }
  Status Complete(const std::string& t, const std::string& k, int64_t token,
                  const std::string& response, store::Action* a) override {
    ++calls["Complete"];
    return inner_->Complete(t, k, token, response, a);
  }
  Status Fail(const std::string& t, const std::string& k, int64_t token, const std::string& error,
              bool retriable, store::Action* a) override {
    ++calls["Fail"];
    return inner_->Fail(t, k, token, error, retriable, a);
  }
  Status Renew(const std::string& t, const std::string& k, int64_t token, int64_t lease_ms,
               store::Action* a) override {
    ++calls["Renew"];
    return inner_->Renew(t, k, token, lease_ms, a);
  }
  Status GetAction(const std::string& t, const std::string& k, store::Action* a) override {
    ++calls["GetAction"];
    return inner_->GetAction(t, k, a);
  }
  Status Lookup(const std::string& t, const std::string& ref, const std::string& type,
                store::LookupResult* out) override {
    ++calls["Lookup"];
    return inner_->Lookup(t, ref, type, out);
  }
  Status Amend(const store::IntentCandidate& r, bool force, store::AmendResult* out) override {
    ++calls["Amend"];
    return inner_->Amend(r, force, out);
  }
  Status DecideApproval(const std::string& t, const std::string& ref, const std::string& type,
                        bool approve, const std::string& by, const std::string& note,
                        const std::string& error, store::LookupResult* out) override {
    ++calls["DecideApproval"];
    return inner_->DecideApproval(t, ref, type, approve, by, note, error, out);
  }
  Status PendingApprovals(const std::optional<std::string>& t, size_t limit,
                          std::vector<store::Intent>* out) override {
    ++calls["PendingApprovals"];
    return inner_->PendingApprovals(t, limit, out);
  }
  Status Uncertain(const std::optional<std::string>& t, size_t limit,
                   std::vector<store::Action>* out) override {
    ++calls["Uncertain"];
    return inner_->Uncertain(t, limit, out);
  }
  Status Seen(const store::SeenRequest& r, std::vector<store::SeenAnswer>* out) override {
    ++calls["Seen"];
    return inner_->Seen(r, out);
  }
  Status MessageDone(const std::string& t, const std::string& c, const std::string& m,
                     int64_t token, store::MessageRecord* out) override {
    ++calls["MessageDone"];
    return inner_->MessageDone(t, c, m, token, out);
  }
  Status ReleaseMessage(const std::string& t, const std::string& c, const std::string& m,
                        int64_t token, store::MessageRecord* out) override {
    ++calls["ReleaseMessage"];
    return inner_->ReleaseMessage(t, c, m, token, out);
  }
  Status ForgetMessage(const std::string& t, const std::string& c, const std::string& m,
                       bool* forgotten) override {
    ++calls["ForgetMessage"];
    return inner_->ForgetMessage(t, c, m, forgotten);
  }
  Status RegisterKeyId(const std::string& id) override { return inner_->RegisterKeyId(id); }
  Status RegisteredKeyIds(std::vector<std::string>* ids) override {
    return inner_->RegisteredKeyIds(ids);
  }
  Status UnregisterKeyId(const std::string& id) override { return inner_->UnregisterKeyId(id); }
  Status CountKeyIdUsage(const std::vector<std::string>& only,
                         std::vector<KeyIdUsage>* usage) override {
    return inner_->CountKeyIdUsage(only, usage);
  }
  Status DayCounters(const std::string& t, int64_t day, std::vector<store::Counter>* out) override {
    ++calls["DayCounters"];
    return inner_->DayCounters(t, day, out);
  }

 private:
  store::Store* inner_;
};

class OneStoreCall : public ::testing::Test {
 protected:
  void SetUp() override {
    store::RocksOptions options;
    options.path = dir_.path() + "/data";
    options.sync = false;
    ASSERT_TRUE(store::RocksStore::Open(options, &rocks_).ok());
    counting_ = std::make_unique<CountingStore>(rocks_.get());
    DispatcherOptions d;
    d.rules_version = 2;
    dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, counting_.get(), d);
  }

  // The request's answer and the store calls it made.
  json Call(const json& request, std::map<std::string, int>* calls = nullptr) {
    counting_->calls.clear();
    json r = json::parse(dispatcher_->HandleLine(peer_, request.dump()), nullptr, false);
    EXPECT_TRUE(r.is_object());
    if (calls) *calls = counting_->calls;
    return r;
  }
  json Intent(const std::string& op, const json& payload,
              const std::string& ref = "FAT-2026-000123") {
    json req = {
        {"op", op}, {"tenant_id", "acme"}, {"intent_ref", ref}, {"action_type", "pix.cobranca"}};
    if (op == "begin") req["lease_ms"] = 60000;
    if (!payload.is_null()) req["payload"] = payload;
    return req;
  }

  testing::TempDir dir_;
  normalizers::KeyDeriver deriver_{testing::kTestSecret};
  Config config_;
  std::unique_ptr<store::RocksStore> rocks_;
  std::unique_ptr<CountingStore> counting_;
  std::unique_ptr<Dispatcher> dispatcher_;
  transport::PeerCredentials peer_{1, 0, 0, {0}};  // root: admin (amend)
};

const std::map<std::string, int> kOneBegin = {{"Begin", 1}};

TEST_F(OneStoreCall, ANewAndARedeliveredBeginAreOneStoreCallEach) {
  std::map<std::string, int> calls;
  json first = Call(Intent("begin", testing::PixPayload()), &calls);
  ASSERT_EQ(first["decision"], "execute") << first.dump();
  EXPECT_EQ(calls, kOneBegin);
  // The same extraction again, written differently: one call, no divergence.
  json payload = testing::PixPayload();
  payload["valor"] = "180";
  json again = Call(Intent("begin", payload), &calls);
  EXPECT_EQ(again["decision"], "in_flight") << again.dump();
  EXPECT_EQ(again["diverged"], false);
  EXPECT_EQ(calls, kOneBegin);
  // A diverged extraction: still one call, acted on as frozen, the field named.
  payload["valor"] = "181.00";
  json diverged = Call(Intent("begin", payload), &calls);
  EXPECT_EQ(diverged["decision"], "in_flight");
  EXPECT_EQ(diverged["key"], first["key"]);
  EXPECT_EQ(diverged["diverged_fields"], json::array({"valor"}));
  EXPECT_EQ(calls, kOneBegin);
  // One that does not derive at all (the model lost a field): the same.
  payload.erase("valor");
  json garbled = Call(Intent("begin", payload), &calls);
  EXPECT_EQ(garbled["decision"], "in_flight") << garbled.dump();
  EXPECT_EQ(garbled["diverged_fields"], json::array({"valor"}));
  EXPECT_EQ(calls, kOneBegin);
  // No payload at all: the same.
  json bare = Call(Intent("begin", nullptr), &calls);
  EXPECT_EQ(bare["decision"], "in_flight");
  EXPECT_EQ(calls, kOneBegin);
  // Completed, a redelivery replays in one call.
  Call({{"op", "complete"},
        {"tenant_id", "acme"},
        {"key", first["key"]},
        {"lease_token", first["lease_token"]},
        {"response", {{"txid", "e2e"}}}});
  json replay = Call(Intent("begin", testing::PixPayload()), &calls);
  EXPECT_EQ(replay["decision"], "replay");
  EXPECT_EQ(calls, kOneBegin);
}

TEST_F(OneStoreCall, RejectingDivergenceComparesWhatTheStoreHeld) {
  json first = Call(Intent("begin", testing::PixPayload()));
  ASSERT_EQ(first["decision"], "execute");
  std::map<std::string, int> calls;
  json same = Intent("begin", testing::PixPayload());
  same["on_divergence"] = "reject";
  EXPECT_EQ(Call(same, &calls)["decision"], "in_flight");
  EXPECT_EQ(calls, kOneBegin);
  json other = same;
  other["payload"]["valor"] = "181.00";
  json refused = Call(other, &calls);
  EXPECT_EQ(refused["error"]["code"], "payload_mismatch") << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("valor"), std::string::npos);
  EXPECT_EQ(calls, kOneBegin);  // the store's conflict carried the frozen intent
}

TEST_F(OneStoreCall, FreezeAndAmendAreOneStoreCallEach) {
  std::map<std::string, int> calls;
  json frozen = Call(Intent("freeze", testing::PixPayload()), &calls);
  ASSERT_EQ(frozen["created"], true) << frozen.dump();
  EXPECT_EQ(calls, (std::map<std::string, int>{{"Freeze", 1}}));
  json again = Call(Intent("freeze", testing::PixPayload()), &calls);
  EXPECT_EQ(again["created"], false);
  EXPECT_EQ(again["key"], frozen["key"]);
  EXPECT_EQ(calls, (std::map<std::string, int>{{"Freeze", 1}}));
  json payload = testing::PixPayload();
  payload["valor"] = "190.00";
  json amended = Call(Intent("amend", payload), &calls);
  EXPECT_EQ(amended["previous_key"], frozen["key"]) << amended.dump();
  EXPECT_NE(amended["key"], frozen["key"]);
  EXPECT_EQ(calls, (std::map<std::string, int>{{"Amend", 1}}));
  payload.erase("referencia_intencao");  // taken from intent_ref
  json missing = Call(Intent("amend", payload, "FAT-404"), &calls);
  EXPECT_EQ(missing["error"]["code"], "not_found") << missing.dump();
  EXPECT_EQ(calls, (std::map<std::string, int>{{"Amend", 1}}));
}

}  // namespace
}  // namespace intentd::agent
