#include "schema/time_format.h"

#include <cstdio>

namespace admission {

namespace {

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp + (mp < 10 ? 3 : -9);
  *y = yoe + era * 400 + (*m <= 2);
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

}  // namespace

Result<int64_t> ParseRfc3339(std::string_view text) {
  auto fail = [&](size_t pos, const std::string& why) -> Status {
    return Status(Code::kInvalidArgument, "time '" + std::string(text) + "' at character " +
                                              std::to_string(pos + 1) + ": " + why +
                                              " (expected RFC 3339, e.g. 2026-11-29T10:00:00Z)");
  };
  size_t pos = 0;
  auto digits = [&](int n, int64_t* out) -> bool {
    int64_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9') return false;
      v = v * 10 + (text[pos++] - '0');
    }
    *out = v;
    return true;
  };
  auto expect = [&](char c) -> bool {
    if (pos < text.size() && (text[pos] == c || (c == 'T' && text[pos] == 't'))) {
      ++pos;
      return true;
    }
    return false;
  };
  int64_t year, month, day, hour, minute, second;
  if (!digits(4, &year)) return fail(pos, "a 4-digit year");
  if (!expect('-')) return fail(pos, "'-'");
  if (!digits(2, &month) || month < 1 || month > 12) return fail(pos, "a month 01-12");
  if (!expect('-')) return fail(pos, "'-'");
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int64_t days_max = kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
  if (!digits(2, &day) || day < 1 || day > days_max) return fail(pos, "a valid day of month");
  if (!expect('T')) return fail(pos, "'T'");
  if (!digits(2, &hour) || hour > 23) return fail(pos, "an hour 00-23");
  if (!expect(':')) return fail(pos, "':'");
  if (!digits(2, &minute) || minute > 59) return fail(pos, "a minute 00-59");
  if (!expect(':')) return fail(pos, "':'");
  if (!digits(2, &second) || second > 59) return fail(pos, "a second 00-59");
  int64_t fraction_ns = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int n = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (n == 9) return fail(pos, "at most 9 fractional digits");
      fraction_ns = fraction_ns * 10 + (text[pos++] - '0');
      ++n;
    }
    if (n == 0) return fail(pos, "a digit after '.'");
    for (; n < 9; ++n) fraction_ns *= 10;
  }
  int64_t offset_s = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos++] == '-' ? -1 : 1;
    int64_t oh, om;
    if (!digits(2, &oh) || oh > 23) return fail(pos, "an offset hour");
    if (!expect(':')) return fail(pos, "':' in the offset");
    if (!digits(2, &om) || om > 59) return fail(pos, "an offset minute");
    offset_s = sign * (oh * 3600 + om * 60);
  } else {
    return fail(pos, "'Z' or an offset");
  }
  if (pos != text.size()) return fail(pos, "end of text");
  int64_t seconds = DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 +
                    second - offset_s;
  constexpr int64_t kSecondsMax = 9'000'000'000;  // ~2255 fits in int64 nanoseconds
  if (seconds < 0 || seconds > kSecondsMax) return fail(0, "outside 1970..2255");
  return seconds * 1'000'000'000 + fraction_ns;
}

std::string FormatRfc3339Seconds(int64_t ns) {
  int64_t fraction = ns % 1'000'000'000;
  if (fraction < 0) fraction += 1'000'000'000;
  return FormatRfc3339(ns - fraction);
}

std::string FormatRfc3339(int64_t ns) {
  int64_t seconds = ns / 1'000'000'000;
  int64_t fraction = ns % 1'000'000'000;
  if (fraction < 0) {
    fraction += 1'000'000'000;
    --seconds;
  }
  int64_t days = seconds / 86400;
  int64_t rem = seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  int64_t y, m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld",
                        static_cast<long long>(y), static_cast<long long>(m),
                        static_cast<long long>(d), static_cast<long long>(rem / 3600),
                        static_cast<long long>(rem / 60 % 60),
                        static_cast<long long>(rem % 60));
  std::string out(buf, n);
  if (fraction != 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%09lld", static_cast<long long>(fraction));
    std::string f(frac);
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "Z";
}

}  // namespace admission
