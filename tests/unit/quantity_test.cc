#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <limits>
#include <string>

#include "schema/quantity.h"

namespace admission::schema {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

TEST(ParseQuantityMilli, ParsesKubernetesSyntaxExactly) {
  struct Case {
    const char* text;
    int64_t milli;
  };
  const Case cases[] = {
      {"0", 0},
      {"1", 1000},
      {"9", 9000},
      {"1.5", 1500},
      {"0.5", 500},
      {".5", 500},
      {"5.", 5000},
      {"+2", 2000},
      {"-2", -2000},
      {"100m", 100},
      {"1500m", 1500},
      {"2k", 2'000'000},
      {"3M", 3'000'000'000},
      {"1G", 1'000'000'000'000},
      {"1T", 1'000'000'000'000'000},
      {"1P", 1'000'000'000'000'000'000},
      {"1Ki", 1'024'000},
      {"200Mi", 200 * (int64_t{1} << 20) * 1000},
      {"36Gi", 36 * kGi * 1000},
      {"1.5Gi", 3 * (kGi / 2) * 1000},
      {"1Ti", (int64_t{1} << 40) * 1000},
      {"1e3", 1'000'000},
      {"1E3", 1'000'000},
      {"1.5e3", 1'500'000},
      {"15e-1", 1500},
      {"1e-3", 1},
      {"1000n", 1},     // 1u = 0.001m, rounded up to 1m
      {"1000000n", 1},  // 1m exactly
      {"5u", 1},        // 0.005m rounds up to 1m
      {"2000u", 2},
      {"0.0001", 1},    // 0.1m rounds up, as Kubernetes' MilliValue does
      {"-0.0001", -1},  // rounds away from zero: Parse(-x) == -Parse(x)
      {"0.001", 1},
      {"0.0000", 0},
      {"-0", 0},
      {"007", 7000},
      {"9223372036854775.807", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775.808", std::numeric_limits<int64_t>::min()},
  };
  for (const Case& c : cases) {
    Result<int64_t> got = ParseQuantityMilli(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.milli) << c.text;
  }
  EXPECT_EQ(*ParseQuantityMilli("1000000n"), 1);
  EXPECT_EQ(*ParseQuantityMilli("1000001n"), 2);
  EXPECT_EQ(*ParseQuantityMilli("9E-3"), 9);  // 'E-3' is an exponent, not exa
  EXPECT_EQ(*ParseQuantityMilli("0.001E"), 1'000'000'000'000'000'000);
}

TEST(ParseQuantityMilli, RefusesGarbageSayingWhy) {
  struct Case {
    const char* text;
    const char* reason;
  };
  const Case cases[] = {
      {"", "empty"},
      {"abc", "expected a number"},
      {"Gi", "expected a number"},
      {".", "expected a number"},
      {"-", "expected a number"},
      {"9Qi", "unknown suffix 'Qi'"},
      {"1 Gi", "unknown suffix ' Gi'"},
      {" 1", "expected a number"},
      {"1.2.3", "unknown suffix '.3'"},
      {"1e", "has no digits"},
      {"1e+", "has no digits"},
      {"1ex", "unknown suffix 'ex'"},
      {"1gi", "unknown suffix 'gi'"},
      {"1E", "out of range"},  // 10^18 units is 10^21 milli-units
      {"16Ei", "out of range"},
      {"9223372036854776", "out of range"},
      {"9223372036854775.8071", "out of range"},  // rounds up past the maximum
      {"-9223372036854775.809", "out of range"},
      {"1e400", "out of range"},
      {"1e99999999999999999999", "out of range"},
  };
  for (const Case& c : cases) {
    Result<int64_t> got = ParseQuantityMilli(c.text);
    ASSERT_FALSE(got.ok()) << c.text;
    EXPECT_EQ(got.status().code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(got.status().message().find(c.reason), std::string::npos)
        << c.text << ": " << got.status().message();
    EXPECT_NE(got.status().message().find("is not a quantity"), std::string::npos) << c.text;
  }
  EXPECT_FALSE(ParseQuantityMilli(std::string(kQuantityTextBytesMax + 1, '1')).ok());
}

TEST(ParseQuantityMilli, TinyExponentsRoundUpToOneMilli) {
  EXPECT_EQ(*ParseQuantityMilli("1e-400"), 1);
  EXPECT_EQ(*ParseQuantityMilli("-1e-99999999999999"), -1);
  EXPECT_EQ(*ParseQuantityMilli("0e400"), 0);
}

TEST(FormatQuantityMilli, GivesCanonicalKubernetesForms) {
  EXPECT_EQ(FormatQuantityMilli(1500, "cpu"), "1500m");
  EXPECT_EQ(FormatQuantityMilli(2000, "cpu"), "2");
  EXPECT_EQ(FormatQuantityMilli(0, "cpu"), "0");
  EXPECT_EQ(FormatQuantityMilli(0, "memory"), "0");
  EXPECT_EQ(FormatQuantityMilli(-500, "cpu"), "-500m");
  EXPECT_EQ(FormatQuantityMilli(36 * kGi * 1000, "memory"), "36Gi");
  EXPECT_EQ(FormatQuantityMilli(200 * (int64_t{1} << 20) * 1000, "memory"), "200Mi");
  EXPECT_EQ(FormatQuantityMilli(1'024'000, "ephemeral-storage"), "1Ki");
  EXPECT_EQ(FormatQuantityMilli(1'000'000, "memory"), "1000");            // not a binary multiple
  EXPECT_EQ(FormatQuantityMilli(36 * kGi * 1000, "cpu"), "38654705664");  // not bytes
  EXPECT_EQ(FormatQuantityMilli(2 * kGi * 1000, "hugepages-2Mi"), "2Gi");
  EXPECT_EQ(FormatQuantityMilli(-(int64_t{1} << 20) * 1000, "memory"), "-1Mi");
  EXPECT_EQ(FormatQuantityMilli(std::numeric_limits<int64_t>::min(), "cpu"),
            "-9223372036854775808m");
}

RC_GTEST_PROP(FormatQuantityMilli, FormatThenParseIsIdentity, (int64_t milli)) {
  for (const char* resource : {"cpu", "memory", "nvidia.com/gpu"}) {
    const std::string text = FormatQuantityMilli(milli, resource);
    Result<int64_t> parsed = ParseQuantityMilli(text);
    RC_ASSERT(parsed.ok());
    RC_ASSERT(*parsed == milli);
  }
}

RC_GTEST_PROP(FormatQuantityMilli, WholeBinaryMultiplesRoundTrip, ()) {
  const int shift = *rc::gen::element(10, 20, 30, 40);
  // 8000 x 2^40 x 1000 still fits int64 milli-units.
  const int64_t units = *rc::gen::inRange<int64_t>(-8000, 8000);
  const int64_t milli = units * (int64_t{1} << shift) * 1000;
  const std::string text = FormatQuantityMilli(milli, "memory");
  RC_ASSERT(units == 0 || text.back() == 'i');
  RC_ASSERT(*ParseQuantityMilli(text) == milli);
}

RC_GTEST_PROP(ParseQuantityMilli, NegationIsSymmetric, ()) {
  const int64_t whole = *rc::gen::inRange<int64_t>(0, 1'000'000'000);
  const int64_t frac = *rc::gen::inRange<int64_t>(0, 1'000'000);
  const std::string text = std::to_string(whole) + "." + std::to_string(frac);
  RC_ASSERT(*ParseQuantityMilli("-" + text) == -*ParseQuantityMilli(text));
}

TEST(ParseDurationNs, ParsesGoDurations) {
  constexpr int64_t kSecond = 1'000'000'000;
  EXPECT_EQ(*ParseDurationNs("0"), 0);
  EXPECT_EQ(*ParseDurationNs("30s"), 30 * kSecond);
  EXPECT_EQ(*ParseDurationNs("10m"), 600 * kSecond);
  EXPECT_EQ(*ParseDurationNs("1h30m"), 5400 * kSecond);
  EXPECT_EQ(*ParseDurationNs("1.5h"), 5400 * kSecond);
  EXPECT_EQ(*ParseDurationNs("500ms"), kSecond / 2);
  EXPECT_EQ(*ParseDurationNs("1h2m3s4ms"), 3723 * kSecond + 4'000'000);
  EXPECT_EQ(*ParseDurationNs("+5s"), 5 * kSecond);
  EXPECT_EQ(*ParseDurationNs(".5s"), kSecond / 2);
  EXPECT_EQ(*ParseDurationNs("1.000000001s"), kSecond + 1);
}

TEST(ParseDurationNs, RefusesWhatItCannotRepresent) {
  for (const char* bad : {"", "10", "-5s", "5d", "1h30", "s", "1.5.5s", "abc", "1e3s",
                          "0.0000000001s", "9999999999999h", "3000000h"}) {
    Result<int64_t> got = ParseDurationNs(bad);
    EXPECT_FALSE(got.ok()) << bad;
    EXPECT_NE(got.status().message().find("is not a duration"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace admission::schema
