#include "cli/cost.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace intentd::cli {
namespace {

using Int = __int128;

// A non-negative rational number, always reduced, den > 0. Money is kept as
// an exact fraction of reais and rounded only when printed, so no float ever
// drifts a cent (0.015 * 8 is 0.12, not 0.11999999999999999).
struct Ratio {
  Int num = 0;
  Int den = 1;
};

Int Gcd(Int a, Int b) {
  if (a < 0) a = -a;
  while (b != 0) {
    Int t = a % b;
    a = b;
    b = t;
  }
  return a == 0 ? 1 : a;
}

Ratio Reduced(Int num, Int den) {
  Int g = Gcd(num, den);
  return Ratio{num / g, den / g};
}

Ratio Whole(int64_t n) { return Ratio{n, 1}; }

// Arithmetic that reports overflow instead of wrapping: false means the
// figures are too large to be computed exactly.
bool Mul(const Ratio& a, const Ratio& b, Ratio* out) {
  // Cross-reduce first so exact results stay small.
  Int g1 = Gcd(a.num, b.den), g2 = Gcd(b.num, a.den);
  Int num, den;
  if (__builtin_mul_overflow(a.num / g1, b.num / g2, &num)) return false;
  if (__builtin_mul_overflow(a.den / g2, b.den / g1, &den)) return false;
  *out = Reduced(num, den);
  return true;
}

bool Add(const Ratio& a, const Ratio& b, Ratio* out) {
  Int g = Gcd(a.den, b.den);
  Int left, right, num, den;
  if (__builtin_mul_overflow(a.num, b.den / g, &left)) return false;
  if (__builtin_mul_overflow(b.num, a.den / g, &right)) return false;
  if (__builtin_add_overflow(left, right, &num)) return false;
  if (__builtin_mul_overflow(a.den, b.den / g, &den)) return false;
  *out = Reduced(num, den);
  return true;
}

// b must be non-zero.
bool Div(const Ratio& a, const Ratio& b, Ratio* out) { return Mul(a, Ratio{b.den, b.num}, out); }

std::string IntToString(Int v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(s.begin(), s.end());
  return s;
}

std::string Grouped(const std::string& digits) {
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

// Rounds half up to `places` decimals; then drops trailing zeros while more
// than `min_places` remain. `group` puts thousands separators in the integer
// part. False on overflow.
bool Format(const Ratio& r, int places, int min_places, bool group, std::string* out) {
  Int scale = 1;
  for (int i = 0; i < places; ++i) scale *= 10;
  Int scaled;
  if (__builtin_mul_overflow(r.num, scale, &scaled)) return false;
  Int q = scaled / r.den, rem = scaled % r.den;
  if (rem >= r.den - rem) ++q;  // half up; written so that nothing can overflow
  std::string whole = IntToString(q / scale);
  std::string frac;
  if (places > 0) {
    frac = IntToString(q % scale);
    frac.insert(0, static_cast<size_t>(places) - frac.size(), '0');
  }
  while (static_cast<int>(frac.size()) > min_places && frac.back() == '0') frac.pop_back();
  *out = group ? Grouped(whole) : whole;
  if (!frac.empty()) *out += "." + frac;
  return true;
}

Int Ceil(const Ratio& r) { return (r.num + r.den - 1) / r.den; }

// Plain decimal digits with an optional '.' fraction of at most
// `max_decimals` digits, as the user typed it for a price or a rate.
bool ParseDecimal(std::string_view text, int max_decimals, Ratio* out, std::string* why) {
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  auto all_digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !all_digits(whole) || !all_digits(frac) ||
      (dot != std::string_view::npos && frac.empty())) {
    *why = "expected plain digits with an optional '.' fraction, like 0.015";
    if (text.find(',') != std::string_view::npos) *why += " (write the decimal mark as '.')";
    return false;
  }
  if (static_cast<int>(frac.size()) > max_decimals) {
    *why = "at most " + std::to_string(max_decimals) + " decimals";
    return false;
  }
  if (whole.size() > 15) {
    *why = "too large";
    return false;
  }
  Int num = 0, den = 1;
  for (char c : whole) num = num * 10 + (c - '0');
  for (char c : frac) {
    num = num * 10 + (c - '0');
    den *= 10;
  }
  *out = Reduced(num, den);
  return true;
}

constexpr std::string_view kUsage =
    "usage: intentd cost [--conversations N] [--input-tokens N] [--output-tokens N]\n"
    "                    [--input-price R$] [--output-price R$] [--repeat-rate PCT]\n"
    "                    [--ticket R$] [--socket PATH] [--json] [--help]\n"
    "\n"
    "What repeated model calls cost when a redelivered conversation calls the\n"
    "model again (the seed article's table). Defaults are the article's example:\n"
    "  --conversations   30000   conversations a month\n"
    "  --input-tokens    8000    input tokens per model call\n"
    "  --output-tokens   600     output tokens per model call\n"
    "  --input-price     0.015   R$ per thousand input tokens\n"
    "  --output-price    0.075   R$ per thousand output tokens\n"
    "  --repeat-rate     3       percent of conversations that repeat the call\n"
    "  --ticket          1.20    R$ of revenue per resolved conversation\n"
    "  --socket PATH     measure the repeat rate from a running agent's counters:\n"
    "                    (replay + in_flight + recover) / all begin decisions; and the\n"
    "                    model calls its seen op saved (duplicate messages dropped)\n"
    "  --json            print one JSON object instead of the table\n"
    "Money is exact, rounded half up only when printed.\n";

struct Inputs {
  Ratio conversations = Whole(30000);
  Ratio input_tokens = Whole(8000);
  Ratio output_tokens = Whole(600);
  Ratio input_price = Reduced(15, 1000);
  Ratio output_price = Reduced(75, 1000);
  Ratio repeat_percent = Whole(3);
  Ratio ticket = Reduced(120, 100);
  std::optional<std::string> socket;
  bool repeat_rate_given = false;
  bool json = false;
  bool help = false;
};

// Parses one flag value into `inputs`. Returns "" or a message for people.
std::string SetValue(const std::string& flag, const std::string& value, Inputs* in) {
  std::string why;
  Ratio r;
  auto integer = [&](Ratio* dst, bool positive) -> std::string {
    if (!ParseDecimal(value, 0, &r, &why)) return "expected a whole number, got '" + value + "'";
    if (positive && r.num == 0) return "must be at least 1";
    *dst = r;
    return "";
  };
  auto decimal = [&](Ratio* dst, int decimals, bool positive) -> std::string {
    if (!ParseDecimal(value, decimals, &r, &why)) return "'" + value + "': " + why;
    if (positive && r.num == 0) return "must be greater than 0";
    *dst = r;
    return "";
  };
  if (flag == "--conversations") return integer(&in->conversations, true);
  if (flag == "--input-tokens") return integer(&in->input_tokens, false);
  if (flag == "--output-tokens") return integer(&in->output_tokens, false);
  if (flag == "--input-price") return decimal(&in->input_price, 9, false);
  if (flag == "--output-price") return decimal(&in->output_price, 9, false);
  if (flag == "--ticket") return decimal(&in->ticket, 9, true);
  if (flag == "--socket") {
    if (value.empty()) return "needs a socket path";
    in->socket = value;
    return "";
  }
  if (flag == "--repeat-rate") {
    std::string v = value;
    if (!v.empty() && v.back() == '%') v.pop_back();
    if (!ParseDecimal(v, 6, &r, &why)) return "'" + value + "': " + why + " (a percent, like 3)";
    if (r.num > 100 * r.den) return "is a percent between 0 and 100";
    in->repeat_percent = r;
    in->repeat_rate_given = true;
    return "";
  }
  return "unknown flag";
}

// Returns -1 when parsing succeeded, otherwise the exit code.
int ParseArgs(const std::vector<std::string>& args, Inputs* in, std::ostream& err) {
  static const std::vector<std::string> kValued = {
      "--conversations", "--input-tokens", "--output-tokens", "--input-price",
      "--output-price",  "--repeat-rate",  "--ticket",        "--socket"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      in->help = true;
      continue;
    }
    if (arg == "--json") {
      in->json = true;
      continue;
    }
    std::string flag = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    if (std::find(kValued.begin(), kValued.end(), flag) == kValued.end()) {
      err << "intentd cost: unknown argument '" << arg << "' (see intentd cost --help)\n";
      return 2;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        err << "intentd cost: " << flag << " needs a value\n";
        return 2;
      }
      value = args[++i];
    }
    if (std::string why = SetValue(flag, value, in); !why.empty()) {
      err << "intentd cost: " << flag << " " << why << "\n";
      return 2;
    }
  }
  if (in->socket && in->repeat_rate_given) {
    err << "intentd cost: --repeat-rate and --socket exclude each other (--socket measures it)\n";
    return 2;
  }
  return -1;
}

