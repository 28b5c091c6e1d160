// UTF-8 well-formedness, for every layer that checks text: the key
// derivation's fields, the metrics' label values, export files.
#pragma once

#include <cstddef>
#include <string_view>

namespace intentd::normalizers {

// Length of the well-formed UTF-8 sequence starting at text[i] (1 to 4), or
// 0 when there is none: no overlong forms, no surrogates, nothing above
// U+10FFFF (Unicode's table 3-7).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// True when `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

}  // namespace intentd::normalizers
