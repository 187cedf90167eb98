// Writes the fuzz targets' seed corpora (docs/faults.md, "Fuzzing and sanitizers"), one folder
// per target under OUT_DIR, each file named by a hash of its bytes:
//   yaml_apply, yaml_submit, yaml_import: the Kueue YAML of tests/scenarios/*.yaml's steps
//     (the compact `workloads:` form expanded as the scenario tests expand it);
//   event: one stored event of each body kind found in the golden ledgers (tests/golden/);
//   snapshot: a snapshot at the head of each golden ledger and of the fuzz World;
//   rpc: admitd record calls (rpc.capnp Message, Call to Ledger.record) of the scenarios'
//     inputs, the same params as a bare root, and one get, explain, workload and watch call.
// Usage: fuzz_seeds SOURCE_DIR OUT_DIR. The corpora in tests/fuzz/corpus/ were made by it;
// ctest also runs it before the fuzz tests, so the snapshot seeds always carry this build's
// format and engine versions.

#include <capnp/message.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_world.h"
#include "ledger/snapshot_store.h"
#include "ops/service/api.h"
#include "replay/ledger_file.h"
#include "schema/admission_rpc.capnp.h"
#include "tests/scenarios/workload_yaml.h"

namespace admission::fuzz {
namespace {

namespace fs = std::filesystem;
using ::admission::rpc::Ledger;

// Few seeds per target: the fuzzer grows the corpus itself; seeds only show it the shapes.
constexpr size_t kSeedsPerTargetMax = 32;
constexpr size_t kRpcInputsPerCallMax = 8;
// Record calls (each as a Call message and as bare params), half of them apply's, leaving room
// in the rpc corpus for the read calls.
constexpr size_t kRecordCallsMax = 12;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ADM_CHECK(in.good(), "cannot read %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Corpus {
 public:
  Corpus(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  void Add(const std::string& bytes) {
    if (written_ >= kSeedsPerTargetMax || bytes.empty()) return;
    const std::string name = "seed-" + schema::HashHex(schema::Sha256Of(bytes)).substr(0, 16);
    if (!names_.insert(name).second) return;
    std::ofstream out(dir_ / name, std::ios::binary);
    out << bytes;
    ADM_CHECK(out.good(), "cannot write %s", (dir_ / name).c_str());
    ++written_;
  }

 private:
  fs::path dir_;
  std::set<std::string> names_;
  size_t written_ = 0;
};

std::vector<fs::path> Sorted(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == extension) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The framed bytes of a message, as the two-party transport writes it.
std::string Framed(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  return std::string(reinterpret_cast<const char*>(words.begin()), words.size() * sizeof(capnp::word));
}

void AddRecordCalls(const std::vector<std::vector<std::string>>& calls, Corpus* corpus) {
  uint32_t question = 0;
  for (const auto& inputs : calls) {
    const size_t count = std::min(inputs.size(), kRpcInputsPerCallMax);
    auto fill = [&](Ledger::RecordParams::Builder params) {
      auto request = params.initRequest();
      request.setRequestId("seed-" + std::to_string(question));
      auto list = request.initInputs(static_cast<unsigned>(count));
      for (size_t i = 0; i < count; ++i) {
        list.set(static_cast<unsigned>(i),
                 capnp::Data::Reader(reinterpret_cast<const kj::byte*>(inputs[i].data()),
                                     inputs[i].size()));
      }
    };
    capnp::MallocMessageBuilder rpc_message;
    auto call = rpc_message.initRoot<capnp::rpc::Message>().initCall();
    call.setQuestionId(question++);
    call.initTarget().setImportedCap(0);
    call.setInterfaceId(capnp::typeId<Ledger>());
    call.setMethodId(1);
    fill(call.initParams().getContent().initAs<Ledger::RecordParams>());
    corpus->Add(Framed(rpc_message));
    capnp::MallocMessageBuilder bare;
    fill(bare.initRoot<Ledger::RecordParams>());
    corpus->Add(Framed(bare));
  }
}

void AddReadCalls(Corpus* corpus) {
  auto call_of = [](capnp::MallocMessageBuilder& m, uint16_t method) {
    auto call = m.initRoot<capnp::rpc::Message>().initCall();
    call.setQuestionId(method);
    call.initTarget().setImportedCap(0);
    call.setInterfaceId(capnp::typeId<Ledger>());
    call.setMethodId(method);
    return call.initParams().getContent();
  };
  {
    capnp::MallocMessageBuilder m;
    call_of(m, 4).initAs<Ledger::WorkloadParams>().setName("a/big");
    corpus->Add(Framed(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto get = call_of(m, 5).initAs<Ledger::GetParams>();
    get.setKind("clusterqueues");
    get.setFormat("yaml");
    corpus->Add(Framed(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto explain = call_of(m, 6).initAs<Ledger::ExplainParams>();
    explain.setName("a/big");
    explain.setFormat("json");
    corpus->Add(Framed(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto filter = call_of(m, 10).initAs<Ledger::WatchParams>().initFilter();
    filter.initNamespaces(1).set(0, "a");
    filter.initChecks(1).set(0, "provisioning");
    corpus->Add(Framed(m));
  }
}

int Run(const fs::path& source, const fs::path& out) {
  Corpus apply(out / "yaml_apply"), submit(out / "yaml_submit"), import(out / "yaml_import");
  Corpus events(out / "event"), snapshots(out / "snapshot"), rpc(out / "rpc");

  // YAML from the scenarios, and the inputs it parses to for the RPC seeds.
  apply.Add(std::string(kWorldDefinitions));
  std::vector<std::vector<std::string>> record_calls;
  for (const fs::path& file : Sorted(source / "tests/scenarios", ".yaml")) {
    YAML::Node scenario = YAML::LoadFile(file.string());
    for (const YAML::Node& step : scenario["steps"]) {
      if (step["apply"]) {
        const std::string text = step["apply"].as<std::string>();
        apply.Add(text);
        auto parsed = ops::ParseApplyYaml(text);
        if (parsed.ok() && record_calls.size() < kRecordCallsMax / 2) {
          std::vector<std::string> inputs;
          for (const auto& o : *parsed) inputs.push_back(o.event);
          record_calls.push_back(inputs);
        }
      }
      const std::string submitted = step["submit"]      ? step["submit"].as<std::string>()
                                    : step["workloads"] ? testing::WorkloadYaml(step["workloads"])
                                                        : "";
      if (!submitted.empty()) {
        submit.Add(submitted);
        auto parsed = ops::ParseSubmitYaml(submitted, ops::SubmitContext{"1", ""});
        if (parsed.ok() && record_calls.size() < kRecordCallsMax) {
          std::vector<std::string> inputs;
          for (const auto& o : *parsed) inputs.push_back(o.event);
          record_calls.push_back(inputs);
        }
      }
      if (step["import"]) import.Add(step["import"].as<std::string>());
    }
  }
  AddRecordCalls(record_calls, &rpc);
  AddReadCalls(&rpc);

  // Events and snapshots from the golden ledgers, and a snapshot of the World.
  std::set<int> kinds_seen;
  FixedClock clock;
  for (const fs::path& file : Sorted(source / "tests/golden", ".ledger")) {
    ledger::MemoryLog log;
    Status imported = replay::ImportLedger(ReadFile(file), log);
    ADM_CHECK(imported.ok(), "%s: %s", file.c_str(), imported.ToString().c_str());
    auto stored = log.Read(1, ledger::kReadEventsMax);
    ADM_CHECK(stored.ok(), "%s", stored.status().ToString().c_str());
    for (const ledger::StoredEvent& e : *stored) {
      auto decoded = schema::DecodeEvent(e.bytes);
      ADM_CHECK(decoded.ok(), "%s", decoded.status().ToString().c_str());
      if (kinds_seen.insert(static_cast<int>(decoded->root().getBody().which())).second) {
        events.Add(e.bytes);
      }
    }
    ledger::MemorySnapshotStore store;
    ops::ServiceOptions options;
    options.snapshots = &store;
    options.snapshot_every_events = 0;
    auto service = ops::Service::Open(log, clock, nullptr, options);
    ADM_CHECK(service.ok(), "%s", service.status().ToString().c_str());
    auto taken = (*service)->Snapshot();
    ADM_CHECK(taken.ok(), "%s", taken.status().ToString().c_str());
    auto bytes = store.Read(taken->after);
    ADM_CHECK(bytes.ok(), "%s", bytes.status().ToString().c_str());
    snapshots.Add(bytes->bytes);
    // The admitted workloads as `admitctl get workloads -o yaml` prints them (with
    // status.admission): what import reads.
    auto workloads = ops::RenderGet((*service)->engine(), "workloads", "yaml");
    ADM_CHECK(workloads.ok(), "%s", workloads.status().ToString().c_str());
    import.Add(*workloads);
  }
  {
    World world;
    ledger::MemorySnapshotStore store;
    ops::ServiceOptions options;
    options.snapshots = &store;
    auto service = ops::Service::Open(world.log, clock, nullptr, options);
    ADM_CHECK(service.ok(), "%s", service.status().ToString().c_str());
    auto taken = (*service)->Snapshot();
    ADM_CHECK(taken.ok(), "%s", taken.status().ToString().c_str());
    auto bytes = store.Read(taken->after);
    ADM_CHECK(bytes.ok(), "%s", bytes.status().ToString().c_str());
    snapshots.Add(bytes->bytes);
  }
  std::printf("fuzz_seeds: wrote the corpora under %s\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace admission::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  return admission::fuzz::Run(argv[1], argv[2]);
}
