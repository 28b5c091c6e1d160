#include "agent/request_line.h"

#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <exception>
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

// simdjson's element as nlohmann's; false where the reference must decide
// (nesting too deep).
bool Convert(simdjson::dom::element e, int depth, json* out) {
  using Type = simdjson::dom::element_type;
  switch (e.type()) {
    case Type::OBJECT: {
      if (depth >= kMaxRequestDepth) return false;
      *out = json::object();
      auto& members = out->get_ref<json::object_t&>();
      for (simdjson::dom::key_value_pair member : simdjson::dom::object(e)) {
        // Assigned over: a repeated name keeps its last value, as nlohmann.
        if (!Convert(member.value, depth + 1, &members[std::string(member.key)])) return false;
      }
      return true;
    }
    case Type::ARRAY: {
      if (depth >= kMaxRequestDepth) return false;
      simdjson::dom::array elements(e);
      *out = json::array();
      auto& values = out->get_ref<json::array_t&>();
      values.reserve(elements.size());
      for (simdjson::dom::element v : elements) {
        values.emplace_back();
        if (!Convert(v, depth + 1, &values.back())) return false;
      }
      return true;
    }
    case Type::STRING:
      *out = std::string(std::string_view(e));
      return true;
    case Type::INT64: {
      // nlohmann's type by the sign written, as the ops test it.
      const int64_t v = int64_t(e);
      if (v >= 0) {
        *out = static_cast<json::number_unsigned_t>(v);
      } else {
        *out = static_cast<json::number_integer_t>(v);
      }
      return true;
    }
    case Type::UINT64:
      *out = static_cast<json::number_unsigned_t>(uint64_t(e));
      return true;
    case Type::DOUBLE:
      *out = double(e);
      return true;
    case Type::BOOL:
      *out = bool(e);
      return true;
    case Type::NULL_VALUE:
      *out = nullptr;
      return true;
  }
  return false;
}

// A thread's parser keeps the capacity of the largest line it parsed
// (measured: 229 KB after a 16 KiB line, 892 KB after a 64 KiB one): longer
// lines take the reference route, so that 64 worker threads fed maximum-size
// frames hold ~15 MB, not ~57.
constexpr size_t kFastRouteMaxBytes = 16 << 10;

struct FastParser {
  simdjson::dom::parser parser;
  std::vector<char> padded;  // the line, then SIMDJSON_PADDING readable bytes
};

}  // namespace

bool ParseRequestLineFast(std::string_view line, ParsedLine* out) {
  // Not JSON; and memchr and memcpy want a pointer, even for no bytes.
  if (line.empty()) return false;
  if (line.size() > kFastRouteMaxBytes) return false;
  if (MayHoldMinusZero(line)) return false;
  thread_local FastParser fast;
  if (fast.padded.size() < line.size() + simdjson::SIMDJSON_PADDING) {
    fast.padded.resize(line.size() + simdjson::SIMDJSON_PADDING);
  }
  std::memcpy(fast.padded.data(), line.data(), line.size());
  simdjson::dom::element root;
  if (fast.parser.parse(fast.padded.data(), line.size(), /*realloc_if_needed=*/false).get(root)) {
    return false;
  }
  json value;
  if (!Convert(root, 0, &value)) return false;
  if (value.is_object()) {
    // The id's text is echoed: a double's is not in simdjson's DOM.
    const auto id = value.find("id");
    if (id != value.end() && id->is_number_float()) return false;
  }
  out->value = std::move(value);
  out->raw_id.clear();
  out->error.clear();
  return true;
}

LineParse ParseRequestLineReference(std::string_view line, ParsedLine* out) {
  out->value = json();
  RequestSax sax(out->value);
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
  if (!parsed || out->value.is_discarded()) return LineParse::kInvalid;
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
