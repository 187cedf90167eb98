// admitctl simulate and admitctl drill: the deterministic simulator and the fault drills
// (ops/sim/simulator.h, docs/faults.md).
//
//   simulate --seed S [--steps N] [--seeds K]   seeds S..S+K-1; PASS, or FAIL with the evidence
//   drill NAME [--seed S] [--keep DIR]          one fault against a fresh service on a fresh
//                                               RocksDB ledger: PASS or FAIL with the evidence
//   drill partition                             admitd on Kafka cut from its broker (a script:
//                                               root, a broker, a network namespace)
//
// Each simulated seed runs in a child process, so a seed that trips one of the decider's
// assertions (an abort) is reported as that seed's failure and the run goes on.

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ledger/rocksdb_log.h"
#include "ops/admitctl/common.h"
#include "ops/sim/simulator.h"

namespace admission::ops {
namespace {

using sim::SimOptions;
using sim::SimReport;

// Runs one seed in a child process; its report comes back through a pipe as lines: "passed
// 0|1", "events N", "trace HEX", "failure TEXT", then "count NAME N" lines. A child that dies
// (a decider assertion aborts) is a failure naming the signal.
SimReport RunInChild(const SimOptions& options) {
  SimReport report;
  int fds[2];
  if (pipe(fds) != 0) {
    report.failure = std::string("pipe: ") + std::strerror(errno);
    return report;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const SimReport r = admission::sim::Simulate(options);
    std::ostringstream out;
    out << "passed " << (r.passed ? 1 : 0) << "\nevents " << r.events << "\ntrace "
        << r.trace_hash << "\n";
    for (const auto& [name, count] : r.counts) out << "count " << name << " " << count << "\n";
    out << "failure " << r.failure << "\n";
    const std::string text = out.str();
    size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = write(fds[1], text.data() + written, text.size() - written);
      if (n <= 0) _exit(3);
      written += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) text.append(buffer, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "passed") report.passed = value == "1";
    if (key == "events") report.events = std::stoull(value);
    if (key == "trace") report.trace_hash = value;
    if (key == "failure") report.failure = value;
    if (key == "count") {
      const size_t sep = value.rfind(' ');
      report.counts[value.substr(0, sep)] = std::stoull(value.substr(sep + 1));
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    report.passed = false;
    report.failure = WIFSIGNALED(status)
                         ? std::string("the simulation died of signal ") +
                               std::to_string(WTERMSIG(status)) + " (" +
                               strsignal(WTERMSIG(status)) +
                               "): a decider assertion (its message is above)"
                         : "the simulation's child exited with status " +
                               std::to_string(WEXITSTATUS(status));
  }
  return report;
}

struct SimulateArgs {
  uint64_t seed = 1;
  uint64_t seeds = 1;
  int steps = 400;
  bool quiet = false;
};

int RunSimulate(const SimulateArgs& args) {
  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, uint64_t> totals;
  uint64_t passed = 0, failed = 0, events = 0;
  for (uint64_t i = 0; i < args.seeds; ++i) {
    SimOptions options;
    options.seed = args.seed + i;
    options.steps = args.steps;
    const SimReport report = RunInChild(options);
    events += report.events;
    for (const auto& [name, count] : report.counts) totals[name] += count;
    if (report.passed) {
      ++passed;
      if (args.seeds == 1) {
        std::printf("seed %llu: PASS, %llu events, trace %s\n",
                    static_cast<unsigned long long>(options.seed),
                    static_cast<unsigned long long>(report.events), report.trace_hash.c_str());
      }
    } else {
      ++failed;
      std::printf("seed %llu: FAIL: %s\n  trace %s\n  repeat: %s\n",
                  static_cast<unsigned long long>(options.seed), report.failure.c_str(),
                  report.trace_hash.c_str(), sim::ReplayCommand(options).c_str());
    }
    if (!args.quiet && args.seeds > 1 && (i + 1) % 100 == 0) {
      std::fprintf(stderr, "simulate: %llu of %llu seeds, %llu failed\n",
                   static_cast<unsigned long long>(i + 1),
                   static_cast<unsigned long long>(args.seeds),
                   static_cast<unsigned long long>(failed));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("seeds: %llu\npassed: %llu\nfailed: %llu\nsteps_per_seed: %d\nevents: %llu\n"
              "seconds: %.1f\n",
              static_cast<unsigned long long>(args.seeds), static_cast<unsigned long long>(passed),
              static_cast<unsigned long long>(failed), args.steps,
              static_cast<unsigned long long>(events), seconds);
  for (const auto& [name, count] : totals) {
    std::printf("%s: %llu\n", name.c_str(), static_cast<unsigned long long>(count));
  }
  return failed == 0 ? 0 : 1;
}

struct DrillArgs {
  std::string name;
  uint64_t seed = 1;
  std::string keep;  // the ledger's folder; empty: a fresh temporary one, removed on PASS
  std::string format = "text";
};

// Steps of a drill: the fault comes at step 60 (and 110), recovery at 160, and the platform
// has the rest to show it recovered.
constexpr int kDrillSteps = 300;

// The partition drill needs a Kafka broker, admitd and a network namespace: a script runs it
// (ops/scripts/drill_partition.sh, from this build's source tree) with this admitctl and the
// admitd beside it.
int RunPartitionDrill() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return Fail(Status(Code::kIoError, "finding admitctl's own path: " + error.message()));
  const std::string admitd = (self.parent_path() / "admitd").string();
  const std::string script = std::string(ADMISSION_SOURCE_DIR) + "/ops/scripts/drill_partition.sh";
  if (access(script.c_str(), X_OK) != 0 || access(admitd.c_str(), X_OK) != 0) {
    return Fail(Status(Code::kNotFound, "drill partition runs " + script + " with " + admitd +
                                            "; one of them is missing"));
  }
  std::fflush(stdout);
  execl(script.c_str(), script.c_str(), self.c_str(), admitd.c_str(), static_cast<char*>(nullptr));
  return Fail(Status(Code::kIoError, "running " + script + ": " + std::strerror(errno)));
}

int RunDrill(const DrillArgs& args) {
  if (args.name == "partition") return RunPartitionDrill();
  const std::optional<sim::Drill> drill = sim::DrillNamed(args.name);
  if (!drill) {
    std::string names;
    for (const char* n : sim::kDrillNames) names += std::string(names.empty() ? "" : ", ") + n;
    names += ", partition";
    return Fail(Status(Code::kInvalidArgument,
                       "no drill '" + args.name + "' (there are: " + names + ")"));
  }
  std::string dir = args.keep;
  if (dir.empty()) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("admission-drill-" + args.name + ".XXXXXX"));
    if (mkdtemp(pattern.data()) == nullptr) {
      return Fail(Status(Code::kIoError, "mkdtemp: " + std::string(std::strerror(errno))));
    }
    dir = pattern;
  } else if (std::filesystem::exists(dir) && !std::filesystem::is_empty(dir)) {
    return Fail(Status(Code::kInvalidArgument,
                       "--keep " + dir + ": not empty (a drill writes a fresh ledger)"));
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Fail(Status(Code::kIoError, "creating " + dir + ": " + error.message()));
  const std::string ledger_dir = dir + "/ledger";
  SimReport report;
  {
    ledger::RocksDbLogOptions log_options;
    log_options.min_free_bytes = 0;  // a drill's ledger is small; the disk is not the fault
    auto log = ledger::RocksDbLog::Open(ledger_dir, log_options);
    if (!log.ok()) return Fail(log.status());
    SimOptions options;
    options.seed = args.seed;
    options.steps = kDrillSteps;
    options.drill = *drill;
    options.log = log->get();
    report = sim::Simulate(options);
  }
  SimOptions shown;
  shown.seed = args.seed;
  shown.drill = *drill;
  if (args.format == "json") {
    nlohmann::json out;
    out["drill"] = args.name;
    out["seed"] = args.seed;
    out["passed"] = report.passed;
    if (!report.passed) out["failure"] = report.failure;
    out["evidence"] = report.evidence;
    out["events"] = report.events;
    out["trace"] = report.trace_hash;
    out["ledger"] = report.passed && args.keep.empty() ? "" : ledger_dir;
    out["repeat"] = sim::ReplayCommand(shown);
    std::cout << out.dump() << "\n";
  } else {
    std::cout << (report.passed ? "PASS" : "FAIL") << " drill " << args.name << " (seed "
              << args.seed << "), " << report.events << " events, trace " << report.trace_hash
              << "\n";
    if (!report.passed) std::cout << "  " << report.failure << "\n";
    for (const std::string& line : report.evidence) std::cout << "  " << line << "\n";
    if (!report.passed || !args.keep.empty()) {
      std::cout << "  ledger: " << ledger_dir << " (admitctl --ledger " << ledger_dir
                << " explain NS/NAME)\n";
    }
    std::cout << "  repeat: " << sim::ReplayCommand(shown) << "\n";
  }
  if (report.passed && args.keep.empty()) std::filesystem::remove_all(dir);
  return report.passed ? 0 : 1;
}

}  // namespace

void AddSimulationCommands(CLI::App& app, int* exit_code) {
  auto sim_args = std::make_shared<SimulateArgs>();
  auto* simulate = app.add_subcommand(
      "simulate",
      "the deterministic simulator: seeded faults against the real service in logical time, "
      "invariants after every append, replay at the end (docs/faults.md)");
  simulate->add_option("--seed", sim_args->seed, "the first seed")->capture_default_str();
  simulate->add_option("--seeds", sim_args->seeds, "how many seeds, from --seed on")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  simulate->add_option("--steps", sim_args->steps, "steps per run (5-120 s of logical time each)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  simulate->add_flag("--quiet", sim_args->quiet, "no progress lines");
  simulate->callback([sim_args, exit_code]() { *exit_code = RunSimulate(*sim_args); });

  auto drill_args = std::make_shared<DrillArgs>();
  std::string names;
  for (const char* n : sim::kDrillNames) names += std::string(names.empty() ? "" : "|") + n;
  names += "|partition";
  auto* drill = app.add_subcommand(
      "drill",
      "run one fault (" + names + ") against a fresh service on a fresh ledger; PASS or FAIL "
      "with the evidence (which invariant, which workload, which sequences)");
  std::vector<std::string> known(std::begin(sim::kDrillNames), std::end(sim::kDrillNames));
  known.push_back("partition");
  drill->add_option("name", drill_args->name, names)->required()->check(CLI::IsMember(known));
  drill->add_option("--seed", drill_args->seed, "the seed of the background load")
      ->capture_default_str();
  drill->add_option("--keep", drill_args->keep,
                    "write the drill's ledger here and keep it (default: a temporary folder, "
                    "removed on PASS)");
  drill->add_option("-o,--output", drill_args->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  drill->callback([drill_args, exit_code]() { *exit_code = RunDrill(*drill_args); });
}

}  // namespace admission::ops