struct Measured {
  int64_t execute = 0, in_flight = 0, recover = 0, replay = 0;
  // The `seen` op's messages: first sightings, and duplicates dropped before
  // the model (each a model call saved). Absent from older agents: 0.
  int64_t seen_first = 0, seen_duplicates = 0;
  int64_t begins() const { return execute + in_flight + recover + replay; }
  int64_t absorbed() const { return in_flight + recover + replay; }
};

// *dst = object[name] when present (a counter never counted may be omitted).
// False with a message on `err` when it is not a non-negative integer.
bool ReadCounter(const nlohmann::json& object, const char* where, const char* name, int64_t* dst,
                 std::ostream& err) {
  auto f = object.find(name);
  if (f == object.end()) return true;
  // Counters beyond 2^53 are not plausible and would let the sum overflow.
  if (!f->is_number_unsigned() || f->get<uint64_t>() > (uint64_t{1} << 53)) {
    err << "intentd cost: " << where << "." << name << " is not a non-negative integer\n";
    return false;
  }
  *dst = f->get<int64_t>();
  return true;
}

// Reads the decision and sighting counters from the agent. Returns -1 or
// the exit code.
int Measure(const Inputs& in, const FetchStatsFn& fetch, Measured* m, std::ostream& err) {
  std::string line, error;
  if (!fetch || !fetch(*in.socket, &line, &error)) {
    err << "intentd cost: cannot reach the agent at " << *in.socket << ": " << error << "\n";
    return 3;
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    err << "intentd cost: the agent's stats answer is not a JSON object\n";
    return 1;
  }
  if (auto ok = j.find("ok"); ok != j.end() && *ok != true) {
    const nlohmann::json& e = j.contains("error") ? j["error"] : nlohmann::json::object();
    err << "intentd cost: the agent answered " << (e.is_object() ? e.value("code", "?") : "?")
        << ": " << (e.is_object() ? e.value("message", "") : "") << "\n";
    return 1;
  }
  auto it = j.find("decisions");
  if (it == j.end() || !it->is_object()) {
    err << "intentd cost: the agent's stats have no \"decisions\" object\n";
    return 1;
  }
  std::pair<const char*, int64_t*> fields[] = {{"execute", &m->execute},
                                               {"in_flight", &m->in_flight},
                                               {"recover", &m->recover},
                                               {"replay", &m->replay}};
  for (auto& [name, dst] : fields) {
    if (!ReadCounter(*it, "decisions", name, dst, err)) return 1;
  }
  if (auto seen = j.find("seen"); seen != j.end()) {
    if (!seen->is_object() || !ReadCounter(*seen, "seen", "first", &m->seen_first, err) ||
        !ReadCounter(*seen, "seen", "duplicates", &m->seen_duplicates, err)) {
      if (!seen->is_object()) err << "intentd cost: the agent's \"seen\" is not an object\n";
      return 1;
    }
  }
  return -1;
}

