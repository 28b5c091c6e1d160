// Parsing a request line into the DOM that the ops read through JsonView.
//
// One parser: nlohmann's, strict, through its public SAX interface
// (nlohmann::json_sax), so that the DOM is nlohmann's own and its error
// messages are the ones a client sees. The SAX handler adds what a plain
// json::parse lacks: nesting deeper than kMaxRequestDepth is refused before
// it is built (writing the DOM back recurses), and the source text of a
// top-level "id" number that the DOM holds as a double is kept, so that it is
// echoed exactly as written.
//
// Thread safety: any number of threads may parse at once.
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

// One value of a parsed request, read in place. Types as nlohmann gives them:
// an integer is kSigned when written with a minus sign (also "-0"), kUnsigned
// otherwise. Of repeated names in an object, the last counts (nlohmann's
// parser assigns over the earlier ones).
class JsonView {
 public:
  using Type = normalizers::FieldValue::Type;

  JsonView() = default;  // absent: no such member
  explicit JsonView(const nlohmann::json* value) : json_(value) {}

  bool absent() const { return json_ == nullptr; }
  Type type() const;  // kNull when absent
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return json_ != nullptr && json_->is_boolean(); }
  bool is_string() const { return json_ != nullptr && json_->is_string(); }
  bool is_object() const { return json_ != nullptr && json_->is_object(); }
  bool is_array() const { return json_ != nullptr && json_->is_array(); }
  std::string_view TypeName() const;  // nlohmann's names, for messages

  // Each reads a value of its type (anything else gives false / empty / 0).
  bool boolean() const;
  std::string_view string() const;
  // An integer that fits in int64_t; false for any other value.
  bool Int64(int64_t* out) const;
  // The value as the normalizers read it (`text` points into the DOM).
  normalizers::FieldValue AsField() const;

  // The member `name` of an object; absent when there is none or this is no
  // object.
  JsonView find(std::string_view name) const;
  // An object's members, sorted by name.
  std::vector<std::pair<std::string_view, JsonView>> Members() const;
  // An array's elements.
  std::vector<JsonView> Elements() const;

  // The value itself; nullptr when absent.
  const nlohmann::json* node() const { return json_; }

 private:
  const nlohmann::json* json_ = nullptr;
};

struct ParsedLine {
  // The DOM (discarded unless the parse succeeded).
  nlohmann::json dom;
  // The source text of a top-level "id" that is a number with a fraction or
  // an exponent, or an integer beyond 64 bits (the DOM holds a double); empty
  // otherwise. Echoed as is.
  std::string raw_id;
  // Why the line is not JSON (kInvalid), nlohmann's message.
  std::string error;

  JsonView value() const { return JsonView(&dom); }
};

LineParse ParseRequestLine(std::string_view line, ParsedLine* out);

}  // namespace intentd::agent
