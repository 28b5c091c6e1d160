// Text for people, shared by the commands' views: times, durations, and the
// names an agent answered. Answers in --json keep the agent's epoch
// milliseconds and raw strings; these are for the text views only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace intentd::cli {

// An instant in epoch milliseconds as ISO 8601 in UTC with its milliseconds,
// e.g. 1796323135699 -> "2026-12-03T18:38:55.699Z". Instants before 1970 are
// written the same way (floor division), never as a negative count.
std::string IsoUtc(int64_t epoch_ms);

// A duration for reading at a glance: "45s", "12m05s", "3h12m", "2d04h"
// (negative durations read as 0s).
std::string HumanDuration(long long ms);

// The wall clock in epoch milliseconds.
int64_t NowEpochMs();

// A JSON value as text: a string as it is, anything else as compact JSON
// (invalid UTF-8 replaced).
std::string PlainText(const nlohmann::json& value);

// A name as the terminal should show it: as PlainText when it holds no
// control character, else JSON-quoted, so that a tenant or reference cannot
// move the cursor or forge a line.
std::string Shown(const nlohmann::json& value);

}  // namespace intentd::cli
