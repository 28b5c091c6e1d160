#include "protocol/request_line.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace intentd::agent {

namespace {

using json = nlohmann::json;
using Node = ParsedLine::Node;
using Type = JsonView::Type;
namespace od = simdjson::ondemand;

// A thread's parser and the padded copy of its line (simdjson reads up to
// SIMDJSON_PADDING bytes past the end).
struct Parser {
  od::parser parser;
  std::string padded;
};

// Walks simdjson's On-Demand document once, in the line's order, adding
// every value to the DOM. Each value is read as nlohmann's parser reads it
// (the types JsonView documents); a number is read from its source text,
// which simdjson hands over without judging it (raw_json_token).
class Builder {
 public:
  Builder(ParsedLine* out, std::string_view line) : out_(out), line_(line) {}

  // The whole document: one value, then nothing but whitespace.
  LineParse Document(od::document& doc) {
    od::json_type type;
    if (Fail(doc.type().get(type))) return result_;
    switch (type) {
      case od::json_type::object: {
        od::object object;
        if (Fail(doc.get_object().get(object)) || !Object(object, 1)) return result_;
        break;
      }
      case od::json_type::array: {
        od::array array;
        if (Fail(doc.get_array().get(array)) || !Array(array, 1)) return result_;
        break;
      }
      default: {
        // A scalar document: its one token must be the whole line but for
        // whitespace.
        std::string_view raw;
        if (Fail(doc.raw_json_token().get(raw))) return result_;
        if (type == od::json_type::number) {
          Number(raw, false);
        } else if (type == od::json_type::string) {
          std::string_view text;
          if (!Fail(doc.get_string().get(text))) String(text);
        } else if (type == od::json_type::boolean) {
          bool b = false;
          if (!Fail(doc.get_bool().get(b))) Add(Type::kBool).boolean = b;
        } else {
          bool null = false;
          if (!Fail(doc.is_null().get(null))) {
            if (null) {
              Add(Type::kNull);
            } else {
              Invalid("invalid literal");
            }
          }
        }
        if (result_ == LineParse::kOk && Trim(line_) != Trim(raw)) {
          return Invalid("unexpected content after the JSON value");
        }
        return result_;
      }
    }
    // Past the value, the document is out of bounds unless more follows.
    const char* more = nullptr;
    if (doc.current_location().get(more) == simdjson::SUCCESS) {
      return Invalid("unexpected content after the JSON value");
    }
    return LineParse::kOk;
  }

 private:
  bool Object(od::object& object, int depth) {
    if (!Open(Type::kObject, depth)) return false;
    for (auto member : object) {
      od::field field;
      std::string_view name;
      if (Fail(std::move(member).get(field)) || Fail(field.unescaped_key().get(name))) return false;
      at_id_ = depth == 1 && name == "id";
      if (at_id_) out_->raw_id.clear();  // a repeated id: only the last one's text
      key_at_ = Append(name);
      key_size_ = static_cast<uint32_t>(name.size());
      if (!Value(field.value(), depth)) return false;
    }
    open_.pop_back();
    return true;
  }
  bool Array(od::array& array, int depth) {
    if (!Open(Type::kArray, depth)) return false;
    for (auto element : array) {
      od::value value;
      if (Fail(std::move(element).get(value)) || !Value(value, depth)) return false;
    }
    open_.pop_back();
    return true;
  }
  bool Value(od::value value, int depth) {
    od::json_type type;
    if (Fail(value.type().get(type))) return false;
    switch (type) {
      case od::json_type::object: {
        od::object object;
        return !Fail(value.get_object().get(object)) && Object(object, depth + 1);
      }
      case od::json_type::array: {
        od::array array;
        return !Fail(value.get_array().get(array)) && Array(array, depth + 1);
      }
      case od::json_type::string: {
        std::string_view text;
        if (Fail(value.get_string().get(text))) return false;
        String(text);
        return true;
      }
      case od::json_type::number: {
        return Number(value.raw_json_token(), at_id_);
      }
      case od::json_type::boolean: {
        bool b = false;
        if (Fail(value.get_bool().get(b))) return false;
        Add(Type::kBool).boolean = b;
        return true;
      }
      case od::json_type::null: {
        bool null = false;
        if (Fail(value.is_null().get(null))) return false;
        if (!null) {
          Invalid("invalid literal");
          return false;
        }
        Add(Type::kNull);
        return true;
      }
    }
    Invalid("unexpected value");
    return false;
  }

