#include "normalizers/brazil_ids.h"

#include <algorithm>
#include <array>

namespace intentd::normalizers::pix_key {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool AllDigits(std::string_view text) { return std::all_of(text.begin(), text.end(), IsDigit); }

// The check digit rule shared by CPF and CNPJ: remainder < 2 gives 0.
int CheckDigit(int sum) {
  const int remainder = sum % 11;
  return remainder < 2 ? 0 : 11 - remainder;
}

// CNPJ weights run 2..9 from the right and wrap around.
int CnpjCheckDigit(std::string_view text) {
  int sum = 0;
  int weight = 2;
  for (size_t i = text.size(); i-- > 0;) {
    sum += (text[i] - '0') * weight;  // for letters: ASCII code minus 48
    weight = weight == 9 ? 2 : weight + 1;
  }
  return CheckDigit(sum);
}

constexpr std::array<int, 67> kAreaCodes = {
    11, 12, 13, 14, 15, 16, 17, 18, 19,  //
    21, 22, 24, 27, 28,                  //
    31, 32, 33, 34, 35, 37, 38,          //
    41, 42, 43, 44, 45, 46, 47, 48, 49,  //
    51, 53, 54, 55,                      //
    61, 62, 63, 64, 65, 66, 67, 68, 69,  //
    71, 73, 74, 75, 77, 79,              //
    81, 82, 83, 84, 85, 86, 87, 88, 89,  //
    91, 92, 93, 94, 95, 96, 97, 98, 99,
};

}  // namespace

bool IsValidCpf(std::string_view digits) {
  if (digits.size() != 11 || !AllDigits(digits)) return false;
  if (std::all_of(digits.begin(), digits.end(), [&](char c) { return c == digits[0]; })) {
    return false;
  }
  // Weights 10..2 for the first check digit, 11..2 for the second.
  for (size_t check = 9; check <= 10; ++check) {
    int sum = 0;
    for (size_t i = 0; i < check; ++i) sum += (digits[i] - '0') * static_cast<int>(check + 1 - i);
    if (CheckDigit(sum) != digits[check] - '0') return false;
  }
  return true;
}

bool IsValidCnpj(std::string_view text) {
  if (text.size() != 14) return false;
  for (size_t i = 0; i < 12; ++i) {
    if (!IsDigit(text[i]) && !(text[i] >= 'A' && text[i] <= 'Z')) return false;
  }
  if (!IsDigit(text[12]) || !IsDigit(text[13])) return false;
  return CnpjCheckDigit(text.substr(0, 12)) == text[12] - '0' &&
         CnpjCheckDigit(text.substr(0, 13)) == text[13] - '0';
}

bool IsBrazilianAreaCode(int code) {
  return std::binary_search(kAreaCodes.begin(), kAreaCodes.end(), code);
}

const char* CheckPhoneDigits(std::string_view digits) {
  if (!AllDigits(digits)) return "a phone has only digits after '+'";
  if (digits.size() < 8 || digits.size() > 15) return "a phone has 8 to 15 digits after '+'";
  if (digits[0] == '0') return "a country code does not start with 0";
  if (digits.substr(0, 2) != "55") return nullptr;
  const std::string_view national = digits.substr(2);
  if (national.size() != 10 && national.size() != 11) {
    return "a Brazilian phone has 10 or 11 digits after +55 (area code and number)";
  }
  if (!IsBrazilianAreaCode((national[0] - '0') * 10 + (national[1] - '0'))) {
    return "unknown Brazilian area code";
  }
  if (national.size() == 11 && national[2] != '9') {
    return "an 11-digit Brazilian number is a mobile and starts with 9 after the area code";
  }
  if (national.size() == 10 && (national[2] < '2' || national[2] > '5')) {
    return "a 10-digit Brazilian number is a landline and starts with 2 to 5 after the area code";
  }
  return nullptr;
}

}  // namespace intentd::normalizers::pix_key
