#include "agent/request_line.h"

#include <algorithm>
#include <climits>
#include <exception>

namespace intentd::agent {

namespace {

using json = nlohmann::json;
using Node = ParsedLine::Node;
using Type = JsonView::Type;

// Builds the line's DOM (ParsedLine::nodes and text) from nlohmann's SAX
// events, refusing nesting deeper than kMaxRequestDepth and keeping the
// source text of a top-level "id" that becomes a double.
class RequestSax final : public nlohmann::json_sax<json> {
 public:
  explicit RequestSax(ParsedLine* out) : out_(out) {}

  bool null() override {
    Add(Type::kNull);
    return true;
  }
  bool boolean(bool v) override {
    Add(Type::kBool).boolean = v;
    return true;
  }
  bool number_integer(number_integer_t v) override {
    Add(Type::kSigned).signed_value = v;
    return true;
  }
  bool number_unsigned(number_unsigned_t v) override {
    Add(Type::kUnsigned).unsigned_value = v;
    return true;
  }
  bool number_float(number_float_t v, const string_t& text) override {
    if (at_id_) out_->raw_id = text;
    Add(Type::kFloat).float_value = v;
    return true;
  }
  bool string(string_t& v) override {
    const uint32_t at = Append(v);
    Node& node = Add(Type::kString);
    node.text_at = at;
    node.text_size = static_cast<uint32_t>(v.size());
    return true;
  }
  bool binary(binary_t&) override { return false; }  // never from JSON text
  bool start_object(std::size_t) override { return Open(Type::kObject); }
  bool start_array(std::size_t) override { return Open(Type::kArray); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    at_id_ = open_.size() == 1 && name == "id";
    if (at_id_) out_->raw_id.clear();  // a repeated id: only the last one's text
    key_at_ = Append(name);
    key_size_ = static_cast<uint32_t>(name.size());
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    out_->error = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }

 private:
  uint32_t Append(const std::string& s) {
    const auto at = static_cast<uint32_t>(out_->text.size());
    out_->text += s;
    return at;
  }
  // A new value where the parse is: the root, or the next child of the
  // innermost open container (named by the last key() in an object).
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
  bool Open(Type type) {
    if (static_cast<int>(open_.size()) >= kMaxRequestDepth) {
      too_deep_ = true;
      return false;
    }
    Add(type);
    open_.push_back(static_cast<uint32_t>(out_->nodes.size() - 1));
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  ParsedLine* out_;
  std::vector<uint32_t> open_;  // the open containers' nodes, innermost last
  uint32_t key_at_ = 0, key_size_ = 0;
  bool at_id_ = false;  // the next value is the top-level "id"
  bool too_deep_ = false;
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
  RequestSax sax(out);
  bool parsed = false;
  try {
    parsed = json::sax_parse(line.begin(), line.end(), &sax, json::input_format_t::json,
                             /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    out->error = e.what();
    parsed = false;
  }
  if (!parsed) {
    out->nodes.clear();
    return sax.too_deep() ? LineParse::kTooDeep : LineParse::kInvalid;
  }
  return LineParse::kOk;
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
