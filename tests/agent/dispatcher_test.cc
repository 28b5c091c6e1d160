// The protocol end to end through the Dispatcher, in process, on a real
// RocksDB store with a manual clock (lease expiry without sleeping).
#include "protocol/dispatcher.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "protocol/ops.h"
#include "store/rocks/fault_injection.h"
#include "store/rocks/rocks_store.h"
#include "tests/agent/agent_util.h"

namespace intentd::agent {
namespace {

using nlohmann::json;
using testing::PixPayload;
using testing::TempDir;

constexpr int64_t kT0 = 1796000000000;

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(Config()); }

  void Open(Config config, int rules_version = 2) {
    dispatcher_.reset();
    store_.reset();
    config_ = std::move(config);
    store::RocksOptions options;
    options.path = dir_.path() + "/data";
    options.sync = false;
    options.clock = &clock_;
    ASSERT_TRUE(store::RocksStore::Open(options, &store_).ok());
    DispatcherOptions d;
    d.rules_version = rules_version;
    d.clock = &clock_;
    dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, store_.get(), d);
  }

  std::string Raw(const std::string& line) { return dispatcher_->HandleLine(peer_, line); }
  json Call(const json& request) {
    json r = json::parse(Raw(request.dump()), nullptr, false);
    EXPECT_TRUE(r.is_object()) << request.dump();
    return r;
  }
  static std::string Code(const json& r) {
    return r.contains("error") ? r["error"].value("code", "") : "";
  }

  json Begin(const json& payload = PixPayload(), const std::string& ref = "FAT-2026-000123",
             int64_t lease_ms = 60000) {
    json req = {{"op", "begin"},
                {"tenant_id", "acme"},
                {"intent_ref", ref},
                {"action_type", "pix.cobranca"},
                {"lease_ms", lease_ms}};
    if (!payload.is_null()) req["payload"] = payload;
    return Call(req);
  }
  json Complete(const json& begun, const json& response = {{"txid", "e2e"}}) {
    return Call({{"op", "complete"},
                 {"tenant_id", "acme"},
                 {"key", begun["key"]},
                 {"lease_token", begun["lease_token"]},
                 {"response", response}});
  }

  TempDir dir_;
  store::ManualClock clock_{kT0};
  normalizers::KeyDeriver deriver_{testing::kTestSecret};
  Config config_;
  std::unique_ptr<store::RocksStore> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  transport::PeerCredentials peer_{1, 1000, 1000, {1000}};
};

TEST_F(DispatcherTest, PingReportsVersionsAndEchoesId) {
  json r = Call({{"id", 7}, {"op", "ping"}});
  EXPECT_EQ(r["id"], 7);
  EXPECT_TRUE(r["ok"].get<bool>());
  EXPECT_EQ(r["protocol"], 1);
  EXPECT_EQ(r["rules_version"], 2);
  EXPECT_TRUE(r["version"].is_string());
}

TEST_F(DispatcherTest, IdIsEchoedByValueAndType) {
  auto starts = [&](const std::string& line, const std::string& prefix) {
    std::string r = Raw(line);
    EXPECT_EQ(r.rfind(prefix, 0), 0u) << r;
  };
  starts(R"({"id":18446744073709551615,"op":"ping"})", R"({"id":18446744073709551615,"ok":true)");
  starts(R"({"id":123456789012345678901234567890,"op":"ping"})",
         R"({"id":123456789012345678901234567890,"ok":true)");
  starts(R"({"id":-9007199254740993,"op":"ping"})", R"({"id":-9007199254740993,"ok":true)");
  starts(R"({"id":1.50,"op":"ping"})", R"({"id":1.50,"ok":true)");
  starts(R"({"id":"abc","op":"ping"})", R"({"id":"abc","ok":true)");
  starts(R"({"id":null,"op":"ping"})", R"({"id":null,"ok":true)");
  starts(R"({"id":true,"op":"nope"})", R"({"id":true,"ok":false)");
  starts(R"({"op":"ping"})", R"({"ok":true)");
}

// Strings are checked eight bytes at a time for what JSON escapes: every
// such byte, at every position of a word and of the tail, is found (a missed
// one would be written unescaped). Bytes that dump writes unchanged (0x7F,
// UTF-8) are PlainJsonPrefix's test (tests/normalizers/canonical_test.cc):
// here either answer writes the same text.
TEST(ReplyText, StringsWithAnEscapedByteAnywhereAreWrittenAsDumpWritesThem) {
  const std::string specials = std::string("\"\\\x1f\x01\t\n") + std::string(1, '\0');
  const std::string harmless = " ~!#[]{}09Azaz\x20\x7e\x21\x5b\x5d";
  for (size_t length = 1; length <= 24; ++length) {
    for (size_t at = 0; at < length; ++at) {
      for (char special : specials) {
        std::string text;
        for (size_t i = 0; i < length; ++i) text += harmless[(i * 7 + length) % harmless.size()];
        text[at] = special;
        std::string got;
        AppendJson(json(text), &got);
        ASSERT_EQ(got, json(text).dump()) << "length " << length << " at " << at;
      }
    }
  }
}

// Replies write values without nlohmann's serializer (ops.h): the text must
// be exactly what json::dump writes, for every kind of value.
TEST(ReplyText, ValuesAreWrittenExactlyAsDumpWritesThem) {
  const std::string invalid_utf8("a\xff\xc3", 3);
  const std::vector<json> values = {
      "",
      "plain ascii 0-9 ~",
      "quote \" and backslash \\",
      "tab\tnewline\n\x01\x1f",
      "del \x7f",
      "caf\u00e9 \u20ac \U0001F600",
      invalid_utf8,
      INT64_MIN,
      INT64_MAX,
      -1,
      0,
      std::numeric_limits<uint64_t>::max(),
      true,
      false,
      nullptr,
      1.5,
      1e300,
      json::array({1, "x"}),
      json{{"k", "v"}},
      json::array(),
      json::object(),
      json::array({json::array(), json::object(), nullptr}),
      json::parse(R"({"psp":"bench","valor":"1.00","n":[1,-2,3.5,)"
                  R"({"z":"caf\u00e9","a":[[]],"q":"\"\\\n"}],)"
                  R"("b":{},"t":true,"e":1e-7,"u":18446744073709551615})"),
      json{{invalid_utf8, json::array({invalid_utf8, 0.1})}}};
  for (const json& v : values) {
    const std::string expected = v.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string text = "<";
    AppendJson(v, &text);
    EXPECT_EQ(text, "<" + expected);
    Reply reply;
    reply.Add("k", v);
    if (v.is_string()) reply.Add("s", v.get_ref<const std::string&>());
    if (v.is_string()) reply.Add("c", v.get_ref<const std::string&>().c_str());
    if (v.is_boolean()) reply.Add("b", v.get<bool>());
    if (v.is_number_integer() && !v.is_number_unsigned()) reply.Add("i", v.get<int64_t>());
    if (v.is_number_unsigned()) reply.Add("u", v.get<uint64_t>());
    std::string want = ",\"k\":" + expected;
    if (v.is_string()) {
      want += ",\"s\":" + expected;
      const std::string upto_nul = v.get_ref<const std::string&>().c_str();
      want += ",\"c\":" + json(upto_nul).dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (v.is_boolean()) want += ",\"b\":" + expected;
    if (v.is_number_integer() && !v.is_number_unsigned()) want += ",\"i\":" + expected;
    if (v.is_number_unsigned()) want += ",\"u\":" + expected;
    EXPECT_EQ(reply.body(), want);
    // complete's result (and fail's error) are stored as this text, and a
    // repeated complete is compared with it: it must stay dump's.
    if (v.dump(-1, ' ', false, json::error_handler_t::replace) ==
        v.dump(-1, ' ', false, json::error_handler_t::ignore)) {  // valid UTF-8
      std::string stored = "left over";
      OpError error;
      const json request{{"result", v}};
      // From the request line, as the parser builds it.
      ParsedLine parsed;
      ASSERT_EQ(ParseRequestLine(request.dump(), &parsed), LineParse::kOk) << request.dump();
      ASSERT_TRUE(ReadResultValue(parsed.value(), "result", &stored, &error));
      EXPECT_EQ(stored, v.dump(-1, ' ', false, json::error_handler_t::strict));
    }
  }
  Reply ints;
  ints.Add("n", 7);
  EXPECT_EQ(ints.body(), ",\"n\":7");
}

