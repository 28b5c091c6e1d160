#include "agent/request_line.h"

#include <climits>
#include <exception>

namespace intentd::agent {

namespace {

using json = nlohmann::json;

// Builds nlohmann's DOM as json::parse would (an object's repeated name keeps
// its last value), refusing nesting deeper than kMaxRequestDepth and keeping
// the source text of a top-level "id" that becomes a double.
class RequestSax final : public nlohmann::json_sax<json> {
 public:
  explicit RequestSax(ParsedLine* out) : out_(out) {}

  bool null() override { return Put(nullptr); }
  bool boolean(bool v) override { return Put(v); }
  bool number_integer(number_integer_t v) override { return Put(v); }
  bool number_unsigned(number_unsigned_t v) override { return Put(v); }
  bool number_float(number_float_t v, const string_t& text) override {
    if (at_id_) out_->raw_id = text;
    return Put(v);
  }
  bool string(string_t& v) override { return Put(std::move(v)); }
  bool binary(binary_t& v) override { return Put(std::move(v)); }  // never from JSON text
  bool start_object(std::size_t) override { return Open(json::value_t::object); }
  bool start_array(std::size_t) override { return Open(json::value_t::array); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    at_id_ = stack_.size() == 1 && name == "id";
    if (at_id_) out_->raw_id.clear();  // a repeated id: only the last one's text
    // Assigned over by the value that follows: a repeated name keeps its last.
    member_ = &stack_.back()->get_ref<json::object_t&>()[std::move(name)];
    *member_ = nullptr;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    out_->error = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }

 private:
  // Places a value where the parse is: the root, an array's next element or
  // the member named last. Returns where it went.
  template <class V>
  json* Place(V&& v) {
    at_id_ = false;
    if (stack_.empty()) {
      out_->dom = std::forward<V>(v);
      return &out_->dom;
    }
    json* parent = stack_.back();
    if (parent->is_array()) {
      auto& array = parent->get_ref<json::array_t&>();
      array.emplace_back(std::forward<V>(v));
      return &array.back();
    }
    *member_ = std::forward<V>(v);
    return member_;
  }
  template <class V>
  bool Put(V&& v) {
    Place(std::forward<V>(v));
    return true;
  }
  bool Open(json::value_t type) {
    if (static_cast<int>(stack_.size()) >= kMaxRequestDepth) {
      too_deep_ = true;
      return false;
    }
    stack_.push_back(Place(json(type)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  ParsedLine* out_;
  std::vector<json*> stack_;  // the open containers, innermost last
  json* member_ = nullptr;    // the member named by the last key()
  bool at_id_ = false;        // the next value is the top-level "id"
  bool too_deep_ = false;
};

}  // namespace

LineParse ParseRequestLine(std::string_view line, ParsedLine* out) {
  out->dom = json();
  out->raw_id.clear();
  out->error.clear();
  RequestSax sax(out);
  bool parsed = false;
  try {
    parsed = json::sax_parse(line.begin(), line.end(), &sax, json::input_format_t::json,
                             /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    out->error = e.what();
    parsed = false;
  }
  if (sax.too_deep()) return LineParse::kTooDeep;
  if (!parsed) {
    out->dom = json();
    return LineParse::kInvalid;
  }
  return LineParse::kOk;
}

JsonView::Type JsonView::type() const {
  return json_ == nullptr ? Type::kNull : normalizers::FieldValue::Of(*json_).type;
}

std::string_view JsonView::TypeName() const {
  normalizers::FieldValue v;
  v.type = type();
  return v.TypeName();
}

bool JsonView::boolean() const { return json_ != nullptr && json_->is_boolean() && json_->get<bool>(); }

std::string_view JsonView::string() const {
  return is_string() ? std::string_view(json_->get_ref<const std::string&>()) : std::string_view();
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
  return json_ == nullptr ? normalizers::FieldValue{} : normalizers::FieldValue::Of(*json_);
}

JsonView JsonView::find(std::string_view name) const {
  if (!is_object()) return JsonView();
  const auto& object = json_->get_ref<const json::object_t&>();
  const auto it = object.find(name);
  return it == object.end() ? JsonView() : JsonView(&it->second);
}

std::vector<std::pair<std::string_view, JsonView>> JsonView::Members() const {
  std::vector<std::pair<std::string_view, JsonView>> members;
  if (!is_object()) return members;
  const auto& object = json_->get_ref<const json::object_t&>();
  members.reserve(object.size());
  for (const auto& [name, value] : object) members.emplace_back(name, JsonView(&value));
  return members;
}

std::vector<JsonView> JsonView::Elements() const {
  std::vector<JsonView> elements;
  if (!is_array()) return elements;
  for (const json& value : json_->get_ref<const json::array_t&>()) elements.emplace_back(&value);
  return elements;
}

}  // namespace intentd::agent
