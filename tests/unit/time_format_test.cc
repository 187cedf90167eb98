#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "schema/time_format.h"

namespace admission::ops {
namespace {

TEST(Rfc3339, ParsesUtcFractionsAndOffsets) {
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseRfc3339("2026-11-29T10:00:00Z"), 1795946400LL * 1'000'000'000);
  EXPECT_EQ(*ParseRfc3339("2026-11-29T10:00:00.5Z"), 1795946400LL * 1'000'000'000 + 500'000'000);
  EXPECT_EQ(*ParseRfc3339("2026-11-29T11:30:00+01:30"), 1795946400LL * 1'000'000'000);
  EXPECT_EQ(*ParseRfc3339("2024-02-29T00:00:00Z"), 1709164800LL * 1'000'000'000);
}

TEST(Rfc3339, RefusesMalformedTimesSayingWhere) {
  for (const char* bad : {"2026-11-29", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
                          "2026-11-29T24:00:00Z", "2026-11-29T10:00:00", "yesterday",
                          "2026-11-29T10:00:00.Z", "2026-11-29T10:00:00Zjunk"}) {
    auto r = ParseRfc3339(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("character"), std::string::npos) << bad;
  }
}

RC_GTEST_PROP(Rfc3339, FormatThenParseIsIdentity, ()) {
  const int64_t ns = *rc::gen::inRange<int64_t>(0, 8'000'000'000LL * 1'000'000'000);
  auto parsed = ParseRfc3339(FormatRfc3339(ns));
  RC_ASSERT(parsed.ok());
  RC_ASSERT(*parsed == ns);
}

}  // namespace
}  // namespace admission::ops