// Routed after the parse (OpSpec::slow): with a store that never blocks the
// ops are answered where the line was parsed (the io thread), the slow ones
// are deferred to a worker; with any other store every op is deferred. Lines
// that are no request are answered at once either way.
TEST_F(DispatcherTest, SlowOpsAndStoresThatMayBlockAreDeferredToAWorker) {
  DispatcherOptions d;
  d.clock = &clock_;
  d.quick_store = true;
  Dispatcher quick(config_, deriver_, store_.get(), d);
  const transport::PeerCredentials& peer = peer_;
  const auto deferred = [&](Dispatcher& dispatcher, const std::string& line) {
    transport::Reply reply = dispatcher.Handle(peer, line);
    if (!reply.deferred) {
      EXPECT_FALSE(reply.line.empty()) << line;
      return false;
    }
    EXPECT_TRUE(reply.line.empty()) << line;
    const transport::Reply answer = reply.deferred();
    EXPECT_FALSE(answer.deferred) << line;
    EXPECT_NE(json::parse(answer.line)["ok"], nullptr) << answer.line;
    return true;
  };
  EXPECT_FALSE(deferred(quick, R"({"op":"ping"})"));
  EXPECT_FALSE(
      deferred(quick, R"({"op":"derive","tenant_id":"acme","action_type":"pix.cobranca"})"));
  EXPECT_FALSE(deferred(quick, R"({"op":"status","tenant_id":"acme","key":"k","note":"stats"})"));
  EXPECT_FALSE(deferred(quick, "not json"));
  EXPECT_FALSE(deferred(quick, R"({"op":"nope"})"));
  for (const OpSpec& op : kOps) {
    const std::string line = std::string(R"({"id":1,"op":")") + std::string(op.name) +
                             R"(","tenant_id":"acme","key":"k"})";
    EXPECT_EQ(deferred(quick, line), op.slow) << line;
    EXPECT_TRUE(deferred(*dispatcher_, line)) << line;  // quick_store off
  }
  // A seen batch of more than 64 messages reads a record per message: a
  // worker's, not the io thread's.
  const auto batch = [](int n) {
    json ids = json::array();
    for (int i = 0; i < n; ++i) ids.push_back("wamid." + std::to_string(i));
    return json{{"op", "seen"}, {"tenant_id", "acme"}, {"channel", "whatsapp"}, {"messages", ids}}
        .dump();
  };
  EXPECT_FALSE(deferred(quick, batch(64)));
  EXPECT_TRUE(deferred(quick, batch(65)));
  // An op's name written with escapes is the same op once parsed.
  EXPECT_TRUE(deferred(quick, R"({"id":1,"op":"st\u0061ts"})"));
  EXPECT_FALSE(deferred(*dispatcher_, "[1]"));
}

TEST_F(DispatcherTest, BadLinesAreBadRequest) {
  const std::vector<std::string> lines = {"not json",
                                          "[1,2]",
                                          "\"str\"",
                                          "{\"op\":1}",
                                          "{}",
                                          "",
                                          "{\"op\":\"ping\"",
                                          "{\"op\":\"p\xffng\"}",
                                          std::string(200, '[')};
  for (const std::string& line : lines) {
    json r = json::parse(Raw(line), nullptr, false);
    ASSERT_TRUE(r.is_object()) << line;
    EXPECT_EQ(Code(r), "bad_request") << line;
    EXPECT_FALSE(r["error"]["message"].get<std::string>().empty());
  }
}

TEST_F(DispatcherTest, FrameTooLargeNamesTheConfiguredLimit) {
  Config config;
  config.limits.max_frame_bytes = 4096;
  Open(config);
  json r = json::parse(dispatcher_->TransportErrorLine(transport::TransportError::kFrameTooLarge));
  EXPECT_EQ(Code(r), "frame_too_large");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("under 4096 bytes"), std::string::npos)
      << r.dump();
}

TEST_F(DispatcherTest, UnknownOpIsNamed) {
  json r = Call({{"id", 1}, {"op", "charge"}});
  EXPECT_EQ(Code(r), "unknown_op");
  EXPECT_EQ(r["id"], 1);
}

TEST_F(DispatcherTest, BeginExecutesThenCompleteThenReplays) {
  json first = Begin();
  ASSERT_TRUE(first["ok"].get<bool>()) << first.dump();
  EXPECT_EQ(first["decision"], "execute");
  EXPECT_EQ(first["created"], true);
  EXPECT_EQ(first["diverged"], false);
  EXPECT_EQ(first["attempt"], 1);
  EXPECT_EQ(first["lease_token"], 1);
  EXPECT_EQ(first["lease_until_ms"], kT0 + 60000);
  EXPECT_EQ(first["key"].get<std::string>().size(), 64u);
  EXPECT_EQ(first["txid"], first["key"].get<std::string>().substr(0, 35));
  EXPECT_EQ(first["payload"]["valor"], "18000");
  EXPECT_EQ(first["payload"]["chave_pix_destino"], "11144477735");

  json done = Complete(first, {{"provider_id", "ch_1"}, {"amount", 18000}});
  ASSERT_TRUE(done["ok"].get<bool>()) << done.dump();
  EXPECT_EQ(done["status"], "completed");

  json again = Begin();
  EXPECT_EQ(again["decision"], "replay");
  EXPECT_EQ(again["created"], false);
  EXPECT_EQ(again["status"], "completed");
  EXPECT_EQ(again["response"]["provider_id"], "ch_1");
  EXPECT_EQ(again["key"], first["key"]);
}

TEST_F(DispatcherTest, LiveLeaseIsInFlightWithRetryAfter) {
  json first = Begin();
  clock_.Advance(13000);
  json second = Begin();
  EXPECT_EQ(second["decision"], "in_flight");
  EXPECT_EQ(second["retry_after_ms"], 47000);
  EXPECT_EQ(second.contains("lease_token"), false);
}

TEST_F(DispatcherTest, ExpiredLeaseIsRecoveredWithTheNextToken) {
  json first = Begin();
  clock_.Advance(60000);
  json second = Begin();
  EXPECT_EQ(second["decision"], "recover");
  EXPECT_EQ(second["lease_token"], 2);
  EXPECT_EQ(second["previous_lease_token"], 1);
  EXPECT_EQ(second["attempt"], 2);
  EXPECT_EQ(second["key"], first["key"]);
  // The stale worker is fenced out; the new one completes.
  json stale = Complete(first);
  EXPECT_EQ(Code(stale), "lease_lost");
  EXPECT_EQ(stale["error"]["field"], "lease_token");
  EXPECT_TRUE(Complete(second)["ok"].get<bool>());
}

