// Proves the checker can fail: synthetic logs, each breaking one invariant.
#pragma once

#include <cstdio>

namespace intentd::torture {

// Runs every case; prints one line per case and "N passed, M failed".
// Returns the number of cases where the checker did not flag exactly the
// broken invariant (0: the checker works).
int RunCheckerSelfTest(std::FILE* out);

}  // namespace intentd::torture
