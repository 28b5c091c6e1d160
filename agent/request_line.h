// Parsing a request line into a DOM that the ops read through JsonView.
//
// Two routes give the same values. The reference is nlohmann's own strict
// parser (ParseRequestLineReference); its error messages are the ones a
// client sees. The route the agent takes (ParseRequestLine) parses with
// simdjson, which validates a line several times faster, and the ops read
// simdjson's DOM in place; wherever the two could differ (any error, a
// top-level "id" that is a double, an integer "-0", nesting past
// kMaxRequestDepth, a line over 16 KiB) it gives the line to the reference
// instead. Tests and the request-line fuzz target compare the two routes.
//
// Thread safety: both may be called from many threads at once (each thread
// keeps its own simdjson parser). A view of the simdjson route is valid until
// the same thread parses its next line.
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

// One value of a parsed request, read in place: a node of simdjson's DOM or
// of nlohmann's. Types as nlohmann gives them: an integer is kSigned when
// negative (or "-0"), kUnsigned otherwise. An object's member is looked up as
// nlohmann would keep it: of repeated names, the last.
class JsonView {
 public:
  using Type = normalizers::FieldValue::Type;

  JsonView() = default;  // absent: no such member
  explicit JsonView(const nlohmann::json* value) : json_(value) {}

  bool absent() const { return json_ == nullptr && !simd_; }
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
  // The value as the normalizers read it (`text` points into the DOM).
  normalizers::FieldValue AsField() const;

  // The member `name` of an object (the last of that name); absent when
  // there is none or this is no object.
  JsonView find(std::string_view name) const;
  // An object's members in the line's order, repeated names included.
  using MemberList = std::vector<std::pair<std::string_view, JsonView>>;
  MemberList Members() const;
  // The same object, whose find() looks in `members` (its Members(), which
  // the caller keeps alive): one pass over the object for many lookups.
  JsonView Indexed(const MemberList* members) const {
    JsonView v = *this;
    v.index_ = members;
    return v;
  }
  // An array's elements.
  std::vector<JsonView> Elements() const;

  // A copy as nlohmann's DOM (what the reference route gives); for tests.
  nlohmann::json ToJson() const;

  // simdjson's dom::element, kept opaque so that only request_line.cc
  // includes simdjson.
  struct SimdNode {
    alignas(8) unsigned char bytes[16];
  };
  explicit JsonView(const SimdNode& node) : simd_(true), node_(node) {}

 private:
  const nlohmann::json* json_ = nullptr;
  const MemberList* index_ = nullptr;
  bool simd_ = false;
  SimdNode node_{};
};

struct ParsedLine {
  ParsedLine() = default;
  ParsedLine(const ParsedLine&) = delete;  // `value` may point into `dom`
  ParsedLine& operator=(const ParsedLine&) = delete;

  JsonView value;
  // The reference route's DOM, which `value` then points into.
  nlohmann::json dom;
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