TEST_F(DispatcherTest, ExpiredLeaseNotTakenOverStillCompletes) {
  json first = Begin();
  clock_.Advance(120000);
  EXPECT_TRUE(Complete(first)["ok"].get<bool>());
}

TEST_F(DispatcherTest, RetriableFailReleasesAndNextBeginExecutes) {
  json first = Begin();
  json failed = Call({{"op", "fail"},
                      {"tenant_id", "acme"},
                      {"key", first["key"]},
                      {"lease_token", 1},
                      {"error", {{"http", 503}}},
                      {"retriable", true}});
  EXPECT_EQ(failed["status"], "released");
  json second = Begin();
  EXPECT_EQ(second["decision"], "execute");
  EXPECT_EQ(second["lease_token"], 2);
  EXPECT_EQ(second["attempt"], 2);
}

TEST_F(DispatcherTest, TerminalFailReplaysTheError) {
  json first = Begin();
  json failed = Call({{"op", "fail"},
                      {"tenant_id", "acme"},
                      {"key", first["key"]},
                      {"lease_token", 1},
                      {"error", {{"reason", "card declined"}}},
                      {"retriable", false}});
  EXPECT_EQ(failed["status"], "failed");
  json again = Begin();
  EXPECT_EQ(again["decision"], "replay");
  EXPECT_EQ(again["status"], "failed");
  EXPECT_EQ(again["error"]["reason"], "card declined");
}

TEST_F(DispatcherTest, RepeatedCompleteSucceedsAndKeepsTheFirstResponse) {
  json first = Begin();
  EXPECT_TRUE(Complete(first, "one")["ok"].get<bool>());
  json repeat = Complete(first, "two");
  EXPECT_TRUE(repeat["ok"].get<bool>()) << repeat.dump();
  json status = Call({{"op", "status"}, {"tenant_id", "acme"}, {"key", first["key"]}});
  EXPECT_EQ(status["action"]["response"], "one");
  EXPECT_EQ(status["action"]["status"], "completed");
}

TEST_F(DispatcherTest, TokenOnTerminalActionIsInvalidState) {
  json first = Begin();
  Complete(first);
  json fail = Call({{"op", "fail"},
                    {"tenant_id", "acme"},
                    {"key", first["key"]},
                    {"lease_token", 1},
                    {"error", nullptr},
                    {"retriable", false}});
  EXPECT_EQ(Code(fail), "invalid_state");
  json renew =
      Call({{"op", "renew"}, {"tenant_id", "acme"}, {"key", first["key"]}, {"lease_token", 1}});
  EXPECT_EQ(Code(renew), "invalid_state");
}

TEST_F(DispatcherTest, RenewExtendsTheLease) {
  json first = Begin();
  clock_.Advance(50000);
  json renewed = Call({{"op", "renew"},
                       {"tenant_id", "acme"},
                       {"key", first["key"]},
                       {"lease_token", 1},
                       {"lease_ms", 30000}});
  EXPECT_EQ(renewed["lease_until_ms"], kT0 + 80000);
  clock_.Advance(20000);
  EXPECT_EQ(Begin()["decision"], "in_flight");
}

TEST_F(DispatcherTest, RedeliveryWithDivergedPayloadUsesTheFrozenOne) {
  json first = Begin();
  json second = Begin(PixPayload("1800.00"));
  EXPECT_EQ(second["decision"], "in_flight");
  EXPECT_EQ(second["diverged"], true);
  EXPECT_EQ(second["diverged_fields"], json::array({"valor"}));
  EXPECT_EQ(second["key"], first["key"]);
  EXPECT_EQ(second["payload"]["valor"], "18000");
  // A garbled extraction still gets the frozen decision.
  json garbled = Begin({{"valor", "abc"}, {"chave_pix_destino", true}});
  EXPECT_TRUE(garbled["ok"].get<bool>()) << garbled.dump();
  EXPECT_EQ(garbled["diverged"], true);
  EXPECT_EQ(garbled["diverged_fields"], json::array({"cliente_id", "valor", "chave_pix_destino"}));
  // Same intent differently written is not a divergence.
  json same = Begin(PixPayload(" 180.0 ", "11144477735"));
  EXPECT_EQ(same["diverged"], false);
  json stats = Call({{"op", "stats"}});
  EXPECT_EQ(stats["diverged"], 2);
  EXPECT_EQ(stats["intents_created"], 1);
  EXPECT_EQ(stats["intents_reused"], 3);
}

TEST_F(DispatcherTest, RejectOnDivergenceChangesNothing) {
  json first = Begin();
  json req = {{"op", "begin"},
              {"tenant_id", "acme"},
              {"intent_ref", "FAT-2026-000123"},
              {"action_type", "pix.cobranca"},
              {"payload", PixPayload("1800.00")},
              {"on_divergence", "reject"}};
  json r = Call(req);
  EXPECT_EQ(Code(r), "payload_mismatch");
  json status = Call({{"op", "status"}, {"tenant_id", "acme"}, {"key", first["key"]}});
  EXPECT_EQ(status["action"]["attempt"], 1);
  req["payload"] = PixPayload();
  EXPECT_EQ(Call(req)["decision"], "in_flight");
}

TEST_F(DispatcherTest, BeginWithoutPayloadNeedsAnExistingIntent) {
  json r = Begin(nullptr);
  EXPECT_EQ(Code(r), "missing_field");
  EXPECT_EQ(r["error"]["field"], "payload");
  Begin();
  EXPECT_EQ(Begin(nullptr)["decision"], "in_flight");
}

TEST_F(DispatcherTest, ArgumentErrorsNameTheField) {
  struct Case {
    json request;
    std::string code;
    std::string field;
  };
  json base = {{"op", "begin"},
               {"tenant_id", "acme"},
               {"intent_ref", "FAT-2026-000123"},
               {"action_type", "pix.cobranca"},
               {"payload", PixPayload()}};
  auto with = [&](const char* k, json v) {
    json r = base;
    if (v.is_discarded())
      r.erase(k);
    else
      r[k] = v;
    return r;
  };
  std::vector<Case> cases = {
      {with("tenant_id", json(json::value_t::discarded)), "missing_field", "tenant_id"},
      {with("tenant_id", " \t"), "invalid_field", "tenant_id"},
      {with("tenant_id", 5), "invalid_field", "tenant_id"},
      {with("tenant_id", std::string(257, 't')), "invalid_field", "tenant_id"},
      {with("intent_ref", ""), "invalid_field", "intent_ref"},
      {with("action_type", "pix.transfer"), "unknown_action_type", "action_type"},
      {with("payload", "x"), "invalid_field", "payload"},
      {with("lease_ms", 999), "invalid_field", "lease_ms"},
      {with("lease_ms", 3600001), "invalid_field", "lease_ms"},
      {with("on_divergence", "ignore"), "invalid_field", "on_divergence"},
      {with("payload", PixPayload("10.005")), "invalid_field", "valor"},
      {with("payload", json::object()), "missing_field", "cliente_id"},
  };
  for (const Case& c : cases) {
    json r = Call(c.request);
    EXPECT_EQ(Code(r), c.code) << c.request.dump();
    EXPECT_EQ(r["error"].value("field", ""), c.field) << c.request.dump();
  }
  // Nothing was written by any of them.
  EXPECT_EQ(Call({{"op", "lookup"},
                  {"tenant_id", "acme"},
                  {"intent_ref", "FAT-2026-000123"},
                  {"action_type", "pix.cobranca"}})["found"],
            false);
}

