// libFuzzer target: a Kueue YAML file through admitctl's apply, submit or import (chosen at
// build time: ADMISSION_YAML_VERB is 0, 1 or 2), from the parser to the ledger. Each input is
// parsed as `admitctl apply|submit|import -f FILE` parses it (ops/admitctl/admitctl.cc, RunFile)
// and recorded through ops::Service on a fresh World. Asserts: no crash and no sanitizer
// report; a refused file (the parser's or the Service's refusal) leaves the ledger's head
// where it was; an accepted one leaves a ledger every reader can decode, whose hash chain
// holds.

#include <capnp/message.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_world.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"

namespace admission::fuzz {
namespace {

enum class Verb { kApply = 0, kSubmit = 1, kImport = 2 };
constexpr Verb kVerb = static_cast<Verb>(ADMISSION_YAML_VERB);

// Bounds the work of one input (the parser itself allows kYamlBytesMax): longer inputs teach
// the fuzzer nothing a short one does not, and would slow every run.
constexpr size_t kInputBytesMax = 64 << 10;

void RunOne(std::string_view text) {
  World world;
  const ledger::Head before = world.log.GetHead();
  ops::SubmitContext ctx;
  ctx.name_seed = std::to_string(before.sequence);
  Result<std::vector<ops::ParsedObject>> objects =
      kVerb == Verb::kApply    ? ops::ParseApplyYaml(text)
      : kVerb == Verb::kSubmit ? ops::ParseSubmitYaml(text, ctx)
                               : ops::ParseImportYaml(text, ctx);
  if (!objects.ok() || objects->empty()) return;  // refused before the Service: nothing to write
  std::vector<std::string> inputs;
  if (kVerb == Verb::kApply) {
    for (const ops::ParsedObject& o : *objects) inputs.push_back(o.event);
  } else {
    // As admitctl: each workload keyed by WorkloadKey.
    inputs = ops::KeyedWorkloadEvents(kVerb == Verb::kSubmit ? "submit" : "import", *objects);
  }
  ops::IntakeOptions options;
  options.actor = kVerb == Verb::kApply ? "operator" : "submitter";
  options.at_ns = kWorldTimeNs;  // embedded admitctl: no request id unless --request-id
  auto outcome = world.service->Record(inputs, options);
  if (!outcome.ok()) {
    CheckNothingWritten(before, world.log.GetHead(), outcome.status());
    return;
  }
  ADM_CHECK(outcome->sequences.size() == inputs.size(), "%zu sequences for %zu inputs",
            outcome->sequences.size(), inputs.size());
  CheckLedgerReadable(world.log);
}

}  // namespace
}  // namespace admission::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > admission::fuzz::kInputBytesMax) return -1;  // not added to the corpus
  admission::fuzz::RunOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
