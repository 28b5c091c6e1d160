#include "store/rocks/codec.h"

#include <gtest/gtest.h>

namespace intentd::store::codec {
namespace {

using namespace std::string_literals;

TEST(Codec, KeysWithNulAndSeparatorBytesStayDistinct) {
  // Without length prefixes ("a\0", "b") and ("a", "\0b") would collide.
  EXPECT_NE(ActionKey("a\0"s, "b"), ActionKey("a", "\0b"s));
  EXPECT_NE(IntentKey("ab", "c", "t"), IntentKey("a", "bc", "t"));
  EXPECT_NE(IntentKey("", "x", "t"), IntentKey("x", "", "t"));
}

TEST(Codec, IntentKeyRoundTripsAnyBytes) {
  Intent i;
  const std::string tenant = "te\0n\xff"s;
  ASSERT_TRUE(DecodeIntentKey(IntentKey(tenant, "ref\n", "pix.cobranca"), &i));
  EXPECT_EQ(i.tenant_id, tenant);
  EXPECT_EQ(i.intent_ref, "ref\n");
  EXPECT_EQ(i.action_type, "pix.cobranca");
  EXPECT_FALSE(DecodeIntentKey(IntentKey(tenant, "r", "t") + "x", &i));
  EXPECT_FALSE(
      DecodeIntentKey("\x05"
                      "ab",
                      &i));
}

TEST(Codec, ActionValueRoundTripsEveryField) {
  Action a;
  a.action_type = "pix.cobranca";
  a.intent_ref = "FAT-1";
  a.status = ActionStatus::kReleased;
  a.attempt = 3;
  a.lease_token = 3;
  a.lease_until_ms = -5;  // any int64
  a.response = "";
  a.error = "{\"e\":\"\0\"}"s;
  a.created_at_ms = 1'800'000'000'000;
  a.updated_at_ms = INT64_MAX;
  Action b;
  int64_t retain = 0;
  ASSERT_TRUE(DecodeActionValue(EncodeActionValue(a, 12345), &b, &retain).ok());
  EXPECT_EQ(retain, 12345);
  EXPECT_EQ(b.action_type, a.action_type);
  EXPECT_EQ(b.intent_ref, a.intent_ref);
  EXPECT_EQ(b.status, a.status);
  EXPECT_EQ(b.attempt, a.attempt);
  EXPECT_EQ(b.lease_token, a.lease_token);
  EXPECT_EQ(b.lease_until_ms, a.lease_until_ms);
  EXPECT_EQ(b.error, a.error);
  EXPECT_EQ(b.created_at_ms, a.created_at_ms);
  EXPECT_EQ(b.updated_at_ms, a.updated_at_ms);
}

TEST(Codec, IntentValueRoundTrips) {
  Intent i;
  i.payload = "{\"valor\":\"18000\"}";
  i.key = std::string(64, 'a');
  i.rules_version = 2;
  i.created_at_ms = 7;
  i.updated_at_ms = 8;
  Intent j;
  int64_t retain = 0;
  ASSERT_TRUE(DecodeIntentValue(EncodeIntentValue(i, INT64_MAX), &j, &retain).ok());
  EXPECT_EQ(retain, INT64_MAX);
  EXPECT_EQ(j.payload, i.payload);
  EXPECT_EQ(j.key, i.key);
  EXPECT_EQ(j.rules_version, 2);
  EXPECT_EQ(j.created_at_ms, 7);
  EXPECT_EQ(j.updated_at_ms, 8);
}

TEST(Codec, HeaderIsFormatByteThenLittleEndianRetention) {
  const std::string v = EncodeIntentValue(Intent(), 0x0102030405060708);
  ASSERT_GE(v.size(), kValueHeaderSize);
  EXPECT_EQ(v[0], static_cast<char>(kValueFormat));
  EXPECT_EQ(v[1], 0x08);
  EXPECT_EQ(v[8], 0x01);
  ValueHeader h;
  ASSERT_TRUE(ReadValueHeader(v, &h));
  EXPECT_EQ(h.retain_until_ms, 0x0102030405060708);
  EXPECT_FALSE(ReadValueHeader("short", &h));
}

TEST(Codec, TruncatedOrUnknownValuesAreCorruption) {
  Action a;
  a.response = "hello";
  std::string v = EncodeActionValue(a, 1);
  Action b;
  int64_t retain;
  EXPECT_EQ(DecodeActionValue(v.substr(0, v.size() - 1), &b, &retain).code(),
            Status::Code::kCorruption);
  EXPECT_EQ(DecodeActionValue(v + "x", &b, &retain).code(), Status::Code::kCorruption);
  std::string newer = v;
  newer[0] = static_cast<char>(kValueFormat + 1);
  EXPECT_EQ(DecodeActionValue(newer, &b, &retain).code(), Status::Code::kCorruption);
  std::string bad_status = v;
  bad_status[kValueHeaderSize] = 9;
  EXPECT_EQ(DecodeActionValue(bad_status, &b, &retain).code(), Status::Code::kCorruption);
  EXPECT_EQ(DecodeIntentValue("", nullptr, &retain).code(), Status::Code::kCorruption);
}

TEST(Codec, LeaseKeysSortByLeaseUntilThenDecode) {
  EXPECT_LT(LeaseKeyAll(-1, "z", "k"), LeaseKeyAll(0, "a", "k"));
  EXPECT_LT(LeaseKeyAll(255, "z", "k"), LeaseKeyAll(256, "a", "k"));
  EXPECT_EQ(LeaseKeyAll(7, "t", "k").rfind(LeasePrefixAll(), 0), 0u);
  // Format 1's per-tenant entries (dropped on open) sort apart from these.
  EXPECT_GT(std::string(kLeaseTenantOrderBegin), LeaseKeyAll(INT64_MAX, "\xff", "\xff"));
  int64_t until;
  std::string tenant, key;
  ASSERT_TRUE(DecodeLeaseKey(LeaseKeyAll(42, "t\0"s, "k"), &until, &tenant, &key));
  EXPECT_EQ(until, 42);
  EXPECT_EQ(tenant, "t\0"s);
  EXPECT_EQ(key, "k");
  ASSERT_TRUE(DecodeLeaseKey(LeaseKeyAll(-42, "t", "k2"), &until, &tenant, &key));
  EXPECT_EQ(until, -42);
  EXPECT_EQ(key, "k2");
  EXPECT_FALSE(DecodeLeaseKey("X", &until, &tenant, &key));
  EXPECT_FALSE(DecodeLeaseKey(LeaseKeyAll(1, "t", "k") + "x", &until, &tenant, &key));
}

TEST(Codec, MessageRecordsRoundTripAndRefuseWhatTheyCannotRead) {
  MessageRecord m;
  ASSERT_TRUE(DecodeMessageKey(MessageKey("t\0"s, "whatsapp", "wamid.\xff"s), &m));
  EXPECT_EQ(m.tenant_id, "t\0"s);
  EXPECT_EQ(m.channel, "whatsapp");
  EXPECT_EQ(m.message_id, "wamid.\xff"s);
  EXPECT_NE(MessageKey("a", "b\0"s, "c"), MessageKey("a", "b", "\0c"s));
  EXPECT_FALSE(DecodeMessageKey(MessageKey("a", "b", "c") + "x", &m));

  m.state = MessageState::kProcessing;
  m.meta = R"({"from":"5511"})";
  m.count = 3;
  m.first_seen_at_ms = 1'800'000'000'000;
  m.last_seen_at_ms = 1'800'000'000'500;
  m.retain_until_ms = 1'800'600'000'000;
  m.lease_token = 2;
  m.lease_until_ms = 1'800'000'060'000;
  const std::string value = EncodeMessageValue(m);
  ValueHeader header;
  ASSERT_TRUE(ReadValueHeader(value, &header));  // what the retention filter reads
  EXPECT_EQ(header.retain_until_ms, m.retain_until_ms);
  MessageRecord back;
  ASSERT_TRUE(DecodeMessageValue(value, &back).ok());
  EXPECT_EQ(back.state, m.state);
  EXPECT_EQ(back.meta, m.meta);
  EXPECT_EQ(back.count, 3);
  EXPECT_EQ(back.first_seen_at_ms, m.first_seen_at_ms);
  EXPECT_EQ(back.last_seen_at_ms, m.last_seen_at_ms);
  EXPECT_EQ(back.retain_until_ms, m.retain_until_ms);
  EXPECT_EQ(back.lease_token, 2);
  EXPECT_EQ(back.lease_until_ms, m.lease_until_ms);

  std::string bad_state = value;
  bad_state[kValueHeaderSize] = 9;
  EXPECT_EQ(DecodeMessageValue(bad_state, &back).code(), Status::Code::kCorruption);
  EXPECT_EQ(DecodeMessageValue(value.substr(0, value.size() - 1), &back).code(),
            Status::Code::kCorruption);
  EXPECT_EQ(DecodeMessageValue(value + "x", &back).code(), Status::Code::kCorruption);
  EXPECT_EQ(DecodeMessageValue(value.substr(0, 4), &back).code(), Status::Code::kCorruption);
}

TEST(Codec, AnIntentValueEndsWithItsKeyIdAndInputAndOlderOnesReadAsZeroAndNone) {
  Intent i;
  i.key = "k";
  i.payload = "{}";
  i.rules_version = 2;
  i.key_id = "2026-12";
  i.input = R"({"descricao":"Pedido 42","valor":"180.00"})";
  std::string value = EncodeIntentValue(i, 5);
  Intent back;
  int64_t retain = 0;
  ASSERT_TRUE(DecodeIntentValue(value, &back, &retain).ok());
  EXPECT_EQ(back.key_id, "2026-12");
  EXPECT_EQ(back.input, i.input);
  // Format 4 wrote no input: the same value without its last field.
  std::string format4 = value.substr(0, value.size() - 1 - i.input.size());
  ASSERT_TRUE(DecodeIntentValue(format4, &back, &retain).ok());
  EXPECT_EQ(back.key_id, "2026-12");
  EXPECT_EQ(back.input, "");
  // Format 3 wrote no key id either.
  const std::string format3 = format4.substr(0, format4.size() - 1 - i.key_id.size());
  ASSERT_TRUE(DecodeIntentValue(format3, &back, &retain).ok());
  EXPECT_EQ(back.key_id, "0");
  EXPECT_EQ(back.input, "");
  EXPECT_EQ(back.payload, "{}");
  EXPECT_EQ(DecodeIntentValue(value + "x", &back, &retain).code(), Status::Code::kCorruption);
  EXPECT_EQ(DecodeIntentValue(value.substr(0, value.size() - 1), &back, &retain).code(),
            Status::Code::kCorruption);
}

}  // namespace
}  // namespace intentd::store::codec
