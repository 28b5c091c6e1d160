#include "tests/torture/checker.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace intentd::torture {
namespace {

using KeyId = std::pair<std::string, std::string>;  // (tenant, key)
constexpr size_t kMaxExamples = 5;

void Violation(InvariantResult* r, std::string what) {
  ++r->violations;
  if (r->examples.size() < kMaxExamples) r->examples.push_back(std::move(what));
}

std::string Describe(const KeyId& id) { return id.first + "/" + id.second.substr(0, 16); }

// Everything the checker needs, indexed by key.
struct Index {
  std::map<KeyId, std::vector<const Grant*>> grants;  // sorted by token
  std::set<std::tuple<std::string, std::string, int64_t>> retriable_sent;
  std::set<std::tuple<std::string, std::string, int64_t>> retriable_acked;
  // Acknowledged terminal outcomes: (tenant, key) -> (token, finish).
  std::map<KeyId, std::vector<const Finish*>> terminal_acked;
};

Index BuildIndex(const std::vector<ClientLog>& logs) {
  Index index;
  for (const ClientLog& log : logs) {
    for (const Grant& g : log.grants) index.grants[{g.tenant, g.key}].push_back(&g);
    for (const Finish& f : log.finishes) {
      if (f.kind == FinishKind::kFailRetriable) {
        index.retriable_sent.insert({f.tenant, f.key, f.token});
        if (f.acked) index.retriable_acked.insert({f.tenant, f.key, f.token});
      } else if (f.acked) {
        index.terminal_acked[{f.tenant, f.key}].push_back(&f);
      }
    }
  }
  for (auto& [id, list] : index.grants) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Grant* a, const Grant* b) { return a->token < b->token; });
  }
  return index;
}

InvariantResult UniqueTokens(const Index& index) {
  InvariantResult r{"no two grants of a key share a lease token"};
  int64_t grants = 0;
  for (const auto& [id, list] : index.grants) {
    grants += static_cast<int64_t>(list.size());
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i]->token == list[i - 1]->token) {
        Violation(&r, "token " + std::to_string(list[i]->token) + " of " + Describe(id) +
                          " granted to clients " + std::to_string(list[i - 1]->client) + " and " +
                          std::to_string(list[i]->client));
      }
    }
  }
  r.checked = grants;
  r.figures = std::to_string(grants) + " grants on " + std::to_string(index.grants.size()) +
              " keys, " + std::to_string(r.violations) + " double grants";
  return r;
}

InvariantResult GrantsFollowExpiryOrRelease(const Index& index) {
  InvariantResult r{"a second grant only after the earlier lease expired or was released"};
  int64_t later = 0, after_expiry = 0, after_release = 0, unseen_previous = 0;
  for (const auto& [id, list] : index.grants) {
    std::map<int64_t, const Grant*> by_token;
    for (const Grant* g : list) by_token.emplace(g->token, g);
    for (const Grant* g : list) {
      ++r.checked;
      const std::string what = Describe(id) + " token " + std::to_string(g->token);
      if (g->token < 1) {
        Violation(&r, what + ": a token below 1");
        continue;
      }
      if (g->token == 1) {
        if (g->recover) Violation(&r, what + ": the first grant is a recover");
        continue;
      }
      ++later;
      auto prev = by_token.find(g->token - 1);
      const bool prev_seen = prev != by_token.end();
      const std::tuple<std::string, std::string, int64_t> prev_id{id.first, id.second,
                                                                  g->token - 1};
      if (g->recover) {
        ++after_expiry;
        if (g->previous_token != g->token - 1) {
          Violation(&r,
                    what + ": recover names previous token " + std::to_string(g->previous_token));
        }
        if (!prev_seen) ++unseen_previous;
        if (prev_seen && g->granted_at_ms < prev->second->lease_until_ms) {
          Violation(&r, what + ": recovered at " + std::to_string(g->granted_at_ms) +
                            " while token " + std::to_string(g->token - 1) + " was leased until " +
                            std::to_string(prev->second->lease_until_ms));
        }
        if (index.retriable_acked.count(prev_id)) {
          Violation(&r, what + ": recover after token " + std::to_string(g->token - 1) +
                            " was released (acknowledged): expected execute");
        }
      } else {
        ++after_release;
        if (!index.retriable_sent.count(prev_id)) {
          Violation(&r, what + ": execute although token " + std::to_string(g->token - 1) +
                            " was never released (no retriable fail sent with it)");
        }
      }
    }
    if (auto t = index.terminal_acked.find(id); t != index.terminal_acked.end()) {
      for (const Finish* f : t->second) {
        ++r.checked;
        if (!list.empty() && list.back()->token > f->token) {
          Violation(&r, Describe(id) + ": token " + std::to_string(list.back()->token) +
                            " granted after the acknowledged " +
                            (f->kind == FinishKind::kComplete ? "complete" : "final fail") +
                            " of token " + std::to_string(f->token));
        }
      }
    }
  }
  r.figures = std::to_string(later) + " later grants (" + std::to_string(after_expiry) +
              " recover after expiry, " + std::to_string(after_release) +
              " execute after release; " + std::to_string(unseen_previous) +
              " followed a grant whose answer was lost)";
  return r;
}

