// projections::ConditionSet against the map keyed by type name it replaced: the same members,
// in the same order, whatever the sequence of updates.

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "projections/conditions.h"

namespace admission::projections {
namespace {

TEST(ConditionSet, NamesParseBackAndAreInOrder) {
  for (int i = 0; i < kConditionTypes; ++i) {
    const auto type = static_cast<ConditionType>(i);
    ASSERT_EQ(ParseConditionType(ConditionTypeName(type)), type);
    if (i > 0) {
      EXPECT_LT(ConditionTypeName(static_cast<ConditionType>(i - 1)), ConditionTypeName(type));
    }
  }
  EXPECT_EQ(ParseConditionType("PodsReady"), std::nullopt);
  EXPECT_EQ(ParseConditionType(""), std::nullopt);
}

TEST(ConditionSet, EmptyAndUnknownNames) {
  ConditionSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.begin(), set.end());
  EXPECT_EQ(set.Find(ConditionType::kAdmitted), nullptr);
  EXPECT_EQ(set.Find(std::string_view("NoSuchType")), nullptr);
  bool added = false;
  set.Upsert(ConditionType::kRequeued, &added).reason = "r";
  EXPECT_TRUE(added);
  set.Upsert(ConditionType::kRequeued, &added);
  EXPECT_FALSE(added);
  EXPECT_EQ(set.Find(std::string_view("Requeued"))->reason, "r");
  EXPECT_EQ(set.size(), 1u);
}

RC_GTEST_PROP(ConditionSet, BehavesAsTheMapByTypeName, (const std::vector<int>& types)) {
  ConditionSet set;
  std::map<std::string, Condition> model;
  int64_t now = 0;
  for (int raw : types) {
    const auto type = static_cast<ConditionType>(((raw % kConditionTypes) + kConditionTypes) %
                                                 kConditionTypes);
    const bool status = (raw / kConditionTypes) % 2 == 0;
    const std::string reason = "reason-" + std::to_string(raw);
    ++now;
    bool added = false;
    Condition& c = set.Upsert(type, &added);
    auto [it, inserted] = model.try_emplace(std::string(ConditionTypeName(type)));
    RC_ASSERT(added == inserted);
    Condition& m = it->second;
    if (inserted) m.type = type;
    // As Engine::SetCondition does: the transition time moves when the status changes.
    if (added || c.status != status) c.last_transition_ns = now;
    if (inserted || m.status != status) m.last_transition_ns = now;
    c.status = m.status = status;
    c.reason = m.reason = reason;
  }
  RC_ASSERT(set.size() == model.size());
  auto it = model.begin();
  for (const Condition& c : set) {
    RC_ASSERT(it != model.end());
    RC_ASSERT(std::string(c.type_name()) == it->first);
    RC_ASSERT(c.type == it->second.type);
    RC_ASSERT(c.status == it->second.status);
    RC_ASSERT(c.reason == it->second.reason);
    RC_ASSERT(c.last_transition_ns == it->second.last_transition_ns);
    RC_ASSERT(set.Find(it->first) == &c);
    ++it;
  }
  RC_ASSERT(it == model.end());
}

}  // namespace
}  // namespace admission::projections
