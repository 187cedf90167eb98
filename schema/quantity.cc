#include "schema/quantity.h"

#include <array>
#include <limits>

namespace admission::schema {

namespace {

constexpr uint64_t kInt64MaxMagnitude = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// Decimal digits of the largest int64 (9223372036854775807): a longer integer overflows.
constexpr size_t kInt64DigitsMax = 19;
// An exponent beyond this magnitude is saturated: the result overflows or rounds up to 1m
// either way, and saturating keeps the position arithmetic in range.
constexpr int64_t kExponentSaturation = 1'000'000'000;

constexpr const char* kSuffixHelp =
    " (expected n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e3)";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  std::string_view text;
  int decimal_exponent;
  int binary_shift;
};

// Kubernetes' suffixes. "E" alone is exa; "e3"/"E3" are exponents, tried after this table.
constexpr std::array<Suffix, 15> kSuffixes{{
    {"n", -9, 0},
    {"u", -6, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
}};

// Doubles a decimal digit string (most significant digit first) in place.
void DoubleDecimal(std::string& digits) {
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    const int d = (digits[i] - '0') * 2 + carry;
    digits[i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry != 0) digits.insert(digits.begin(), static_cast<char>('0' + carry));
}

// REQUIRES: digits are 1..19 decimal digits (fits in uint64).
uint64_t DigitsToU64(std::string_view digits) {
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

bool IsByteResource(std::string_view resource) {
  return resource == "memory" || resource == "storage" || resource == "ephemeral-storage" ||
         resource.starts_with("hugepages-");
}

}  // namespace

Result<int64_t> ParseQuantityMilli(std::string_view text) {
  auto fail = [&](const std::string& why) -> Status {
    return Status(Code::kInvalidArgument, "'" + std::string(text) + "' is not a quantity: " + why);
  };
  if (text.empty()) return fail("empty");
  if (text.size() > kQuantityTextBytesMax) {
    return fail("longer than " + std::to_string(kQuantityTextBytesMax) + " characters");
  }

  size_t i = 0;
  bool negative = false;
  if (text[i] == '+' || text[i] == '-') {
    negative = text[i] == '-';
    ++i;
  }
  const size_t int_begin = i;
  while (i < text.size() && IsDigit(text[i])) ++i;
  const std::string_view int_digits = text.substr(int_begin, i - int_begin);
  std::string_view frac_digits;
  if (i < text.size() && text[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    frac_digits = text.substr(frac_begin, i - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) {
    return fail(
        "expected a number such as 1, 1.5 or .5, then an optional suffix "
        "(m, k, M, G, Ki, Mi, Gi, e3...)");
  }

  const std::string_view suffix = text.substr(i);
  int64_t exponent = 0;
  int binary_shift = 0;
  const Suffix* known = nullptr;
  for (const Suffix& s : kSuffixes) {
    if (s.text == suffix) known = &s;
  }
  if (known != nullptr) {
    exponent = known->decimal_exponent;
    binary_shift = known->binary_shift;
  } else if (!suffix.empty() && (suffix[0] == 'e' || suffix[0] == 'E')) {
    // An exponent: [eE][+-]?<digits>, to the end of the text ("Ei" and "E" matched above).
    size_t j = 1;
    bool exponent_negative = false;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) {
      exponent_negative = suffix[j] == '-';
      ++j;
    }
    if (j == suffix.size()) return fail("exponent '" + std::string(suffix) + "' has no digits");
    for (; j < suffix.size(); ++j) {
      if (!IsDigit(suffix[j]))
        return fail("unknown suffix '" + std::string(suffix) + "'" + kSuffixHelp);
      if (exponent < kExponentSaturation) exponent = exponent * 10 + (suffix[j] - '0');
    }
    if (exponent_negative) exponent = -exponent;
  } else if (!suffix.empty()) {
    return fail("unknown suffix '" + std::string(suffix) + "'" + kSuffixHelp);
  }

  // Exact value in milli-units: digits x 10^scale x 2^binary_shift, digits without the point.
  std::string digits;
  digits.reserve(int_digits.size() + frac_digits.size() + 20);
  digits.append(int_digits).append(frac_digits);
  int64_t scale = exponent + 3 - static_cast<int64_t>(frac_digits.size());
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return int64_t{0};
  digits.erase(0, first_nonzero);
  for (int k = 0; k < binary_shift; ++k) DoubleDecimal(digits);
  const size_t last_nonzero = digits.find_last_not_of('0');
  scale += static_cast<int64_t>(digits.size() - 1 - last_nonzero);
  digits.resize(last_nonzero + 1);

  // Integer part of the milli value, and whether a non-zero fraction is left (round up).
  const int64_t integer_digits = static_cast<int64_t>(digits.size()) + scale;
  if (integer_digits > static_cast<int64_t>(kInt64DigitsMax)) {
    return fail("out of range: beyond int64 milli-units (about 9.2e15 units)");
  }
  uint64_t magnitude = 0;
  bool round_up = false;
  if (scale >= 0) {
    magnitude = DigitsToU64(digits + std::string(static_cast<size_t>(scale), '0'));
  } else {
    if (integer_digits > 0) {
      magnitude =
          DigitsToU64(std::string_view(digits).substr(0, static_cast<size_t>(integer_digits)));
    }
    round_up = true;  // the last kept digit is non-zero, so the fraction is non-zero
  }
  const uint64_t limit = negative ? kInt64MaxMagnitude + 1 : kInt64MaxMagnitude;
  if (magnitude > limit || (round_up && magnitude == limit)) {
    return fail("out of range: beyond int64 milli-units (about 9.2e15 units)");
  }
  if (round_up) ++magnitude;
  // Two's complement: negating 2^63 as unsigned gives INT64_MIN.
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

std::string FormatQuantityMilli(int64_t milli, std::string_view resource) {
  const uint64_t magnitude =
      milli < 0 ? 0 - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  const std::string sign = milli < 0 ? "-" : "";
  if (magnitude % 1000 != 0) return sign + std::to_string(magnitude) + "m";
  const uint64_t units = magnitude / 1000;
  if (units != 0 && IsByteResource(resource)) {
    for (size_t s = kSuffixes.size(); s-- > 0;) {
      const Suffix& suffix = kSuffixes[s];
      if (suffix.binary_shift == 0) break;
      const uint64_t unit = uint64_t{1} << suffix.binary_shift;
      if (units % unit == 0) return sign + std::to_string(units / unit) + std::string(suffix.text);
    }
  }
  return sign + std::to_string(units);
}

Result<int64_t> ParseRetentionNs(std::string_view text) {
  if (text == "never") return int64_t{-1};
  auto d = ParseDurationNs(text);
  if (!d.ok()) {
    return Status(Code::kInvalidArgument, d.status().message() + ", or never");
  }
  return d;
}

Result<int64_t> ParseDurationNs(std::string_view text) {
  auto fail = [&](const std::string& why) -> Status {
    return Status(Code::kInvalidArgument, "'" + std::string(text) + "' is not a duration: " + why +
                                              " (expected e.g. 30s, 10m, 1h30m, 500ms)");
  };
  if (text.empty()) return fail("empty");
  if (text.size() > kDurationTextBytesMax) {
    return fail("longer than " + std::to_string(kDurationTextBytesMax) + " characters");
  }
  if (text[0] == '-') return fail("negative");
  size_t i = text[0] == '+' ? 1 : 0;
  if (text.substr(i) == "0") return int64_t{0};  // Go allows a bare zero

  struct Unit {
    std::string_view name;
    uint64_t ns;
  };
  static constexpr std::array<Unit, 7> kUnits{{{"ns", 1},
                                               {"us", 1'000},
                                               {"\xC2\xB5s", 1'000},  // µs
                                               {"ms", 1'000'000},
                                               {"s", 1'000'000'000},
                                               {"m", 60'000'000'000},
                                               {"h", 3'600'000'000'000}}};
  constexpr unsigned __int128 kMax = kInt64MaxMagnitude;
  // Fractional digits beyond nanosecond precision of the smallest useful unit.
  constexpr size_t kFractionDigitsMax = 18;

  unsigned __int128 total = 0;
  if (i == text.size()) return fail("no number");
  while (i < text.size()) {
    const size_t int_begin = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    const std::string_view int_digits = text.substr(int_begin, i - int_begin);
    std::string_view frac_digits;
    if (i < text.size() && text[i] == '.') {
      const size_t frac_begin = ++i;
      while (i < text.size() && IsDigit(text[i])) ++i;
      frac_digits = text.substr(frac_begin, i - frac_begin);
    }
    if (int_digits.empty() && frac_digits.empty()) {
      return fail("expected a number at character " + std::to_string(int_begin + 1));
    }
    const size_t unit_begin = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    const std::string_view unit_text = text.substr(unit_begin, i - unit_begin);
    if (unit_text.empty()) return fail("missing unit after the number");
    uint64_t unit_ns = 0;
    for (const Unit& u : kUnits) {
      if (u.name == unit_text) unit_ns = u.ns;
    }
    if (unit_ns == 0) return fail("unknown unit '" + std::string(unit_text) + "'");

    unsigned __int128 whole = 0;
    for (char c : int_digits) {
      whole = whole * 10 + static_cast<unsigned>(c - '0');
      if (whole > kMax) return fail("out of range: beyond int64 nanoseconds");
    }
    total += whole * unit_ns;
    if (frac_digits.size() > kFractionDigitsMax) return fail("too many fractional digits");
    unsigned __int128 numerator = 0;
    unsigned __int128 denominator = 1;
    for (char c : frac_digits) {
      numerator = numerator * 10 + static_cast<unsigned>(c - '0');
      denominator *= 10;
    }
    numerator *= unit_ns;
    if (numerator % denominator != 0) return fail("not a whole number of nanoseconds");
    total += numerator / denominator;
    if (total > kMax) return fail("out of range: beyond int64 nanoseconds");
  }
  return static_cast<int64_t>(total);
}

}  // namespace admission::schema
