// Helpers of the decider's translation units (projections/engine_internal.h).

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <capnp/blob.h>
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "projections/engine.h"
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

// Found by tests/fuzz/rpc_fuzz.cc: the same resource twice with huge values overflowed the
// decider's signed sum of a pod's requests (undefined behaviour). Validate now refuses such a
// workload, before anything is recorded.
TEST(EngineValidate, RefusesRequestsTheDeciderCannotAddUp) {
  auto submit = [](int32_t count, std::vector<int64_t> cpu_milli) {
    auto message = std::make_unique<capnp::MallocMessageBuilder>();
    auto wl = message->initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
    wl.setNamespace("a");
    wl.setName("w");
    auto ps = wl.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(count);
    auto requests = ps.initRequests(static_cast<unsigned>(cpu_milli.size()));
    for (unsigned i = 0; i < cpu_milli.size(); ++i) {
      requests[i].setName("cpu");
      requests[i].setMilli(cpu_milli[i]);
    }
    return message;
  };
  Engine engine;
  auto verdict = [&](int32_t count, std::vector<int64_t> milli) {
    auto message = submit(count, std::move(milli));
    return engine.Validate(message->getRoot<schema::Event>().asReader()).status;
  };
  EXPECT_TRUE(verdict(4, {1000, 2000}).ok());
  EXPECT_TRUE(verdict(1, {kWorkloadRequestMilliMax}).ok());
  const Status twice = verdict(1, {9178730101431336960, 8031714103660475500});
  EXPECT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("overflow"), std::string::npos) << twice.message();
  const Status times_count = verdict(1 << 20, {int64_t{1} << 50});
  EXPECT_FALSE(times_count.ok());
  EXPECT_NE(times_count.message().find("beyond"), std::string::npos) << times_count.message();
}

// Found by tests/fuzz/rpc_fuzz.cc in CI: a minCount far above count times a large request
// overflowed the flavor assigner's "could it ever fit" product. Intake now refuses minCount
// above count (Kueue's CRD rule), and the product is checked for overflow for what was recorded
// before.
TEST(EngineValidate, RefusesMinCountAboveCount) {
  auto verdict = [](int32_t count, int32_t min_count) {
    capnp::MallocMessageBuilder message;
    auto wl = message.initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
    wl.setNamespace("a");
    wl.setName("w");
    auto ps = wl.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(count);
    ps.setMinCount(min_count);
    auto requests = ps.initRequests(1);
    requests[0].setName("cpu");
    requests[0].setMilli(16121856);
    return Engine().Validate(message.getRoot<schema::Event>().asReader()).status;
  };
  EXPECT_TRUE(verdict(4, 2).ok());
  EXPECT_TRUE(verdict(4, 4).ok());
  const Status above = verdict(1, 576460752);
  EXPECT_FALSE(above.ok());
  EXPECT_NE(above.message().find("minCount 576460752 above its count 1"), std::string::npos)
      << above.message();
}

