// Keyring ids against every backend: an intent keeps the key_id it was
// frozen with, amend takes the new one, the registry, and the live intents
// per id.
#include <gtest/gtest.h>

#include "store/decision.h"
#include "tests/store/contract_fixture.h"

namespace intentd::store::testing {
namespace {

using Code = Status::Code;

IntentCandidate WithKeyId(IntentCandidate request, const std::string& key_id) {
  request.candidate->key_id = key_id;
  return request;
}

using KeyIdsContract = StoreContract;

TEST_P(KeyIdsContract, AnIntentKeepsTheKeyIdItWasFrozenWith) {
  BeginResult r =
      BeginExpectingOk(store_.get(), WithKeyId(NewIntentRequest("acme", "R1", KeyFor(1)), "1"));
  EXPECT_EQ(r.intent.key_id, "1");
  FreezeResult f;
  ASSERT_TRUE(
      store_->Freeze(WithKeyId(NewIntentRequest("acme", "R2", KeyFor(2)), "2026-12"), &f).ok());
  EXPECT_EQ(f.intent.key_id, "2026-12");
  Reopen();
  LookupResult l;
  ASSERT_TRUE(store_->Lookup("acme", "R1", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key_id, "1");
  // A redelivery under another current secret: the stored intent answers.
  r = BeginExpectingOk(store_.get(), ExistingIntentRequest("acme", "R1", KeyFor(1)));
  EXPECT_EQ(r.intent.key_id, "1");
  EXPECT_EQ(r.intent.key, KeyFor(1));
  // amend derives anew: the new key and its id.
  IntentCandidate amend = WithKeyId(NewIntentRequest("acme", "R2", KeyFor(3)), "3");
  amend.expected_key = KeyFor(2);
  AmendResult a;
  ASSERT_TRUE(store_->Amend(amend, /*force=*/false, &a).ok());
  EXPECT_EQ(a.intent.key_id, "3");
  ASSERT_TRUE(store_->Lookup("acme", "R2", "pix.cobranca", &l).ok());
  EXPECT_EQ(l.intent.key_id, "3");
}

TEST_P(KeyIdsContract, TheRegistryListsWhatWasRegisteredUntilUnregistered) {
  std::vector<std::string> ids;
  ASSERT_TRUE(store_->RegisteredKeyIds(&ids).ok());
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(store_->RegisterKeyId("1").ok());
  ASSERT_TRUE(store_->RegisterKeyId("0").ok());
  ASSERT_TRUE(store_->RegisterKeyId("1").ok());  // again: nothing changes
  Reopen();
  ASSERT_TRUE(store_->RegisteredKeyIds(&ids).ok());
  EXPECT_EQ(ids, (std::vector<std::string>{"0", "1"}));
  ASSERT_TRUE(store_->UnregisterKeyId("0").ok());
  ASSERT_TRUE(store_->RegisteredKeyIds(&ids).ok());
  EXPECT_EQ(ids, std::vector<std::string>{"1"});
}

TEST_P(KeyIdsContract, UsageCountsLiveIntentsPerKeyIdAndTheirTenants) {
  for (int i = 0; i < 3; ++i) {
    BeginExpectingOk(store_.get(),
                     WithKeyId(NewIntentRequest("acme", "A" + std::to_string(i), KeyFor(i)), "0"));
  }
  BeginExpectingOk(store_.get(), WithKeyId(NewIntentRequest("globex", "G", KeyFor(10)), "0"));
  BeginResult done =
      BeginExpectingOk(store_.get(), WithKeyId(NewIntentRequest("acme", "N", KeyFor(20)), "1"));
  Action a;
  ASSERT_TRUE(store_->Complete("acme", KeyFor(20), 1, "{}", &a).ok());
  std::vector<Store::KeyIdUsage> usage;
  ASSERT_TRUE(store_->CountKeyIdUsage({}, &usage).ok());
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].key_id, "0");
  EXPECT_EQ(usage[0].live_intents, 4u);
  EXPECT_EQ(usage[0].tenant_count, 2u);
  EXPECT_EQ(usage[0].tenants, (std::vector<std::string>{"acme", "globex"}));
  EXPECT_EQ(usage[1].key_id, "1");
  EXPECT_EQ(usage[1].live_intents, 1u);
  ASSERT_TRUE(store_->CountKeyIdUsage({"1"}, &usage).ok());
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].key_id, "1");
  // Past retention, the completed action's intent is not live any more; the
  // started ones keep theirs.
  clock_.Advance(31 * kDay);
  ASSERT_TRUE(store_->CountKeyIdUsage({}, &usage).ok());
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].key_id, "0");
  EXPECT_EQ(usage[0].live_intents, 4u);
}

INSTANTIATE_STORE_CONTRACT(KeyIdsContract);

}  // namespace
}  // namespace intentd::store::testing
