#include "cli/cost_measured.h"

#include <nlohmann/json.hpp>
#include <ostream>
#include <utility>

namespace intentd::cli {
namespace {

using nlohmann::json;

// *dst = object[name] when present (a counter never counted may be omitted).
// False with a message on `err` when it is not a non-negative integer.
bool ReadCounter(const json& object, const std::string& where, const std::string& name,
                 int64_t* dst, std::ostream& err) {
  auto f = object.find(name);
  if (f == object.end()) return true;
  // Counters beyond 2^53 are not plausible and would let the sums overflow.
  if (!f->is_number_unsigned() || f->get<uint64_t>() > (uint64_t{1} << 53)) {
    err << "intentd cost: " << where << "." << name << " is not a non-negative integer\n";
    return false;
  }
  *dst = f->get<int64_t>();
  return true;
}

bool ReadPrevented(const json& prevented, Measured* m, std::ostream& err) {
  if (!prevented.is_object()) {
    err << "intentd cost: the agent's \"prevented\" is not an object\n";
    return false;
  }
  for (auto t = prevented.begin(); t != prevented.end(); ++t) {
    const std::string where = "prevented." + t.key();
    if (!t->is_object()) {
      err << "intentd cost: " << where << " is not an object\n";
      return false;
    }
    Measured::Prevented p;
    p.action_type = t.key();
    if (!ReadCounter(*t, where, "replayed", &p.replayed, err) ||
        !ReadCounter(*t, where, "recovered", &p.recovered, err)) {
      return false;
    }
    const json replayed = t->value("replayed_cents", json::object());
    const json recovered = t->value("recovered_cents", json::object());
    if (!replayed.is_object() || !recovered.is_object()) {
      err << "intentd cost: " << where << "'s cents are not objects\n";
      return false;
    }
    for (auto f = replayed.begin(); f != replayed.end(); ++f) {
      Measured::Money money{f.key()};
      if (!ReadCounter(replayed, where + ".replayed_cents", f.key(), &money.replayed_cents, err) ||
          !ReadCounter(recovered, where + ".recovered_cents", f.key(), &money.recovered_cents,
                       err)) {
        return false;
      }
      p.money.push_back(std::move(money));
    }
    m->prevented.push_back(std::move(p));
  }
  m->prevented_reported = true;
  return true;
}

}  // namespace

int64_t Measured::replayed() const {
  if (!prevented_reported) return replay;
  int64_t n = 0;
  for (const Prevented& p : prevented) n += p.replayed;
  return n;
}

int64_t Measured::recovered() const {
  if (!prevented_reported) return recover;
  int64_t n = 0;
  for (const Prevented& p : prevented) n += p.recovered;
  return n;
}

int64_t Measured::replayed_cents() const {
  int64_t n = 0;
  for (const Prevented& p : prevented) {
    for (const Money& money : p.money) n += money.replayed_cents;
  }
  return n;
}

int64_t Measured::recovered_cents() const {
  int64_t n = 0;
  for (const Prevented& p : prevented) {
    for (const Money& money : p.money) n += money.recovered_cents;
  }
  return n;
}

int ParseStats(const std::string& line, Measured* m, std::ostream& err) {
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    err << "intentd cost: the agent's stats answer is not a JSON object\n";
    return 1;
  }
  if (auto ok = j.find("ok"); ok != j.end() && *ok != true) {
    const json& e = j.contains("error") ? j["error"] : json::object();
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
    if (!seen->is_object()) {
      err << "intentd cost: the agent's \"seen\" is not an object\n";
      return 1;
    }
    if (!ReadCounter(*seen, "seen", "first", &m->seen_first, err) ||
        !ReadCounter(*seen, "seen", "duplicates", &m->seen_duplicates, err)) {
      return 1;
    }
  }
  if (auto up = j.find("uptime_ms"); up != j.end() && up->is_number_integer()) {
    m->uptime_ms = up->get<int64_t>();
  }
  if (auto prevented = j.find("prevented"); prevented != j.end()) {
    if (!ReadPrevented(*prevented, m, err)) return 1;
  }
  return -1;
}

}  // namespace intentd::cli
