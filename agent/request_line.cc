#include "agent/request_line.h"

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <type_traits>
#include <vector>

namespace intentd::agent {

namespace {

using json = nlohmann::json;

// Builds the DOM like nlohmann's own parser, and keeps the source text of a
// top-level "id" number so that it is echoed exactly (integers beyond 64 bits
// too, which the DOM would turn into doubles). Rejects nesting deeper than
// kMaxRequestDepth.
class RequestSax : public nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;

 public:
  explicit RequestSax(json& root) : Base(root, /*allow_exceptions=*/false) {}

  bool start_object(std::size_t n) { return Enter() && Base::start_object(n); }
  bool end_object() {
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    at_id_ = false;
    return Enter() && Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool key(std::string& k) {
    at_id_ = depth_ == 1 && k == "id";
    return Base::key(k);
  }
  bool number_float(double v, const std::string& text) {
    if (at_id_) raw_id_ = text;
    return Base::number_float(v, text);
  }
  bool number_integer(json::number_integer_t v) {
    if (at_id_) raw_id_.clear();
    return Base::number_integer(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (at_id_) raw_id_.clear();
    return Base::number_unsigned(v);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& ex) {
    error_ = ex.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  std::string& raw_id() { return raw_id_; }
  std::string& error() { return error_; }

 private:
  bool Enter() {
    if (++depth_ > kMaxRequestDepth) {
      too_deep_ = true;
      return false;
    }
    return true;
  }
  int depth_ = 0;
  bool at_id_ = false;
  bool too_deep_ = false;
  std::string raw_id_;
  std::string error_;
};

// A "-0" that may be an integer: nlohmann makes it a signed integer, simdjson
// gives the same 0 as for "0", which nlohmann makes unsigned. ("-0.5" and
// "-0e1" are doubles on both routes; inside a string, a "-0" after a digit
// or letter, as in a date, is no number.)
bool MayHoldMinusZero(std::string_view line) {
  const char* p = line.data();
  const char* end = p + line.size();
  while (true) {
    p = static_cast<const char*>(std::memchr(p, '-', static_cast<size_t>(end - p)));
    if (p == nullptr || p + 1 >= end) return false;
    if (p[1] == '0' && (p + 2 == end || (p[2] != '.' && p[2] != 'e' && p[2] != 'E'))) {
      if (p == line.data()) return true;
      switch (p[-1]) {
        case ':':
        case '[':
        case ',':
        case ' ':
        case '\t':
        case '\r':
        case '\n':
          return true;
        default:
          break;
      }
    }
    ++p;
  }
}

using Element = simdjson::dom::element;
static_assert(sizeof(Element) <= sizeof(JsonView::SimdNode::bytes) &&
                  alignof(Element) <= alignof(JsonView::SimdNode) &&
                  std::is_trivially_copyable_v<Element>,
              "JsonView keeps simdjson's element in its opaque bytes");

JsonView::SimdNode NodeOf(Element e) {
  JsonView::SimdNode node;
  std::memcpy(node.bytes, &e, sizeof e);
  return node;
}

Element ElementOf(const JsonView::SimdNode& node) {
  Element e;
  std::memcpy(&e, node.bytes, sizeof e);
  return e;
}

}  // namespace

JsonView::Type JsonView::type() const {
  if (json_ != nullptr) return normalizers::FieldValue::Of(*json_).type;
  if (!simd_) return Type::kNull;
  using T = simdjson::dom::element_type;
  const Element e = ElementOf(node_);
  switch (e.type()) {
    case T::OBJECT:
      return Type::kObject;
    case T::ARRAY:
      return Type::kArray;
    case T::STRING:
      return Type::kString;
    case T::INT64:
      // nlohmann's type by the sign written, as the ops test it ("-0" never
      // takes this route).
      return int64_t(e) < 0 ? Type::kSigned : Type::kUnsigned;
    case T::UINT64:
      return Type::kUnsigned;
    case T::DOUBLE:
      return Type::kFloat;
    case T::BOOL:
      return Type::kBool;
    case T::NULL_VALUE:
      return Type::kNull;
  }
  return Type::kNull;
}

std::string_view JsonView::TypeName() const {
  normalizers::FieldValue v;
  v.type = type();
  return v.TypeName();
}

bool JsonView::boolean() const {
  if (json_ != nullptr) return json_->is_boolean() && json_->get<bool>();
  return simd_ && ElementOf(node_).is_bool() && bool(ElementOf(node_));
}

std::string_view JsonView::string() const {
  if (json_ != nullptr) {
    return json_->is_string() ? std::string_view(json_->get_ref<const std::string&>())
                              : std::string_view();
  }
  if (!simd_ || !ElementOf(node_).is_string()) return {};
  return std::string_view(ElementOf(node_));
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
  if (json_ != nullptr) return normalizers::FieldValue::Of(*json_);
  normalizers::FieldValue v;
  v.type = type();
  if (!simd_) return v;
  const Element e = ElementOf(node_);
  switch (v.type) {
    case Type::kString:
      v.text = std::string_view(e);
      break;
    case Type::kSigned:
      v.signed_value = int64_t(e);
      break;
    case Type::kUnsigned:
      v.unsigned_value = e.is_uint64() ? uint64_t(e) : static_cast<uint64_t>(int64_t(e));
      break;
    case Type::kFloat:
      v.float_value = double(e);
      break;
    default:
      break;
  }
  return v;
}

JsonView JsonView::find(std::string_view name) const {
  if (index_ != nullptr) {
    // The last of repeated names.
    for (auto it = index_->rbegin(); it != index_->rend(); ++it) {
      if (it->first == name) return it->second;
    }
    return JsonView();
  }
  if (json_ != nullptr) {
    if (!json_->is_object()) return JsonView();
    const auto it = json_->find(name);
    return it == json_->end() ? JsonView() : JsonView(&*it);
  }
  if (!simd_ || !ElementOf(node_).is_object()) return JsonView();
  JsonView found;
  for (simdjson::dom::key_value_pair member : simdjson::dom::object(ElementOf(node_))) {
    if (member.key == name) found = JsonView(NodeOf(member.value));
  }
  return found;
}

JsonView::MemberList JsonView::Members() const {
  MemberList members;
  if (json_ != nullptr) {
    if (!json_->is_object()) return members;
    for (const auto& [name, value] : json_->get_ref<const json::object_t&>()) {
      members.emplace_back(name, JsonView(&value));
    }
    return members;
  }
  if (!simd_ || !ElementOf(node_).is_object()) return members;
  const simdjson::dom::object object(ElementOf(node_));
  members.reserve(object.size());  // from the tape (saturated at 2^24 - 1)
  for (simdjson::dom::key_value_pair member : object) {
    members.emplace_back(member.key, JsonView(NodeOf(member.value)));
  }
  return members;
}

std::vector<JsonView> JsonView::Elements() const {
  std::vector<JsonView> elements;
  if (json_ != nullptr) {
    if (!json_->is_array()) return elements;
    for (const json& value : json_->get_ref<const json::array_t&>()) elements.emplace_back(&value);
    return elements;
  }
  if (!simd_ || !ElementOf(node_).is_array()) return elements;
  for (Element v : simdjson::dom::array(ElementOf(node_))) elements.emplace_back(NodeOf(v));
  return elements;
}

json JsonView::ToJson() const {
  if (json_ != nullptr) return *json_;
  const normalizers::FieldValue v = AsField();
  switch (v.type) {
    case Type::kObject: {
      json out = json::object();
      // Assigned over: a repeated name keeps its last value, as nlohmann.
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

namespace {

// A thread's parser keeps the capacity of the largest line it parsed
// (measured: 229 KB after a 16 KiB line, 892 KB after a 64 KiB one): longer
// lines take the reference route, so that 64 worker threads fed maximum-size
// frames hold ~15 MB, not ~57.
constexpr size_t kFastRouteMaxBytes = 16 << 10;

struct FastParser {
  FastParser() {
    // Containers nested deeper than kMaxRequestDepth are simdjson's
    // DEPTH_ERROR (its max_depth counts one more than the deepest nesting it
    // takes); the reference then says kTooDeep. Capacity grows with the
    // longest line, keeping this depth. On failure every line takes the
    // reference route.
    ok = !parser.allocate(4096, kMaxRequestDepth + 1);
  }
  simdjson::dom::parser parser;
  std::vector<char> padded;  // the line, then SIMDJSON_PADDING readable bytes
  bool ok = false;
};

}  // namespace

bool ParseRequestLineFast(std::string_view line, ParsedLine* out) {
  // Not JSON; and memchr and memcpy want a pointer, even for no bytes.
  if (line.empty()) return false;
  if (line.size() > kFastRouteMaxBytes) return false;
  if (MayHoldMinusZero(line)) return false;
  thread_local FastParser fast;
  if (!fast.ok) return false;
  if (fast.padded.size() < line.size() + simdjson::SIMDJSON_PADDING) {
    fast.padded.resize(line.size() + simdjson::SIMDJSON_PADDING);
  }
  std::memcpy(fast.padded.data(), line.data(), line.size());
  simdjson::dom::element root;
  if (fast.parser.parse(fast.padded.data(), line.size(), /*realloc_if_needed=*/false).get(root)) {
    return false;
  }
  if (root.is_object()) {
    // The id's text is echoed: a double's is not in simdjson's DOM.
    const JsonView id = JsonView(NodeOf(root)).find("id");
    if (id.type() == JsonView::Type::kFloat) return false;
  }
  out->dom = json();
  out->value = JsonView(NodeOf(root));
  out->raw_id.clear();
  out->error.clear();
  return true;
}

LineParse ParseRequestLineReference(std::string_view line, ParsedLine* out) {
  out->dom = json();
  out->value = JsonView(&out->dom);
  RequestSax sax(out->dom);
  bool parsed = false;
  try {
    parsed = json::sax_parse(line.begin(), line.end(), &sax, json::input_format_t::json,
                             /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::exception&) {
    parsed = false;
  }
  out->raw_id = std::move(sax.raw_id());
  out->error = std::move(sax.error());
  if (sax.too_deep()) return LineParse::kTooDeep;
  if (!parsed || out->dom.is_discarded()) return LineParse::kInvalid;
  return LineParse::kOk;
}

LineParse ParseRequestLine(std::string_view line, ParsedLine* out) {
  if (ParseRequestLineFast(line, out)) return LineParse::kOk;
  return ParseRequestLineReference(line, out);
}

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

}  // namespace intentd::agent
