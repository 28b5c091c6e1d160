#include "cli/cost.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace intentd::cli {
namespace {

struct CostRun {
  int code = -1;
  std::string out, err;
};

CostRun Cost(const std::vector<std::string>& args, const FetchStatsFn& fetch = nullptr,
             const std::string& env_socket = "") {
  std::ostringstream out, err;
  CostRun r;
  r.code = RunCostCommand(args, env_socket, fetch, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

nlohmann::json CostJson(std::vector<std::string> args, const FetchStatsFn& fetch = nullptr,
                        const std::string& env_socket = "") {
  args.push_back("--json");
  CostRun r = Cost(args, fetch, env_socket);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return nlohmann::json::parse(r.out);
}

FetchStatsFn StatsReturning(std::string line, std::string* asked_socket = nullptr) {
  return [line, asked_socket](const std::string& socket, std::string* json, std::string*) {
    if (asked_socket) *asked_socket = socket;
    *json = line;
    return true;
  };
}

TEST(Cost, DefaultsReproduceTheSeedTable) {
  nlohmann::json j = CostJson({});
  EXPECT_EQ(j["cost_per_call"], "0.165");
  EXPECT_EQ(j["revenue_month"], "36000.00");
  EXPECT_EQ(j["repeated_conversations"], "900");
  EXPECT_EQ(j["wasted_month"], "148.50");
  EXPECT_EQ(j["wasted_share_percent"], "0.41");
  EXPECT_EQ(j["wasted_year"], "1782.00");
  EXPECT_EQ(j["break_even_conversations"], 124);
  EXPECT_EQ(j["repeat_rate_source"], "flag");
  EXPECT_EQ(j["conversations"], 30000);
  EXPECT_EQ(j["input_price_per_thousand"], "0.015");
  EXPECT_EQ(j["ticket"], "1.20");
  EXPECT_FALSE(j.contains("agent"));
}

TEST(Cost, TablePrintsTheSeedFiguresWithSeparators) {
  CostRun r = Cost({});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| Cost per call "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("R$ 0.165"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("R$ 148.50 a month"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("R$ 36,000.00"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3%, or 900"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.41%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("R$ 1,782.00"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("124 a month"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8,000 input, 600 output"), std::string::npos) << r.out;
}

TEST(Cost, FlagsChangeEveryFigure) {
  nlohmann::json j = CostJson({"--conversations", "1000", "--input-tokens=2000", "--output-tokens",
                               "100", "--input-price", "0.01", "--output-price=0.04",
                               "--repeat-rate", "10%", "--ticket", "2"});
  // 2 * 0.01 + 0.1 * 0.04 = 0.024 a call; 100 repeats; 2.40 a month.
  EXPECT_EQ(j["cost_per_call"], "0.024");
  EXPECT_EQ(j["repeated_conversations"], "100");
  EXPECT_EQ(j["wasted_month"], "2.40");
  EXPECT_EQ(j["revenue_month"], "2000.00");
  EXPECT_EQ(j["wasted_share_percent"], "0.12");
  EXPECT_EQ(j["wasted_year"], "28.80");
  EXPECT_EQ(j["break_even_conversations"], 2);  // 1.2 tickets, rounded up
}

TEST(Cost, MoneyIsExactWhereDoublesDrift) {
  // In doubles 0.1 + 0.2 != 0.3 and 3 * 0.1 * 1000 is 300.00000000000006.
  nlohmann::json j = CostJson({"--conversations", "1000", "--input-tokens", "1000",
                               "--output-tokens", "1000", "--input-price", "0.1", "--output-price",
                               "0.2", "--repeat-rate", "100", "--ticket", "0.3"});
  EXPECT_EQ(j["cost_per_call"], "0.30");
  EXPECT_EQ(j["wasted_month"], "300.00");
  EXPECT_EQ(j["wasted_share_percent"], "100.00");
  // Exactly 1000 tickets: a float ceiling would say 1001.
  EXPECT_EQ(j["break_even_conversations"], 1000);
}

TEST(Cost, BreakEvenRoundsUpAnyFraction) {
  // 7 repeats * 0.165 = 1.155 → 0.9625 tickets of 1.20 → 1.
  nlohmann::json j = CostJson({"--conversations", "7", "--repeat-rate", "100"});
  EXPECT_EQ(j["wasted_month"], "1.16");  // 1.155 half up
  EXPECT_EQ(j["break_even_conversations"], 1);
  j = CostJson({"--repeat-rate", "0"});
  EXPECT_EQ(j["wasted_month"], "0.00");
  EXPECT_EQ(j["break_even_conversations"], 0);
}

TEST(Cost, FractionalRepeatRateKeepsFractionalConversations) {
  nlohmann::json j = CostJson({"--conversations", "1001", "--repeat-rate", "2.5"});
  EXPECT_EQ(j["repeated_conversations"], "25.03");  // 25.025 half up
  EXPECT_EQ(j["repeat_rate_percent"], "2.5");
  EXPECT_EQ(j["wasted_month"], "4.13");  // 25.025 * 0.165 = 4.129125
}

TEST(Cost, BadValuesAreUsageErrors) {
  const std::vector<std::vector<std::string>> bad = {
      {"--conversations", "0"},
      {"--conversations", "-5"},
      {"--conversations", "1.5"},
      {"--input-tokens", "abc"},
      {"--input-price", "0,015"},
      {"--input-price", "1e-3"},
      {"--output-price", ".5"},
      {"--output-price", "5."},
      {"--repeat-rate", "101"},
      {"--repeat-rate", "3.1234567"},
      {"--ticket", "0"},
      {"--ticket", ""},
      {"--input-price", "0.0000000001"},
      {"--frobnicate"},
      {"extra"},
      {"--conversations"},
      {"--socket="},
      {"--json=1"},
  };
  for (const auto& args : bad) {
    CostRun r = Cost(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.code, 2) << joined;
    EXPECT_EQ(r.out, "") << joined;
    EXPECT_NE(r.err.find("intentd cost: "), std::string::npos) << joined;
  }
  EXPECT_NE(Cost({"--input-price", "0,015"}).err.find("'.'"), std::string::npos);
}

TEST(Cost, FiguresTooLargeForExactArithmeticAreRefused) {
  CostRun r = Cost({"--conversations", "999999999999999", "--input-tokens", "999999999999999",
                    "--input-price", "999999999999999.999999999", "--ticket", "0.000000001"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("too large"), std::string::npos) << r.err;
}

TEST(Cost, HelpPrintsUsageAndExplainsEveryRow) {
  CostRun r = Cost({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: intentd cost"), std::string::npos);
  EXPECT_NE(r.out.find("--repeat-rate"), std::string::npos);
  EXPECT_NE(r.out.find("$INTENTD_SOCKET"), std::string::npos);
  // Every row label of both tables is explained.
  for (const char* row :
       {"Begins answered:", "Double charges prevented:", "Repeated begins:",
        "Duplicate messages (seen):", "Cost per call:", "Revenue a month:",
        "Conversations that repeat the call:", "Tokens burned on duplicates:", "Share of revenue:",
        "Same volume, a year:", "Conversations to break even:", "Model calls saved by seen:"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  }
}

TEST(Cost, SocketTakesRepeatRateFromAgentDecisions) {
  std::string asked;
  auto fetch = StatsReturning(
      R"({"ok":true,"decisions":{"execute":97,"in_flight":1,"recover":1,"replay":1},)"
      R"("intents_created":97,"intents_reused":3})",
      &asked);
  nlohmann::json j = CostJson({"--socket", "/tmp/a.sock", "--min-sample", "100"}, fetch);
  EXPECT_EQ(asked, "/tmp/a.sock");
  EXPECT_EQ(j["repeat_rate_source"], "agent");
  EXPECT_EQ(j["repeat_rate_percent"], "3");  // 3 of 100 begins
  EXPECT_EQ(j["wasted_month"], "148.50");
  EXPECT_EQ(j["agent"]["begins"], 100);
  EXPECT_EQ(j["agent"]["absorbed"], 3);
  EXPECT_EQ(j["agent"]["recover"], 1);

  CostRun table = Cost({"--socket=/tmp/a.sock", "--min-sample=100"}, fetch);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("3%, or 900 (measured: 3 of 100 begins repeated)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("| Repeated begins "), std::string::npos) << table.out;
}

TEST(Cost, SocketWithOmittedDecisionsCountsThemAsZero) {
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{"execute":3,"replay":1}})");
  nlohmann::json j = CostJson({"--socket", "s", "--min-sample", "4"}, fetch);
  EXPECT_EQ(j["repeat_rate_percent"], "25");
  EXPECT_EQ(j["repeated_conversations"], "7500");
}

// An agent with no begin yet measured nothing: the month is priced with the
// assumed rate, and the table says why.
TEST(Cost, SocketWithNoBeginsYetPricesTheAssumedRate) {
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{}})");
  CostRun r = Cost({"--socket", "s"}, fetch);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("3%, or 900 (assumed, default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no begin yet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| Begins answered "), std::string::npos) << r.out;
}

TEST(Cost, UnreachableAgentExitsThree) {
  FetchStatsFn fetch = [](const std::string&, std::string*, std::string* error) {
    *error = "connection refused";
    return false;
  };
  CostRun r = Cost({"--socket", "/nope"}, fetch);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("connection refused"), std::string::npos) << r.err;
  EXPECT_EQ(Cost({"--socket", "/nope"}, nullptr).code, 3);
}

TEST(Cost, AgentErrorsAndMalformedStatsExitOne) {
  const std::vector<std::string> lines = {
      R"({"ok":false,"error":{"code":"forbidden","message":"not an admin"}})",
      "not json",
      "[1,2]",
      R"({"ok":true})",
      R"({"ok":true,"decisions":{"execute":-1}})",
      R"({"ok":true,"decisions":{"replay":"3"}})",
  };
  for (const auto& line : lines) {
    CostRun r = Cost({"--socket", "s"}, StatsReturning(line));
    EXPECT_EQ(r.code, 1) << line;
    EXPECT_EQ(r.out, "") << line;
    EXPECT_FALSE(r.err.empty()) << line;
  }
  EXPECT_NE(Cost({"--socket", "s"}, StatsReturning(lines[0])).err.find("forbidden"),
            std::string::npos);
}

// A rate typed is the user's assumption: it prices the month, and the
// measurement is still shown as measured.
TEST(Cost, RepeatRateFlagWinsOverTheMeasuredRate) {
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{"execute":1500,"replay":500}})");
  nlohmann::json j = CostJson({"--socket", "s", "--repeat-rate", "3"}, fetch);
  EXPECT_EQ(j["repeat_rate_source"], "flag");
  EXPECT_EQ(j["repeat_rate_percent"], "3");
  EXPECT_EQ(j["agent"]["measured_rate_percent"], "25");
  EXPECT_EQ(j["agent"]["sample_sufficient"], true);
  EXPECT_EQ(j["defaults_used"].size(), 6u) << j;
  CostRun r = Cost({"--socket", "s", "--repeat-rate", "3"}, fetch);
  EXPECT_NE(r.out.find("3%, or 900 (assumed)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("500 of 2,000 (25%)"), std::string::npos) << r.out;
}

// The issue's dev agent: one manual replay among 4 begins read as a 25%
// repeat rate and R$ 1,237.50 a month. A sample below --min-sample is shown
// as measured and never extrapolated.
TEST(Cost, ATinySampleIsShownButNeverExtrapolated) {
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{"execute":3,"replay":1}})");
  nlohmann::json j = CostJson({"--socket", "s"}, fetch);
  EXPECT_EQ(j["repeat_rate_source"], "flag");
  EXPECT_EQ(j["repeat_rate_percent"], "3");
  EXPECT_EQ(j["wasted_month"], "148.50");
  EXPECT_EQ(j["agent"]["measured_rate_percent"], "25");
  EXPECT_EQ(j["agent"]["min_sample"], 1000);
  EXPECT_EQ(j["agent"]["sample_sufficient"], false);
  CostRun r = Cost({"--socket", "s"}, fetch);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("1,237.50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3%, or 900 (assumed, default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("The agent's repeat rate, 25% (1 of 4 begins), is too small a sample to "
                       "stand for a month: it takes 1,000 begins (--min-sample)."),
            std::string::npos)
      << r.out;
  // At the minimum it stands.
  j = CostJson({"--socket", "s", "--min-sample", "4"}, fetch);
  EXPECT_EQ(j["repeat_rate_source"], "agent");
  EXPECT_EQ(j["wasted_month"], "1237.50");
  EXPECT_EQ(Cost({"--min-sample", "0"}).code, 2);
  EXPECT_EQ(Cost({"--min-sample", "x"}).code, 2);
}

TEST(Cost, AssumptionsAreMarkedAndMeasurementsApart) {
  CostRun r = Cost({"--ticket", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("Measured"), std::string::npos) << "no agent, nothing measured\n" << r.out;
  EXPECT_NE(r.out.find("| Conversations a month              | 30,000 (assumed, default)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("R$ 2.00 (assumed) "), std::string::npos) << r.out;
  EXPECT_EQ(CostJson({"--ticket", "2"})["defaults_used"],
            (nlohmann::json{"conversations", "input-tokens", "output-tokens", "input-price",
                            "output-price", "repeat-rate"}));
}

// Double charges prevented: replays of completed actions and recoveries,
// with the money frozen in them, per action type, from the agent's stats.
TEST(Cost, DoubleChargesPreventedCountAndReais) {
  auto fetch = StatsReturning(R"({"ok":true,"uptime_ms":3723000,
      "decisions":{"execute":1200,"in_flight":10,"recover":4,"replay":22},
      "prevented":{
        "pix.cobranca":{"replayed":20,"recovered":4,
                        "replayed_cents":{"valor":360000},"recovered_cents":{"valor":72050}},
        "email.cobranca":{"replayed":0,"recovered":0,"replayed_cents":{},"recovered_cents":{}}}})");
  nlohmann::json j = CostJson({"--socket", "s"}, fetch);
  const nlohmann::json& p = j["agent"]["prevented"];
  EXPECT_EQ(p["count"], 24);
  EXPECT_EQ(p["amount"], "4320.50");
  EXPECT_EQ(p["replayed"], 20) << "2 replays were of failed actions: not counted";
  EXPECT_EQ(p["replayed_amount"], "3600.00");
  EXPECT_EQ(p["recovered"], 4);
  EXPECT_EQ(p["recovered_amount"], "720.50");
  EXPECT_EQ(p["amounts_reported"], true);
  EXPECT_EQ(p["by_action_type"]["pix.cobranca"]["replayed_amount"]["valor"], "3600.00");
  EXPECT_EQ(j["agent"]["uptime_ms"], 3723000);
  // 1,236 begins: the measured rate, 36 / 1236, prices the month.
  EXPECT_EQ(j["repeat_rate_source"], "agent");
  EXPECT_EQ(j["repeated_conversations"], "873.79");
  EXPECT_EQ(j["wasted_month"], "144.17");

  CostRun r = Cost({"--socket", "s"}, fetch);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Measured on the agent at s, since it started 1h02m ago"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| Double charges prevented          | 24, R$ 4,320.50"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("|   replays of a completed charge   | 20, R$ 3,600.00"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("|   recoveries (if the first acted) | 4, R$ 720.50"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("|   pix.cobranca                    | 24, valor R$ 4,320.50"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("email.cobranca"), std::string::npos) << "no row for nothing\n" << r.out;
  EXPECT_LT(r.out.find("Double charges prevented"), r.out.find("| Estimate"))
      << "measurements come before, and apart from, the estimate";
}

TEST(Cost, AnAgentWithoutPreventedGivesCountsButNoAmounts) {
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{"execute":10,"recover":1,"replay":2}})");
  nlohmann::json j = CostJson({"--socket", "s"}, fetch);
  EXPECT_EQ(j["agent"]["prevented"]["count"], 3);
  EXPECT_EQ(j["agent"]["prevented"]["amount"], nullptr);
  EXPECT_EQ(j["agent"]["prevented"]["amounts_reported"], false);
  CostRun r = Cost({"--socket", "s"}, fetch);
  EXPECT_NE(r.out.find("3 (amounts: this agent does not report them; upgrade it)"),
            std::string::npos)
      << r.out;
}

TEST(Cost, TakesTheSocketFromIntentdSocket) {
  std::string asked;
  auto fetch = StatsReturning(R"({"ok":true,"decisions":{"execute":1}})", &asked);
  nlohmann::json j = CostJson({}, fetch, "/run/env.sock");
  EXPECT_EQ(asked, "/run/env.sock");
  EXPECT_EQ(j["agent"]["socket"], "/run/env.sock");
  CostJson({"--socket", "/flag.sock"}, fetch, "/run/env.sock");
  EXPECT_EQ(asked, "/flag.sock") << "--socket wins over $INTENTD_SOCKET";
  FetchStatsFn down = [](const std::string&, std::string*, std::string* error) {
    *error = "connection refused";
    return false;
  };
  CostRun r = Cost({}, down, "/run/env.sock");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("unset it to print the estimate alone"), std::string::npos) << r.err;
  EXPECT_FALSE(CostJson({}, nullptr, "").contains("agent")) << "neither: nothing measured";
}

}  // namespace
}  // namespace intentd::cli
