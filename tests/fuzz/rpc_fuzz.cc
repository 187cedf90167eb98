// libFuzzer target: bytes as one message of admitd's RPC stream, read as the daemon reads a
// connection (capnp's stream framing: segment table, then segments; rpc::PeerReaderOptions'
// traversal and nesting limits), then served as ops/rpc/server.cc serves it, without a socket:
// - the root as an rpc.capnp Message; a Call to the Ledger interface has its params read as
//   that method's params struct (record, watch, get, workload, explain);
// - the same root read directly as record's params (the shortest way for the fuzzer to reach
//   the record path).
// A record call goes through the daemon's own checks (rpc::RecordCallOf: request id, input
// count, DecodeEvent and the policy's MayRecord for each input) for every principal of a fixed
// policy, and the first principal it is allowed to is recorded through Service::RecordGroup
// (admitd's group commit) on a fresh World. Asserts, besides no crash, no uncaught exception
// and no sanitizer report: a refused record call leaves the ledger's head where it was, an
// accepted one leaves a ledger every reader can decode. The other methods run the policy check
// and the read they would answer (RenderGet, the workload lookup, RenderExplain, MayWatch).

#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_world.h"
#include "ops/service/api.h"
#include "ops/rpc/policy.h"
#include "ops/rpc/server.h"
#include "ops/rpc/transport.h"
#include "schema/admission_rpc.capnp.h"