TEST_F(DispatcherTest, IntentRefFillsAndMustMatchTheReference) {
  json payload = PixPayload();
  payload.erase("referencia_intencao");
  json r = Begin(payload, "FAT-9");
  EXPECT_EQ(r["payload"]["referencia_intencao"], "FAT-9");
  payload["referencia_intencao"] = " FAT-10 ";
  EXPECT_EQ(Begin(payload, "FAT-10")["decision"], "execute");
  payload["referencia_intencao"] = "FAT-11";
  json bad = Begin(payload, "FAT-12");
  EXPECT_EQ(Code(bad), "invalid_field");
  EXPECT_EQ(bad["error"]["field"], "referencia_intencao");
}

// An id written as a double (echoed from its source text) or as an integer
// changes nothing else in the answers: repeated names (the last wins), the
// reference filled in from intent_ref, the stored response's text.
TEST_F(DispatcherTest, TheIdsFormChangesNothingElse) {
  const std::string payload =
      R"({"cliente_id":"01J9ZQ3K8V7M2N4P6R8T0W2Y4A","valor":"1.00","valor":" 180.00 ",)"
      R"("chave_pix_destino":"111.444.777-35","extra":[1,{"b":2,"a":-3.25e1}]})";
  const std::string response =
      R"({"z":{"k":1,"k":[true,null]},"a":"caf\u00e9 \"q\"","n":-7,"u":18446744073709551615,)"
      R"("f":0.1,"e":1e300})";
  std::map<std::string, json> answers;  // by route: what must not differ
  for (const std::string id : {"7", "7.5"}) {
    const std::string ref = "ROUTE-" + id;
    json derived = json::parse(Raw(R"({"id":)" + id +
                                   R"(,"op":"derive","tenant_id":"acme","action_type":)"
                                   R"("pix.cobranca","payload":{"referencia_intencao":"D-1",)" +
                                   payload.substr(1) + "}"));
    ASSERT_TRUE(derived["ok"].get<bool>()) << derived.dump();
    EXPECT_EQ(derived["id"].dump(), id);
    json begun = json::parse(Raw(R"({"id":)" + id +
                                 R"(,"op":"begin","tenant_id":"acme",)"
                                 R"("intent_ref":")" +
                                 ref +
                                 R"(","action_type":"pix.cobranca",)"
                                 R"("lease_ms":1000,"lease_ms":60000,"payload":)" +
                                 payload + "}"));
    ASSERT_TRUE(begun["ok"].get<bool>()) << begun.dump();
    EXPECT_EQ(begun["decision"], "execute");
    EXPECT_EQ(begun["lease_until_ms"], kT0 + 60000);  // the last lease_ms
    EXPECT_EQ(begun["payload"]["referencia_intencao"], ref);
    EXPECT_EQ(begun["payload"]["valor"], "18000");
    json done = json::parse(Raw(R"({"id":)" + id +
                                R"(,"op":"complete","tenant_id":"acme",)"
                                R"("key":")" +
                                begun["key"].get<std::string>() + R"(","lease_token":)" +
                                begun["lease_token"].dump() + R"(,"response":)" + response + "}"));
    ASSERT_TRUE(done["ok"].get<bool>()) << done.dump();
    const std::string replay = Raw(R"({"op":"begin","tenant_id":"acme","intent_ref":")" + ref +
                                   R"(","action_type":"pix.cobranca"})");
    const size_t at = replay.find(R"("response":)");
    ASSERT_NE(at, std::string::npos) << replay;
    answers[id] = {{"derived", derived["key"]},
                   {"derived_payload", derived["payload"]},
                   {"response_text", replay.substr(at)}};
  }
  EXPECT_EQ(answers["7"], answers["7.5"]);
  // The stored response is dump's text of the last values, names sorted.
  EXPECT_EQ(answers["7"]["response_text"],
            std::string(R"("response":{"a":"café \"q\"","e":1e+300,"f":0.1,"n":-7,)"
                        R"("u":18446744073709551615,"z":{"k":[true,null]}}})"));
}

TEST_F(DispatcherTest, TenantsAreSeparate) {
  json a = Begin();
  json b = Call({{"op", "begin"},
                 {"tenant_id", "other"},
                 {"intent_ref", "FAT-2026-000123"},
                 {"action_type", "pix.cobranca"},
                 {"payload", PixPayload()}});
  EXPECT_EQ(b["decision"], "execute");
  EXPECT_NE(a["key"], b["key"]);
  json cross = Call({{"op", "status"}, {"tenant_id", "other"}, {"key", a["key"]}});
  EXPECT_EQ(Code(cross), "not_found");
}

TEST_F(DispatcherTest, FreezeWritesOnceAndReportsDivergence) {
  json payload = PixPayload();
  payload.erase("referencia_intencao");
  json req = {{"op", "freeze"},
              {"tenant_id", "acme"},
              {"intent_ref", "FAT-1"},
              {"action_type", "pix.cobranca"},
              {"payload", payload}};
  json first = Call(req);
  EXPECT_EQ(first["created"], true);
  EXPECT_EQ(first["created_at_ms"], kT0);
  req["payload"]["referencia_intencao"] = "FAT-1";
  req["payload"]["valor"] = 180;
  json second = Call(req);
  EXPECT_EQ(second["created"], false);
  EXPECT_EQ(second["diverged"], false);
  EXPECT_EQ(second["key"], first["key"]);
  json lookup = Call({{"op", "lookup"},
                      {"tenant_id", "acme"},
                      {"intent_ref", "FAT-1"},
                      {"action_type", "pix.cobranca"}});
  EXPECT_EQ(lookup["found"], true);
  EXPECT_TRUE(lookup["action"].is_null());
  EXPECT_EQ(Code(Call({{"op", "status"}, {"tenant_id", "acme"}, {"key", first["key"]}})),
            "not_found");
}

TEST_F(DispatcherTest, DeriveStoresNothingAndMatchesBegin) {
  json d = Call({{"op", "derive"},
                 {"tenant_id", "acme"},
                 {"action_type", "pix.cobranca"},
                 {"payload", PixPayload()}});
  ASSERT_TRUE(d["ok"].get<bool>()) << d.dump();
  EXPECT_EQ(d["rules_version"], 2);
  json v1 = Call({{"op", "derive"},
                  {"tenant_id", "acme"},
                  {"action_type", "pix.cobranca"},
                  {"payload", PixPayload()},
                  {"rules_version", 1}});
  EXPECT_NE(v1["key"], d["key"]);
  EXPECT_EQ(Call({{"op", "lookup"},
                  {"tenant_id", "acme"},
                  {"intent_ref", "FAT-2026-000123"},
                  {"action_type", "pix.cobranca"}})["found"],
            false);
  EXPECT_EQ(Begin()["key"], d["key"]);
}

TEST_F(DispatcherTest, AmendGivesANewKeyAndANewCharge) {
  json first = Begin();
  json refused = Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "FAT-2026-000123"},
                       {"action_type", "pix.cobranca"},
                       {"payload", PixPayload("1800.00")}});
  EXPECT_EQ(Code(refused), "invalid_state");
  Call({{"op", "fail"},
        {"tenant_id", "acme"},
        {"key", first["key"]},
        {"lease_token", 1},
        {"error", "wrong amount"},
        {"retriable", true}});
  json amended = Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "FAT-2026-000123"},
                       {"action_type", "pix.cobranca"},
                       {"payload", PixPayload("1800.00")}});
  ASSERT_TRUE(amended["ok"].get<bool>()) << amended.dump();
  EXPECT_EQ(amended["previous_key"], first["key"]);
  EXPECT_NE(amended["key"], first["key"]);
  EXPECT_EQ(amended["payload"]["valor"], "180000");
  json next = Begin(nullptr);
  EXPECT_EQ(next["decision"], "execute");
  EXPECT_EQ(next["key"], amended["key"]);
  // The old action is still readable.
  EXPECT_EQ(
      Call({{"op", "status"}, {"tenant_id", "acme"}, {"key", first["key"]}})["action"]["status"],
      "released");
}