InvariantResult CompletesDurable(const std::vector<ClientLog>& logs, const FinalState& final) {
  InvariantResult r{"every acknowledged complete is present with its response"};
  int64_t completes = 0, fails = 0;
  std::set<std::tuple<std::string, std::string, int64_t>> seen;
  for (const ClientLog& log : logs) {
    for (const Finish& f : log.finishes) {
      if (!f.acked || f.kind == FinishKind::kFailRetriable) continue;
      if (!seen.insert({f.tenant, f.key, f.token}).second) continue;
      ++r.checked;
      const bool complete = f.kind == FinishKind::kComplete;
      (complete ? completes : fails) += 1;
      const KeyId id{f.tenant, f.key};
      auto it = final.actions.find(id);
      if (it == final.actions.end() || !it->second.found) {
        Violation(&r, Describe(id) + ": acknowledged " + (complete ? "complete" : "final fail") +
                          " is missing");
        continue;
      }
      const FinalAction& a = it->second;
      const std::string want_status = complete ? "completed" : "failed";
      const std::string& stored = complete ? a.response : a.error;
      if (a.status != want_status || stored != f.outcome) {
        Violation(&r, Describe(id) + ": acknowledged " + want_status + " " + f.outcome +
                          " (token " + std::to_string(f.token) + "), stored " + a.status + " " +
                          stored);
      }
    }
  }
  r.figures = std::to_string(completes) + " completes and " + std::to_string(fails) +
              " final fails acknowledged, " + std::to_string(r.violations) + " lost or changed";
  return r;
}

InvariantResult IntentsDurable(const std::vector<ClientLog>& logs, const FinalState& final) {
  InvariantResult r{"every acknowledged intent is still there with the same key"};
  std::map<KeyId, std::string> acked;  // (tenant, ref) -> key
  int64_t begins = 0;
  for (const ClientLog& log : logs) {
    for (const BeginAck& b : log.begins) {
      ++begins;
      auto [it, inserted] = acked.emplace(KeyId{b.tenant, b.ref}, b.key);
      if (!inserted && it->second != b.key) {
        Violation(&r, b.tenant + "/" + b.ref + ": begins answered two keys " +
                          it->second.substr(0, 16) + " and " + b.key.substr(0, 16));
      }
    }
  }
  for (const auto& [id, key] : acked) {
    ++r.checked;
    auto it = final.intents.find(id);
    if (it == final.intents.end() || it->second.empty()) {
      Violation(&r, id.first + "/" + id.second + ": acknowledged intent is missing");
    } else if (it->second != key) {
      Violation(&r, id.first + "/" + id.second + ": key " + key.substr(0, 16) + " became " +
                        it->second.substr(0, 16));
    }
  }
  r.figures = std::to_string(acked.size()) + " intents from " + std::to_string(begins) +
              " acknowledged begins, " + std::to_string(r.violations) + " lost or changed";
  return r;
}

