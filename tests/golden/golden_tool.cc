// golden_tool: the golden corpus of ledgers (tests/golden/README.md).
//
//   golden_tool generate SCENARIO.yaml OUT     writes OUT.ledger and OUT.sha256 from a scenario
//   golden_tool check DIR                      replays every DIR/*.ledger with verify and
//                                              compares its decision-stream hash with DIR/*.sha256
//   golden_tool kafka BOOTSTRAP DIR SCENARIOS  the same corpus, and every scenario of the folder
//                                              SCENARIOS, through KafkaLog on the broker at
//                                              BOOTSTRAP: byte-identical events and the same
//                                              decision-stream hash as in memory (docs/kafka.md)
//
// `generate` runs a scenario file (tests/scenarios/*.yaml, the format of
// tests/scenarios/README.md; its `expect:` and `noop:` checks are scenario_tests' business) with
// the step interpreter scenario_tests uses (tests/scenarios/steps.h), through the real intake
// path (Kueue YAML parser, Service, decider, ledger) on an in-memory ledger. `check` exits 1
// when a ledger does not load, does not replay byte for byte, or hashes differently from its
// committed hash.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ledger/kafka_log.h"
#include "ledger/memory_log.h"
#include "ops/service/service.h"
#include "projections/engine_version.h"
#include "replay/ledger_file.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "tests/scenarios/steps.h"

