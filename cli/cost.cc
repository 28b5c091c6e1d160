#include "cli/cost.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/cost_measured.h"
#include "cli/exact.h"
#include "cli/view_text.h"

namespace intentd::cli {
namespace {

using exact::Format;
using exact::Int;
using exact::Ratio;
using exact::Reduced;
using exact::Ungrouped;
using exact::Whole;

// No line of the row notes starts with "--": the man page test reads such
// lines as flags.
constexpr std::string_view kUsage =
    "usage: intentd cost [--conversations N] [--input-tokens N] [--output-tokens N]\n"
    "                    [--input-price R$] [--output-price R$] [--repeat-rate PCT]\n"
    "                    [--ticket R$] [--socket PATH] [--min-sample N] [--json] [--help]\n"
    "\n"
    "Two tables, apart so that an assumption never reads as a measurement: what a running\n"
    "agent measured since it started (with --socket, or $INTENTD_SOCKET), then an estimate\n"
    "of the model tokens repeated calls burn a month without intentd, from assumptions:\n"
    "the flags below, or their defaults (the seed article's example), each marked.\n"
    "  --conversations   30000   conversations a month\n"
    "  --input-tokens    8000    input tokens per model call\n"
    "  --output-tokens   600     output tokens per model call\n"
    "  --input-price     0.015   R$ per thousand input tokens\n"
    "  --output-price    0.075   R$ per thousand output tokens\n"
    "  --repeat-rate     3       percent of conversations that repeat the call\n"
    "  --ticket          1.20    R$ of revenue per resolved conversation\n"
    "  --socket PATH     the agent to measure (default $INTENTD_SOCKET; with neither,\n"
    "                    nothing is measured)\n"
    "  --min-sample N    begins the agent must have answered before its repeat rate\n"
    "                    stands for a month (default 1000); below, it is shown only\n"
    "  --json            one JSON object instead of the tables\n"
    "\n"
    "Rows measured (the agent's stats, since it started):\n"
    "  Begins answered: begin decisions, by decision.\n"
    "  Double charges prevented: begins that would have paid again without intentd, with\n"
    "    the amounts frozen in their payloads (the action types' money fields): replays of\n"
    "    a completed action (the provider charged; a key drawn per attempt charges again)\n"
    "    and recoveries (an attempt died mid-call; the same key let the provider\n"
    "    deduplicate the repeat: a double charge only if that call had charged, so an\n"
    "    upper bound). in_flight is left out: a client that polls counts once per poll.\n"
    "  Repeated begins: (replay + in_flight + recover) / all begins, the measured repeat\n"
    "    rate (an upper bound: polls count).\n"
    "  Duplicate messages (seen): messages dropped as redeliveries, of all sightings.\n"
    "Rows of the estimate (a month, without intentd):\n"
    "  Cost per call: input tokens x input price + output tokens x output price, per\n"
    "    thousand tokens.\n"
    "  Revenue a month: conversations x ticket.\n"
    "  Conversations that repeat the call: conversations x the repeat rate, which is the\n"
    "    measured one when the agent answered at least the minimum sample of begins and\n"
    "    no rate was given; else the rate given, or 3.\n"
    "  Tokens burned on duplicates: repeated conversations x cost per call.\n"
    "  Share of revenue: tokens burned / revenue. Same volume, a year: tokens burned x 12.\n"
    "  Conversations to break even: the resolved conversations a month whose tickets pay\n"
    "    for the tokens burned: tokens burned / ticket, rounded up.\n"
    "  Model calls saved by seen: the measured duplicate messages x cost per call.\n"
    "Money is exact, rounded half up only when printed. Exit codes: 0 printed, 1 the agent\n"
    "refused or sent no counters, 2 usage error, 3 agent unreachable.\n";

struct Inputs {
  Ratio conversations = Whole(30000);
  Ratio input_tokens = Whole(8000);
  Ratio output_tokens = Whole(600);
  Ratio input_price = Reduced(15, 1000);
  Ratio output_price = Reduced(75, 1000);
  Ratio repeat_percent = Whole(3);
  Ratio ticket = Reduced(120, 100);
  int64_t min_sample = 1000;
  std::optional<std::string> socket;
  bool socket_from_env = false;
  std::set<std::string> given;  // the flags typed, e.g. "--ticket"
  bool json = false;
  bool help = false;
};

// Parses one flag value into `inputs`. Returns "" or a message for people.
std::string SetValue(const std::string& flag, const std::string& value, Inputs* in) {
  std::string why;
  Ratio r;
  auto integer = [&](Ratio* dst, bool positive) -> std::string {
    if (!exact::ParseDecimal(value, 0, &r, &why)) {
      return "expected a whole number, got '" + value + "'";
    }
    if (positive && r.num == 0) return "must be at least 1";
    *dst = r;
    return "";
  };
  auto decimal = [&](Ratio* dst, int decimals, bool positive) -> std::string {
    if (!exact::ParseDecimal(value, decimals, &r, &why)) return "'" + value + "': " + why;
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
  if (flag == "--min-sample") {
    Ratio n;
    if (std::string e = integer(&n, true); !e.empty()) return e;
    if (n.num > Int{1} << 53) return "is too large";
    in->min_sample = static_cast<int64_t>(n.num);
    return "";
  }
  if (flag == "--socket") {
    if (value.empty()) return "needs a socket path";
    in->socket = value;
    return "";
  }
  if (flag == "--repeat-rate") {
    std::string v = value;
    if (!v.empty() && v.back() == '%') v.pop_back();
    if (!exact::ParseDecimal(v, 6, &r, &why)) {
      return "'" + value + "': " + why + " (a percent, like 3)";
    }
    if (r.num > 100 * r.den) return "is a percent between 0 and 100";
    in->repeat_percent = r;
    return "";
  }
  return "unknown flag";
}

// Returns -1 when parsing succeeded, otherwise the exit code.
int ParseArgs(const std::vector<std::string>& args, const std::string& env_socket, Inputs* in,
              std::ostream& err) {
  static const std::vector<std::string> kValued = {
      "--conversations", "--input-tokens", "--output-tokens", "--input-price", "--output-price",
      "--repeat-rate",   "--ticket",       "--socket",        "--min-sample"};
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
    in->given.insert(flag);
  }
  if (!in->socket && !env_socket.empty()) {
    in->socket = env_socket;
    in->socket_from_env = true;
  }
  return -1;
}

// Where the estimate's repeat rate comes from.
struct Rate {
  Ratio fraction;         // 0..1
  bool measured = false;  // the agent's, over at least min_sample begins
  Ratio measured_fraction;
  bool sample_too_small = false;  // measured, but not used for that
};

Rate ChooseRate(const Inputs& in, const Measured* m) {
  Rate r;
  Ratio flag = in.repeat_percent;
  flag.den *= 100;  // den <= 10^6, cannot overflow
  r.fraction = Reduced(flag.num, flag.den);
  if (m == nullptr) return r;
  r.measured_fraction = m->begins() == 0 ? Whole(0) : Reduced(m->absorbed(), m->begins());
  if (in.given.count("--repeat-rate")) return r;  // the user's assumption wins
  if (m->begins() < in.min_sample) {
    r.sample_too_small = true;
    return r;
  }
  r.fraction = r.measured_fraction;
  r.measured = true;
  return r;
}

struct Figures {
  Ratio cost_per_call, revenue, repeated, month, share_percent, year;
  Ratio saved_by_dedup;  // measured duplicates dropped x cost per call
  Int break_even = 0;
};

bool Compute(const Inputs& in, const Ratio& rate, int64_t duplicates, Figures* f) {
  using exact::Add;
  using exact::Div;
  using exact::Mul;
  Ratio in_cost, out_cost, per_thousand = Reduced(1, 1000), hundred = Whole(100);
  return Mul(in.input_tokens, in.input_price, &in_cost) && Mul(in_cost, per_thousand, &in_cost) &&
         Mul(in.output_tokens, in.output_price, &out_cost) &&
         Mul(out_cost, per_thousand, &out_cost) && Add(in_cost, out_cost, &f->cost_per_call) &&
         Mul(in.conversations, in.ticket, &f->revenue) &&
         Mul(in.conversations, rate, &f->repeated) &&
         Mul(f->repeated, f->cost_per_call, &f->month) &&
         Div(f->month, f->revenue, &f->share_percent) &&
         Mul(f->share_percent, hundred, &f->share_percent) && Mul(f->month, Whole(12), &f->year) &&
         Mul(Whole(duplicates), f->cost_per_call, &f->saved_by_dedup) && [&] {
           Ratio tickets;
           if (!Div(f->month, in.ticket, &tickets)) return false;
           f->break_even = exact::Ceil(tickets);
           return true;
         }();
}

struct Text {
  std::string conversations, input_tokens, output_tokens, input_price, output_price, ticket;
  std::string rate_percent, measured_percent, cost_per_call, revenue, repeated, month, share, year;
  std::string break_even, saved_by_dedup;
};

bool Render(const Inputs& in, const Rate& rate, const Figures& f, Text* t) {
  Ratio rate_percent, measured_percent;
  return Format(in.conversations, 0, 0, true, &t->conversations) &&
         Format(in.input_tokens, 0, 0, true, &t->input_tokens) &&
         Format(in.output_tokens, 0, 0, true, &t->output_tokens) &&
         Format(in.input_price, 9, 2, false, &t->input_price) &&
         Format(in.output_price, 9, 2, false, &t->output_price) &&
         Format(in.ticket, 9, 2, false, &t->ticket) &&
         exact::Mul(rate.fraction, Whole(100), &rate_percent) &&
         Format(rate_percent, 2, 0, false, &t->rate_percent) &&
         exact::Mul(rate.measured_fraction, Whole(100), &measured_percent) &&
         Format(measured_percent, 2, 0, false, &t->measured_percent) &&
         Format(f.cost_per_call, 6, 2, false, &t->cost_per_call) &&
         Format(f.revenue, 2, 2, true, &t->revenue) &&
         Format(f.repeated, 2, 0, true, &t->repeated) && Format(f.month, 2, 2, true, &t->month) &&
         Format(f.share_percent, 2, 2, false, &t->share) && Format(f.year, 2, 2, true, &t->year) &&
         Format(Ratio{f.break_even, 1}, 0, 0, true, &t->break_even) &&
         Format(f.saved_by_dedup, 2, 2, true, &t->saved_by_dedup);
}

// Integer cents as reais: 432000 -> "4,320.00" (group) or "4320.00".
std::string Reais(int64_t cents, bool group) {
  std::string text;
  Format(Reduced(cents, 100), 2, 2, group, &text);
  return text;
}

std::string Count(int64_t n) {
  std::string text;
  Format(Whole(n), 0, 0, true, &text);
  return text;
}

nlohmann::json PreventedJson(const Measured& m) {
  const bool amounts = m.prevented_reported;
  auto amount = [&](int64_t cents) {
    return amounts ? nlohmann::json(Reais(cents, false)) : nullptr;
  };
  nlohmann::json by_type = nlohmann::json::object();
  for (const Measured::Prevented& p : m.prevented) {
    nlohmann::json replayed = nlohmann::json::object(), recovered = nlohmann::json::object();
    for (const Measured::Money& money : p.money) {
      replayed[money.field] = Reais(money.replayed_cents, false);
      recovered[money.field] = Reais(money.recovered_cents, false);
    }
    by_type[p.action_type] = {{"replayed", p.replayed},
                              {"recovered", p.recovered},
                              {"replayed_amount", replayed},
                              {"recovered_amount", recovered}};
  }
  return {{"count", m.replayed() + m.recovered()},
          {"amount", amount(m.replayed_cents() + m.recovered_cents())},
          {"replayed", m.replayed()},
          {"replayed_amount", amount(m.replayed_cents())},
          {"recovered", m.recovered()},
          {"recovered_amount", amount(m.recovered_cents())},
          {"amounts_reported", amounts},
          {"by_action_type", by_type}};
}

void PrintJson(const Inputs& in, const Rate& rate, const Text& t, const Figures& f,
               const Measured* m, std::ostream& out) {
  // Money and rates as exact decimal strings: a JSON double would undo the
  // exact arithmetic for whoever reads it.
  nlohmann::json defaults = nlohmann::json::array();
  for (const char* flag : {"--conversations", "--input-tokens", "--output-tokens", "--input-price",
                           "--output-price", "--repeat-rate", "--ticket"}) {
    if (!in.given.count(flag)) defaults.push_back(std::string(flag).substr(2));
  }
  nlohmann::json j = {{"conversations", std::stoll(Ungrouped(t.conversations))},
                      {"input_tokens", std::stoll(Ungrouped(t.input_tokens))},
                      {"output_tokens", std::stoll(Ungrouped(t.output_tokens))},
                      {"input_price_per_thousand", t.input_price},
                      {"output_price_per_thousand", t.output_price},
                      {"ticket", t.ticket},
                      {"repeat_rate_percent", t.rate_percent},
                      {"repeat_rate_source", rate.measured ? "agent" : "flag"},
                      {"defaults_used", defaults},
                      {"cost_per_call", t.cost_per_call},
                      {"revenue_month", Ungrouped(t.revenue)},
                      {"repeated_conversations", Ungrouped(t.repeated)},
                      {"wasted_month", Ungrouped(t.month)},
                      {"wasted_share_percent", t.share},
                      {"wasted_year", Ungrouped(t.year)},
                      {"break_even_conversations", static_cast<int64_t>(f.break_even)},
                      {"currency", "BRL"}};
  if (m) {
    j["agent"] = {{"begins", m->begins()},
                  {"absorbed", m->absorbed()},
                  {"execute", m->execute},
                  {"in_flight", m->in_flight},
                  {"recover", m->recover},
                  {"replay", m->replay},
                  {"measured_rate_percent", t.measured_percent},
                  {"min_sample", in.min_sample},
                  {"sample_sufficient", m->begins() >= in.min_sample},
                  {"seen_first", m->seen_first},
                  {"seen_duplicates", m->seen_duplicates},
                  {"saved_by_dedup", Ungrouped(t.saved_by_dedup)},
                  {"prevented", PreventedJson(*m)},
                  {"uptime_ms", m->uptime_ms},
                  {"socket", *in.socket}};
  }
  out << j.dump() << "\n";
}

using Rows = std::vector<std::pair<std::string, std::string>>;

void PrintRows(const std::string& head, const Rows& rows, std::ostream& out) {
  size_t w = head.size(), v = std::string("Value").size();
  for (const auto& r : rows) {
    w = std::max(w, r.first.size());
    v = std::max(v, r.second.size());
  }
  auto pad = [](const std::string& s, size_t n) { return s + std::string(n - s.size(), ' '); };
  out << "| " << pad(head, w) << " | " << pad("Value", v) << " |\n|" << std::string(w + 2, '-')
      << "|" << std::string(v + 2, '-') << "|\n";
  for (const auto& r : rows) out << "| " << pad(r.first, w) << " | " << pad(r.second, v) << " |\n";
}

Rows MeasuredRows(const Measured& m, const Text& t) {
  const bool amounts = m.prevented_reported;
  auto money = [&](int64_t cents) {
    return amounts ? ", R$ " + Reais(cents, true) : std::string();
  };
  Rows rows = {
      {"Begins answered", Count(m.begins()) + ": execute " + Count(m.execute) + ", in_flight " +
                              Count(m.in_flight) + ", recover " + Count(m.recover) + ", replay " +
                              Count(m.replay)},
      {"Double charges prevented",
       Count(m.replayed() + m.recovered()) +
           (amounts ? money(m.replayed_cents() + m.recovered_cents())
                    : " (amounts: this agent does not report them; upgrade it)")},
      {"  replays of a completed charge", Count(m.replayed()) + money(m.replayed_cents())},
      {"  recoveries (if the first acted)", Count(m.recovered()) + money(m.recovered_cents())},
  };
  for (const Measured::Prevented& p : m.prevented) {
    if (p.replayed + p.recovered == 0) continue;
    std::string value = Count(p.replayed + p.recovered);
    for (const Measured::Money& f : p.money) {
      value += ", " + f.field + " R$ " + Reais(f.replayed_cents + f.recovered_cents, true);
    }
    rows.push_back({"  " + Shown(nlohmann::json(p.action_type)), value});
  }
  rows.push_back({"Repeated begins", Count(m.absorbed()) + " of " + Count(m.begins()) + " (" +
                                         t.measured_percent + "%): replay + in_flight + recover"});
  rows.push_back({"Duplicate messages (seen)", Count(m.seen_duplicates) + " of " +
                                                   Count(m.seen_first + m.seen_duplicates) +
                                                   " sightings dropped"});
  return rows;
}

void PrintTables(const Inputs& in, const Rate& rate, const Text& t, const Measured* m,
                 std::ostream& out) {
  if (m) {
    out << "Measured on the agent at " << *in.socket
        << (in.socket_from_env ? " ($INTENTD_SOCKET)" : "") << ", since it started "
        << HumanDuration(m->uptime_ms) << " ago (" << IsoUtc(NowEpochMs() - m->uptime_ms) << "):\n";
    PrintRows("Measured", MeasuredRows(*m, t), out);
    out << "\n";
  }
  auto assumed = [&](const char* flag) {
    return in.given.count(flag) ? std::string(" (assumed)") : std::string(" (assumed, default)");
  };
  std::string rate_text = t.rate_percent + "%, or " + t.repeated;
  if (rate.measured) {
    rate_text +=
        " (measured: " + Count(m->absorbed()) + " of " + Count(m->begins()) + " begins repeated)";
  } else {
    rate_text += assumed("--repeat-rate");
  }
  Rows rows = {
      {"Conversations a month", t.conversations + assumed("--conversations")},
      {"Tokens per model call",
       t.input_tokens + " input, " + t.output_tokens + " output" +
           (in.given.count("--input-tokens") || in.given.count("--output-tokens")
                ? std::string(" (assumed)")
                : std::string(" (assumed, default)"))},
      {"Price per thousand tokens",
       "R$ " + t.input_price + " input, R$ " + t.output_price + " output" +
           (in.given.count("--input-price") || in.given.count("--output-price")
                ? std::string(" (assumed)")
                : std::string(" (assumed, default)"))},
      {"Cost per call", "R$ " + t.cost_per_call},
      {"Ticket per resolved conversation", "R$ " + t.ticket + assumed("--ticket")},
      {"Revenue a month", "R$ " + t.revenue},
      {"Conversations that repeat the call", rate_text},
      {"Tokens burned on duplicates", "R$ " + t.month + " a month"},
      {"Share of revenue", t.share + "%"},
      {"Same volume, a year", "R$ " + t.year},
      {"Conversations to break even", t.break_even + " a month"},
  };
  if (m) {
    rows.push_back({"Model calls saved by seen", Count(m->seen_duplicates) + " (measured) x R$ " +
                                                     t.cost_per_call + ": R$ " + t.saved_by_dedup});
  }
  out << "Model tokens that repeated calls burn without intentd, a month (an estimate):\n";
  PrintRows("Estimate", rows, out);
  if (m && m->begins() == 0) {
    out << "(the agent has answered no begin yet)\n";
  } else if (rate.sample_too_small) {
    out << "The agent's repeat rate, " << t.measured_percent << "% (" << Count(m->absorbed())
        << " of " << Count(m->begins())
        << " begins), is too small a sample to stand for a month: it takes " << Count(in.min_sample)
        << " begins (--min-sample).\n";
  }
}

}  // namespace

int RunCostCommand(const std::vector<std::string>& args, const std::string& env_socket,
                   const FetchStatsFn& fetch_stats, std::ostream& out, std::ostream& err) {
  try {
    Inputs in;
    if (int code = ParseArgs(args, env_socket, &in, err); code >= 0) return code;
    if (in.help) {
      out << kUsage;
      return 0;
    }
    Measured measured;
    if (in.socket) {
      std::string line, error;
      if (!fetch_stats || !fetch_stats(*in.socket, &line, &error)) {
        err << "intentd cost: cannot reach the agent at " << *in.socket << ": " << error;
        if (in.socket_from_env) {
          err << " (the socket is $INTENTD_SOCKET's; unset it to print the estimate alone)";
        }
        err << "\n";
        return 3;
      }
      if (int code = ParseStats(line, &measured, err); code >= 0) return code;
    }
    const Measured* m = in.socket ? &measured : nullptr;
    const Rate rate = ChooseRate(in, m);
    Figures f;
    Text t;
    if (!Compute(in, rate.fraction, m ? measured.seen_duplicates : 0, &f) ||
        !Render(in, rate, f, &t)) {
      err << "intentd cost: the figures are too large to compute exactly; use smaller values\n";
      return 2;
    }
    if (in.json) {
      PrintJson(in, rate, t, f, m, out);
    } else {
      PrintTables(in, rate, t, m, out);
    }
    return 0;
  } catch (const std::exception& e) {  // e.g. bad_alloc: never let it cross into main
    err << "intentd cost: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace intentd::cli