InvariantResult ReplaysMatch(const std::vector<ClientLog>& logs, const FinalState& final) {
  InvariantResult r{"every replay carried the stored outcome"};
  for (const ClientLog& log : logs) {
    for (const BeginAck& b : log.begins) {
      if (b.decision != "replay") continue;
      ++r.checked;
      auto it = final.actions.find({b.tenant, b.key});
      if (it == final.actions.end() || !it->second.found) {
        Violation(&r, Describe({b.tenant, b.key}) + ": replayed, but no action is stored");
        continue;
      }
      const FinalAction& a = it->second;
      const std::string& stored = a.status == "completed" ? a.response : a.error;
      if (a.status != b.replay_status || stored != b.replay_outcome) {
        Violation(&r, Describe({b.tenant, b.key}) + ": replayed " + b.replay_status + " " +
                          b.replay_outcome + ", stored " + a.status + " " + stored);
      }
    }
  }
  r.figures = std::to_string(r.checked) + " replays, " + std::to_string(r.violations) +
              " differ from the stored outcome";
  return r;
}

InvariantResult RecordsCoverGrants(const Index& index, const FinalState& final) {
  InvariantResult r{"final records account for every grant"};
  for (const auto& [id, list] : index.grants) {
    ++r.checked;
    auto it = final.actions.find(id);
    if (it == final.actions.end() || !it->second.found) {
      Violation(&r, Describe(id) + ": granted, but no action is stored");
      continue;
    }
    const FinalAction& a = it->second;
    const int64_t highest = list.back()->token;
    if (a.lease_token < highest || a.attempt != a.lease_token) {
      Violation(&r, Describe(id) + ": token " + std::to_string(highest) +
                        " was granted, stored lease_token " + std::to_string(a.lease_token) +
                        " attempt " + std::to_string(a.attempt));
    }
  }
  r.figures = std::to_string(r.checked) + " keys with grants, " + std::to_string(r.violations) +
              " whose record lost a grant";
  return r;
}

InvariantResult RestartsSucceeded(const RunFacts& facts) {
  InvariantResult r{"every restart succeeded"};
  r.checked = facts.restarts_attempted + 1;
  if (facts.restarts_succeeded != facts.restarts_attempted) {
    Violation(&r, std::to_string(facts.restarts_attempted - facts.restarts_succeeded) +
                      " restarts did not answer ping");
  }
  if (facts.kills < facts.min_kills) {
    Violation(&r, "only " + std::to_string(facts.kills) + " kills (at least " +
                      std::to_string(facts.min_kills) + " required)");
  }
  r.figures = std::to_string(facts.kills) + " SIGKILLs, " +
              std::to_string(facts.restarts_succeeded) + "/" +
              std::to_string(facts.restarts_attempted) + " restarts answered";
  return r;
}

InvariantResult RefusedLeftNoTrace(const std::vector<ClientLog>& logs, const FinalState& final) {
  InvariantResult r{"no write answered storage_error took effect"};
  int64_t begins = 0, sightings = 0, finishes = 0;
  for (const ClientLog& log : logs) {
    for (const auto& [tenant, ref] : log.refused_begins) {
      ++r.checked;
      ++begins;
      auto it = final.intents.find({tenant, ref});
      if (it != final.intents.end() && !it->second.empty()) {
        Violation(&r, tenant + "/" + ref +
                          ": its begin was answered storage_error, yet the "
                          "intent was frozen with key " +
                          it->second.substr(0, 16));
      }
    }
    for (const Sighting& m : log.seen_refused) {
      ++r.checked;
      ++sightings;
      auto it = final.messages.find({m.tenant, m.channel, m.message_id});
      if (it != final.messages.end() && !it->second.was_absent) {
        Violation(&r, m.tenant + "/" + m.channel + "/" + m.message_id +
                          ": its seen was answered storage_error, yet it was recorded (" +
                          std::to_string(it->second.count) + " sightings)");
      }
    }
    for (const Finish& f : log.finishes) {
      if (!f.refused) continue;
      ++r.checked;
      ++finishes;
      auto it = final.actions.find({f.tenant, f.key});
      if (it == final.actions.end() || !it->second.found) continue;
      const FinalAction& a = it->second;
      const std::string& stored = f.kind == FinishKind::kComplete ? a.response : a.error;
      if (stored == f.outcome) {
        Violation(&r, Describe({f.tenant, f.key}) + ": token " + std::to_string(f.token) +
                          " was answered storage_error, yet its outcome " + f.outcome +
                          " is stored (" + a.status + ")");
      }
    }
  }
  r.figures = std::to_string(begins) + " begins, " + std::to_string(sightings) + " seen and " +
              std::to_string(finishes) + " complete/fail answered storage_error, " +
              std::to_string(r.violations) + " took effect";
  return r;
}

