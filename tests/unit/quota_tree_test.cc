// QuotaTree::BorrowingHeight: Kueue's FindHeightOfLowestSubtreeThatFits on trees built from
// definitions (engine v8 orders a cycle's entries by it).

#include <gtest/gtest.h>

#include "projections/quota_tree.h"

namespace admission::projections {
namespace {

constexpr int kFlavor = 0;
constexpr int kCpu = 0;
const Fr kFr = MakeFr(kFlavor, kCpu);

std::vector<ResourceGroup> Cpu(int64_t nominal_milli, std::optional<int64_t> lending = {}) {
  ResourceQuota q;
  q.nominal = nominal_milli;
  q.lending_limit = lending;
  FlavorQuotas f;
  f.flavor = kFlavor;
  f.resources[kCpu] = q;
  return {ResourceGroup{{kCpu}, {f}}};
}

// root
// ├── org (4 cpu)
// │   ├── team (2 cpu)
// │   │   └── cq a (1 cpu)
// │   └── cq b (0 cpu)
// └── cq c (0 cpu)
// cq alone (no cohort)
class BorrowingHeightTest : public ::testing::Test {
 protected:
  void Build(const std::map<std::string, FrQuantities>& usage = {}) {
    std::map<std::string, CohortSpec> cohorts;
    cohorts["root"] = CohortSpec{"root", "", {}};
    cohorts["org"] = CohortSpec{"org", "root", Cpu(4000)};
    cohorts["team"] = CohortSpec{"team", "org", Cpu(2000)};
    std::map<std::string, ClusterQueueSpec> cqs;
    auto cq = [&](const std::string& name, const std::string& cohort, int64_t nominal) {
      ClusterQueueSpec s;
      s.name = name;
      s.cohort = cohort;
      s.resource_groups = Cpu(nominal);
      cqs[name] = s;
    };
    cq("a", "team", 1000);
    cq("b", "org", 0);
    cq("c", "root", 0);
    cq("alone", "", 1000);
    tree_.Rebuild(cqs, cohorts, usage);
  }
  int Height(const std::string& cq, int64_t val) const {
    return tree_.BorrowingHeight(tree_.FindClusterQueue(cq), kFr, val);
  }
  QuotaTree tree_;
};

TEST_F(BorrowingHeightTest, IsZeroWithinNominalQuotaOrWithoutCohort) {
  Build();
  EXPECT_EQ(Height("a", 1000), 0);
  EXPECT_EQ(Height("alone", 5000), 0);  // no cohort: never borrowing
}

TEST_F(BorrowingHeightTest, IsTheHeightOfTheLowestCohortWhoseSubtreeHoldsTheRequest) {
  Build();
  // team holds 1 (a) + 2 = 3: a cohort of ClusterQueues only has height 1.
  EXPECT_EQ(Height("a", 3000), 1);
  // org holds 3 + 4 = 7, with team below it: height 2.
  EXPECT_EQ(Height("a", 7000), 2);
  EXPECT_EQ(Height("b", 4000), 2);
  // root holds what org holds, with org and team below it: height 3, also when nothing holds it.
  EXPECT_EQ(Height("c", 1000), 3);
  EXPECT_EQ(Height("a", 100000), 3);
}

TEST_F(BorrowingHeightTest, CountsUsageAlreadyTakenInEachSubtree) {
  // b uses 3 of org's 7 (above its own 0). team's subtree still holds 3 for a; org has 4
  // left, so 4 for a come from org; 5 fit nowhere below the root, which has no more: the
  // root's height.
  Build({{"b", {{kFr, 3000}}}});
  EXPECT_EQ(Height("a", 3000), 1);
  EXPECT_EQ(Height("a", 4000), 2);
  EXPECT_EQ(Height("a", 5000), 3);
}

TEST_F(BorrowingHeightTest, WhatAClusterQueueKeepsFromLendingCountsFirst) {
  // With lendingLimit 0, a's own 1 cpu is not in team's subtree; a request of 2 takes that 1
  // and 1 of team's 2 (Kueue subtracts LocalAvailable before walking up).
  std::map<std::string, CohortSpec> cohorts;
  cohorts["team"] = CohortSpec{"team", "", Cpu(2000)};
  std::map<std::string, ClusterQueueSpec> cqs;
  ClusterQueueSpec a;
  a.name = "a";
  a.cohort = "team";
  a.resource_groups = Cpu(1000, 0);
  cqs["a"] = a;
  tree_.Rebuild(cqs, cohorts, {});
  EXPECT_EQ(tree_.Nominal(tree_.FindCohort("team"), kFr), 2000);
  EXPECT_EQ(Height("a", 3000), 1);
  EXPECT_EQ(Height("a", 4000), 1);  // held nowhere: the root's height, team is the root
}

}  // namespace
}  // namespace admission::projections