  // A number from its source text, as nlohmann reads it: an integer without
  // fraction or exponent that fits 64 bits is kSigned when written with a
  // minus sign, else kUnsigned; any other number is a double (kFloat), and
  // one beyond a double's range is refused.
  bool Number(std::string_view raw, bool top_level_id) {
    while (!raw.empty() &&
           (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' || raw.back() == '\r')) {
      raw.remove_suffix(1);
    }
    size_t i = 0;
    const bool negative = i < raw.size() && raw[i] == '-';
    if (negative) ++i;
    const auto digits = [&] {
      const size_t from = i;
      while (i < raw.size() && raw[i] >= '0' && raw[i] <= '9') ++i;
      return i - from;
    };
    const size_t int_start = i;
    const size_t int_digits = digits();
    bool integer = true;
    if (int_digits == 0 || (raw[int_start] == '0' && int_digits > 1)) {
      Invalid("invalid number '" + std::string(raw) + "'");
      return false;
    }
    if (i < raw.size() && raw[i] == '.') {
      ++i;
      integer = false;
      if (digits() == 0) {
        Invalid("invalid number '" + std::string(raw) + "'");
        return false;
      }
    }
    if (i < raw.size() && (raw[i] == 'e' || raw[i] == 'E')) {
      ++i;
      integer = false;
      if (i < raw.size() && (raw[i] == '+' || raw[i] == '-')) ++i;
      if (digits() == 0) {
        Invalid("invalid number '" + std::string(raw) + "'");
        return false;
      }
    }
    if (i != raw.size()) {
      Invalid("invalid number '" + std::string(raw) + "'");
      return false;
    }
    if (integer) {
      const char* first = raw.data();
      const char* last = raw.data() + raw.size();
      if (negative) {
        int64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          Add(Type::kSigned).signed_value = v;
          return true;
        }
      } else {
        uint64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          Add(Type::kUnsigned).unsigned_value = v;
          return true;
        }
      }
    }
    // strtod, as nlohmann's lexer; the text is a valid JSON number here.
    const std::string text(raw);
    const double v = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v)) {
      Invalid("number overflow parsing '" + text + "'");
      return false;
    }
    if (top_level_id) out_->raw_id = text;
    Add(Type::kFloat).float_value = v;
    return true;
  }

  void String(std::string_view text) {
    const uint32_t at = Append(text);
    Node& node = Add(Type::kString);
    node.text_at = at;
    node.text_size = static_cast<uint32_t>(text.size());
  }
  uint32_t Append(std::string_view s) {
    const auto at = static_cast<uint32_t>(out_->text.size());
    out_->text += s;
    return at;
  }
  // A new value where the walk is: the root, or the next child of the
  // innermost open container (named by the last member name in an object).
  Node& Add(Type type) {
    at_id_ = false;
    std::vector<Node>& nodes = out_->nodes;
    const auto index = static_cast<uint32_t>(nodes.size());
    nodes.emplace_back();
    nodes.back().type = type;
    if (!open_.empty()) {
      Node& parent = nodes[open_.back()];
      if (parent.type == Type::kObject) {
        nodes.back().key_at = key_at_;
        nodes.back().key_size = key_size_;
      }
      if (parent.last == 0) {
        parent.first = index + 1;
      } else {
        nodes[parent.last - 1].next = index + 1;
      }
      parent.last = index + 1;
    }
    return nodes.back();
  }
  bool Open(Type type, int depth) {
    if (depth > kMaxRequestDepth) {
      result_ = LineParse::kTooDeep;
      return false;
    }
    Add(type);
    open_.push_back(static_cast<uint32_t>(out_->nodes.size() - 1));
    return true;
  }
  // True (and the line refused) when simdjson reported an error.
  bool Fail(simdjson::error_code error) {
    if (error == simdjson::SUCCESS) return false;
    if (error == simdjson::DEPTH_ERROR) {
      result_ = LineParse::kTooDeep;
    } else {
      Invalid(simdjson::error_message(error));
    }
    return true;
  }
  LineParse Invalid(std::string why) {
    if (result_ == LineParse::kOk) {
      result_ = LineParse::kInvalid;
      out_->error = std::move(why);
    }
    return result_;
  }

  static std::string_view Trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
  }

  ParsedLine* out_;
  std::string_view line_;
  std::vector<uint32_t> open_;  // the open containers' nodes, innermost last
  uint32_t key_at_ = 0, key_size_ = 0;
  bool at_id_ = false;  // the value being read is the top-level "id"
  LineParse result_ = LineParse::kOk;
};

}  // namespace