InvariantResult SightingsDurable(const std::vector<ClientLog>& logs, const FinalState& final) {
  InvariantResult r{"every acknowledged sighting is still there, and no new id was seen before"};
  int64_t acked = 0;
  for (const ClientLog& log : logs) {
    for (const Sighting& m : log.seen_acked) {
      ++r.checked;
      ++acked;
      auto it = final.messages.find({m.tenant, m.channel, m.message_id});
      if (it == final.messages.end() || it->second.was_absent) {
        Violation(&r, m.tenant + "/" + m.channel + "/" + m.message_id +
                          ": acknowledged as a first sighting, then missing");
      }
    }
    for (const std::string& d : log.seen_fresh_duplicates) {
      ++r.checked;
      Violation(&r, d);
    }
  }
  r.figures = std::to_string(acked) + " first sightings acknowledged, " +
              std::to_string(r.violations) + " lost or seen before";
  return r;
}

InvariantResult EveryRequestAnswered(const std::vector<ClientLog>& logs, const RunFacts& facts) {
  InvariantResult r{"the agent never died on its own and answered every request while it ran"};
  int64_t stalls = 0;
  for (const ClientLog& log : logs) {
    r.checked += log.begins_sent + log.seen_sent;
    for (const std::string& s : log.stalls) {
      ++stalls;
      Violation(&r, "client " + std::to_string(log.client) + ": " + s);
    }
  }
  for (const std::string& e : facts.unexpected_exits) Violation(&r, e);
  r.figures = std::to_string(stalls) + " requests left unanswered while the agent ran, " +
              std::to_string(facts.unexpected_exits.size()) + " deaths not caused by a kill";
  return r;
}

}  // namespace

std::vector<InvariantResult> CheckInvariants(const std::vector<ClientLog>& logs,
                                             const FinalState& final_state, const RunFacts& facts) {
  const Index index = BuildIndex(logs);
  return {UniqueTokens(index),
          GrantsFollowExpiryOrRelease(index),
          CompletesDurable(logs, final_state),
          IntentsDurable(logs, final_state),
          ReplaysMatch(logs, final_state),
          RecordsCoverGrants(index, final_state),
          RestartsSucceeded(facts),
          RefusedLeftNoTrace(logs, final_state),
          SightingsDurable(logs, final_state),
          EveryRequestAnswered(logs, facts)};
}

void PrintResult(const InvariantResult& r, const std::string& indent, std::FILE* out) {
  std::fprintf(out, "%s%s %s: %s (%lld checked, %lld violations)\n", indent.c_str(),
               r.passed() ? "PASS" : "FAIL", r.name.c_str(), r.figures.c_str(),
               static_cast<long long>(r.checked), static_cast<long long>(r.violations));
  for (const std::string& e : r.examples)
    std::fprintf(out, "%s    %s\n", indent.c_str(), e.c_str());
}

int PrintResults(const std::vector<InvariantResult>& results, std::FILE* out) {
  int passed = 0, failed = 0;
  for (const InvariantResult& r : results) {
    PrintResult(r, "", out);
    (r.passed() ? passed : failed) += 1;
  }
  std::fprintf(out, "%d passed, %d failed\n", passed, failed);
  std::fflush(out);
  return failed;
}

}  // namespace intentd::torture
