// The simulator in CI: many seeds pass every invariant, the same seed gives the same trace, and
// the checker catches a pods-released report with a forged token appended behind the service's
// back (the test can fail).
//
// Found by the simulator (docs/faults.md, "Found by the simulator"): in seeds 30, 65 and 196
// (of the 300) engine v5's admission cycles never reached a fixpoint and its assertion aborted
// the decider; engine v6 fixed it, and these seeds are now ordinary ones. The same rotation is
// pinned down as tests/scenarios/24-preemption-ring.yaml.

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "ops/sim/simulator.h"

namespace admission::sim {
namespace {

// CI runs at least 300 seeds (SIM_SEEDS overrides; `simulate --seeds 10000` is the long run).
constexpr uint64_t kSeedsDefault = 300;
uint64_t Seeds() {
  const char* text = std::getenv("SIM_SEEDS");
  if (text == nullptr || *text == '\0') return kSeedsDefault;
  return std::strtoull(text, nullptr, 10);
}

TEST(Simulation, EverySeedKeepsEveryInvariant) {
  const uint64_t seeds = Seeds();
  std::map<std::string, uint64_t> totals;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimOptions options;
    options.seed = seed;
    const SimReport report = Simulate(options);
    ASSERT_TRUE(report.passed) << "seed " << seed << ": " << report.failure
                               << "\nrepeat: " << ReplayCommand(options);
    for (const auto& [name, count] : report.counts) totals[name] += count;
  }
  for (const auto& [name, count] : totals) std::printf("%s: %llu\n", name.c_str(),
                                                       static_cast<unsigned long long>(count));
  // Not vacuous: the faults happened and the platform still admitted work.
  for (const char* what : {"admitted", "evicted", "preempted", "revocations", "restarts",
                           "node-failures", "quota-reclaims", "controller-outages",
                           "late-reports-refused", "pod-reports-refused", "foreign-reports",
                           "starvation-alerts", "drain-deadlines-passed", "deactivated"}) {
    EXPECT_GT(totals[what], 0u) << what << " never happened in " << seeds << " seeds";
  }
}

TEST(Simulation, TheSameSeedGivesTheSameTrace) {
  for (uint64_t seed : {7u, 4242u}) {
    SimOptions options;
    options.seed = seed;
    const SimReport a = Simulate(options);
    const SimReport b = Simulate(options);
    ASSERT_TRUE(a.passed) << a.failure;
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.counts, b.counts);
    options.seed = seed + 1;
    EXPECT_NE(Simulate(options).trace_hash, a.trace_hash);
  }
}

// The drills (admitctl drill NAME) on a few seeds each: every invariant holds, and the fault
// took effect (evidence), else the drill fails by itself.
TEST(Drill, EachDrillPassesWithEvidenceOfItsFault) {
  for (Drill drill : {Drill::kControllerOutage, Drill::kDuplicateCallbacks, Drill::kQuotaReclaim,
                      Drill::kNodeFailure}) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      SimOptions options;
      options.seed = seed;
      options.steps = 300;
      options.drill = drill;
      const SimReport report = Simulate(options);
      ASSERT_TRUE(report.passed) << DrillName(drill) << " seed " << seed << ": "
                                 << report.failure << "\nrepeat: " << ReplayCommand(options);
      // The fault's own lines and what it did (the duplicate drill sums up in one line).
      EXPECT_GE(report.evidence.size(), drill == Drill::kDuplicateCallbacks ? 1u : 3u)
          << DrillName(drill) << " seed " << seed;
    }
  }
}

// admitctl drill NAME reads each drill's name back (DrillNamed, through EnumFromName), the names
// the command lists are the drills' own, in order, and "simulation" (Drill::kNone) is no drill.
TEST(Drill, EachNameReadsBackAsItsDrill) {
  size_t listed = 0;
  for (const char* name : kDrillNames) {
    const std::optional<Drill> drill = DrillNamed(name);
    ASSERT_TRUE(drill.has_value()) << name;
    EXPECT_STREQ(DrillName(*drill), name);
    EXPECT_EQ(static_cast<size_t>(*drill), ++listed) << name;
  }
  EXPECT_EQ(listed, static_cast<size_t>(kDrillLast));
  EXPECT_FALSE(DrillNamed("simulation"));
  EXPECT_FALSE(DrillNamed("node-failure "));
  EXPECT_FALSE(DrillNamed(""));
}

// A drill whose fault never comes (the run ends before its step) fails: it cannot pass
// vacuously.
TEST(Drill, ADrillWhoseFaultNeverCameFails) {
  for (Drill drill : {Drill::kControllerOutage, Drill::kQuotaReclaim, Drill::kNodeFailure}) {
    SimOptions options;
    options.steps = 50;
    options.drill = drill;
    const SimReport report = Simulate(options);
    EXPECT_FALSE(report.passed) << DrillName(drill);
    EXPECT_NE(report.failure.find("the drill's fault had no effect"), std::string::npos)
        << report.failure;
  }
}

// A drill catches what the invariants catch: the forged release of the simulation's test.
TEST(Drill, ADrillFailsOnAForgedRelease) {
  SimOptions options;
  options.steps = 300;
  options.drill = Drill::kDuplicateCallbacks;
  options.forge_release_at_step = 100;
  const SimReport report = Simulate(options);
  ASSERT_FALSE(report.passed);
  EXPECT_NE(report.failure.find("invariant pods-only-with-a-valid-token"), std::string::npos)
      << report.failure;
}

TEST(Simulation, APodsReleaseWithAForgedTokenIsCaught) {
  SimOptions options;
  options.seed = 11;
  options.forge_release_at_step = 120;
  const SimReport report = Simulate(options);
  ASSERT_FALSE(report.passed);
  EXPECT_NE(report.failure.find("invariant pods-only-with-a-valid-token"), std::string::npos)
      << report.failure;
  EXPECT_NE(report.failure.find("forged/1"), std::string::npos) << report.failure;
}

}  // namespace
}  // namespace admission::sim
