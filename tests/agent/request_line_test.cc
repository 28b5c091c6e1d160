// protocol/request_line.h: the request parser (simdjson's On-Demand API and a
// DOM of its own) must read every line exactly as nlohmann's json::parse
// does, and refuse exactly what it refuses (with a message of its own); plus
// what it adds (the depth limit, the id's source text).
#include "protocol/request_line.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "protocol/ops.h"

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

// Same types and values throughout (nlohmann's == takes 1 and 1u, or 1 and
// 1.0, as equal).
bool SameJson(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      const auto& x = a.get_ref<const json::object_t&>();
      const auto& y = b.get_ref<const json::object_t&>();
      if (x.size() != y.size()) return false;
      for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j) {
        if (i->first != j->first || !SameJson(i->second, j->second)) return false;
      }
      return true;
    }
    case json::value_t::array: {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameJson(a[i], b[i])) return false;
      }
      return true;
    }
    case json::value_t::number_float: {
      // Bit for bit: -0.0 is not 0.0 here.
      const double x = a.get<double>(), y = b.get<double>();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    default:
      return a == b;
  }
}

int Depth(const json& v) {
  int deepest = 0;
  if (v.is_object() || v.is_array()) {
    for (const json& e : v) deepest = std::max(deepest, Depth(e));
    return deepest + 1;
  }
  return 0;
}

// Parses `line` both ways; fails the test when they disagree. Returns what
// ParseRequestLine said.
LineParse ExpectLikeJsonParse(const std::string& line) {
  ParsedLine parsed;
  const LineParse got = ParseRequestLine(line, &parsed);
  if (line.find('\0') != std::string::npos) {
    // A raw NUL byte ends nlohmann's input (what follows it is ignored); it
    // is refused here wherever it is.
    EXPECT_NE(got, LineParse::kOk) << line;
    EXPECT_TRUE(parsed.value().absent()) << line;
    return got;
  }
  json expected;
  std::string expected_error;
  try {
    expected = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e400
    expected_error = e.what();
  }
  if (!expected_error.empty()) {
    EXPECT_EQ(got, LineParse::kInvalid) << line << " json::parse: " << expected_error;
    EXPECT_FALSE(parsed.error.empty()) << line;
    EXPECT_TRUE(parsed.value().absent()) << line;
    return got;
  }
  if (Depth(expected) > kMaxRequestDepth) {
    EXPECT_EQ(got, LineParse::kTooDeep) << line;
    return got;
  }
  EXPECT_EQ(got, LineParse::kOk) << line;
  const json got_json = parsed.value().ToJson();
  EXPECT_TRUE(SameJson(got_json, expected))
      << line << "\n got: " << got_json.dump() << "\n json::parse: " << expected.dump();
  // find() gives each member as json::parse has it (the last of its name).
  if (expected.is_object()) {
    for (const auto& [name, member] : expected.items()) {
      EXPECT_TRUE(SameJson(parsed.value().find(name).ToJson(), member)) << line << " " << name;
    }
  }
  std::string text, expected_text = expected.dump(-1, ' ', false, json::error_handler_t::replace);
  AppendJson(parsed.value(), &text);
  EXPECT_EQ(text, expected_text) << line;
  // The source text of a top-level id that the DOM holds as a double.
  const bool float_id =
      expected.is_object() && expected.contains("id") && expected["id"].is_number_float();
  EXPECT_EQ(parsed.raw_id.empty(), !float_id) << line << " raw_id " << parsed.raw_id;
  return got;
}

TEST(RequestLineTest, ParsesLikeJsonParse) {
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
      R"({"id":1.50,"op":"ping"})",
      R"({"id":2,"op":"ping","id":1e0})",
      R"({"id":18446744073709551616,"op":"ping"})",  // beyond 64 bits: a double
      R"({"op":"ping","n":-0,"m":[-0]})",
      R"({"x":{"id":1.5}})",  // not the top-level id
      R"([1,2,3])",
      R"("just a string")",
      R"(42)",
      R"(-0)",
      Nested(64),
      R"({"op":"ping","pad":")" + std::string(64 << 10, 'x') + R"("})",
  };
  for (const auto& line : lines) EXPECT_EQ(ExpectLikeJsonParse(line), LineParse::kOk) << line;
  ParsedLine parsed;
  ASSERT_EQ(ParseRequestLine(kBegin, &parsed), LineParse::kOk);
  const JsonView value = parsed.value();
  EXPECT_EQ(value.find("id").type(), JsonView::Type::kUnsigned);
  EXPECT_EQ(value.find("payload").find("valor").string(), "123.45");
  EXPECT_TRUE(value.find("nothing").absent());
  EXPECT_TRUE(value.find("nothing").is_null());
  ASSERT_EQ(ParseRequestLine(R"({"op":"a","op":"b","x":{"k":1,"k":[2]},"n":null})", &parsed),
            LineParse::kOk);
  EXPECT_EQ(parsed.value().find("op").string(), "b");
  EXPECT_TRUE(parsed.value().find("x").find("k").is_array());
  EXPECT_FALSE(parsed.value().find("n").absent());
  EXPECT_TRUE(parsed.value().find("n").is_null());
  std::string text;
  AppendJson(parsed.value().find("x"), &text);
  EXPECT_EQ(text, R"({"k":[2]})");
  ASSERT_EQ(ParseRequestLine(R"({"id":1.50,"op":"ping"})", &parsed), LineParse::kOk);
  EXPECT_EQ(parsed.raw_id, "1.50");
  ASSERT_EQ(ParseRequestLine(R"({"id":18446744073709551616,"op":"ping"})", &parsed),
            LineParse::kOk);
  EXPECT_EQ(parsed.raw_id, "18446744073709551616");
  ASSERT_EQ(ParseRequestLine(R"({"id":1.5,"id":7})", &parsed), LineParse::kOk);
  EXPECT_EQ(parsed.raw_id, "") << "the last id is an integer";
  ASSERT_EQ(ParseRequestLine(R"({"op":"ping","n":-0})", &parsed), LineParse::kOk);
  EXPECT_EQ(parsed.value().find("n").type(), JsonView::Type::kSigned);
}

