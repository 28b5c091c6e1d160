// What `intentd cost` reads from the agent's `stats` answer (cli/cost.h says
// what each figure means).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace intentd::cli {

struct Measured {
  int64_t execute = 0, in_flight = 0, recover = 0, replay = 0;
  // The `seen` op's messages: first sightings, and duplicates dropped before
  // the model (each a model call saved). Absent from older agents: 0.
  int64_t seen_first = 0, seen_duplicates = 0;
  int64_t uptime_ms = 0;

  // The double charges prevented, per action type, with the money of each
  // of the type's money fields (integer cents). `prevented_reported` is
  // false for an agent whose stats have no "prevented": then `prevented` is
  // empty and replayed()/recovered() fall back to the decisions (replays of
  // failed actions included).
  struct Money {
    std::string field;
    int64_t replayed_cents = 0, recovered_cents = 0;
  };
  struct Prevented {
    std::string action_type;
    int64_t replayed = 0, recovered = 0;
    std::vector<Money> money;
  };
  bool prevented_reported = false;
  std::vector<Prevented> prevented;

  int64_t begins() const { return execute + in_flight + recover + replay; }
  int64_t absorbed() const { return in_flight + recover + replay; }
  int64_t replayed() const;
  int64_t recovered() const;
  int64_t replayed_cents() const;  // 0 unless prevented_reported
  int64_t recovered_cents() const;
};

// Reads a `stats` answer line into *m. Returns -1 when it holds the decision
// counters, else 1 with a message on `err` (an error answer, not JSON, no
// "decisions", a counter that is not a non-negative integer up to 2^53).
int ParseStats(const std::string& line, Measured* m, std::ostream& err);

}  // namespace intentd::cli
