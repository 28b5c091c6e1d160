// The two routes of agent/request_line.h must agree on every line: the
// simdjson route where it answers, nlohmann's strict parser (the reference)
// everywhere else.
#include "agent/request_line.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "agent/ops.h"

namespace intentd::agent {
namespace {

using nlohmann::json;

// The lines the load generator sends, and their neighbours.
const char kBegin[] =
    R"({"id":12345,"op":"begin","tenant_id":"acme","intent_ref":"wa:msg:7f3a9c2e","action_type":)"
    R"("pix.charge","payload":{"cliente_id":"c-1234567","valor":"123.45","chave_pix_destino":)"
    R"("123.456.789-09","referencia_intencao":"wa:msg:7f3a9c2e"},"lease_ms":30000})";
const char kComplete[] =
    R"({"id":"r-9","op":"complete","tenant_id":"acme","key":"k2:0123456789abcdef","lease_token":)"
    R"("0123456789abcdef","result":{"psp":"bench-psp","ok":true,"fee":null,"n":[1,-2,3.5e2,)"
    R"({"deep":[[]]}],"when":"2026-01-05"}})";

std::string Nested(int depth) {
  std::string line;
  for (int i = 0; i < depth; ++i) line += i % 2 ? "[" : "{\"a\":";
  line += "1";
  for (int i = depth - 1; i >= 0; --i) line += i % 2 ? "]" : "}";
  return line;
}

// What the ops read of a parsed line, as nlohmann values and text: the whole
// value, each top-level member as find() gives it, and AppendJson's text.
struct Reading {
  json value;
  std::vector<std::pair<std::string, json>> members;
  std::string text;
};

Reading Read(const ParsedLine& parsed, const json& names) {
  Reading r;
  r.value = parsed.value.ToJson();
  if (names.is_object()) {
    for (const auto& [name, ignored] : names.items()) {
      r.members.emplace_back(name, parsed.value.find(name).ToJson());
    }
  }
  AppendJson(parsed.value, &r.text);
  return r;
}

void ExpectSameReading(const Reading& got, const ParsedLine& reference, const std::string& line) {
  EXPECT_TRUE(SameJson(got.value, reference.dom))
      << line << "\n got: " << got.value.dump() << "\n reference: " << reference.dom.dump();
  for (const auto& [name, value] : got.members) {
    EXPECT_TRUE(SameJson(value, reference.dom[name])) << line << " member " << name;
  }
  std::string expected_text;
  AppendJson(reference.dom, &expected_text);
  EXPECT_EQ(got.text, expected_text) << line;
}

// Returns whether the fast route answered; fails the test when the routes
// disagree on the outcome, the value (types included) or the id's text.
bool ExpectSameRoutes(const std::string& line) {
  ParsedLine reference;
  const LineParse expected = ParseRequestLineReference(line, &reference);
  ParsedLine fast;
  const bool answered = ParseRequestLineFast(line, &fast);
  if (answered) {
    EXPECT_EQ(expected, LineParse::kOk) << "the fast route accepted: " << line;
    if (expected == LineParse::kOk) ExpectSameReading(Read(fast, reference.dom), reference, line);
    EXPECT_EQ(fast.raw_id, reference.raw_id) << line;
  }
  ParsedLine chosen;
  EXPECT_EQ(ParseRequestLine(line, &chosen), expected) << line;
  if (expected == LineParse::kOk) {
    ExpectSameReading(Read(chosen, reference.dom), reference, line);
    EXPECT_EQ(chosen.raw_id, reference.raw_id) << line;
  } else {
    EXPECT_EQ(chosen.error, reference.error) << line;
  }
  return answered;
}

TEST(RequestLineTest, TheFastRouteAnswersOrdinaryRequestsAsTheReference) {
  const std::vector<std::string> lines = {
      kBegin,
      kComplete,
      R"({"op":"ping"})",
      R"( {"id":null,"op":"status","x":[true,false,{}],"y":{}} )",
      "\t{\"op\":\"ping\"}\r\n",
      R"({"id":-7,"op":"ping","big":18446744073709551615,"min":-9223372036854775808})",
      R"({"id":9223372036854775807,"op":"ping","f":1E+2,"g":-0.25,"h":1e-400,"z":[-0.0,-0e3]})",
      R"({"op":"ping","s":"\u00e9\ud83d\ude00\n\"\\\/\u0000","k\u0041":1})",
      "{\"op\":\"ping\",\"s\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
      R"({"op":"a","op":"b","x":{"k":1,"k":[2]}})",  // repeated names: the last wins
      R"({"id":1.5,"id":2})",
      R"([1,2,3])",
      R"("just a string")",
      R"(42)",
      Nested(64),
      R"({"op":"ping","pad":")" + std::string((16 << 10) - 24, 'x') + R"("})",  // 16 KiB
  };
  for (const auto& line : lines) {
    EXPECT_TRUE(ExpectSameRoutes(line)) << "went to the reference: " << line;
  }
  ParsedLine parsed;
  ASSERT_TRUE(ParseRequestLineFast(kBegin, &parsed));
  EXPECT_EQ(parsed.value.find("id").type(), JsonView::Type::kUnsigned);
  EXPECT_EQ(parsed.value.find("payload").find("valor").string(), "123.45");
  EXPECT_TRUE(parsed.value.find("nothing").absent());
  EXPECT_TRUE(parsed.value.find("nothing").is_null());
  ASSERT_TRUE(ParseRequestLineFast(R"({"op":"a","op":"b","x":{"k":1,"k":[2]},"n":null})", &parsed));
  EXPECT_EQ(parsed.value.find("op").string(), "b");
  EXPECT_TRUE(parsed.value.find("x").find("k").is_array());
  EXPECT_FALSE(parsed.value.find("n").absent());
  EXPECT_TRUE(parsed.value.find("n").is_null());
  std::string text;
  AppendJson(parsed.value.find("x"), &text);
  EXPECT_EQ(text, R"({"k":[2]})");
}