// The integer readers of the ops: a value that fits in int64_t, nothing else.
TEST(RequestLineTest, Int64TakesIntegersThatFit) {
  ParsedLine parsed;
  ASSERT_EQ(ParseRequestLine(
                R"({"a":9223372036854775807,"b":9223372036854775808,"c":-9223372036854775808,)"
                R"("d":1.0,"e":"1","f":true,"g":-3})",
                &parsed),
            LineParse::kOk);
  const JsonView value = parsed.value();
  int64_t v = 0;
  EXPECT_TRUE(value.find("a").Int64(&v));
  EXPECT_EQ(v, INT64_MAX);
  EXPECT_FALSE(value.find("b").Int64(&v));
  EXPECT_TRUE(value.find("c").Int64(&v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(value.find("d").Int64(&v));
  EXPECT_FALSE(value.find("e").Int64(&v));
  EXPECT_FALSE(value.find("f").Int64(&v));
  EXPECT_FALSE(value.find("missing").Int64(&v));
  EXPECT_TRUE(value.find("g").Int64(&v));
  EXPECT_EQ(v, -3);
  EXPECT_EQ(value.find("g").type(), JsonView::Type::kSigned);
}

TEST(RequestLineTest, RefusesWhatJsonParseRefuses) {
  const std::vector<std::string> lines = {
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
      std::string("{\"op\":\"ping\",\"x\":\"a\0b\"}", 23),
  };
  for (const auto& line : lines) EXPECT_EQ(ExpectLikeJsonParse(line), LineParse::kInvalid) << line;
  ExpectLikeJsonParse("\xef\xbb\xbf{\"op\":\"ping\"}");  // a byte order mark: as json::parse
  ParsedLine nul;
  EXPECT_EQ(ParseRequestLine(std::string("{\"op\":\"ping\"}\t\0\0", 16), &nul),
            LineParse::kInvalid);
  ParsedLine parsed;
  EXPECT_EQ(ParseRequestLine("{\"op\":", &parsed), LineParse::kInvalid);
  EXPECT_FALSE(parsed.error.empty());
  EXPECT_EQ(ParseRequestLine(R"({"n":1e400})", &parsed), LineParse::kInvalid);
  EXPECT_EQ(parsed.error, "number overflow parsing '1e400'");
}

TEST(RequestLineTest, NestingDeeperThanTheLimitIsRefusedBeforeItIsBuilt) {
  ParsedLine parsed;
  EXPECT_EQ(ParseRequestLine(Nested(kMaxRequestDepth), &parsed), LineParse::kOk);
  EXPECT_EQ(ParseRequestLine(Nested(kMaxRequestDepth + 1), &parsed), LineParse::kTooDeep);
  // Far deeper than the stack would take if it were built and written back,
  // and never closed: refused before anything is built.
  EXPECT_NE(ParseRequestLine(std::string(1 << 20, '['), &parsed), LineParse::kOk);
  EXPECT_TRUE(parsed.value().absent());
  EXPECT_EQ(ExpectLikeJsonParse(Nested(2000)), LineParse::kTooDeep);
}

// Random edits of request lines (bytes that matter to JSON and UTF-8): the
// parser agrees with json::parse on each, accepting and refusing many.
TEST(RequestLineTest, AgreesWithJsonParseOnMutatedLines) {
  const std::vector<std::string> seeds = {kBegin, kComplete,
                                          R"({"id":1,"n":[1.5,-2,{"s":"\u00e9"}]})"};
  const std::string alphabet = std::string("{}[]:,\"\\/-+.0123456789eEutrfalsn \t\r\n\x01\x7f") +
                               std::string(1, '\0') + "\xc3\xa9\xed\xa0\x80\xf0\x9f\x98\x80\xff";
  std::mt19937 rng(20261201);
  int ok = 0, refused = 0;
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
    (ExpectLikeJsonParse(line) == LineParse::kOk ? ok : refused)++;
    if (HasFailure()) break;
  }
  EXPECT_GT(ok, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace intentd::agent
