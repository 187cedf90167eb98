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
// tests/scenarios/README.md; its `expect:` blocks are ignored here, scenario_tests checks them;
// the steps are run as scenario_test.cc runs them) through the real intake path (Kueue YAML parser,
// Service, decider, ledger) on an in-memory ledger. `check` exits 1 when a ledger does not load,
// does not replay byte for byte, or hashes differently from its committed hash.

#include <capnp/message.h>
#include <yaml-cpp/yaml.h>

#include "tests/scenarios/workload_yaml.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ledger/kafka_log.h"
#include "ledger/memory_log.h"
#include "ops/kueue_yaml.h"
#include "schema/quantity.h"
#include "ops/service.h"
#include "schema/time_format.h"
#include "projections/engine_version.h"
#include "replay/ledger_file.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"

namespace admission::golden {
namespace {

class StepClock final : public ops::Clock {
 public:
  int64_t NowNs() override { return now_ns; }
  int64_t now_ns = kCorpusStartNs;
  // The corpus starts here; scenario_test.cc starts its clock at 0, which scenarios that set
  // `at:` to dates before the corpus start need.
  static constexpr int64_t kCorpusStartNs = 1'795'910'400'000'000'000;  // 2026-11-29T00:00:00Z
};

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


// Records one step's inputs. A step marked `refused:` expects intake to refuse them (nothing is
// written); its refusal is not an error here.
Status Record(ops::Service& service, const std::vector<std::string>& inputs, int64_t at,
              const std::string& actor, bool refusal_expected) {
  if (inputs.empty()) return Status::Ok();
  ops::IntakeOptions options;
  options.at_ns = at;
  options.actor = actor;
  auto outcome = service.Record(inputs, options);
  if (refusal_expected) {
    return outcome.ok() ? Status(Code::kInvalidArgument, "a refusal was expected") : Status::Ok();
  }
  return outcome.ok() ? Status::Ok() : outcome.status();
}

// The step keys this tool runs (those of tests/scenarios/scenario_test.cc); a scenario with any
// other key is refused rather than recorded differently from the scenario test.
const std::set<std::string>& KnownStepKeys() {
  static const std::set<std::string> kKeys = {
      "at",     "name",        "apply",     "submit", "import", "workloads",
      "finish", "delete",      "report",    "pods",   "revoke", "tick",  "finish_by_uid",
      "node",   "maintenance", "configure", "expect", "noop",   "refused"};
  return kKeys;
}

Status RunStep(const YAML::Node& step, size_t index, ledger::EventLog& log, StepClock& clock,
               ops::Service& service) {
  const std::string where = "step " + std::to_string(index) + ": ";
  for (const auto& kv : step) {
    const std::string key = kv.first.as<std::string>();
    if (KnownStepKeys().count(key) == 0) {
      return Status(Code::kInvalidArgument, where + "golden_tool does not run '" + key +
                                                "' steps; add it here as scenario_test.cc runs it");
    }
  }
  const bool refused = static_cast<bool>(step["refused"]);
  auto record = [&](const std::vector<std::string>& inputs, const std::string& actor) {
    return Record(service, inputs, clock.now_ns, actor, refused);
  };
  if (step["at"]) {
    auto at = ParseRfc3339(step["at"].as<std::string>());
    if (!at.ok()) return Status(at.status().code(), where + at.status().message());
    clock.now_ns = *at;
  } else {
    clock.now_ns += 1'000'000'000;
  }
  if (step["apply"]) {
    auto objects = ops::ParseApplyYaml(step["apply"].as<std::string>());
    if (!objects.ok()) return Status(objects.status().code(), where + objects.status().message());
    std::vector<std::string> inputs;
    for (const auto& o : *objects) inputs.push_back(o.event);
    ADM_RETURN_IF_ERROR(record(inputs, "operator"));
  }
  for (const char* verb : {"submit", "import", "workloads"}) {
    if (!step[verb]) continue;
    const bool compact = std::string(verb) == "workloads";
    const std::string text = compact ? testing::WorkloadYaml(step[verb]) : step[verb].as<std::string>();
    const std::string kind = compact ? "submit" : verb;
    ops::SubmitContext ctx;
    ctx.name_seed = std::to_string(log.GetHead().sequence);
    auto objects =
        kind == "submit" ? ops::ParseSubmitYaml(text, ctx) : ops::ParseImportYaml(text, ctx);
    if (!objects.ok()) return Status(objects.status().code(), where + objects.status().message());
    std::vector<std::string> inputs;
    for (const auto& o : *objects) {
      auto decoded = schema::DecodeEvent(o.event);
      if (!decoded.ok()) return decoded.status();
      capnp::MallocMessageBuilder message;
      message.setRoot(decoded->root());
      message.getRoot<schema::Event>().setIdempotencyKey(kind + "/" + o.ns + "/" + o.name);
      inputs.push_back(schema::EncodeEvent(message));
    }
    ADM_RETURN_IF_ERROR(record(inputs, "submitter"));
  }
  auto workload = [&](const std::string& key) -> const projections::WorkloadState* {
    auto it = service.engine().workloads().find(key);
    return it == service.engine().workloads().end() ? nullptr : &it->second;
  };
  auto set_ref = [](schema::WorkloadRef::Builder ref, const projections::WorkloadState& wl) {
    ref.setNamespace(wl.ns);
    ref.setName(wl.name);
    ref.setUid(wl.uid);
  };
  auto missing = [&](const std::string& key) {
    return Status(Code::kNotFound, where + "no workload " + key);
  };
  for (const char* verb : {"finish", "delete", "finish_by_uid"}) {
    if (!step[verb]) continue;
    std::vector<std::string> names;
    if (step[verb].IsSequence()) {
      for (const auto& n : step[verb]) names.push_back(n.as<std::string>());
    } else {
      names.push_back(step[verb].as<std::string>());
    }
    std::vector<std::string> inputs;
    for (const std::string& key : names) {
      const projections::WorkloadState* wl = workload(key);
      if (wl == nullptr) return missing(key);
      capnp::MallocMessageBuilder message;
      auto event = message.initRoot<schema::Event>();
      const bool delete_it = std::string(verb) == "delete";
      auto ref = delete_it ? event.initBody().initWorkloadDeleted().initWorkload()
                           : event.initBody().initWorkloadFinished().initWorkload();
      ref.setNamespace(wl->ns);
      if (std::string(verb) != "finish_by_uid") ref.setName(wl->name);  // else the uid alone
      ref.setUid(wl->uid);
      inputs.push_back(schema::EncodeEvent(message));
    }
    ADM_RETURN_IF_ERROR(record(inputs, "runtime"));
  }
  if (const auto& r = step["report"]) {
    const std::string key = r["workload"].as<std::string>();
    const projections::WorkloadState* wl = workload(key);
    if (wl == nullptr) return missing(key);
    capnp::MallocMessageBuilder m;
    auto rep = m.initRoot<schema::Event>().initBody().initCheckStateReported();
    set_ref(rep.initWorkload(), *wl);
    rep.setCheck(r["check"].as<std::string>());
    const std::string gen = r["generation"] ? r["generation"].as<std::string>() : "current";
    rep.setGeneration(gen == "current" ? wl->generation : std::stoull(gen));
    const std::string state = r["state"].as<std::string>();
    rep.setState(state == "Ready"      ? schema::CheckState::READY
                 : state == "Retry"    ? schema::CheckState::RETRY
                 : state == "Rejected" ? schema::CheckState::REJECTED
                                       : schema::CheckState::PENDING);
    if (r["message"]) rep.setMessage(r["message"].as<std::string>());
    if (r["requeueAfter"]) {
      auto after = schema::ParseDurationNs(r["requeueAfter"].as<std::string>());
      if (!after.ok()) return after.status();
      rep.setRequeueAfterNs(*after);
    }
    ADM_RETURN_IF_ERROR(
        record({schema::EncodeEvent(m)}, r["as"] ? r["as"].as<std::string>() : "nobody"));
  }
  if (const auto& p = step["pods"]) {
    const std::string key = p["workload"].as<std::string>();
    const projections::WorkloadState* wl = workload(key);
    if (wl == nullptr) return missing(key);
    capnp::MallocMessageBuilder m;
    auto rep = m.initRoot<schema::Event>().initBody().initPodsReported();
    set_ref(rep.initWorkload(), *wl);
    const std::string token = p["token"] ? p["token"].as<std::string>() : "current";
    rep.setFencingToken(token == "current" ? (wl->fencing_token.empty()
                                                  ? wl->uid + "/" + std::to_string(wl->generation)
                                                  : wl->fencing_token)
                                           : token);
    const std::string what = p["report"].as<std::string>();
    rep.setReport(what == "released"     ? schema::PodsReport::RELEASED
                  : what == "ready"      ? schema::PodsReport::READY
                  : what == "terminated" ? schema::PodsReport::TERMINATED
                                         : schema::PodsReport::FINISHED);
    ADM_RETURN_IF_ERROR(record({schema::EncodeEvent(m)}, "pod-runtime"));
  }
  if (const auto& r = step["revoke"]) {
    capnp::MallocMessageBuilder m;
    auto rev = m.initRoot<schema::Event>().initBody().initRevocationRequested();
    if (r["workload"]) {
      const std::string key = r["workload"].as<std::string>();
      const projections::WorkloadState* wl = workload(key);
      if (wl == nullptr) return missing(key);
      set_ref(rev.getTarget().initWorkload(), *wl);
    } else if (r["check"]) {
      rev.getTarget().setCheck(r["check"].as<std::string>());
    } else {
      rev.getTarget().setFlavor(r["flavor"].as<std::string>());
    }
    rev.setReason(r["reason"] ? r["reason"].as<std::string>() : "test");
    if (r["drain"] && r["drain"].as<bool>()) rev.setPodSetAction(schema::PodSetAction::DRAIN);
    if (r["drainDeadline"]) {
      auto deadline = schema::ParseDurationNs(r["drainDeadline"].as<std::string>());
      if (!deadline.ok()) return deadline.status();
      rev.setDrainDeadlineNs(clock.now_ns + *deadline);
    }
    ADM_RETURN_IF_ERROR(
        record({schema::EncodeEvent(m)}, r["as"] ? r["as"].as<std::string>() : "security"));
  }
  if (step["tick"]) {
    capnp::MallocMessageBuilder m;
    m.initRoot<schema::Event>().initBody().initClockAdvanced().setToNs(clock.now_ns);
    ADM_RETURN_IF_ERROR(record({schema::EncodeEvent(m)}, "clock"));
  }
  if (const auto& n = step["node"]) {
    capnp::MallocMessageBuilder m;
    auto body = m.initRoot<schema::Event>().initBody();
    const std::string action = n["action"].as<std::string>();
    auto node = action == "capacity" ? body.initNodeCapacityChanged()
                : action == "fail"   ? body.initNodeFailed()
                                     : body.initNodeRecovered();
    node.setNode(n["node"].as<std::string>());
    if (n["flavor"]) node.setFlavor(n["flavor"].as<std::string>());
    if (n["capacity"]) {
      auto list = node.initCapacity(static_cast<unsigned>(n["capacity"].size()));
      unsigned i = 0;
      for (const auto& c : n["capacity"]) {
        auto milli = schema::ParseQuantityMilli(c.second.as<std::string>());
        if (!milli.ok()) return milli.status();
        list[i].setName(c.first.as<std::string>());
        list[i].setMilli(*milli);
        ++i;
      }
    }
    ADM_RETURN_IF_ERROR(record({schema::EncodeEvent(m)}, "node-monitor"));
  }
  if (const auto& w = step["maintenance"]) {
    capnp::MallocMessageBuilder m;
    auto win = m.initRoot<schema::Event>().initBody().initMaintenanceWindowDefined();
    auto from = ParseRfc3339(w["from"].as<std::string>());
    auto to = ParseRfc3339(w["to"].as<std::string>());
    if (!from.ok()) return from.status();
    if (!to.ok()) return to.status();
    win.setName(w["name"].as<std::string>());
    win.setFlavor(w["flavor"].as<std::string>());
    win.setStartNs(*from);
    win.setEndNs(*to);
    ADM_RETURN_IF_ERROR(record({schema::EncodeEvent(m)}, "operator"));
  }
  if (const auto& c = step["configure"]) {
    capnp::MallocMessageBuilder m;
    auto cfg = m.initRoot<schema::Event>().initBody().initEngineConfigDefined();
    auto duration = [&](const char* key, int64_t* out) -> Status {
      auto d = schema::ParseDurationNs(c[key].as<std::string>());
      if (!d.ok()) return d.status();
      *out = *d;
      return Status::Ok();
    };
    if (c["podsReadyTimeout"]) {
      int64_t ns = 0;
      ADM_RETURN_IF_ERROR(duration("podsReadyTimeout", &ns));
      cfg.setWaitForPodsReadyEnabled(true);
      cfg.setPodsReadyTimeoutNs(ns);
    }
    if (c["backoffBaseSeconds"]) cfg.setBackoffBaseSeconds(c["backoffBaseSeconds"].as<int>());
    if (c["backoffMaxSeconds"]) cfg.setBackoffMaxSeconds(c["backoffMaxSeconds"].as<int>());
    if (c["backoffLimitCount"]) cfg.setBackoffLimitCount(c["backoffLimitCount"].as<int>());
    if (c["agingStep"]) {
      int64_t ns = 0;
      ADM_RETURN_IF_ERROR(duration("agingStep", &ns));
      cfg.setAgingStepNs(ns);
    }
    if (c["agingMax"]) cfg.setAgingPriorityMax(c["agingMax"].as<int>());
    if (c["fairSharing"]) cfg.setFairSharingEnabled(c["fairSharing"].as<bool>());
    if (c["retainFinished"]) cfg.setRetainFinishedNs(*schema::ParseRetentionNs(c["retainFinished"].as<std::string>()));
    if (c["retainDeactivated"]) cfg.setRetainDeactivatedNs(*schema::ParseRetentionNs(c["retainDeactivated"].as<std::string>()));
    ADM_RETURN_IF_ERROR(record({schema::EncodeEvent(m)}, "operator"));
  }
  return Status::Ok();
}

// A scenario run on a log: the ledger as text (ExportLedger) and its decision-stream hash.
struct RunLedger {
  std::string text;
  std::string hash;
  uint64_t events = 0;
  uint64_t decisions = 0;
};

Result<RunLedger> RunScenario(const std::string& scenario, ledger::EventLog& log,
                              int64_t start_ns = StepClock::kCorpusStartNs) {
  StepClock clock;
  clock.now_ns = start_ns;
  auto service = ops::Service::Open(log, clock);
  if (!service.ok()) return service.status();
  YAML::Node doc = YAML::LoadFile(scenario);
  size_t index = 0;
  for (const auto& step : doc["steps"]) {
    Status s = RunStep(step, ++index, log, clock, **service);
    if (!s.ok()) return Status(s.code(), scenario + ": " + s.message());
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