// The integer readers of the ops: a value that fits in int64_t, nothing else.
TEST(RequestLineTest, Int64TakesIntegersThatFit) {
  ParsedLine parsed;
  ASSERT_TRUE(ParseRequestLineFast(
      R"({"a":9223372036854775807,"b":9223372036854775808,"c":-9223372036854775808,)"
      R"("d":1.0,"e":"1","f":true,"g":-3})",
      &parsed));
  int64_t v = 0;
  EXPECT_TRUE(parsed.value.find("a").Int64(&v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(parsed.value.find("b").Int64(&v));
  EXPECT_TRUE(parsed.value.find("c").Int64(&v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(parsed.value.find("d").Int64(&v));
  EXPECT_FALSE(parsed.value.find("e").Int64(&v));
  EXPECT_FALSE(parsed.value.find("f").Int64(&v));
  EXPECT_FALSE(parsed.value.find("missing").Int64(&v));
  EXPECT_TRUE(parsed.value.find("g").Int64(&v));
  EXPECT_EQ(v, -3);
  EXPECT_EQ(parsed.value.find("g").type(), JsonView::Type::kSigned);
}

TEST(RequestLineTest, LinesWhereTheRoutesCouldDifferGoToTheReference) {
  const std::vector<std::string> lines = {
      R"({"id":1.50,"op":"ping"})",                  // a double id is echoed as written
      R"({"id":2,"op":"ping","id":1e0})",            // ... also when it is the last of two
      R"({"id":18446744073709551616,"op":"ping"})",  // beyond 64 bits
      R"({"op":"ping","n":-0})",                     // a signed zero integer
      R"({"op":"ping","n":[-0]})",
      R"(-0)",
      Nested(65),  // too deep
      Nested(2000),
      "",
      " ",
      "{",
      R"({"op":"ping"} {"op":"ping"})",  // two documents
      R"({"op":"ping",})",
      R"({'op':'ping'})",
      R"({"op":"ping","n":01})",
      R"({"op":"ping","n":1e400})",
      R"({"op":"ping","s":"\ud800"})",  // a lone surrogate
      R"({"op":"ping","s":"\udc00\ud800"})",
      "{\"op\":\"ping\",\"s\":\"\x01\"}",          // an unescaped control character
      "{\"op\":\"ping\",\"s\":\"\xed\xa0\x80\"}",  // a surrogate in UTF-8
      "{\"op\":\"ping\",\"s\":\"\xc3\"}",          // a truncated sequence
      "\xef\xbb\xbf{\"op\":\"ping\"}",             // a byte order mark
      std::string("{\"op\":\"ping\",\"x\":\"a\0b\"}", 23),
      // Over 16 KiB: the parsers kept per thread stay small.
      R"({"op":"ping","pad":")" + std::string(16 << 10, 'x') + R"("})",
  };
  for (const auto& line : lines) {
    EXPECT_FALSE(ExpectSameRoutes(line)) << "the fast route answered: " << line;
  }
  ParsedLine parsed;
  ASSERT_EQ(ParseRequestLine(R"({"id":1.50,"op":"ping"})", &parsed), LineParse::kOk);
  EXPECT_EQ(parsed.raw_id, "1.50");
  EXPECT_EQ(ParseRequestLine(Nested(65), &parsed), LineParse::kTooDeep);
  EXPECT_EQ(ParseRequestLine("{\"op\":", &parsed), LineParse::kInvalid);
  EXPECT_NE(parsed.error.find("unexpected end of input"), std::string::npos) << parsed.error;
}

TEST(RequestLineTest, MinusZeroInsideWordsStaysOnTheFastRoute) {
  EXPECT_TRUE(ExpectSameRoutes(R"({"op":"ping","when":"2026-01-05","ref":"c-0a"})"));
  EXPECT_FALSE(ParseRequestLineFast(std::string_view(), nullptr));
}

TEST(RequestLineTest, SameJsonComparesTypesAndBits) {
  EXPECT_TRUE(SameJson(json::parse(kComplete), json::parse(kComplete)));
  EXPECT_FALSE(SameJson(json(1u), json(1)));
  EXPECT_FALSE(SameJson(json(1), json(1.0)));
  EXPECT_FALSE(SameJson(json(0.0), json(-0.0)));
  EXPECT_FALSE(SameJson(json::parse(R"({"a":1})"), json::parse(R"({"b":1})")));
  EXPECT_FALSE(SameJson(json::parse(R"([1,2])"), json::parse(R"([1])")));
  EXPECT_FALSE(
      SameJson(json::parse(R"({"a":[1,{"b":"x"}]})"), json::parse(R"({"a":[1,{"b":"y"}]})")));
}

// Random edits of request lines (bytes that matter to JSON and UTF-8): the
// routes agree on each, and both routes are taken many times.
TEST(RequestLineTest, RoutesAgreeOnMutatedLines) {
  const std::vector<std::string> seeds = {kBegin, kComplete,
                                          R"({"id":1,"n":[1.5,-2,{"s":"\u00e9"}]})"};
  const std::string alphabet = std::string("{}[]:,\"\\/-+.0123456789eEutrfalsn \t\r\n\x01\x7f") +
                               std::string(1, '\0') + "\xc3\xa9\xed\xa0\x80\xf0\x9f\x98\x80\xff";
  std::mt19937 rng(20261201);
  int fast = 0, reference = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string line = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !line.empty(); ++e) {
      const size_t at = rng() % line.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          line[at] = c;
          break;
        case 1:
          line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          line.erase(at, 1 + rng() % 4);
          break;
      }
    }
    (ExpectSameRoutes(line) ? fast : reference)++;
    if (HasFailure()) break;
  }
  EXPECT_GT(fast, 1000);
  EXPECT_GT(reference, 1000);
}

}  // namespace
}  // namespace intentd::agent
