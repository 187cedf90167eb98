#pragma once
// The interpreter of scenario steps (tests/scenarios/README.md), shared by the scenario tests
// (scenario_test.cc) and the golden corpus tool (tests/golden/golden_tool.cc), so that a
// scenario means the same inputs to both: a golden ledger is exactly what the scenario test
// checked when it was made.
//
// A key the interpreter does not know, in a scenario file, a step, a step's map (report, pods,
// revoke, node, maintenance, configure) or a compact workload (`workloads:`) or its podSets, is
// refused before the step records anything, naming the key, the step and the file: a misspelt
// key would otherwise be an input or a check that silently never happens.
// Expectations (`expect:`, `noop:`) are the scenario test's: the interpreter accepts the keys
// and leaves them to its caller.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "ledger/event_log.h"
#include "ops/service/clock.h"
#include "ops/service/service.h"
#include "schema/result.h"

namespace admission::testing {

// The logical time of a scenario: set by each step (`at:`, else one second after the last).
class StepClock final : public ops::Clock {
 public:
  explicit StepClock(int64_t start_ns = 0) : now_ns(start_ns) {}
  int64_t NowNs() override { return now_ns; }
  int64_t now_ns;
};

// A scenario file's steps. Refuses a file that is not a mapping of `description`, `kueue`
// (the Kueue cases it ports) and a list of `steps`, or that has any other key.
Result<YAML::Node> LoadScenarioSteps(const std::string& path);

// A case of Kueue's own unit tables that a scenario ports: `kueue: [{test: TestSchedule,
// case: "...", differs: "why"}]`. `differs` says why our outcome deliberately differs; `gap`
// (instead) names Kueue's behaviour that the decider does not reproduce yet, not by choice.
struct KueuePort {
  std::string test;        // TestSchedule, TestPreemption, TestAssignFlavors, ...
  std::string kueue_case;  // the case's name in that table
  std::string differs;     // empty when the scenario expects Kueue's outcome
  std::string gap;         // empty unless Kueue's outcome needs something not built
};
Result<std::vector<KueuePort>> LoadKueuePorts(const std::string& path);

// "FILE step N" or "FILE step N (NAME)": where a step's errors and failed checks are reported.
std::string StepWhere(const std::string& file, const YAML::Node& step, size_t index);

// What one step recorded.
struct StepOutcome {
  // One line per decision the step's inputs caused: body name and ops::DescribeDecision.
  std::vector<std::string> decisions;
  // The step's last recorded input was a no-op (already recorded); false if it recorded none.
  bool last_input_unchanged = false;
};

// Runs steps through the real intake path: the Kueue YAML parser and `service`, at the time
// of `clock`.
// REQUIRES: `service` records into `log` and reads `clock`; all three outlive the runner.
class StepRunner {
 public:
  StepRunner(std::string file, ledger::EventLog& log, StepClock& clock, ops::Service& service)
      : file_(std::move(file)), log_(log), clock_(clock), service_(service) {}

  // Runs step `index` (1-based). An error names the file and the step: an unknown key, a value
  // that does not parse, a workload the step names that does not exist, an input refused
  // (or, under `refused: TEXT`, one accepted, or refused for another reason or after writing).
  Result<StepOutcome> Run(const YAML::Node& step, size_t index);

 private:
  class Step;

  const std::string file_;
  ledger::EventLog& log_;
  StepClock& clock_;
  ops::Service& service_;
};

}  // namespace admission::testing
