// Helpers of the decider's translation units (projections/engine_internal.h).

#include <string>

#include <capnp/blob.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "projections/engine_internal.h"

namespace admission::projections {
namespace {

// The decider reads input texts through View; it must read them exactly as cStr() into a
// std::string did before, embedded NULs included, or old decisions would stop replaying.
RC_GTEST_PROP(EngineInternal, ViewReadsATextAsCStrDid, (const std::string& bytes)) {
  std::string stored = bytes;  // capnp keeps a NUL after the text's bytes
  stored.push_back('\0');
  capnp::Text::Reader text(stored.data(), bytes.size());
  RC_ASSERT(std::string(View(text)) == std::string(text.cStr()));
}

TEST(EngineInternal, ViewCutsAtAnEmbeddedNul) {
  const std::string stored("uid/1\0extra\0", 12);
  capnp::Text::Reader text(stored.data(), 11);
  EXPECT_EQ(View(text), "uid/1");
}

TEST(EngineInternal, CatJoinsInOrder) {
  EXPECT_EQ(Cat({"a", std::string("bc"), std::string_view(""), "d"}), "abcd");
  EXPECT_EQ(Cat({}), "");
}

}  // namespace
}  // namespace admission::projections