LineParse ParseRequestLine(std::string_view line, ParsedLine* out) {
  out->nodes.clear();
  out->text.clear();
  out->raw_id.clear();
  out->error.clear();
  // A request line has a few dozen values, and its strings are shorter than
  // the line: one allocation each, usually.
  out->nodes.reserve(32);
  out->text.reserve(line.size());
  // A byte order mark is skipped, as nlohmann's parser skips it.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (line.substr(0, kBom.size()) == kBom) line.remove_prefix(kBom.size());
  thread_local Parser p;
  p.padded.assign(line);
  p.padded.resize(line.size() + simdjson::SIMDJSON_PADDING);
  od::document doc;
  LineParse result = LineParse::kOk;
  const simdjson::error_code error =
      p.parser.iterate(simdjson::padded_string_view(p.padded.data(), line.size(), p.padded.size()))
          .get(doc);
  Builder builder(out, line);
  if (error != simdjson::SUCCESS) {
    out->error = simdjson::error_message(error);
    result = error == simdjson::DEPTH_ERROR ? LineParse::kTooDeep : LineParse::kInvalid;
  } else {
    result = builder.Document(doc);
  }
  if (result != LineParse::kOk) out->nodes.clear();
  return result;
}

JsonView::Type JsonView::type() const {
  return line_ == nullptr ? Type::kNull : line_->nodes[node_].type;
}

std::string_view JsonView::TypeName() const {
  normalizers::FieldValue v;
  v.type = type();
  return v.TypeName();
}

bool JsonView::boolean() const { return is_bool() && line_->nodes[node_].boolean; }

std::string_view JsonView::string() const {
  if (!is_string()) return {};
  const Node& node = line_->nodes[node_];
  return std::string_view(line_->text).substr(node.text_at, node.text_size);
}

bool JsonView::Int64(int64_t* out) const {
  const normalizers::FieldValue v = AsField();
  if (v.type == Type::kSigned) {
    *out = v.signed_value;
    return true;
  }
  if (v.type == Type::kUnsigned && v.unsigned_value <= static_cast<uint64_t>(INT64_MAX)) {
    *out = static_cast<int64_t>(v.unsigned_value);
    return true;
  }
  return false;
}

normalizers::FieldValue JsonView::AsField() const {
  normalizers::FieldValue v;
  if (line_ == nullptr) return v;
  const Node& node = line_->nodes[node_];
  v.type = node.type;
  v.text = string();
  v.signed_value = node.signed_value;
  v.unsigned_value = node.unsigned_value;
  v.float_value = node.float_value;
  return v;
}

JsonView JsonView::find(std::string_view name) const {
  if (!is_object()) return JsonView();
  const std::string_view text(line_->text);
  JsonView found;
  for (uint32_t i = line_->nodes[node_].first; i != 0; i = line_->nodes[i - 1].next) {
    const Node& member = line_->nodes[i - 1];
    if (text.substr(member.key_at, member.key_size) == name) found = JsonView(line_, i - 1);
  }
  return found;
}

std::vector<std::pair<std::string_view, JsonView>> JsonView::Members() const {
  std::vector<std::pair<std::string_view, JsonView>> members;
  if (!is_object()) return members;
  const std::string_view text(line_->text);
  for (uint32_t i = line_->nodes[node_].first; i != 0; i = line_->nodes[i - 1].next) {
    const Node& member = line_->nodes[i - 1];
    members.emplace_back(text.substr(member.key_at, member.key_size), JsonView(line_, i - 1));
  }
  // Sorted by name, stably: of repeated names the last stays.
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t kept = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (i + 1 < members.size() && members[i + 1].first == members[i].first) continue;
    members[kept++] = members[i];
  }
  members.resize(kept);
  return members;
}

std::vector<JsonView> JsonView::Elements() const {
  std::vector<JsonView> elements;
  if (!is_array()) return elements;
  for (uint32_t i = line_->nodes[node_].first; i != 0; i = line_->nodes[i - 1].next) {
    elements.emplace_back(line_, i - 1);
  }
  return elements;
}

json JsonView::ToJson() const {
  const normalizers::FieldValue v = AsField();
  switch (v.type) {
    case Type::kObject: {
      json out = json::object();
      for (const auto& [name, value] : Members()) out[std::string(name)] = value.ToJson();
      return out;
    }
    case Type::kArray: {
      json out = json::array();
      for (const JsonView& value : Elements()) out.push_back(value.ToJson());
      return out;
    }
    case Type::kString:
      return std::string(v.text);
    case Type::kSigned:
      return static_cast<json::number_integer_t>(v.signed_value);
    case Type::kUnsigned:
      return static_cast<json::number_unsigned_t>(v.unsigned_value);
    case Type::kFloat:
      return v.float_value;
    case Type::kBool:
      return boolean();
    case Type::kNull:
      break;
  }
  return nullptr;
}

}  // namespace intentd::agent
