#include "protocol/anchor.h"

#include <algorithm>
#include <cctype>

namespace intentd::agent {
namespace {

bool AllOf(std::string_view s, int (*pred)(int)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [pred](char c) {
    return pred(static_cast<unsigned char>(c)) != 0;
  });
}

bool IsUuid(std::string_view s) {
  if (s.size() == 32) return AllOf(s, isxdigit);
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (s[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// "2026-12-03T21:04:05..." (a date, then T or a space, then a time).
bool IsIsoDateTime(std::string_view s) {
  if (s.size() < 16) return false;
  const auto digits = [&](size_t at, size_t n) { return AllOf(s.substr(at, n), isdigit); };
  return digits(0, 4) && s[4] == '-' && digits(5, 2) && s[7] == '-' && digits(8, 2) &&
         (s[10] == 'T' || s[10] == ' ') && digits(11, 2) && s[13] == ':' && digits(14, 2);
}

}  // namespace

bool LooksDrawnInsideTheAttempt(std::string_view ref, std::string* what) {
  if (IsUuid(ref)) {
    *what = "a uuid";
  } else if (ref.substr(0, 6) == "wamid.") {
    *what =
        "a WhatsApp message id (a customer who writes again about the same charge sends a new "
        "one)";
  } else if ((ref.size() == 10 || ref.size() == 13) && AllOf(ref, isdigit)) {
    *what = "a Unix timestamp";
  } else if (IsIsoDateTime(ref)) {
    *what = "a date and time";
  } else {
    return false;
  }
  return true;
}

}  // namespace intentd::agent