struct Figures {
  Ratio rate;  // fraction of conversations, 0..1
  Ratio cost_per_call, revenue, repeated, month, share_percent, year;
  Ratio saved_by_dedup;  // measured duplicates dropped x cost per call
  Int break_even = 0;
};

bool Compute(const Inputs& in, const Ratio& rate, int64_t duplicates, Figures* f) {
  Ratio in_cost, out_cost, per_thousand = Reduced(1, 1000), hundred = Whole(100);
  f->rate = rate;
  return Mul(in.input_tokens, in.input_price, &in_cost) && Mul(in_cost, per_thousand, &in_cost) &&
         Mul(in.output_tokens, in.output_price, &out_cost) &&
         Mul(out_cost, per_thousand, &out_cost) && Add(in_cost, out_cost, &f->cost_per_call) &&
         Mul(in.conversations, in.ticket, &f->revenue) &&
         Mul(in.conversations, rate, &f->repeated) &&
         Mul(f->repeated, f->cost_per_call, &f->month) &&
         Div(f->month, f->revenue, &f->share_percent) &&
         Mul(f->share_percent, hundred, &f->share_percent) &&
         Mul(f->month, Whole(12), &f->year) &&
         Mul(Whole(duplicates), f->cost_per_call, &f->saved_by_dedup) && [&] {
           Ratio tickets;
           if (!Div(f->month, in.ticket, &tickets)) return false;
           f->break_even = Ceil(tickets);
           return true;
         }();
}