// What a ledger recorded before intake refused minCount above count still decides without
// overflow (UBSan in the asan preset catches the old product): the pod set can never fit.
TEST(EngineDecider, MinCountAboveCountRecordedEarlierNeverFits) {
  Engine engine;
  uint64_t sequence = 0;
  auto apply = [&](auto&& fill) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<schema::Event>();
    event.setSequence(++sequence);
    fill(event.initBody());
    engine.ApplyInput(event.asReader());
    const Status held = engine.CheckInvariants();  // the quota invariants, after every input
    EXPECT_TRUE(held.ok()) << held.message();
  };
  apply([](schema::Event::Body::Builder body) { body.initFlavorDefined().setName("f"); });
  apply([](schema::Event::Body::Builder body) {
    auto cq = body.initClusterQueueDefined();
    cq.setName("cq");
    cq.initNamespaceSelector().setMatchesAll(true);
    auto group = cq.initResourceGroups(1)[0];
    group.initCoveredResources(1).set(0, "cpu");
    auto flavor = group.initFlavors(1)[0];
    flavor.setName("f");
    auto quota = flavor.initResources(1)[0];
    quota.setName("cpu");
    quota.setNominalQuotaMilli(1000);
  });
  apply([](schema::Event::Body::Builder body) {
    auto lq = body.initLocalQueueDefined();
    lq.setNamespace("a");
    lq.setName("lq");
    lq.setClusterQueue("cq");
  });
  apply([](schema::Event::Body::Builder body) {
    auto wl = body.initWorkloadSubmitted().initWorkload();
    wl.setNamespace("a");
    wl.setName("w");
    wl.setUid("u");
    wl.setQueueName("lq");
    auto ps = wl.initPodSets(1)[0];
    ps.setName("main");
    ps.setCount(1);
    ps.setMinCount(16121856);
    auto request = ps.initRequests(1)[0];
    request.setName("cpu");
    request.setMilli(576460752303429488);
  });
  engine.EndBatch(sequence, 1'000'000'000);
  const Status held = engine.CheckInvariants();
  EXPECT_TRUE(held.ok()) << held.message();
  const WorkloadState& w = engine.workloads().begin()->second;
  EXPECT_FALSE(HoldsQuota(w.phase)) << PhaseName(w.phase) << ": " << w.pending_message;
}

// Timers fire in the order their text "kind|key|generation|detail" had before they were a
// struct: JoinedTextLess must compare as the joined texts do, for any parts ('|' inside too).
RC_GTEST_PROP(EngineInternal, JoinedTextLessComparesAsTheJoinedTexts,
              (const std::string& a0, const std::string& a1, const std::string& a2,
               const std::string& b0, const std::string& b1, const std::string& b2)) {
  const std::string a = a0 + "|" + a1 + "|" + a2;
  const std::string b = b0 + "|" + b1 + "|" + b2;
  RC_ASSERT(JoinedTextLess({a0, a1, a2}, {b0, b1, b2}) == (a < b));
  RC_ASSERT(JoinedTextLess({a0, a1, a2}, {a0, a1, a2}) == false);
}

// Admission fair sharing's decay factor is computed without floating point so that replay never
// depends on a libm; it must still be 2^(-num/den) to within 2^-40 relative.
TEST(EngineInternal, Pow2NegQ62IsTwoToTheMinusTheRatio) {
  constexpr uint64_t kOne = uint64_t{1} << 62;
  EXPECT_EQ(Pow2NegQ62(0, 7), kOne);
  EXPECT_EQ(Pow2NegQ62(10, 10), kOne / 2);
  EXPECT_EQ(Pow2NegQ62(30, 10), kOne / 8);
  EXPECT_EQ(Pow2NegQ62(62, 1), 0u);
  EXPECT_EQ(Pow2NegQ62(uint64_t{1} << 62, 1), 0u);
  for (auto [num, den] : {std::pair<uint64_t, uint64_t>{1, 10}, {1, 2}, {7, 3}, {999, 1000},
                          {1'000'000'000, 3'600'000'000'000}, {5 * 60'000'000'000ull, 3'600'000'000'000}}) {
    const long double want = std::pow(2.0L, -static_cast<long double>(num) / den) * kOne;
    const long double got = Pow2NegQ62(num, den);
    EXPECT_LT(std::fabs(got - want) / want, 1e-11L) << num << "/" << den;
  }
}

RC_GTEST_PROP(EngineInternal, Pow2NegQ62DecreasesAndMultiplies, (uint32_t a, uint32_t b, uint32_t d)) {
  const uint64_t den = uint64_t{d} + 1;
  const uint64_t x = Pow2NegQ62(a, den), y = Pow2NegQ62(uint64_t{a} + b, den);
  RC_ASSERT(y <= x);  // non-increasing in the exponent
  // 2^-(a+b) = 2^-a * 2^-b, to within the rounding of three factors.
  const long double product = static_cast<long double>(x) * Pow2NegQ62(b, den) / (uint64_t{1} << 62);
  RC_ASSERT(std::fabs(product - static_cast<long double>(y)) <= 1e-11L * (uint64_t{1} << 62));
}

