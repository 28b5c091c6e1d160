#include "tests/torture/selftest.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tests/torture/checker.h"

namespace intentd::torture {
namespace {

// Indexes of CheckInvariants' results.
enum Inv {
  kUnique,
  kAfterExpiry,
  kCompletes,
  kIntents,
  kReplays,
  kRecords,
  kRestarts,
  kRefused,
  kSightings,
  kAnswered
};

struct Scenario {
  std::vector<ClientLog> logs;
  FinalState final_state;
  RunFacts facts;
};

Grant MakeGrant(const std::string& key, int64_t token, bool recover, int64_t at, int client) {
  Grant g;
  g.tenant = "acme";
  g.key = key;
  g.token = token;
  g.recover = recover;
  g.previous_token = recover ? token - 1 : 0;
  g.granted_at_ms = at;
  g.lease_until_ms = at + 1000;
  g.client = client;
  return g;
}

Finish MakeFinish(const std::string& key, int64_t token, FinishKind kind, std::string outcome) {
  Finish f;
  f.tenant = "acme";
  f.key = key;
  f.token = token;
  f.kind = kind;
  f.outcome = std::move(outcome);
  f.acked = true;
  return f;
}

// A consistent history: key A executed and completed (then replayed), key B
// expired, recovered, released, executed again and failed for good, key C
// recovered after a grant whose answer was lost, then completed.
Scenario Clean() {
  Scenario s;
  s.logs.resize(2);
  ClientLog& c0 = s.logs[0];
  ClientLog& c1 = s.logs[1];
  c0.client = 0;
  c1.client = 1;
  c0.begins.push_back({"acme", "ref-a", "A", "execute"});
  c0.grants.push_back(MakeGrant("A", 1, false, 1000, 0));
  c0.finishes.push_back(MakeFinish("A", 1, FinishKind::kComplete, R"({"charge":"a"})"));
  c1.begins.push_back({"acme", "ref-a", "A", "replay", "completed", R"({"charge":"a"})"});

  c0.begins.push_back({"acme", "ref-b", "B", "execute"});
  c0.grants.push_back(MakeGrant("B", 1, false, 1000, 0));  // abandoned
  c1.begins.push_back({"acme", "ref-b", "B", "in_flight"});
  c1.begins.push_back({"acme", "ref-b", "B", "recover"});
  c1.grants.push_back(MakeGrant("B", 2, true, 2000, 1));
  c1.finishes.push_back(MakeFinish("B", 2, FinishKind::kFailRetriable, R"({"e":1})"));
  c0.begins.push_back({"acme", "ref-b", "B", "execute"});
  c0.grants.push_back(MakeGrant("B", 3, false, 2100, 0));
  c0.finishes.push_back(MakeFinish("B", 3, FinishKind::kFailFinal, R"({"e":2})"));

  c1.begins.push_back({"acme", "ref-c", "C", "recover"});
  c1.grants.push_back(MakeGrant("C", 2, true, 5000, 1));
  c1.finishes.push_back(MakeFinish("C", 2, FinishKind::kComplete, R"({"charge":"c"})"));

  s.final_state.actions[{"acme", "A"}] = {true, "completed", R"({"charge":"a"})", "", 1, 1};
  s.final_state.actions[{"acme", "B"}] = {true, "failed", "", R"({"e":2})", 3, 3};
  s.final_state.actions[{"acme", "C"}] = {true, "completed", R"({"charge":"c"})", "", 2, 2};
  s.final_state.intents[{"acme", "ref-a"}] = "A";
  s.final_state.intents[{"acme", "ref-b"}] = "B";
  s.final_state.intents[{"acme", "ref-c"}] = "C";
  // A begin, a seen and a complete answered storage_error left no trace; a
  // first sighting is still there.
  c0.refused_begins.push_back({"acme", "ref-d"});
  s.final_state.intents[{"acme", "ref-d"}] = "";
  c0.seen_refused.push_back({"acme", "wa", "m-1"});
  s.final_state.messages[{"acme", "wa", "m-1"}] = {true, 1};
  c1.seen_acked.push_back({"acme", "wa", "m-2"});
  s.final_state.messages[{"acme", "wa", "m-2"}] = {false, 2};
  Finish refused = MakeFinish("A", 1, FinishKind::kComplete, R"({"charge":"a2"})");
  refused.acked = false;
  refused.refused = true;
  c1.finishes.push_back(refused);
  s.facts.kills = 20;
  s.facts.restarts_attempted = 20;
  s.facts.restarts_succeeded = 20;
  s.facts.min_kills = 20;
  return s;
}

struct Case {
  const char* name;
  std::set<int> expect_failed;
  std::function<void(Scenario*)> break_it;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"a consistent history passes", {}, [](Scenario*) {}},
      {"one token granted to two clients",
       {kUnique},
       [](Scenario* s) { s->logs[1].grants.push_back(MakeGrant("A", 1, false, 1000, 1)); }},
      {"recover before the earlier lease expired",
       {kAfterExpiry},
       [](Scenario* s) { s->logs[1].grants[0].granted_at_ms = 1999; }},
      {"recover naming the wrong previous token",
       {kAfterExpiry},
       [](Scenario* s) { s->logs[1].grants[0].previous_token = 0; }},
      {"execute although the lease was never released",
       {kAfterExpiry},
       [](Scenario* s) { s->logs[1].finishes.erase(s->logs[1].finishes.begin()); }},
      {"recover after an acknowledged release",
       {kAfterExpiry},
       [](Scenario* s) {
         s->logs[0].grants[2].recover = true;
         s->logs[0].grants[2].previous_token = 2;
         s->logs[0].grants[2].granted_at_ms = 3000;
       }},
      {"a grant after an acknowledged complete",
       {kAfterExpiry},
       [](Scenario* s) {
         s->logs[1].grants.push_back(MakeGrant("A", 2, true, 3000, 1));
         s->final_state.actions[{"acme", "A"}].lease_token = 2;
         s->final_state.actions[{"acme", "A"}].attempt = 2;
       }},
      {"an acknowledged complete stored with another response",
       {kCompletes},
       [](Scenario* s) {
         s->final_state.actions[{"acme", "C"}].response = R"({"charge":"x"})";
       }},
      {"an acknowledged complete lost",
       {kCompletes, kRecords},
       [](Scenario* s) {
         s->final_state.actions[{"acme", "C"}] = FinalAction{};
       }},
      {"an acknowledged final fail lost",
       {kCompletes},
       [](Scenario* s) {
         s->final_state.actions[{"acme", "B"}].status = "started";
       }},
      {"an acknowledged intent lost",
       {kIntents},
       [](Scenario* s) {
         s->final_state.intents[{"acme", "ref-c"}] = "";
       }},
      {"an acknowledged intent with another key",
       {kIntents},
       [](Scenario* s) {
         s->final_state.intents[{"acme", "ref-b"}] = "Z";
       }},
      {"two begins of one intent answered different keys",
       {kIntents},
       [](Scenario* s) {
         s->logs[1].begins.push_back({"acme", "ref-c", "Z", "in_flight"});
       }},
      {"a replay with another response",
       {kReplays},
       [](Scenario* s) { s->logs[1].begins[0].replay_outcome = R"({"charge":"b"})"; }},
      {"a record that lost a grant",
       {kRecords},
       [](Scenario* s) {
         s->final_state.actions[{"acme", "B"}].attempt = 2;
       }},
      {"a restart that failed", {kRestarts}, [](Scenario* s) { s->facts.restarts_succeeded = 19; }},
      {"too few kills", {kRestarts}, [](Scenario* s) { s->facts.kills = 19; }},
      {"a begin answered storage_error froze its intent",
       {kRefused},
       [](Scenario* s) {
         s->final_state.intents[{"acme", "ref-d"}] = "D";
       }},
      {"a seen answered storage_error was recorded",
       {kRefused},
       [](Scenario* s) {
         s->final_state.messages[{"acme", "wa", "m-1"}] = {false, 2};
       }},
      {"a complete answered storage_error was stored",
       {kRefused, kCompletes, kReplays},
       [](Scenario* s) {
         s->final_state.actions[{"acme", "A"}].response = R"({"charge":"a2"})";
       }},
      {"an acknowledged first sighting lost",
       {kSightings},
       [](Scenario* s) {
         s->final_state.messages[{"acme", "wa", "m-2"}] = {true, 1};
       }},
      {"a fresh message id reported seen before",
       {kSightings},
       [](Scenario* s) { s->logs[0].seen_fresh_duplicates.push_back("acme/wa/m-3: first false"); }},
      {"a request left unanswered while the agent ran",
       {kAnswered},
       [](Scenario* s) { s->logs[1].stalls.push_back("begin of acme/ref-e: 5 s, no answer"); }},
      {"the agent died on its own",
       {kAnswered},
       [](Scenario* s) { s->facts.unexpected_exits.push_back("exit status 134 (SIGABRT)"); }},
  };
  return cases;
}

}  // namespace

int RunCheckerSelfTest(std::FILE* out) {
  int passed = 0, failed = 0;
  for (const Case& c : Cases()) {
    Scenario s = Clean();
    c.break_it(&s);
    const std::vector<InvariantResult> results = CheckInvariants(s.logs, s.final_state, s.facts);
    std::set<int> flagged;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].passed()) flagged.insert(static_cast<int>(i));
    }
    const bool ok = flagged == c.expect_failed;
    (ok ? passed : failed) += 1;
    std::string which;
    for (int i : flagged) which += (which.empty() ? "" : "; ") + results[i].name;
    std::fprintf(out, "%s %s: flagged [%s]\n", ok ? "PASS" : "FAIL", c.name, which.c_str());
    if (!ok) PrintResults(results, out);
  }
  std::fprintf(out, "%d passed, %d failed\n", passed, failed);
  return failed;
}

}  // namespace intentd::torture