namespace admission::golden {
namespace {

// The corpus starts here; the scenario tests start their clock at 0, which scenarios that set
// `at:` to dates before the corpus start need.
constexpr int64_t kCorpusStartNs = 1'795'910'400'000'000'000;  // 2026-11-29T00:00:00Z

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

// A scenario run on a log: the ledger as text (ExportLedger) and its decision-stream hash.
struct RunLedger {
  std::string text;
  std::string hash;
  uint64_t events = 0;
  uint64_t decisions = 0;
};

Result<RunLedger> RunScenario(const std::string& scenario, ledger::EventLog& log,
                              int64_t start_ns = kCorpusStartNs) {
  testing::StepClock clock(start_ns);
  auto service = ops::Service::Open(log, clock);
  if (!service.ok()) return service.status();
  auto steps = testing::LoadScenarioSteps(scenario);
  if (!steps.ok()) return steps.status();
  testing::StepRunner runner(scenario, log, clock, **service);
  size_t index = 0;
  for (const auto& step : *steps) {
    auto outcome = runner.Run(step, ++index);
    if (!outcome.ok()) return outcome.status();
  }
  auto report = replay::ReplayAndVerify(log);
  if (!report.ok()) return report.status();
  if (report->divergence) {
    return Status(Code::kCorruption,
                  scenario + ": the generated ledger does not replay: divergence at " +
                      std::to_string(report->divergence->sequence));
  }
  auto text = replay::ExportLedger(log);
  if (!text.ok()) return text.status();
  return RunLedger{std::move(*text), schema::HashHex(report->decision_stream_hash),
                   log.GetHead().sequence, report->decisions_compared};
}

int Generate(const std::string& scenario, const std::string& out) {
  ledger::MemoryLog log;
  auto run = RunScenario(scenario, log);
  if (!run.ok()) {
    std::cerr << run.status().ToString() << "\n";
    return 1;
  }
  if (!WriteFile(out + ".ledger", run->text) || !WriteFile(out + ".sha256", run->hash + "\n")) {
    std::cerr << "cannot write " << out << ".ledger / .sha256\n";
    return 1;
  }
  std::cout << out << ".ledger: " << run->events << " events, " << run->decisions
            << " decisions, engine v" << projections::kEngineVersion
            << ", decision-stream sha256 " << run->hash << "\n";
  return 0;
}

int Check(const std::string& dir) {
  std::vector<std::string> ledgers;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".ledger") ledgers.push_back(entry.path().string());
  }
  std::sort(ledgers.begin(), ledgers.end());
  if (ledgers.empty()) {
    std::cerr << "no *.ledger files in " << dir << "\n";
    return 1;
  }
  int failures = 0;
  for (const std::string& path : ledgers) {
    const std::string stem = path.substr(0, path.size() - std::string(".ledger").size());
    const std::string name = std::filesystem::path(stem).filename().string();
    std::string expected = ReadFile(stem + ".sha256");
    expected.erase(
        std::remove_if(expected.begin(), expected.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
        expected.end());
    ledger::MemoryLog log;
    Status loaded = replay::ImportLedger(ReadFile(path), log);
    if (!loaded.ok()) {
      std::cout << "FAIL " << name << ": does not load: " << loaded.ToString() << "\n";
      ++failures;
      continue;
    }
    auto report = replay::ReplayAndVerify(log);
    if (!report.ok()) {
      std::cout << "FAIL " << name << ": " << report.status().ToString() << "\n"
                << "  (a build must still decide as the version that wrote this ledger; see "
                   "tests/golden/README.md)\n";
      ++failures;
      continue;
    }
    if (report->divergence) {
      const replay::Divergence& d = *report->divergence;
      std::cout << "FAIL " << name << ": replay diverges at sequence " << d.sequence
                << " (first differing field: " << d.first_differing_field << ")\n"
                << "  recorded: " << d.recorded_json << "\n"
                << "  replayed: " << d.replayed_json << "\n"
                << "  An unintended behaviour change of the decider, or a deliberate one that must "
                   "bump kEngineVersion and keep the old behaviour behind a switch on the "
                   "batch's version (tests/golden/README.md).\n";
      ++failures;
      continue;
    }
    const std::string actual = schema::HashHex(report->decision_stream_hash);
    if (actual != expected) {
      std::cout << "FAIL " << name << ": decision-stream sha256 " << actual << ", committed "
                << expected << "\n";
      ++failures;
      continue;
    }
    std::cout << "ok   " << name << ": " << report->events << " events, "
              << report->decisions_compared << " decisions reproduced, sha256 " << actual << "\n";
  }
  return failures == 0 ? 0 : 1;
}

// Through KafkaLog: each run gets a fresh topic; the writer's events are read back by a reader
// with its own fresh local copy, so what is compared is what the topic holds.
class KafkaRuns {
 public:
  explicit KafkaRuns(std::string bootstrap) : bootstrap_(std::move(bootstrap)) {
    char pattern[] = "/tmp/golden-kafka-XXXXXX";
    ADM_CHECK(mkdtemp(pattern) != nullptr, "mkdtemp");
    dir_ = pattern;
  }
  ~KafkaRuns() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  Result<std::unique_ptr<ledger::KafkaLog>> Open(const std::string& topic, bool writer) {
    ledger::KafkaLogOptions options;
    options.address = ledger::KafkaAddress{bootstrap_, topic};
    options.state_dir = dir_ + "/" + topic + (writer ? "-writer" : "-reader");
    options.writer = writer;
    options.create_topic = writer;
    return ledger::KafkaLog::Open(options);
  }
  std::string Topic(const std::string& name) {
    return "golden-" + std::to_string(getpid()) + "-" + std::to_string(count_++) + "-" + name;
  }