TEST_F(DispatcherTest, UncertainListsExpiredStartedActionsOldestFirst) {
  json a = Begin(PixPayload(), "FAT-2026-000123", 10000);
  json p2 = PixPayload();
  p2.erase("referencia_intencao");
  json b = Begin(p2, "FAT-2", 5000);
  json c = Begin(p2, "FAT-3", 60000);
  clock_.Advance(20000);
  json r = Call({{"op", "uncertain"}, {"tenant_id", "acme"}});
  ASSERT_EQ(r["actions"].size(), 2u) << r.dump();
  EXPECT_EQ(r["actions"][0]["key"], b["key"]);
  EXPECT_EQ(r["actions"][1]["key"], a["key"]);
  EXPECT_EQ(r["actions"][0]["intent_ref"], "FAT-2");
  EXPECT_EQ(r["actions"][0]["lease_until_ms"], kT0 + 5000);
  EXPECT_EQ(Call({{"op", "uncertain"}, {"limit", 1}})["actions"].size(), 1u);
  EXPECT_EQ(Code(Call({{"op", "uncertain"}, {"limit", 0}})), "invalid_field");
}

TEST_F(DispatcherTest, ResponsesOver32KiBAreRefused) {
  json first = Begin();
  json r = Complete(first, std::string(33000, 'x'));
  EXPECT_EQ(Code(r), "invalid_field");
  EXPECT_EQ(r["error"]["field"], "response");
  json missing =
      Call({{"op", "complete"}, {"tenant_id", "acme"}, {"key", first["key"]}, {"lease_token", 1}});
  EXPECT_EQ(Code(missing), "missing_field");
  EXPECT_TRUE(Complete(first, nullptr)["ok"].get<bool>());
}

TEST_F(DispatcherTest, AccessRulesLimitTenantsAndAdminOps) {
  Config config;
  config.access.push_back({1000, std::nullopt, {"acme"}, false});
  config.access.push_back({std::nullopt, 2000, {"*"}, true});
  Open(std::move(config));
  EXPECT_EQ(Begin()["decision"], "execute");
  json other = Call({{"op", "begin"},
                     {"tenant_id", "globex"},
                     {"intent_ref", "FAT-2026-000123"},
                     {"action_type", "pix.cobranca"},
                     {"payload", PixPayload()}});
  EXPECT_EQ(Code(other), "forbidden");
  EXPECT_EQ(Code(Call({{"op", "uncertain"}})), "forbidden");
  EXPECT_TRUE(Call({{"op", "uncertain"}, {"tenant_id", "acme"}})["ok"].get<bool>());
  EXPECT_EQ(Code(Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "FAT-2026-000123"},
                       {"action_type", "pix.cobranca"},
                       {"payload", PixPayload()}})),
            "forbidden");
  // A member of the admin group (supplementary) may do everything.
  peer_ = {2, 3000, 3000, {3000, 2000}};
  EXPECT_TRUE(Call({{"op", "uncertain"}})["ok"].get<bool>());
  EXPECT_EQ(Call({{"op", "begin"},
                  {"tenant_id", "globex"},
                  {"intent_ref", "FAT-2026-000123"},
                  {"action_type", "pix.cobranca"},
                  {"payload", PixPayload()}})["decision"],
            "execute");
  // A peer no rule names may only ping.
  peer_ = {3, 4000, 4000, {4000}};
  EXPECT_EQ(Code(Call({{"op", "stats"}})), "forbidden");
  EXPECT_TRUE(Call({{"op", "ping"}})["ok"].get<bool>());
}

TEST_F(DispatcherTest, StatsCountDecisionsAndErrors) {
  json first = Begin();
  Begin();
  Complete(first);
  Begin();
  Call({{"op", "nope"}});
  json s = Call({{"op", "stats"}});
  EXPECT_EQ(s["decisions"]["execute"], 1);
  EXPECT_EQ(s["decisions"]["in_flight"], 1);
  EXPECT_EQ(s["decisions"]["replay"], 1);
  EXPECT_EQ(s["decisions"]["recover"], 0);
  EXPECT_EQ(s["completed"], 1);
  EXPECT_EQ(s["errors"]["unknown_op"], 1);
  EXPECT_TRUE(s.contains("uptime_ms"));
  EXPECT_TRUE(s.contains("connections_total"));
}