namespace admission::fuzz {
namespace {

using ::admission::rpc::Ledger;

// Inputs beyond this teach the fuzzer nothing new; the transport's own bound is
// kRequestWordsMax words.
constexpr size_t kInputBytesMax = 64 << 10;

// The policy's principals, in the order a record call is tried as them: the narrow roles
// first, so that the fuzzer meets the checks that can refuse.
const char* const kPrincipals[] = {"tenant-a",   "check-controller", "runtime",
                                   "auditor",    "operator",         "uid:1000",
                                   ops::rpc::kAdminPrincipal};

const ops::rpc::Policy& FixedPolicy() {
  static const ops::rpc::Policy kPolicy = [] {
    auto policy = ops::rpc::Policy::Parse(
        "principals:\n"
        "- {name: operator, roles: [operator]}\n"
        "- {name: tenant-a, roles: [tenant], namespaces: [a]}\n"
        "- {name: check-controller, roles: [check-controller]}\n"
        "- {name: runtime, roles: [runtime]}\n"
        "- {name: auditor, roles: [auditor]}\n",
        "fuzz");
    ADM_CHECK(policy.ok(), "policy: %s", policy.status().ToString().c_str());
    return std::move(*policy);
  }();
  return kPolicy;
}

// FUZZ_VERBOSE=1 prints what each call came to (to read one input's run, not while fuzzing).
bool Verbose() {
  static const bool kVerbose = std::getenv("FUZZ_VERBOSE") != nullptr;
  return kVerbose;
}

// Reading a malformed message throws, as it does inside the RPC system (the call is answered
// with that exception, or the connection dropped): only the reads of the message run under
// this. What the daemon does with what it read (the Service, the renderers, the policy) runs
// outside it, so an exception there is a crash libFuzzer reports, as it would end admitd.
template <typename F>
bool ReadMessage(F&& read) {
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions(std::forward<F>(read));
  return error == nullptr;
}

// `params` reads the call's params from the message (it may throw).
void ServeRecord(const std::function<Ledger::RecordParams::Reader()>& params) {
  World world;
  for (const char* principal : kPrincipals) {
    Result<ops::RecordCall> call = Status(Code::kInvalidArgument, "unread");
    if (!ReadMessage([&]() {
          call = ops::rpc::RecordCallOf(FixedPolicy(), principal, params().getRequest(),
                                        world.service->engine());
        })) {
      return;
    }
    if (Verbose()) {
      std::fprintf(stderr, "record as %s: %s\n", principal,
                   call.ok() ? "allowed" : call.status().ToString().c_str());
    }
    if (!call.ok()) continue;  // refused before any work: nothing written
    const ledger::Head before = world.log.GetHead();
    std::vector<ops::RecordCall> calls;
    calls.push_back(std::move(*call));
    std::vector<Result<ops::RecordOutcome>> outcomes = world.service->RecordGroup(calls);
    ADM_CHECK(outcomes.size() == 1, "%zu outcomes of one call", outcomes.size());
    if (Verbose()) {
      std::fprintf(stderr, "recorded: %s\n",
                   outcomes[0].ok() ? "ok" : outcomes[0].status().ToString().c_str());
    }
    if (!outcomes[0].ok()) {
      CheckNothingWritten(before, world.log.GetHead(), outcomes[0].status());
    } else {
      CheckLedgerReadable(world.log);
    }
    return;
  }
}

std::vector<std::string> Texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  for (auto t : list) out.emplace_back(t.cStr());
  return out;
}

// The read-only methods: the fields as the server reads them, then its policy check and the
// read it would answer, for every principal.
void ServeRead(uint16_t method, capnp::AnyPointer::Reader content) {
  std::string name, kind, format;
  uint64_t at = 0;
  std::vector<std::string> kinds, namespaces, cluster_queues, checks;
  const bool read = ReadMessage([&]() {
    switch (method) {
      case 4:  // workload
        name = content.getAs<Ledger::WorkloadParams>().getName();
        break;
      case 5: {  // get
        auto get = content.getAs<Ledger::GetParams>();
        kind = get.getKind();
        format = get.getFormat();
        break;
      }
      case 6: {  // explain
        auto explain = content.getAs<Ledger::ExplainParams>();
        name = explain.getName();
        at = explain.getAt();
        format = explain.getFormat();
        break;
      }
      case 10: {  // watch
        auto filter = content.getAs<Ledger::WatchParams>().getFilter();
        kinds = Texts(filter.getKinds());
        namespaces = Texts(filter.getNamespaces());
        cluster_queues = Texts(filter.getClusterQueues());
        checks = Texts(filter.getChecks());
        break;
      }
      default:
        break;
    }
  });
  if (!read || (method != 4 && method != 5 && method != 6 && method != 10)) return;
  World world;
  const ops::rpc::Policy& policy = FixedPolicy();
  const std::string ns = name.substr(0, name.find('/'));
  for (const char* principal : kPrincipals) {
    if (method == 4 && policy.MaySee(principal, "look up", ns).ok()) {
      (void)world.service->engine().workloads().count(name);
    } else if (method == 5 && policy.MaySee(principal, "get", "").ok()) {
      ops::NamespaceScope scope{policy.ScopeOf(principal)};
      if (std::string_view(principal) == ops::rpc::kAdminPrincipal) scope.namespaces.clear();
      (void)ops::RenderGet(world.service->engine(), kind, format, scope);
    } else if (method == 6 && policy.MaySee(principal, "explain", ns).ok()) {
      (void)ops::RenderExplain(world.log, name, at, format, nullptr);
    } else if (method == 10) {
      std::vector<std::string> allowed_namespaces = namespaces, allowed_checks = checks;
      (void)policy.MayWatch(principal, &allowed_namespaces, &allowed_checks,
                            world.service->engine());
    }
  }
}

void RunOne(std::string_view bytes) {
  const size_t word_count = bytes.size() / sizeof(capnp::word);
  if (word_count == 0) return;
  // The transport reads into word-aligned buffers; so does this.
  auto words = std::make_unique<capnp::word[]>(word_count);
  std::memcpy(words.get(), bytes.data(), word_count * sizeof(capnp::word));
  std::unique_ptr<capnp::FlatArrayMessageReader> reader;
  bool is_ledger_call = false;
  uint16_t method = 0;
  capnp::AnyPointer::Reader content;
  if (!ReadMessage([&]() {
        reader = std::make_unique<capnp::FlatArrayMessageReader>(
            kj::arrayPtr(words.get(), word_count), ops::rpc::PeerReaderOptions());
        auto message = reader->getRoot<capnp::rpc::Message>();
        if (message.which() != capnp::rpc::Message::CALL) return;
        auto call = message.getCall();
        if (call.getInterfaceId() != capnp::typeId<Ledger>()) return;
        is_ledger_call = true;
        method = call.getMethodId();
        content = call.getParams().getContent();
      })) {
    return;
  }
  if (is_ledger_call) {
    if (method == 1) {
      ServeRecord([&]() { return content.getAs<Ledger::RecordParams>(); });
    } else {
      ServeRead(method, content);
    }
  }
  ServeRecord([&]() { return reader->getRoot<Ledger::RecordParams>(); });
}

}  // namespace
}  // namespace admission::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > admission::fuzz::kInputBytesMax) return -1;
  admission::fuzz::RunOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