 private:
  std::string bootstrap_;
  std::string dir_;
  int count_ = 0;
};

// What a reader of the topic exports and replays.
Result<RunLedger> ReadBack(KafkaRuns& runs, const std::string& topic) {
  auto reader = runs.Open(topic, false);
  if (!reader.ok()) return reader.status();
  auto report = replay::ReplayAndVerify(**reader);
  if (!report.ok()) return report.status();
  if (report->divergence) {
    return Status(Code::kCorruption, "replay of the topic diverges at sequence " +
                                         std::to_string(report->divergence->sequence));
  }
  auto text = replay::ExportLedger(**reader);
  if (!text.ok()) return text.status();
  return RunLedger{std::move(*text), schema::HashHex(report->decision_stream_hash),
                   (*reader)->GetHead().sequence, report->decisions_compared};
}

int Kafka(const std::string& bootstrap, const std::string& dir, const std::string& scenarios) {
  KafkaRuns runs(bootstrap);
  int failures = 0;
  int compared = 0;
  auto fail = [&](const std::string& name, const std::string& why) {
    std::cout << "FAIL " << name << ": " << why << "\n";
    ++failures;
  };
  // The corpus: each committed ledger appended through a Kafka writer, read back.
  std::vector<std::string> ledgers;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".ledger") ledgers.push_back(entry.path().string());
  }
  std::sort(ledgers.begin(), ledgers.end());
  for (const std::string& path : ledgers) {
    const std::string stem = path.substr(0, path.size() - std::string(".ledger").size());
    const std::string name = std::filesystem::path(stem).filename().string();
    std::string expected = ReadFile(stem + ".sha256");
    expected.erase(std::remove_if(expected.begin(), expected.end(),
                                  [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
                   expected.end());
    const std::string text = ReadFile(path);
    const std::string topic = runs.Topic(name);
    {
      auto writer = runs.Open(topic, true);
      if (!writer.ok()) {
        fail(name, writer.status().ToString());
        continue;
      }
      Status loaded = replay::ImportLedger(text, **writer);
      if (!loaded.ok()) {
        fail(name, "does not load through Kafka: " + loaded.ToString());
        continue;
      }
    }
    auto back = ReadBack(runs, topic);
    if (!back.ok()) {
      fail(name, back.status().ToString());
    } else if (back->text != text) {
      fail(name, "the topic does not hold the committed ledger byte for byte");
    } else if (back->hash != expected) {
      fail(name, "decision-stream sha256 " + back->hash + " through Kafka, committed " + expected);
    } else {
      ++compared;
      std::cout << "ok   " << name << " (corpus): " << back->events << " events through Kafka, "
                << back->decisions << " decisions reproduced, sha256 " << back->hash << "\n";
    }
  }
  // The scenario streams: the Service on a Kafka writer, against the Service in memory.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(scenarios)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    const std::string name = std::filesystem::path(file).stem().string();
    ledger::MemoryLog memory;
    // The clock as scenario_test.cc runs them (some set `at:` to dates before the corpus start).
    auto in_memory = RunScenario(file, memory, 0);
    if (!in_memory.ok()) {
      fail(name, "in memory: " + in_memory.status().ToString());
      continue;
    }
    const std::string topic = runs.Topic(name);
    {
      auto writer = runs.Open(topic, true);
      if (!writer.ok()) {
        fail(name, writer.status().ToString());
        continue;
      }
      auto through_kafka = RunScenario(file, **writer, 0);
      if (!through_kafka.ok()) {
        fail(name, "through Kafka: " + through_kafka.status().ToString());
        continue;
      }
      if (through_kafka->text != in_memory->text || through_kafka->hash != in_memory->hash) {
        fail(name, "the Kafka writer's ledger differs from the one in memory");
        continue;
      }
    }
    auto back = ReadBack(runs, topic);
    if (!back.ok()) {
      fail(name, back.status().ToString());
    } else if (back->text != in_memory->text || back->hash != in_memory->hash) {
      fail(name, "the topic read back differs from the ledger in memory");
    } else {
      ++compared;
      std::cout << "ok   " << name << " (scenario): " << back->events
                << " events, the same bytes through Kafka, sha256 " << back->hash << "\n";
    }
  }
  if (compared == 0) {
    std::cout << "FAIL: nothing compared (no ledgers in " << dir << ", no scenarios in "
              << scenarios << ")\n";
    return 1;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::golden

int main(int argc, char** argv) {
  const std::string usage =
      "usage: golden_tool generate SCENARIO.yaml OUT   |   golden_tool check DIR   |   "
      "golden_tool kafka BOOTSTRAP DIR SCENARIOS\n";
  if (argc == 4 && std::string(argv[1]) == "generate") {
    return admission::golden::Generate(argv[2], argv[3]);
  }
  if (argc == 3 && std::string(argv[1]) == "check") return admission::golden::Check(argv[2]);
  if (argc == 5 && std::string(argv[1]) == "kafka") {
    return admission::golden::Kafka(argv[2], argv[3], argv[4]);
  }
  std::cerr << usage;
  return 2;
}
