// Admission checks' podSetUpdates (projections/pod_set_updates.h): Kueue's merge and conflict
// rules (pkg/podset/podset.go, PodSetInfo.Merge) and intake's validation (Kueue's workload
// webhook, validatePodSetUpdates).

#include <optional>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "projections/pod_set_updates.h"

namespace admission::projections {
namespace {

PodSetUpdate Update(Labels labels, Labels annotations = {}, Labels node_selector = {},
                    std::vector<Toleration> tolerations = {}) {
  return PodSetUpdate{"main", std::move(labels), std::move(annotations), std::move(node_selector),
                      std::move(tolerations)};
}

TEST(MergePodSetUpdate, AddsKeysAndKeepsEqualValues) {
  PodSetUpdate into = Update({{"a", "1"}}, {}, {{"zone", "z1"}});
  EXPECT_EQ(MergePodSetUpdate(Update({{"a", "1"}, {"b", "2"}}, {{"note", "x"}}, {{"zone", "z1"}}),
                              &into),
            std::nullopt);
  EXPECT_EQ(into.labels, (Labels{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(into.annotations, (Labels{{"note", "x"}}));
  EXPECT_EQ(into.node_selector, (Labels{{"zone", "z1"}}));
}

TEST(MergePodSetUpdate, AnotherValueForAKeyIsAConflictInKueuesWordsAndMergesNothing) {
  PodSetUpdate into = Update({{"a", "1"}, {"b", "2"}});
  const PodSetUpdate before = into;
  auto conflict = MergePodSetUpdate(Update({{"b", "3"}, {"c", "4"}}), &into);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(*conflict,
            "invalid admission check PodSetUpdate: conflict for labels: conflict for key=b, "
            "value1=2, value2=3");
  EXPECT_EQ(into, before);
}

TEST(MergePodSetUpdate, ChecksAnnotationsThenLabelsThenNodeSelectorAsKueue) {
  PodSetUpdate into = Update({{"l", "1"}}, {{"an", "1"}}, {{"ns", "1"}});
  auto conflict =
      MergePodSetUpdate(Update({{"l", "2"}}, {{"an", "2"}}, {{"ns", "2"}}), &into);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_NE(conflict->find("conflict for annotations: conflict for key=an"), std::string::npos)
      << *conflict;
  PodSetUpdate selector_only = Update({}, {}, {{"ns", "1"}});
  conflict = MergePodSetUpdate(Update({}, {}, {{"ns", "2"}}), &selector_only);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_NE(conflict->find("conflict for nodeSelector: conflict for key=ns, value1=1, value2=2"),
            std::string::npos)
      << *conflict;
}

TEST(MergePodSetUpdate, AddsATolerationOnceWithAnEmptyOperatorBeingEqual) {
  PodSetUpdate into = Update({}, {}, {}, {Toleration{"k", "", "v", "NoSchedule"}});
  EXPECT_EQ(MergePodSetUpdate(Update({}, {}, {},
                                     {Toleration{"k", "Equal", "v", "NoSchedule"},
                                      Toleration{"k", "Equal", "v", "NoExecute"},
                                      Toleration{"other", "Exists", "", ""}}),
                              &into),
            std::nullopt);
  ASSERT_EQ(into.tolerations.size(), 3u);
  EXPECT_EQ(into.tolerations[1].effect, "NoExecute");
  EXPECT_EQ(into.tolerations[2].key, "other");
}

// Merging is additive: whatever merged cleanly holds every key of both, with the values of both.
RC_GTEST_PROP(MergePodSetUpdate, AMergeWithoutConflictHoldsBothSides,
              (const std::map<std::string, std::string>& a,
               const std::map<std::string, std::string>& b)) {
  PodSetUpdate into = Update(a);
  if (MergePodSetUpdate(Update(b), &into).has_value()) {
    bool some_key_differs = false;
    for (const auto& [k, v] : b) some_key_differs |= a.count(k) != 0 && a.at(k) != v;
    RC_ASSERT(some_key_differs);
    RC_ASSERT(into.labels == a);
    return;
  }
  for (const auto& [k, v] : a) RC_ASSERT(into.labels.at(k) == v);
  for (const auto& [k, v] : b) RC_ASSERT(into.labels.at(k) == v);
}

// Builds a report's podSetUpdates list with one update for `pod_set`.
class OneUpdate {
 public:
  explicit OneUpdate(const std::string& pod_set) {
    list_ = message_.initRoot<schema::CheckStateReported>().initPodSetUpdates(1);
    list_[0].setPodSet(pod_set);
  }
  schema::PodSetUpdate::Builder update() { return list_[0]; }
  std::optional<std::string> Invalid() {
    std::vector<PodSetSpec> pod_sets(2);
    pod_sets[0].name = "launcher";
    pod_sets[1].name = "workers";
    return InvalidPodSetUpdates(list_.asReader(), pod_sets);
  }

 private:
  capnp::MallocMessageBuilder message_;
  capnp::List<schema::PodSetUpdate>::Builder list_;
};

TEST(InvalidPodSetUpdates, AcceptsValidUpdates) {
  OneUpdate u("workers");
  auto labels = u.update().initLabels(1);
  labels[0].setKey("example.com/pool");
  labels[0].setValue("a-1");
  auto tolerations = u.update().initTolerations(2);
  tolerations[0].setKey("reserved");
  tolerations[0].setValue("pool-a");
  tolerations[0].setEffect("NoSchedule");
  tolerations[1].setOperator("Exists");
  EXPECT_EQ(u.Invalid(), std::nullopt);
}

TEST(InvalidPodSetUpdates, RefusesAnUnknownPodSetNamingTheKnownOnes) {
  OneUpdate u("worker");
  EXPECT_EQ(u.Invalid(), "podSetUpdates[0].podSet: \"worker\" is not a podSet of the workload "
                         "(its podSets: launcher, workers)");
}

TEST(InvalidPodSetUpdates, RefusesInvalidKeysAndValues) {
  {
    OneUpdate u("workers");
    auto l = u.update().initLabels(1);
    l[0].setKey("@abc");
    EXPECT_NE(u.Invalid().value_or("").find("podSetUpdates[0].labels[\"@abc\"]"), std::string::npos);
  }
  {
    OneUpdate u("workers");
    auto l = u.update().initNodeSelector(1);
    l[0].setKey("pool");
    l[0].setValue(std::string(64, 'a'));
    EXPECT_NE(u.Invalid().value_or("").find("is not a valid label value"), std::string::npos);
  }
  {
    // Annotation values are free text; their keys are checked.
    OneUpdate u("workers");
    auto l = u.update().initAnnotations(2);
    l[0].setKey("note");
    l[0].setValue("any text: at all");
    l[1].setKey("Bad Key");
    EXPECT_NE(u.Invalid().value_or("").find("podSetUpdates[0].annotations[\"Bad Key\"]"),
              std::string::npos);
  }
  {
    OneUpdate u("workers");
    auto l = u.update().initLabels(2);
    l[0].setKey("a");
    l[1].setKey("a");
    EXPECT_NE(u.Invalid().value_or("").find("the key appears twice"), std::string::npos);
  }
}

TEST(InvalidPodSetUpdates, RefusesInvalidTolerations) {
  auto invalid = [](auto fill) {
    OneUpdate u("workers");
    fill(u.update().initTolerations(1)[0]);
    return u.Invalid().value_or("");
  };
  EXPECT_NE(invalid([](auto t) { t.setKey("k"); t.setOperator("In"); }).find(".operator: \"In\" is not supported"),
            std::string::npos);
  EXPECT_NE(invalid([](auto t) { t.setValue("v"); }).find("must be Exists when the key is empty"),
            std::string::npos);
  EXPECT_NE(invalid([](auto t) { t.setKey("k"); t.setEffect("Never"); }).find(".effect: \"Never\""),
            std::string::npos);
  OneUpdate many("workers");
  auto ts = many.update().initTolerations(kPodSetUpdateTolerationsMax + 1);
  for (auto t : ts) t.setOperator("Exists");
  EXPECT_NE(many.Invalid().value_or("").find("at most 8"), std::string::npos);
}

}  // namespace
}  // namespace admission::projections