// Admission fair sharing compares usage / weight exactly, never overflowing (usages up to 2^126,
// weights up to 2^63), and a weight of 0 is an infinite usage, as Kueue's CalculateUsage.
TEST(EngineInternal, AfsScoresCompareExactly) {
  auto score = [](__int128 usage, int64_t weight) {
    AfsScore s;
    s.usage = usage;
    s.weight_milli = weight;
    return s;
  };
  EXPECT_LT(score(2, 1000).Compare(score(8, 1000)), 0);
  EXPECT_EQ(score(4, 1000).Compare(score(8, 2000)), 0);      // 4/1 == 8/2
  EXPECT_GT(score(5, 1000).Compare(score(8, 2000)), 0);
  EXPECT_GT(score(0, 0).Compare(score(8, 1000)), 0);         // weight 0: last
  EXPECT_EQ(score(0, 0).Compare(score(9, 0)), 0);            // two infinite usages tie
  const __int128 huge = static_cast<__int128>(1) << 126;
  const int64_t big = INT64_MAX;
  EXPECT_EQ(score(huge, big).Compare(score(huge, big)), 0);
  EXPECT_LT(score(huge - 1, big).Compare(score(huge, big)), 0);
  EXPECT_GT(score(huge, big - 1).Compare(score(huge, big)), 0);
}

TEST(EngineInternal, TimersFireInTheOrderOfTheirFormerText) {
  // "ns/a|..." sorts after "ns/ab|..." as text ('|' is above every name character); the
  // generation compares as decimal text (10 before 9).
  const Timer a{5, TimerKind::kRequeue, "ns/a", 1, ""};
  const Timer ab{5, TimerKind::kRequeue, "ns/ab", 1, ""};
  EXPECT_TRUE(ab < a);
  EXPECT_FALSE(a < ab);
  const Timer g10{5, TimerKind::kTtl, "ns/a", 10, "scan"};
  const Timer g9{5, TimerKind::kTtl, "ns/a", 9, "scan"};
  EXPECT_TRUE(g10 < g9);
  EXPECT_TRUE((Timer{4, TimerKind::kWindow, "z", 0, ""} < a));
  for (int k = 0; k + 1 < kTimerKinds; ++k) {
    EXPECT_LT(std::string(TimerKindName(static_cast<TimerKind>(k))),
              std::string(TimerKindName(static_cast<TimerKind>(k + 1))));
    EXPECT_EQ(TimerKindFromName(TimerKindName(static_cast<TimerKind>(k))), static_cast<TimerKind>(k));
  }
  EXPECT_FALSE(TimerKindFromName("nap"));
}

// The names snapshots store read back as their enumerators, the last of each enum included (the
// ranges EnumFromName walks end there), and no other text does.
TEST(EngineInternal, EnumNamesReadBack) {
  for (int k = 0; k <= static_cast<int>(kCheckStateLast); ++k) {
    const auto state = static_cast<CheckState>(k);
    EXPECT_EQ(CheckStateFromName(CheckStateName(state)), state) << k;
  }
  EXPECT_EQ(CheckStateFromName("Rejected"), CheckState::kRejected);
  EXPECT_FALSE(CheckStateFromName("rejected"));
  for (int k = 0; k <= static_cast<int>(kAfterEvictionLast); ++k) {
    const auto after = static_cast<AfterEviction>(k);
    EXPECT_EQ(AfterEvictionFromName(AfterEvictionName(after)), after) << k;
  }
  EXPECT_EQ(AfterEvictionFromName(""), AfterEviction::kRequeue);
  EXPECT_EQ(AfterEvictionFromName("deactivate"), AfterEviction::kDeactivate);
  EXPECT_FALSE(AfterEvictionFromName("requeue"));
  for (int k = 0; k < kTimerKinds; ++k) {
    const auto kind = static_cast<TimerKind>(k);
    EXPECT_EQ(TimerKindFromName(TimerKindName(kind)), kind) << k;
  }
  EXPECT_EQ(TimerKindFromName("window"), TimerKind::kWindow);
}