// A reply held for its sync (the agent's group commit) whose sync fails is
// replaced by a storage_error that still echoes the request's id.
TEST_F(DispatcherTest, HeldReplyWhoseSyncFailsIsAStorageErrorWithTheId) {
  dispatcher_.reset();
  store_.reset();
  auto faults = std::make_shared<store::FaultInjection>();
  store::RocksOptions options;
  options.path = dir_.path() + "/faulty";
  options.sync = true;
  options.defer_sync = true;
  options.hash_memtables = true;
  options.clock = &clock_;
  ASSERT_TRUE(store::OpenWithFaultInjection(options, faults, &store_).ok());
  DispatcherOptions d;
  d.clock = &clock_;
  dispatcher_ = std::make_unique<Dispatcher>(config_, deriver_, store_.get(), d);

  faults->SetSyncFault(store::FaultInjection::Fault::kIOError);
  const std::vector<std::optional<json>> ids = {json(7), json("req \"7\""), json(nullptr),
                                                std::nullopt};
  auto begin = [](const std::string& ref) {
    json payload = PixPayload();
    payload["referencia_intencao"] = ref;
    return json{{"op", "begin"},     {"tenant_id", "acme"},
                {"intent_ref", ref}, {"action_type", "pix.cobranca"},
                {"lease_ms", 60000}, {"payload", payload}};
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    json req = begin("R" + std::to_string(i));
    if (ids[i]) req["id"] = *ids[i];
    json r = Call(req);
    EXPECT_EQ(Code(r), "storage_error") << r.dump();
    EXPECT_FALSE(r.value("ok", true)) << r.dump();
    EXPECT_NE(r["error"].value("message", "").find("nothing was granted"), std::string::npos)
        << r.dump();
    if (ids[i]) {
      ASSERT_TRUE(r.contains("id")) << r.dump();
      EXPECT_EQ(r["id"], *ids[i]) << r.dump();
    } else {
      EXPECT_FALSE(r.contains("id")) << r.dump();
    }
  }
  EXPECT_GT(faults->injected(), 0);
  // Replies that hold no record take no ticket: they answer while syncs fail.
  for (const char* op : {"ping", "stats", "metrics"}) {
    json r = Call({{"op", op}, {"id", op}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    EXPECT_EQ(r["id"], op);
  }
  faults->Clear();
  json retry = begin("R0");
  retry["id"] = 8;
  // The store recovers by itself, in the background: until then a retry is
  // refused at once. The refused begin's record was voided before its
  // storage_error was sent, so the retry finds nothing: execute, token 1.
  json again;
  for (int i = 0; i < 100; ++i) {
    again = Call(retry);
    if (Code(again) != "storage_error") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(again.value("ok", false)) << again.dump();
  EXPECT_EQ(again.value("decision", ""), "execute") << again.dump();
  EXPECT_EQ(again.value("lease_token", 0), 1) << again.dump();
  EXPECT_EQ(again["id"], 8);
}

TEST_F(DispatcherTest, TheInputAsSentIsFrozenAndReadBackByEveryLaterAttempt) {
  json first = PixPayload("180.00");
  first["descricao"] = "Pedido 42";
  first["vencimento"] = "2026-12-10";
  json a = Begin(first);
  ASSERT_EQ(a.value("decision", ""), "execute") << a.dump();
  EXPECT_EQ(a["input"], first) << a.dump();
  EXPECT_EQ(a["payload"]["valor"], "18000");  // the key field, in cents
  // A redelivery with another extraction reads the first one back.
  json later = PixPayload("180.00");
  later["descricao"] = "something else";
  json b = Begin(later);
  EXPECT_EQ(b.value("decision", ""), "in_flight") << b.dump();
  EXPECT_EQ(b["input"], first) << b.dump();
  EXPECT_FALSE(b.value("diverged", true)) << b.dump();  // judged on the key fields
  json l = Call({{"op", "lookup"},
                 {"tenant_id", "acme"},
                 {"intent_ref", "FAT-2026-000123"},
                 {"action_type", "pix.cobranca"}});
  EXPECT_EQ(l["input"], first) << l.dump();
  // Bounded: a payload over 16 KiB is refused for a new intent.
  json huge = PixPayload("10.00");
  huge.erase("referencia_intencao");
  huge["anexo"] = std::string(17 * 1024, 'x');
  json r = Begin(huge, "FAT-HUGE");
  EXPECT_EQ(Code(r), "invalid_field") << r.dump().substr(0, 300);
  EXPECT_EQ(r["error"].value("field", ""), "payload");
}

TEST_F(DispatcherTest, MoneyIsTheFrozenAmountInWholeUnitsWhateverTheSpelling) {
  // Each spelling of an amount the model may send, and the one text every
  // answer shows for it (the payload's cents are a key input, not an amount).
  const std::vector<std::pair<json, std::string>> cases = {
      {json("180.00"), "180.00"}, {json(180), "180.00"},  {json("180.5"), "180.50"},
      {json(19.99), "19.99"},     {json("0.05"), "0.05"}, {json(" 007.50 "), "7.50"},
      {json(1), "1.00"}};
  int n = 0;
  for (const auto& [amount, text] : cases) {
    const std::string ref = "FAT-M-" + std::to_string(n++);
    json p = PixPayload("1.00");
    p.erase("referencia_intencao");
    p["valor"] = amount;
    json b = Begin(p, ref);
    ASSERT_TRUE(b.value("ok", false)) << amount << ": " << b.dump();
    EXPECT_EQ(b["money"], json({{"valor", text}})) << amount << ": " << b.dump();
    json l = Call({{"op", "lookup"},
                   {"tenant_id", "acme"},
                   {"intent_ref", ref},
                   {"action_type", "pix.cobranca"}});
    EXPECT_EQ(l["money"], json({{"valor", text}})) << l.dump();
  }
  // A type without money fields answers an empty object.
  json email = Call({{"op", "freeze"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "E-1"},
                     {"action_type", "email.cobranca"},
                     {"payload", {{"cliente_id", "c1"}, {"template", "lembrete"}}}});
  EXPECT_EQ(email["money"], json::object()) << email.dump();
}

TEST_F(DispatcherTest, StrictAnchorsRefuseRefsDrawnInsideTheAttemptOnMoneyActions) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"anchors": "strict"})", &config, &error)) << error;
  Open(std::move(config));
  for (const std::string ref : {"0b7c9e1e-8f1d-4c3a-9b2a-1f2e3d4c5b6a", "wamid.HBgMNTUxMTk5",
                                "1796000000000", "2026-12-03T21:04:05Z"}) {
    json r = Begin(PixPayload(), ref);
    EXPECT_EQ(Code(r), "invalid_field") << ref << ": " << r.dump();
    EXPECT_EQ(r["error"].value("field", ""), "intent_ref") << r.dump();
  }
  EXPECT_EQ(Begin(PixPayload(), "FAT-2026-000123").value("decision", ""), "execute");
  // An action type without money is not judged.
  json email = Call({{"op", "freeze"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "0b7c9e1e-8f1d-4c3a-9b2a-1f2e3d4c5b6a"},
                     {"action_type", "email.cobranca"},
                     {"payload", {{"cliente_id", "c1"}, {"template", "lembrete"}}}});
  EXPECT_TRUE(email.value("ok", false)) << email.dump();
  // Lenient (the default) accepts them, and a bad value is refused at start.
  EXPECT_FALSE(ParseConfig(R"({"anchors": "maybe"})", &config, &error));
  EXPECT_NE(error.find("strict"), std::string::npos) << error;
}

TEST_F(DispatcherTest, PinnedPixKeyTypesRefuseWhatAModelMayMistype) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"pix_keys": {"chave_pix_destino":
      {"types": ["cpf", "email", "phone"], "phone": "+55"}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  const auto payload_for = [](const std::string& ref, const json& key) {
    json p = PixPayload("180.00");
    p["chave_pix_destino"] = key;
    p["referencia_intencao"] = ref;
    return p;
  };
  // A bare mistyped CPF whose third digit is 9 would be the phone
  // +5511944477736: refused, naming the field and what it was read as.
  json r = Begin(payload_for("FAT-POLICY-1", "11944477736"), "FAT-POLICY-1");
  EXPECT_EQ(Code(r), "invalid_field") << r.dump();
  EXPECT_EQ(r["error"].value("field", ""), "chave_pix_destino");
  EXPECT_NE(r["error"].value("message", "").find("+55"), std::string::npos) << r.dump();
  // Nothing was frozen.
  json found = Call({{"op", "lookup"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "FAT-POLICY-1"},
                     {"action_type", "pix.cobranca"}});
  EXPECT_FALSE(found.value("found", true)) << found.dump();
  // A key type the action does not accept (a CNPJ; an EVP).
  for (const char* key : {"11.222.333/0001-81", "123e4567-e89b-12d3-a456-426614174000"}) {
    r = Begin(payload_for("FAT-POLICY-2", key), "FAT-POLICY-2");
    EXPECT_EQ(Code(r), "invalid_field") << key << ": " << r.dump();
    EXPECT_NE(r["error"].value("message", "").find("accepts cpf, phone, email"), std::string::npos)
        << r.dump();
  }
  // A key that is no Pix key at all says why.
  r = Begin(payload_for("FAT-POLICY-3", "529.982.247-24"), "FAT-POLICY-3");
  EXPECT_EQ(Code(r), "invalid_field") << r.dump();
  // What is accepted: a CPF (also as a JSON integer), a phone written with
  // +55, an e-mail; the answers name the type each key was read as.
  const std::pair<json, std::string> accepted[] = {
      {"529.982.247-25", "cpf"},
      {52998224725LL, "cpf"},
      {"+55 11 94447-7736", "phone"},
      {"Fulano@Example.com", "email"},
  };
  int n = 0;
  for (const auto& [key, type] : accepted) {
    const std::string ref = "FAT-POLICY-OK-" + std::to_string(++n);
    r = Begin(payload_for(ref, key), ref);
    ASSERT_EQ(r.value("decision", ""), "execute") << key.dump() << ": " << r.dump();
    EXPECT_EQ(r["pix_key_types"], json({{"chave_pix_destino", type}})) << r.dump();
  }
}

