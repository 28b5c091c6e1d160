// Exact decimal arithmetic for `intentd cost`: non-negative rationals on
// 128-bit integers, always reduced, so that money is never a float that
// drifts a cent (0.015 * 8 is 0.12, not 0.11999999999999999). Values are
// rounded only when printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace intentd::cli::exact {

using Int = __int128;

// num / den, den > 0, reduced.
struct Ratio {
  Int num = 0;
  Int den = 1;
};

Ratio Reduced(Int num, Int den);
inline Ratio Whole(int64_t n) { return Ratio{n, 1}; }

// Arithmetic that reports overflow instead of wrapping: false means the
// figures are too large to be computed exactly.
bool Mul(const Ratio& a, const Ratio& b, Ratio* out);
bool Add(const Ratio& a, const Ratio& b, Ratio* out);
bool Div(const Ratio& a, const Ratio& b, Ratio* out);  // b must be non-zero

// Rounds half up to `places` decimals; then drops trailing zeros while more
// than `min_places` remain. `group` puts thousands separators (",") in the
// integer part. False on overflow.
bool Format(const Ratio& r, int places, int min_places, bool group, std::string* out);

// The smallest integer not below r.
inline Int Ceil(const Ratio& r) { return (r.num + r.den - 1) / r.den; }

// Plain decimal digits with an optional '.' fraction of at most
// `max_decimals` digits, as a person types a price or a rate ("0.015").
// False with *why (for people) otherwise.
bool ParseDecimal(std::string_view text, int max_decimals, Ratio* out, std::string* why);

// `s` without its thousands separators.
std::string Ungrouped(std::string s);

}  // namespace intentd::cli::exact