struct Text {
  std::string conversations, input_tokens, output_tokens, input_price, output_price, ticket;
  std::string rate_percent, cost_per_call, revenue, repeated, month, share, year, break_even;
  std::string saved_by_dedup;
};

bool Render(const Inputs& in, const Figures& f, Text* t) {
  Ratio rate_percent;
  return Format(in.conversations, 0, 0, true, &t->conversations) &&
         Format(in.input_tokens, 0, 0, true, &t->input_tokens) &&
         Format(in.output_tokens, 0, 0, true, &t->output_tokens) &&
         Format(in.input_price, 9, 2, false, &t->input_price) &&
         Format(in.output_price, 9, 2, false, &t->output_price) &&
         Format(in.ticket, 9, 2, false, &t->ticket) && Mul(f.rate, Whole(100), &rate_percent) &&
         Format(rate_percent, 2, 0, false, &t->rate_percent) &&
         Format(f.cost_per_call, 6, 2, false, &t->cost_per_call) &&
         Format(f.revenue, 2, 2, true, &t->revenue) &&
         Format(f.repeated, 2, 0, true, &t->repeated) && Format(f.month, 2, 2, true, &t->month) &&
         Format(f.share_percent, 2, 2, false, &t->share) && Format(f.year, 2, 2, true, &t->year) &&
         Format(Ratio{f.break_even, 1}, 0, 0, true, &t->break_even) &&
         Format(f.saved_by_dedup, 2, 2, true, &t->saved_by_dedup);
}

std::string Ungrouped(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  return s;
}

void PrintJson(const Inputs& in, const Text& t, const Figures& f, const Measured* m,
               std::ostream& out) {
  // Money and rates as exact decimal strings: a JSON double would undo the
  // exact arithmetic for whoever reads it.
  nlohmann::json j = {
      {"conversations", std::stoll(Ungrouped(t.conversations))},
      {"input_tokens", std::stoll(Ungrouped(t.input_tokens))},
      {"output_tokens", std::stoll(Ungrouped(t.output_tokens))},
      {"input_price_per_thousand", t.input_price},
      {"output_price_per_thousand", t.output_price},
      {"ticket", t.ticket},
      {"repeat_rate_percent", t.rate_percent},
      {"repeat_rate_source", m ? "agent" : "flag"},
      {"cost_per_call", t.cost_per_call},
      {"revenue_month", Ungrouped(t.revenue)},
      {"repeated_conversations", Ungrouped(t.repeated)},
      {"wasted_month", Ungrouped(t.month)},
      {"wasted_share_percent", t.share},
      {"wasted_year", Ungrouped(t.year)},
      {"break_even_conversations", static_cast<int64_t>(f.break_even)},
      {"currency", "BRL"}};
  if (m) {
    j["agent"] = {{"begins", m->begins()},     {"absorbed", m->absorbed()},
                  {"execute", m->execute},     {"in_flight", m->in_flight},
                  {"recover", m->recover},     {"replay", m->replay},
                  {"seen_first", m->seen_first}, {"seen_duplicates", m->seen_duplicates},
                  {"saved_by_dedup", Ungrouped(t.saved_by_dedup)},
                  {"socket", *in.socket}};
  }
  out << j.dump() << "\n";
}

