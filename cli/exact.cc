#include "cli/exact.h"

#include <algorithm>

namespace intentd::cli::exact {
namespace {

Int Gcd(Int a, Int b) {
  if (a < 0) a = -a;
  while (b != 0) {
    Int t = a % b;
    a = b;
    b = t;
  }
  return a == 0 ? 1 : a;
}

}  // namespace

Ratio Reduced(Int num, Int den) {
  Int g = Gcd(num, den);
  return Ratio{num / g, den / g};
}

bool Mul(const Ratio& a, const Ratio& b, Ratio* out) {
  // Cross-reduce first so exact results stay small.
  Int g1 = Gcd(a.num, b.den), g2 = Gcd(b.num, a.den);
  Int num, den;
  if (__builtin_mul_overflow(a.num / g1, b.num / g2, &num)) return false;
  if (__builtin_mul_overflow(a.den / g2, b.den / g1, &den)) return false;
  *out = Reduced(num, den);
  return true;
}

bool Add(const Ratio& a, const Ratio& b, Ratio* out) {
  Int g = Gcd(a.den, b.den);
  Int left, right, num, den;
  if (__builtin_mul_overflow(a.num, b.den / g, &left)) return false;
  if (__builtin_mul_overflow(b.num, a.den / g, &right)) return false;
  if (__builtin_add_overflow(left, right, &num)) return false;
  if (__builtin_mul_overflow(a.den, b.den / g, &den)) return false;
  *out = Reduced(num, den);
  return true;
}

bool Div(const Ratio& a, const Ratio& b, Ratio* out) { return Mul(a, Ratio{b.den, b.num}, out); }

namespace {

std::string IntToString(Int v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(s.begin(), s.end());
  return s;
}

std::string Grouped(const std::string& digits) {
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

}  // namespace

bool Format(const Ratio& r, int places, int min_places, bool group, std::string* out) {
  Int scale = 1;
  for (int i = 0; i < places; ++i) scale *= 10;
  Int scaled;
  if (__builtin_mul_overflow(r.num, scale, &scaled)) return false;
  Int q = scaled / r.den, rem = scaled % r.den;
  if (rem >= r.den - rem) ++q;  // half up; written so that nothing can overflow
  std::string whole = IntToString(q / scale);
  std::string frac;
  if (places > 0) {
    frac = IntToString(q % scale);
    frac.insert(0, static_cast<size_t>(places) - frac.size(), '0');
  }
  while (static_cast<int>(frac.size()) > min_places && frac.back() == '0') frac.pop_back();
  *out = group ? Grouped(whole) : whole;
  if (!frac.empty()) *out += "." + frac;
  return true;
}

bool ParseDecimal(std::string_view text, int max_decimals, Ratio* out, std::string* why) {
  size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  auto all_digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !all_digits(whole) || !all_digits(frac) ||
      (dot != std::string_view::npos && frac.empty())) {
    *why = "expected plain digits with an optional '.' fraction, like 0.015";
    if (text.find(',') != std::string_view::npos) *why += " (write the decimal mark as '.')";
    return false;
  }
  if (static_cast<int>(frac.size()) > max_decimals) {
    *why = "at most " + std::to_string(max_decimals) + " decimals";
    return false;
  }
  if (whole.size() > 15) {
    *why = "too large";
    return false;
  }
  Int num = 0, den = 1;
  for (char c : whole) num = num * 10 + (c - '0');
  for (char c : frac) {
    num = num * 10 + (c - '0');
    den *= 10;
  }
  *out = Reduced(num, den);
  return true;
}

std::string Ungrouped(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  return s;
}

}  // namespace intentd::cli::exact
