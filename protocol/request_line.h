// Parsing a request line into the DOM that the ops read through JsonView.
//
// One parser: simdjson's On-Demand API, which validates the line (UTF-8
// included) several times faster than a character-at-a-time parser, walked
// once to build a compact DOM of our own: the nodes in one vector and every
// string in one buffer, two allocations per line. Every value reads as
// nlohmann's json::parse reads it (tests/agent/request_line_test.cc compares
// the two on every line it tries, 30,000 mutated ones included): numbers are
// read from their source text (so an integer beyond 64 bits is a double, as
// there, and "-0" a signed integer), of repeated names the last counts, a
// leading byte order mark is skipped. One difference: a raw NUL byte is
// refused wherever it is, where nlohmann's parser takes one after the value
// as the end of its input. It also refuses nesting deeper than
// kMaxRequestDepth before building it (writing a DOM back recurses), and
// keeps the source text of a top-level "id" that is a double, so that it is
// echoed exactly as written.
//
// Thread safety: any number of threads may parse at once (each keeps its own
// simdjson parser); a JsonView reads its ParsedLine, which must outlive it
// and not move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "normalizers/key_derivation.h"

namespace intentd::agent {

// Containers nested deeper are refused: the DOM would recurse when written
// back.
inline constexpr int kMaxRequestDepth = 64;

enum class LineParse {
  kOk,
  kInvalid,  // not JSON, or not UTF-8
  kTooDeep,  // more than kMaxRequestDepth nested containers
};

struct ParsedLine;

// One value of a parsed request, read in place. Types as nlohmann gives them:
// an integer is kSigned when written with a minus sign (also "-0"), kUnsigned
// otherwise; a number beyond 64 bits or with a fraction or an exponent is
// kFloat. Of repeated names in an object, the last counts.
class JsonView {
 public:
  using Type = normalizers::FieldValue::Type;

  JsonView() = default;  // absent: no such member
  JsonView(const ParsedLine* line, uint32_t node) : line_(line), node_(node) {}

  bool absent() const { return line_ == nullptr; }
  Type type() const;  // kNull when absent
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_string() const { return type() == Type::kString; }
  bool is_object() const { return type() == Type::kObject; }
  bool is_array() const { return type() == Type::kArray; }
  std::string_view TypeName() const;  // nlohmann's names, for messages

  // Each reads a value of its type (anything else gives false / empty / 0).
  bool boolean() const;
  std::string_view string() const;
  // An integer that fits in int64_t; false for any other value.
  bool Int64(int64_t* out) const;
  // The value as the normalizers read it (`text` points into the line's DOM).
  normalizers::FieldValue AsField() const;

  // The member `name` of an object (the last of that name); absent when
  // there is none or this is no object.
  JsonView find(std::string_view name) const;
  // An object's members sorted by name, each name once (its last value).
  std::vector<std::pair<std::string_view, JsonView>> Members() const;
  // An array's elements.
  std::vector<JsonView> Elements() const;

  // A copy as nlohmann's DOM (what json::parse gives); for tests.
  nlohmann::json ToJson() const;

 private:
  const ParsedLine* line_ = nullptr;
  uint32_t node_ = 0;
};

struct ParsedLine {
  // A value; children are linked in the line's order.
  struct Node {
    JsonView::Type type = JsonView::Type::kNull;
    bool boolean = false;
    uint32_t key_at = 0, key_size = 0;    // an object member's name, in `text`
    uint32_t text_at = 0, text_size = 0;  // a string, in `text`
    uint32_t first = 0;                   // the first child's index + 1; 0: none
    uint32_t last = 0;                    // the last child's index + 1 (while parsing)
    uint32_t next = 0;                    // the next sibling's index + 1; 0: none
    int64_t signed_value = 0;
    uint64_t unsigned_value = 0;
    double float_value = 0;
  };
  std::vector<Node> nodes;  // nodes[0] is the root
  std::string text;         // every string and member name, unescaped
  // The source text of a top-level "id" that is a number with a fraction or
  // an exponent, or an integer beyond 64 bits (kFloat); empty otherwise.
  // Echoed as is.
  std::string raw_id;
  // Why the line is not JSON (kInvalid): simdjson's message, or which number
  // is out of a double's range.
  std::string error;

  // The root value; absent unless the parse succeeded.
  JsonView value() const { return nodes.empty() ? JsonView() : JsonView(this, 0); }
};

LineParse ParseRequestLine(std::string_view line, ParsedLine* out);

}  // namespace intentd::agent
