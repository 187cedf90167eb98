// simulate: runs the deterministic simulator (simulator.h) for one seed or a range of seeds.
//
//   simulate --seed S [--steps N]            one run: PASS or FAIL with the evidence
//   simulate --seed S --seeds K [--steps N]  seeds S..S+K-1, a line per failure, then totals
//
// Prints the trace hash of each run shown (the same seed gives the same hash), and for a
// failing seed the one command that repeats it. Each seed runs in a child process, so a seed
// that trips one of the decider's assertions (an abort) is reported as that seed's failure and
// the run goes on. Exit status: 0 all passed, 1 a seed failed, 2 usage error.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "tests/sim/simulator.h"

namespace {

using admission::sim::SimOptions;
using admission::sim::SimReport;

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Deterministic simulation of the admission service: seeded faults, invariants "
               "checked after every append, replay at the end (docs/faults.md)"};
  uint64_t seed = 1;
  uint64_t seeds = 1;
  int steps = 400;
  bool quiet = false;
  app.add_option("--seed", seed, "the first seed")->capture_default_str();
  app.add_option("--seeds", seeds, "how many seeds, from --seed on")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  app.add_option("--steps", steps, "steps per run (logical time: 5-120 s each)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  app.add_flag("--quiet", quiet, "no progress lines");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  std::map<std::string, uint64_t> totals;
  uint64_t passed = 0;
  uint64_t events = 0;
  uint64_t failed = 0;
  for (uint64_t i = 0; i < seeds; ++i) {
    SimOptions options;
    options.seed = seed + i;
    options.steps = steps;
    const SimReport report = RunInChild(options);
    events += report.events;
    for (const auto& [name, count] : report.counts) totals[name] += count;
    if (report.passed) {
      ++passed;
      if (seeds == 1) {
        std::printf("seed %llu: PASS, %llu events, trace %s\n",
                    static_cast<unsigned long long>(options.seed),
                    static_cast<unsigned long long>(report.events), report.trace_hash.c_str());
      }
    } else {
      ++failed;
      std::printf("seed %llu: FAIL: %s\n  trace %s\n  repeat: %s\n",
                  static_cast<unsigned long long>(options.seed), report.failure.c_str(),
                  report.trace_hash.c_str(), admission::sim::ReplayCommand(options).c_str());
    }
    if (!quiet && seeds > 1 && (i + 1) % 100 == 0) {
      std::fprintf(stderr, "simulate: %llu of %llu seeds, %llu failed\n",
                   static_cast<unsigned long long>(i + 1), static_cast<unsigned long long>(seeds),
                   static_cast<unsigned long long>(failed));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("seeds: %llu\npassed: %llu\nfailed: %llu\nsteps_per_seed: %d\nevents: %llu\n"
              "seconds: %.1f\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(passed),
              static_cast<unsigned long long>(failed), steps,
              static_cast<unsigned long long>(events), seconds);
  for (const auto& [name, count] : totals) {
    std::printf("%s: %llu\n", name.c_str(), static_cast<unsigned long long>(count));
  }
  return failed == 0 ? 0 : 1;
}
