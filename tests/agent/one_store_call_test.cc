// freeze, begin and amend are one store call each (ops_intent.cc): a
// redelivered begin, the request intentd exists for, reads the frozen intent
// back inside the store's own step instead of a Lookup and a second Begin.
// The store here counts the calls the Dispatcher makes on a real RocksDB
// store.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "protocol/dispatcher.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"
#include "tests/store/forwarding_store.h"

namespace intentd::agent {
namespace {

using nlohmann::json;
using store::Status;

// Forwards every call to `inner` (ForwardingStore) and counts the calls
// that read or write intents and actions, by name.
class CountingStore : public store::ForwardingStore {
 public:
  explicit CountingStore(store::Store* inner) : ForwardingStore(inner) {}
  std::map<std::string, int> calls;

  Status Freeze(const store::IntentCandidate& r, store::FreezeResult* out) override {
    ++calls["Freeze"];
    return ForwardingStore::Freeze(r, out);
  }
  Status Begin(const store::IntentCandidate& r, int64_t lease_ms,
               store::BeginResult* out) override {
    ++calls["Begin"];
    return ForwardingStore::Begin(r, lease_ms, out);
  }
  Status GetAction(const std::string& t, const std::string& k, store::Action* a) override {
    ++calls["GetAction"];
    return ForwardingStore::GetAction(t, k, a);
  }
  Status Lookup(const std::string& t, const std::string& ref, const std::string& type,
                store::LookupResult* out) override {
    ++calls["Lookup"];
    return ForwardingStore::Lookup(t, ref, type, out);
  }
  Status Amend(const store::IntentCandidate& r, bool force, store::AmendResult* out) override {
    ++calls["Amend"];
    return ForwardingStore::Amend(r, force, out);
  }
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