TEST_F(DispatcherTest, APixKeyPolicyNeverRefusesAFrozenIntentNorChangesItsKey) {
  // Frozen before the policy: a phone completed to +55 by rules version 2.
  json payload = PixPayload("180.00", "11944477736");
  json before = Begin(payload);
  ASSERT_EQ(before.value("decision", ""), "execute") << before.dump();
  EXPECT_EQ(before["pix_key_types"], json({{"chave_pix_destino", "phone"}}));
  ASSERT_TRUE(Complete(before).value("ok", false));

  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"pix_keys": {"chave_pix_destino":
      {"types": ["cpf"], "phone": "+55"}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  // The redelivery reads the frozen intent back: replay, the same key.
  json again = Begin(payload);
  EXPECT_EQ(again.value("decision", ""), "replay") << again.dump();
  EXPECT_EQ(again["key"], before["key"]);
  // The same payload under a new reference is refused, and derive (which
  // freezes nothing) still computes the key a restriction never changes.
  payload["referencia_intencao"] = "FAT-2026-000999";
  EXPECT_EQ(Code(Begin(payload, "FAT-2026-000999")), "invalid_field");
  json derived = Call({{"op", "derive"},
                       {"tenant_id", "acme"},
                       {"action_type", "pix.cobranca"},
                       {"payload", PixPayload("180.00", "11944477736")}});
  EXPECT_EQ(derived["key"], before["key"]) << derived.dump();
  // amend freezes a new payload: the policy applies.
  json amended = Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "FAT-2026-000123"},
                       {"action_type", "pix.cobranca"},
                       {"force", true},
                       {"payload", PixPayload("1800.00", "11944477736")}});
  EXPECT_EQ(Code(amended), "invalid_field") << amended.dump();
}

TEST_F(DispatcherTest, RulesVersionOneAnswersNoPixKeyType) {
  Open(Config(), /*rules_version=*/1);
  json r = Begin();
  ASSERT_EQ(r.value("decision", ""), "execute") << r.dump();
  EXPECT_EQ(r["pix_key_types"], json({{"chave_pix_destino", nullptr}})) << r.dump();
  json email = Call({{"op", "freeze"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "E-1"},
                     {"action_type", "email.cobranca"},
                     {"payload", {{"cliente_id", "c1"}, {"template", "lembrete"}}}});
  EXPECT_EQ(email["pix_key_types"], json::object()) << email.dump();
}

TEST_F(DispatcherTest, AMaximumPerActionRefusesALargerAmountAndFreezesNothing) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"money": {"valor":
      {"max_per_action": "5000.00"}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  // A hallucinated amount (or cents sent as whole units): refused with its
  // own code, naming the rule and the limit.
  for (const json& valor : {json("18000"), json(18000), json("5000.01")}) {
    json payload = PixPayload();
    payload["valor"] = valor;
    json r = Begin(payload);
    EXPECT_EQ(Code(r), "policy_refused") << valor.dump() << ": " << r.dump();
    EXPECT_EQ(r["error"].value("field", ""), "valor");
    const std::string message = r["error"].value("message", "");
    EXPECT_NE(message.find("max_per_action"), std::string::npos) << message;
    EXPECT_NE(message.find("5000.00"), std::string::npos) << message;
  }
  json found = Call({{"op", "lookup"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "FAT-2026-000123"},
                     {"action_type", "pix.cobranca"}});
  EXPECT_FALSE(found.value("found", true)) << found.dump();
  json frozen = Call({{"op", "freeze"},
                      {"tenant_id", "acme"},
                      {"intent_ref", "FAT-2026-000123"},
                      {"action_type", "pix.cobranca"},
                      {"payload", PixPayload("18000.00")}});
  EXPECT_EQ(Code(frozen), "policy_refused") << frozen.dump();
  // At the limit is allowed; a redelivery that misreads the amount reads the
  // frozen one back (not refused); amend above the limit is refused.
  json ok = Begin(PixPayload("5000.00"));
  ASSERT_EQ(ok.value("decision", ""), "execute") << ok.dump();
  json again = Begin(PixPayload("50000.00"));
  EXPECT_EQ(again.value("decision", ""), "in_flight") << again.dump();
  EXPECT_TRUE(again.value("diverged", false));
  json amended = Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "FAT-2026-000123"},
                       {"action_type", "pix.cobranca"},
                       {"force", true},
                       {"payload", PixPayload("5000.10")}});
  EXPECT_EQ(Code(amended), "policy_refused") << amended.dump();
  json stats = Call({{"op", "stats"}});
  EXPECT_EQ(stats["errors"].value("policy_refused", 0), 5) << stats.dump();
}

TEST_F(DispatcherTest, DailyCapsPerTenantAndPerPayerRefuseWhatWouldPassThemAndCountOnce) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"money": {"valor": {
      "per_day": {"max_total": "1000.00"},
      "per_payer_per_day": {"payer": "cliente_id", "max_total": "400.00"}}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  const auto charge = [&](const std::string& ref, const std::string& payer,
                          const std::string& valor) {
    json payload = PixPayload(valor);
    payload["cliente_id"] = payer;
    payload.erase("referencia_intencao");
    return Begin(payload, ref);
  };
  EXPECT_EQ(charge("R1", "c1", "300.00").value("decision", ""), "execute");
  EXPECT_EQ(charge("R2", "c1", "100.00").value("decision", ""), "execute");
  // c1 has 400.00 today: one cent more is refused, naming rule and remainder.
  json r = charge("R3", "c1", "0.01");
  EXPECT_EQ(Code(r), "policy_refused") << r.dump();
  EXPECT_EQ(r["error"].value("field", ""), "valor");
  std::string message = r["error"].value("message", "");
  EXPECT_NE(message.find("per_payer_per_day.max_total"), std::string::npos) << message;
  EXPECT_NE(message.find("cliente_id c1"), std::string::npos) << message;
  EXPECT_NE(message.find("0.00 remain"), std::string::npos) << message;
  EXPECT_NE(message.find("Brazil time"), std::string::npos) << message;
  json found = Call({{"op", "lookup"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "R3"},
                     {"action_type", "pix.cobranca"}});
  EXPECT_FALSE(found.value("found", true)) << found.dump();
  EXPECT_EQ(charge("R3", "c2", "300.00").value("decision", ""), "execute");
  // The tenant has 700.00 today: 350.00 is refused by the tenant's cap.
  r = charge("R4", "c3", "350.00");
  EXPECT_EQ(Code(r), "policy_refused") << r.dump();
  message = r["error"].value("message", "");
  EXPECT_NE(message.find("per_day.max_total"), std::string::npos) << message;
  EXPECT_NE(message.find("300.00 remain"), std::string::npos) << message;
  // freeze too; then exactly what remains fits.
  json payload = PixPayload("350.00");
  payload["cliente_id"] = "c3";
  payload.erase("referencia_intencao");
  json frozen = Call({{"op", "freeze"},
                      {"tenant_id", "acme"},
                      {"intent_ref", "R4"},
                      {"action_type", "pix.cobranca"},
                      {"payload", payload}});
  EXPECT_EQ(Code(frozen), "policy_refused") << frozen.dump();
  EXPECT_EQ(charge("R4", "c3", "300.00").value("decision", ""), "execute");
  // A redelivery reads its frozen intent back: never refused, never counted.
  json again = charge("R1", "c1", "300.00");
  EXPECT_EQ(again.value("decision", ""), "in_flight") << again.dump();
  EXPECT_EQ(Code(charge("R5", "c4", "0.01")), "policy_refused");
  json stats = Call({{"op", "stats"}});
  EXPECT_EQ(stats["errors"].value("policy_refused", 0), 4) << stats.dump();
  // By rule, for monitoring.
  const std::string metrics = Call({{"op", "metrics"}}).value("text", "");
  for (const char* sample :
       {"intentd_policy_refusals_total{rule=\"per_day.max_total\"} 3",
        "intentd_policy_refusals_total{rule=\"per_payer_per_day.max_total\"} 1"}) {
    EXPECT_NE(metrics.find(sample), std::string::npos) << sample << "\n" << metrics;
  }
}

