// Parsing a request line into nlohmann's DOM, which the ops read.
//
// Two routes give the same result. The reference is nlohmann's own strict
// parser (ParseRequestLineReference); its error messages are the ones a
// client sees. The route the agent takes (ParseRequestLine) parses with
// simdjson, which validates a line several times faster, and builds the same
// DOM from it; wherever the two could differ (any error, a top-level "id"
// that is a double, an integer "-0", nesting past kMaxRequestDepth, a line
// over 16 KiB) it gives the line to the reference instead. Tests and the
// request-line fuzz target compare the two routes.
//
// Thread safety: both may be called from many threads at once (each thread
// keeps its own simdjson parser).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace intentd::agent {

// Containers nested deeper are refused: the DOM would recurse when written
// back.
inline constexpr int kMaxRequestDepth = 64;

enum class LineParse {
  kOk,
  kInvalid,  // not JSON, or not UTF-8
  kTooDeep,  // more than kMaxRequestDepth nested containers
};

struct ParsedLine {
  nlohmann::json value;
  // The source text of a top-level "id" that is a number with a fraction or
  // an exponent, or an integer beyond 64 bits (the DOM holds a double); empty
  // otherwise. Echoed as is.
  std::string raw_id;
  // Why the line is not JSON (kInvalid), from nlohmann's parser.
  std::string error;
};

LineParse ParseRequestLine(std::string_view line, ParsedLine* out);
LineParse ParseRequestLineReference(std::string_view line, ParsedLine* out);
// The simdjson route alone: false when the line must go to the reference
// (*out is then unspecified).
bool ParseRequestLineFast(std::string_view line, ParsedLine* out);

// Same types and values throughout (nlohmann's == takes 1 and 1u, or 1 and
// 1.0, as equal); for comparing the routes.
bool SameJson(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace intentd::agent