// An engine with lowered bounds (EngineLimits) and `windows` maintenance windows ending at 10 s
// (each starts one timer, due then), whose batch ends at `now_ns`.
void RunWindows(const EngineLimits& limits, int windows, int64_t now_ns) {
  Engine engine(limits);
  for (int i = 0; i < windows; ++i) {
    capnp::MallocMessageBuilder message;
    auto event = message.initRoot<schema::Event>();
    event.setSequence(static_cast<uint64_t>(i) + 1);
    auto window = event.initBody().initMaintenanceWindowDefined();
    window.setName("window-" + std::to_string(i));
    window.setFlavor("f");
    window.setStartNs(1'000'000'000);
    window.setEndNs(10'000'000'000);
    engine.ApplyInput(event.asReader());
  }
  engine.EndBatch(static_cast<uint64_t>(windows), now_ns);
}

// kTimersMax: a timer beyond the bound is an assertion naming the count and the timer, never a
// timer silently dropped. Shown with the bound lowered to 2.
TEST(EngineBoundsDeathTest, ATimerBeyondTheBoundAborts) {
  const EngineLimits limits{.timers_max = 2};
  RunWindows(limits, 2, 2'000'000'000);
  EXPECT_DEATH(RunWindows(limits, 3, 2'000'000'000),
               "3 timers, over the 2 the decider keeps \\(kTimersMax\\), adding "
               "window\\|window-2\\|0");
}

// kTimerFiresPerRoundMax: a round that would fire more timers than the bound is an assertion,
// never a round cut short. Shown with the bound lowered to 2.
TEST(EngineBoundsDeathTest, FiringMoreTimersThanTheBoundAborts) {
  const EngineLimits limits{.timer_fires_per_round_max = 2};
  RunWindows(limits, 2, 20'000'000'000);
  EXPECT_DEATH(RunWindows(limits, 3, 20'000'000'000),
               "2 timers fired at 20000000000 and more are due \\(kTimerFiresPerRoundMax\\)");
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

// Reasons quote quantities through FormatMilli; its text is part of recorded decisions, so it
// must stay what printf's "%lld" / "%lldm" made, for every value.
RC_GTEST_PROP(EngineInternal, FormatMilliPrintsAsPrintfDid, (int64_t milli)) {
  char buf[48];
  if (milli % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(milli / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(milli));
  }
  RC_ASSERT(FormatMilli(milli) == std::string(buf));
}

TEST(EngineInternal, FormatMilliAtTheEdges) {
  EXPECT_EQ(FormatMilli(0), "0");
  EXPECT_EQ(FormatMilli(1500), "1500m");
  EXPECT_EQ(FormatMilli(-2000), "-2");
  EXPECT_EQ(FormatMilli(INT64_MIN), "-9223372036854775808m");
  EXPECT_EQ(FormatMilli(INT64_MAX), "9223372036854775807m");
}

// Txt hands a decider string to capnp by its size; for the decider's strings (no NUL) that is
// the text the implicit conversion through c_str() gave.
RC_GTEST_PROP(EngineInternal, TxtIsTheConversionItReplaces, (std::string s)) {
  s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
  const capnp::Text::Reader implicit = s;
  RC_ASSERT(std::string(Txt(s).cStr(), Txt(s).size()) == std::string(implicit.cStr(), implicit.size()));
}

}  // namespace
}  // namespace admission::projections