TEST_F(DispatcherTest, ADailyCountCapsIntentsWhateverTheirAmount) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"money": {"valor": {
      "per_day": {"max_count": 2}}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  for (const char* ref : {"R1", "R2"}) {
    json payload = PixPayload();
    payload.erase("referencia_intencao");
    ASSERT_EQ(Begin(payload, ref).value("decision", ""), "execute");
  }
  json payload = PixPayload("0.01");
  payload.erase("referencia_intencao");
  json r = Begin(payload, "R3");
  EXPECT_EQ(Code(r), "policy_refused") << r.dump();
  const std::string message = r["error"].value("message", "");
  EXPECT_NE(message.find("per_day.max_count"), std::string::npos) << message;
  EXPECT_NE(message.find("none remain"), std::string::npos) << message;
}

TEST_F(DispatcherTest, AnAmountAboveTheApprovalThresholdWaitsAndIsCountedInMetrics) {
  Config config;
  std::string error;
  ASSERT_TRUE(ParseConfig(R"({"policy": {"pix.cobranca": {"money": {"valor": {
      "approval_above": "1000.00"}}}}})",
                          &config, &error))
      << error;
  Open(std::move(config));
  // At the threshold: no approval needed.
  json at = Begin(PixPayload("1000.00"));
  EXPECT_EQ(at.value("decision", ""), "execute") << at.dump();
  EXPECT_FALSE(at.contains("approval"));
  json payload = PixPayload("1000.01");
  payload.erase("referencia_intencao");
  json frozen = Call({{"op", "freeze"},
                      {"tenant_id", "acme"},
                      {"intent_ref", "R2"},
                      {"action_type", "pix.cobranca"},
                      {"payload", payload}});
  ASSERT_EQ(frozen["approval"].value("state", ""), "pending") << frozen.dump();
  EXPECT_EQ(frozen["approval"].value("reason", ""),
            "valor is 1000.01, above this action type's approval threshold of 1000.00 (policy "
            "rule approval_above): an admin must approve it (intentd approve) before any attempt");
  json r = Begin(json(nullptr), "R2");
  EXPECT_EQ(r.value("decision", ""), "pending_approval") << r.dump();
  json found = Call({{"op", "lookup"},
                     {"tenant_id", "acme"},
                     {"intent_ref", "R2"},
                     {"action_type", "pix.cobranca"}});
  EXPECT_EQ(found["approval"].value("state", ""), "pending") << found.dump();
  EXPECT_TRUE(found["action"].is_null());
  const std::string metrics = Call({{"op", "metrics"}}).value("text", "");
  EXPECT_NE(metrics.find("intentd_approvals_pending 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("intentd_approval_oldest_pending_seconds "), std::string::npos);
  // amend below the threshold: no approval any more; then it executes.
  payload["valor"] = "900.00";
  json amended = Call({{"op", "amend"},
                       {"tenant_id", "acme"},
                       {"intent_ref", "R2"},
                       {"action_type", "pix.cobranca"},
                       {"payload", payload}});
  EXPECT_FALSE(amended.contains("approval")) << amended.dump();
  EXPECT_EQ(Begin(json(nullptr), "R2").value("decision", ""), "execute");
  json pending = Call({{"op", "pending"}});
  EXPECT_TRUE(pending["intents"].empty()) << pending.dump();
  json bad = Call({{"op", "approve"},
                   {"tenant_id", "acme"},
                   {"intent_ref", "R2"},
                   {"action_type", "pix.cobranca"},
                   {"note", 5}});
  EXPECT_EQ(Code(bad), "invalid_field") << bad.dump();
  bad = Call({{"op", "deny"},
              {"tenant_id", "acme"},
              {"intent_ref", "R2"},
              {"action_type", "pix.cobranca"}});
  EXPECT_EQ(Code(bad), "invalid_state") << bad.dump();
}

TEST(PolicyConfig, BadPoliciesAreRefusedAtStartNamingTheMember) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"policy": []})", "\"policy\" must be an object"},
      {R"({"policy": {"pix.saque": {}}})", "policy.pix.saque: unknown action type"},
      {R"({"policy": {"pix.cobranca": {"limits": {}}}})", "unknown member \"limits\""},
      {R"({"policy": {"pix.cobranca": {"pix_keys": {"valor": {"types": ["cpf"]}}}}})",
       "no pix-key field named \"valor\""},
      {R"({"policy": {"pix.cobranca": {"pix_keys": {"chave_pix_destino": {"types": []}}}}})",
       "non-empty array"},
      {R"({"policy": {"pix.cobranca": {"pix_keys": {"chave_pix_destino":
          {"types": ["telefone"]}}}}})",
       "\"telefone\" is not a Pix key type (cpf, cnpj, phone, email, evp)"},
      {R"({"policy": {"pix.cobranca": {"pix_keys": {"chave_pix_destino": {"phone": "55"}}}}})",
       ".phone must be \"+55\""},
      {R"({"policy": {"pix.cobranca": {"money": {"chave_pix_destino": {}}}}})",
       "no money field named \"chave_pix_destino\""},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"max_per_action": 5000}}}}})",
       "max_per_action must be a positive amount"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"max_per_action": "-1"}}}}})",
       "max_per_action must be a positive amount"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"daily_total": "1"}}}}})",
       "unknown member \"daily_total\""},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"approval_above": "0"}}}}})",
       "approval_above must be a positive amount"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"per_day": {}}}}}})",
       "per_day needs max_total, max_count or both"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"per_day": {"max_count": 0}}}}}})",
       "per_day.max_count must be a positive integer"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"per_day": {"max_total": 10}}}}}})",
       "per_day.max_total must be a positive amount"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor":
          {"per_payer_per_day": {"max_count": 3}}}}}})",
       "per_payer_per_day needs \"payer\""},
      {R"({"policy": {"pix.cobranca": {"money": {"valor":
          {"per_payer_per_day": {"payer": "pagador", "max_count": 3}}}}}})",
       "per_payer_per_day.payer must name a field of pix.cobranca"},
      {R"({"policy": {"pix.cobranca": {"money": {"valor": {"per_day": {"payer": "cliente_id"}}}}}})",
       "unknown member \"payer\" (expected max_total, max_count)"},
  };
  for (const auto& [text, expected] : cases) {
    Config config;
    std::string error;
    EXPECT_FALSE(ParseConfig(text, &config, &error)) << text;
    EXPECT_NE(error.find(expected), std::string::npos) << text << " -> " << error;
  }
  // A policy for an action type the same file defines.
  Config config;
  std::string error;
  EXPECT_TRUE(ParseConfig(R"({"action_types": {"pix.devolucao": {"fields": [
      {"name": "chave", "kind": "pix-key"}, {"name": "valor", "kind": "money"}]}},
      "policy": {"pix.devolucao": {"pix_keys": {"chave": {"phone": "+55"}}}}})",
                          &config, &error))
      << error;
  ASSERT_EQ(config.policy.size(), 1u);
  EXPECT_EQ(config.policy[0].pix_keys[0].types, 0x1fu);
  EXPECT_TRUE(config.policy[0].pix_keys[0].phone_plus55);
}

}  // namespace
}  // namespace intentd::agent