void PrintTable(const Inputs& in, const Text& t, const Measured* m, std::ostream& out) {
  std::string rate = t.rate_percent + "%, or " + t.repeated;
  if (m) {
    rate += " (measured: " + std::to_string(m->absorbed()) + " of " + std::to_string(m->begins()) +
            " begins absorbed: replay " + std::to_string(m->replay) + ", in_flight " +
            std::to_string(m->in_flight) + ", recover " + std::to_string(m->recover) + ")";
  }
  std::vector<std::pair<std::string, std::string>> rows = {
      {"Conversations a month", t.conversations},
      {"Tokens per model call", t.input_tokens + " input, " + t.output_tokens + " output"},
      {"Price per thousand tokens",
       "R$ " + t.input_price + " input, R$ " + t.output_price + " output"},
      {"Cost per call", "R$ " + t.cost_per_call},
      {"Ticket per resolved conversation", "R$ " + t.ticket},
      {"Revenue a month", "R$ " + t.revenue},
      {"Conversations that repeat the call", rate},
      {"Tokens burned on duplicates", "R$ " + t.month + " a month"},
      {"Share of revenue", t.share + "%"},
      {"Same volume, a year", "R$ " + t.year},
      {"Conversations to break even", t.break_even + " a month"},
  };
  if (m) {
    rows.push_back({"Model calls saved by seen (measured)",
                    std::to_string(m->seen_duplicates) + " duplicate message" +
                        (m->seen_duplicates == 1 ? "" : "s") + " dropped of " +
                        std::to_string(m->seen_first + m->seen_duplicates) + " seen: R$ " +
                        t.saved_by_dedup});
  }
  size_t w = std::string("Item").size(), v = std::string("Value").size();
  for (const auto& r : rows) {
    w = std::max(w, r.first.size());
    v = std::max(v, r.second.size());
  }
  auto pad = [](const std::string& s, size_t n) { return s + std::string(n - s.size(), ' '); };
  out << "| " << pad("Item", w) << " | " << pad("Value", v) << " |\n|" << std::string(w + 2, '-')
      << "|" << std::string(v + 2, '-') << "|\n";
  for (const auto& r : rows) out << "| " << pad(r.first, w) << " | " << pad(r.second, v) << " |\n";
}

}  // namespace

int RunCostCommand(const std::vector<std::string>& args, const FetchStatsFn& fetch_stats,
                   std::ostream& out, std::ostream& err) {
  try {
    Inputs in;
    if (int code = ParseArgs(args, &in, err); code >= 0) return code;
    if (in.help) {
      out << kUsage;
      return 0;
    }
    Measured measured;
    Ratio rate;
    if (in.socket) {
      if (int code = Measure(in, fetch_stats, &measured, err); code >= 0) return code;
      rate = measured.begins() == 0 ? Whole(0) : Reduced(measured.absorbed(), measured.begins());
    } else {
      rate = in.repeat_percent;
      rate.den *= 100;  // den <= 10^6, cannot overflow
      rate = Reduced(rate.num, rate.den);
    }
    Figures f;
    Text t;
    if (!Compute(in, rate, in.socket ? measured.seen_duplicates : 0, &f) || !Render(in, f, &t)) {
      err << "intentd cost: the figures are too large to compute exactly; use smaller values\n";
      return 2;
    }
    const Measured* m = in.socket ? &measured : nullptr;
    if (in.json) {
      PrintJson(in, t, f, m, out);
    } else {
      PrintTable(in, t, m, out);
      if (m && measured.begins() == 0) out << "(the agent has answered no begin yet)\n";
    }
    return 0;
  } catch (const std::exception& e) {  // e.g. bad_alloc: never let it cross into main
    err << "intentd cost: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace intentd::cli
