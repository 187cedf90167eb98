// admitd's Cap'n Proto methods (schema/admission_rpc.capnp's Ledger): the record calls'
// checks (RecordCallOf, the manifest's parse and ManifestRecordCall) and Daemon::LedgerImpl,
// which answers every method for one connection's principal. The serving loop, group commit
// and watches are in daemon.cc and watch.cc.

#include "ops/rpc/server.h"

#include <chrono>

#include <malloc.h>

#include <algorithm>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include "ops/rpc/daemon_internal.h"
#include "ops/rpc/workload_state.h"
#include "ops/service/api.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"

namespace admission::ops::rpc {

namespace {

// A manifest parsed of at least this many bytes is followed by malloc_trim: the parser's tree
// (about 150 times the manifest's bytes at worst, docs/admitd.md "Limits") is freed to the
// allocator, which would otherwise keep it resident.
constexpr size_t kTrimAfterManifestBytes = size_t{256} << 10;

capnp::Data::Reader DataOf(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

std::vector<std::string> Texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  for (auto t : list) out.emplace_back(t.cStr());
  return out;
}

}  // namespace

void FillEvents(capnp::List<StoredEvent>::Builder list,
                const std::vector<ledger::StoredEvent>& events) {
  for (unsigned i = 0; i < events.size(); ++i) {
    list[i].setSequence(events[i].sequence);
    list[i].setBytes(DataOf(events[i].bytes));
  }
}

// One page of the ledger for a `read` reply: up to max_count events from `from` on, only as
// many as fit in kReadPageBytesMax stored bytes, and always the first (a client that asked for
// events below the head gets at least one, so it makes progress).
Result<std::vector<ledger::StoredEvent>> ReadPage(ledger::EventLog& log, uint64_t from,
                                                  size_t max_count) {
  std::vector<ledger::StoredEvent> page;
  size_t bytes = 0;
  auto shown = log.Scan(from, max_count, [&](ledger::Sequence sequence, std::string_view stored) {
    if (!page.empty() && bytes + stored.size() > kReadPageBytesMax) return false;
    bytes += stored.size();
    page.push_back(ledger::StoredEvent{sequence, std::string(stored)});
    return true;
  });
  if (!shown.ok()) return shown.status();
  return page;
}

Result<RecordCall> RecordCallOf(const Policy& policy, const std::string& principal,
                                ::admission::rpc::RecordRequest::Reader request,
                                const projections::Engine& engine) {
  if (request.getRequestId().size() == 0) {
    return Status(Code::kInvalidArgument,
                  "record: requestId is empty; every mutating call carries a request id");
  }
  if (request.getRequestId().size() > kRequestIdBytesMax) {
    return Status(Code::kInvalidArgument,
                  "record: requestId is " + std::to_string(request.getRequestId().size()) +
                      " bytes; at most " + std::to_string(kRequestIdBytesMax) + " are allowed");
  }
  // Read once: every get of a list counts its whole size against the message's traversal
  // limit again, so reading it per input made a call of 2,048 inputs read 2,048 lists.
  const capnp::List<capnp::Data>::Reader inputs = request.getInputs();
  if (inputs.size() == 0 || inputs.size() > ledger::kAppendBatchEventsMax / 2) {
    return Status(Code::kInvalidArgument,
                  "record: a request holds 1 to " +
                      std::to_string(ledger::kAppendBatchEventsMax / 2) + " inputs, not " +
                      std::to_string(inputs.size()));
  }
  RecordCall call;
  call.inputs.reserve(inputs.size());
  for (unsigned i = 0; i < inputs.size(); ++i) {
    auto data = inputs[i];
    // Decoded once, here: the intake and the append take this decoded input.
    auto decoded = schema::DecodeEvent(
        std::string_view(reinterpret_cast<const char*>(data.begin()), data.size()));
    if (!decoded.ok()) {
      return Status(Code::kInvalidArgument,
                    "input " + std::to_string(i) + ": " + decoded.status().message());
    }
    Status s = policy.MayRecord(principal, decoded->root(), engine);
    if (!s.ok()) return s;
    call.inputs.push_back(std::move(*decoded));
  }
  // The actor is the connection's principal, whatever the input says; the request id keys
  // every input that has no key of its own.
  call.options.actor = principal;
  call.options.force_actor = true;
  call.options.request_id = request.getRequestId().cStr();
  if (request.getHasAt()) call.options.at_ns = request.getAtNs();
  return call;
}

namespace {

// The modes of recordManifest: admitctl's apply, submit, import and delete.
Status CheckManifestMode(std::string_view mode) {
  if (mode != "apply" && mode != "submit" && mode != "import" && mode != "delete") {
    return Status(Code::kInvalidArgument, "recordManifest: mode '" + std::string(mode) +
                                              "' is not 'apply', 'submit', 'import' or 'delete'");
  }
  return Status::Ok();
}

}  // namespace

Status ManifestPreCheck(const Policy& policy, const std::string& principal, std::string_view mode,
                        size_t manifest_bytes) {
  ADM_RETURN_IF_ERROR(CheckManifestMode(mode));
  // The role first: a principal that could record nothing of this mode learns nothing of the
  // limits either.
  ADM_RETURN_IF_ERROR(policy.MayRecordManifest(principal, mode));
  if (manifest_bytes > kManifestBytesMax) {
    return Status(Code::kInvalidArgument,
                  "recordManifest: the manifest is " + std::to_string(manifest_bytes) +
                      " bytes; at most " + std::to_string(kManifestBytesMax) + " are allowed");
  }
  return Status::Ok();
}

Result<ParsedManifest> ParseManifest(std::string_view mode, std::string_view text,
                                     std::string request_id, const std::string& name_seed) {
  ADM_RETURN_IF_ERROR(CheckManifestMode(mode));
  if (text.size() > kManifestBytesMax) {
    return Status(Code::kInvalidArgument,
                  "recordManifest: the manifest is " + std::to_string(text.size()) +
                      " bytes; at most " + std::to_string(kManifestBytesMax) + " are allowed");
  }
  SubmitContext ctx;
  ctx.name_seed = name_seed;
  // A retry (the same request id) is the same workload, another request a new one.
  ctx.uid_seed = request_id;
  // The bridge sends objects as the API server stored them: validated against their CRDs and
  // kinds already (which may carry fields of Kueue's this parser does not know).
  ParseOptions parse;
  parse.field_validation = FieldValidation::kIgnore;
  // An import takes over from a Kueue that stopped at any point: what the ledger cannot honour
  // (a reservation whose checks are not all Ready, a check not Ready) is dropped, as admitctl
  // import --lenient drops it, and the workload is imported pending, not the manifest refused.
  parse.lenient = mode == "import";
  Result<std::vector<ParsedObject>> objects =
      mode == "apply"    ? ParseApplyYaml(text, parse)
      : mode == "delete" ? ParseDeleteYaml(text)
      : mode == "import" ? ParseImportYaml(text, ctx, parse)
                         : ParseSubmitYaml(text, ctx, parse);
  if (!objects.ok()) return objects.status();
  if (objects->empty()) {
    return Status(Code::kInvalidArgument, "recordManifest: the manifest holds no objects");
  }
  if (objects->size() > ledger::kAppendBatchEventsMax / 2) {
    return Status(Code::kInvalidArgument,
                  "recordManifest: the manifest holds " + std::to_string(objects->size()) +
                      " objects; at most " + std::to_string(ledger::kAppendBatchEventsMax / 2) +
                      " are allowed");
  }
  ParsedManifest parsed;
  parsed.request_id = std::move(request_id);
  // A workload is submitted (or imported) once: WorkloadKey names the object, as admitctl
  // submit and import key it.
  if (mode == "submit" || mode == "import") {
    parsed.inputs = KeyedWorkloadEvents(mode, *objects);
  } else {
    parsed.inputs.reserve(objects->size());
    for (ParsedObject& o : *objects) parsed.inputs.push_back(std::move(o.event));
  }
  return parsed;
}

Result<RecordCall> ManifestRecordCall(const Policy& policy, const std::string& principal,
                                      const ParsedManifest& parsed,
                                      const projections::Engine& engine) {
  // The events as a record request, so that every check of `record` applies unchanged.
  capnp::MallocMessageBuilder message;
  auto record = message.initRoot<::admission::rpc::RecordRequest>();
  record.setRequestId(parsed.request_id);
  auto inputs = record.initInputs(static_cast<unsigned>(parsed.inputs.size()));
  for (unsigned i = 0; i < parsed.inputs.size(); ++i) {
    inputs.set(i, capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(parsed.inputs[i].data()),
                                      parsed.inputs[i].size()));
  }
  return RecordCallOf(policy, principal, record.asReader(), engine);
}

Result<RecordCall> ManifestCallOf(const Policy& policy, const std::string& principal,
                                  ::admission::rpc::ManifestRequest::Reader request,
                                  const projections::Engine& engine, const std::string& name_seed) {
  const std::string_view mode = request.getMode().cStr();
  ADM_RETURN_IF_ERROR(ManifestPreCheck(policy, principal, mode, request.getManifest().size()));
  auto parsed = ParseManifest(mode,
                              std::string_view(request.getManifest().cStr(),
                                               request.getManifest().size()),
                              request.getRequestId().cStr(), name_seed);
  if (!parsed.ok()) return parsed.status();
  return ManifestRecordCall(policy, principal, *parsed, engine);
}

// Counts one call of a method and how long it took to answer, when it is destroyed: at the
// method's return for the calls answered at once, or with the promise it is attached to.
class CallTimer {
 public:
  CallTimer(DaemonStats& stats, const char* method)
      : stats_(stats), method_(method), started_(std::chrono::steady_clock::now()) {}
  ~CallTimer() {
    const uint64_t us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                  std::chrono::steady_clock::now() - started_)
                                                  .count());
    stats_.call_duration[method_].Observe(us);
  }

 private:
  DaemonStats& stats_;
  const char* method_;
  std::chrono::steady_clock::time_point started_;
};

// A record call's results, in words, a little over: the message's first segment is allocated
// (and zeroed) at this size, not capnp's default of 8 KiB.
capnp::MessageSize ResultsSize(const Result<RecordOutcome>& result) {
  uint64_t words = 32;
  if (!result.ok()) return capnp::MessageSize{words + result.status().message().size() / 8, 0};
  const RecordOutcome& o = result.value();
  words += o.sequences.size() + (o.unchanged.size() + o.configured.size()) / 64 + 4;
  for (const std::string& n : o.notes) words += n.size() / 8 + 2;
  for (const std::string& d : o.decisions) words += d.size() / 8 + 2;
  return capnp::MessageSize{words, 0};
}

// The capability a connection gets: every method checks the policy for the connection's
// principal first.
class Daemon::LedgerImpl final : public Ledger::Server {
 public:
  LedgerImpl(Daemon& daemon, std::string principal)
      : d_(daemon), principal_(std::move(principal)) {}

 protected:
  kj::Promise<void> whoami(WhoamiContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "whoami");
    auto results = context.getResults();
    results.setPrincipal(principal_);
    auto roles = d_.policy_.RolesOf(principal_);
    auto list = results.initRoles(static_cast<unsigned>(roles.size()));
    for (unsigned i = 0; i < roles.size(); ++i) list.set(i, roles[i]);
    return kj::READY_NOW;
  }

  kj::Promise<void> ping(PingContext) override { return kj::READY_NOW; }

  kj::Promise<void> record(RecordContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "record");
    auto request = context.getParams().getRequest();
    Status s = Admit();
    Result<RecordCall> checked = s.ok() ? RecordCallOf(d_.policy_, principal_, request,
                                                       d_.service_.engine())
                                        : Result<RecordCall>(s);
    return Enqueue(kj::mv(context), kj::mv(checked), "record", kj::mv(timer));
  }

  kj::Promise<void> recordManifest(RecordManifestContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "recordManifest");
    auto request = context.getParams().getRequest();
    const std::string mode = request.getMode();
    const size_t bytes = request.getManifest().size();
    // Authorized before any parsing (docs/admitd.md, "recordManifest"), then parsed on the
    // manifest worker within kManifestParseBytesMax, then checked as `record` on the loop.
    Status s = Admit();
    if (s.ok()) s = ManifestPreCheck(d_.policy_, principal_, mode, bytes);
    if (s.ok() && d_.shutting_down_) {
      s = Status(Code::kUnavailable, "admitd is shutting down; retry with the same request id");
    }
    if (s.ok() && d_.manifest_bytes_->load() + bytes > kManifestParseBytesMax) {
      s = Status(Code::kOverloaded,
                 std::to_string(d_.manifest_bytes_->load()) +
                     " bytes of manifests are being parsed; this one's " + std::to_string(bytes) +
                     " would pass the limit of " + std::to_string(kManifestParseBytesMax));
      ++d_.stats_.overloaded_calls;
    }
    if (!s.ok()) return Enqueue(kj::mv(context), Result<RecordCall>(s), "recordManifest", kj::mv(timer));
    // The worker gets its own copy; the request's message goes now.
    std::string text(request.getManifest().cStr(), bytes);
    std::string request_id = request.getRequestId();
    context.releaseParams();
    // Names made from generateName take the head as their seed, as admitctl submit's do.
    const std::string seed = std::to_string(d_.log_.GetHead().sequence);
    auto paf = kj::newPromiseAndCrossThreadFulfiller<kj::Own<Result<ParsedManifest>>>();
    std::shared_ptr<std::atomic<uint64_t>> in_flight = d_.manifest_bytes_;
    *in_flight += bytes;
    const bool queued = d_.manifests_->Submit(
        [text = std::move(text), request_id = std::move(request_id), mode, seed, in_flight,
         bytes, fulfiller = kj::mv(paf.fulfiller)]() mutable {
          auto parsed = kj::heap<Result<ParsedManifest>>(
              ParseManifest(mode, text, std::move(request_id), seed));
          std::string().swap(text);
          // The parser's tree is freed by now; give its pages back, or the daemon stays as
          // large as its largest parse.
          if (bytes >= kTrimAfterManifestBytes) ::malloc_trim(0);
          *in_flight -= bytes;
          fulfiller->fulfill(kj::mv(parsed));
        });
    if (!queued) {
      *in_flight -= bytes;
      ++d_.stats_.overloaded_calls;
      return Enqueue(kj::mv(context),
                     Result<RecordCall>(Status(Code::kOverloaded,
                                               std::to_string(kManifestQueueMax) +
                                                   " manifests wait for the parser already (the "
                                                   "limit)")),
                     "recordManifest", kj::mv(timer));
    }
    return paf.promise.then(
        [this, context, timer = kj::mv(timer)](kj::Own<Result<ParsedManifest>> parsed) mutable {
          // Back on the loop: the policy and the engine as they are now.
          Result<RecordCall> checked =
              parsed->ok() ? ManifestRecordCall(d_.policy_, principal_, **parsed,
                                                d_.service_.engine())
                           : Result<RecordCall>(parsed->status());
          return Enqueue(kj::mv(context), kj::mv(checked), "recordManifest", kj::mv(timer));
        });
  }

  // The rest of a record or recordManifest call: refused at once, or queued for a group commit
  // and answered with its outcome. Context: RecordContext or RecordManifestContext, whose
  // results both hold `outcome` and `error`.
  template <typename Context>
  kj::Promise<void> Enqueue(Context context, Result<RecordCall> checked, const char* method,
                            kj::Own<CallTimer> timer) {
    Status s = checked.ok() ? Status::Ok() : checked.status();
    if (s.ok() && d_.shutting_down_) {
      s = Status(Code::kUnavailable, "admitd is shutting down; retry with the same request id");
    }
    if (s.ok() && d_.pending_.size() >= kPendingCallsMax) {
      s = Status(Code::kOverloaded, std::to_string(d_.pending_.size()) +
                                        " calls are waiting for the ledger (the limit is " +
                                        std::to_string(kPendingCallsMax) + ")");
      ++d_.stats_.overloaded_calls;
    }
    if (!s.ok()) {
      Count(s, method);
      ToError(s, context.getResults().initError());
      return kj::READY_NOW;
    }
    auto paf = kj::newPromiseAndFulfiller<kj::Own<Result<RecordOutcome>>>();
    auto call = kj::heap<PendingCall>();
    call->call = std::move(*checked);
    call->fulfiller = kj::mv(paf.fulfiller);
    call->caller = this;
    d_.Enqueue(kj::mv(call));
    return paf.promise.attach(kj::mv(timer)).then([context](kj::Own<Result<RecordOutcome>> owned) mutable {
      const Result<RecordOutcome>& result = *owned;
      auto results = context.getResults(ResultsSize(result));
      if (!result.ok()) {
        ToError(result.status(), results.initError());
        return;
      }
      const RecordOutcome& o = result.value();
      auto out = results.initOutcome();
      auto seqs = out.initSequences(static_cast<unsigned>(o.sequences.size()));
      for (unsigned i = 0; i < o.sequences.size(); ++i) seqs.set(i, o.sequences[i]);
      auto unchanged = out.initUnchanged(static_cast<unsigned>(o.unchanged.size()));
      for (unsigned i = 0; i < o.unchanged.size(); ++i) unchanged.set(i, o.unchanged[i]);
      auto configured = out.initConfigured(static_cast<unsigned>(o.configured.size()));
      for (unsigned i = 0; i < o.configured.size(); ++i) configured.set(i, o.configured[i]);
      auto notes = out.initNotes(static_cast<unsigned>(o.notes.size()));
      for (unsigned i = 0; i < o.notes.size(); ++i) notes.set(i, o.notes[i]);
      auto decisions = out.initDecisions(static_cast<unsigned>(o.decisions.size()));
      for (unsigned i = 0; i < o.decisions.size(); ++i) decisions.set(i, DataOf(o.decisions[i]));
      out.setFirstDecisionSequence(o.first_decision_sequence);
      out.setRetried(o.retried);
    });
  }

  kj::Promise<void> head(HeadContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "head");
    // Any principal the policy knows: submit and revoke build names and deadlines from it.
    const ledger::Head h = d_.log_.GetHead();
    auto out = context.getResults().initHead();
    Status s = Admit();
    if (s.ok() && principal_ != kAdminPrincipal && d_.policy_.Find(principal_) == nullptr) {
      s = Status(Code::kPermissionDenied,
                 "principal '" + principal_ + "' may not read the head: not in the policy");
    }
    if (!s.ok()) {
      Count(s, "head");
      ToError(s, context.getResults().initError());
      return kj::READY_NOW;
    }
    out.setSequence(h.sequence);
    out.setHash(capnp::Data::Reader(h.hash.data(), h.hash.size()));
    out.setRecordedAtNs(h.recorded_at_ns);
    return kj::READY_NOW;
  }

  kj::Promise<void> read(ReadContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "read");
    auto params = context.getParams();
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MayRead(principal_, "read the log");
    const size_t max = std::min<size_t>(params.getMaxCount(), kReadPageEventsMax);
    if (s.ok()) {
      auto events = ReadPage(d_.log_, std::max<uint64_t>(params.getFrom(), 1), max);
      if (events.ok()) {
        FillEvents(context.getResults().initEvents(static_cast<unsigned>(events->size())), *events);
        return kj::READY_NOW;
      }
      s = events.status();
    }
    Count(s, "read");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> workload(WorkloadContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "workload");
    const std::string name = context.getParams().getName();
    const std::string ns = name.substr(0, name.find('/'));
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MaySee(principal_, "look up", ns);
    if (s.ok()) s = Current();
    if (s.ok()) {
      const auto& workloads = d_.service_.engine().workloads();
      auto it = workloads.find(name);
      if (it == workloads.end()) {
        s = Status(Code::kNotFound, "no workload " + name + " in the ledger");
      } else {
        WorkloadInfo info = InfoOf(it->second);
        auto w = context.getResults().initWorkload();
        w.setNamespace(info.ns);
        w.setName(info.name);
        w.setUid(info.uid);
        w.setGeneration(info.generation);
        w.setFencingToken(info.fencing_token);
        return kj::READY_NOW;
      }
    }
    Count(s, "workload");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> workloadStates(WorkloadStatesContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "workloadStates");
    auto names = context.getParams().getNames();
    Status s = Admit();
    if (s.ok() && names.size() > kWorkloadStatesNamesMax) {
      s = Status(Code::kInvalidArgument,
                 "workloadStates: " + std::to_string(names.size()) + " names; at most " +
                     std::to_string(kWorkloadStatesNamesMax) + " in one call");
    }
    for (unsigned i = 0; s.ok() && i < names.size(); ++i) {
      const std::string name = names[i];
      s = d_.policy_.MaySee(principal_, "look up", name.substr(0, name.find('/')));
    }
    if (s.ok()) s = Current();
    if (!s.ok()) {
      Count(s, "workloadStates");
      ToError(s, context.getResults().initError());
      return kj::READY_NOW;
    }
    const auto& engine = d_.service_.engine();
    std::vector<const projections::WorkloadState*> found;
    std::vector<std::string> missing;
    for (auto name : names) {
      auto it = engine.workloads().find(name.cStr());
      if (it == engine.workloads().end()) {
        missing.emplace_back(name.cStr());
      } else {
        found.push_back(&it->second);
      }
    }
    auto results = context.getResults();
    auto states = results.initStates(static_cast<unsigned>(found.size()));
    for (unsigned i = 0; i < found.size(); ++i) FillWorkloadState(states[i], engine, *found[i]);
    auto out = results.initMissing(static_cast<unsigned>(missing.size()));
    for (unsigned i = 0; i < missing.size(); ++i) out.set(i, missing[i]);
    results.setHead(d_.log_.GetHead().sequence);
    return kj::READY_NOW;
  }

  kj::Promise<void> get(GetContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "get");
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MaySee(principal_, "get", "");
    if (s.ok()) s = Current();
    if (s.ok()) {
      NamespaceScope scope{d_.policy_.ScopeOf(principal_)};
      if (principal_ == kAdminPrincipal) scope.namespaces.clear();
      auto params = context.getParams();
      GetQuery query;
      query.name = params.getName().cStr();
      query.ns = params.getNamespace().cStr();
      query.selector = params.getSelector().cStr();
      query.cluster_queue = params.getClusterQueue().cStr();
      query.local_queue = params.getLocalQueue().cStr();
      if (params.getLimit() > 0) query.limit = params.getLimit();
      query.offset = params.getOffset();
      auto text = RenderGet(d_.service_.engine(), params.getKind(), params.getFormat(), scope,
                            query);
      if (text.ok()) {
        context.getResults().setText(*text);
        return kj::READY_NOW;
      }
      s = text.status();
    }
    Count(s, "get");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> definition(DefinitionContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "definition");
    const std::string key = context.getParams().getKey();
    const size_t a = key.find('/'), b = key.find('/', a == std::string::npos ? a : a + 1);
    Status s = Admit();
    if (s.ok() && (a == std::string::npos || b == std::string::npos)) {
      s = Status(Code::kInvalidArgument, "definition key '" + key + "': expected KIND/NAMESPACE/NAME");
    }
    if (s.ok()) s = d_.policy_.MaySee(principal_, "definition", key.substr(a + 1, b - a - 1));
    if (s.ok()) s = Current();
    if (s.ok()) {
      auto body = DefinitionOf(d_.service_, key);
      if (body.ok()) {
        context.getResults().setBody(
            capnp::Data::Reader(reinterpret_cast<const kj::byte*>(body->data()), body->size()));
        return kj::READY_NOW;
      }
      s = body.status();
    }
    Count(s, "definition");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> explain(ExplainContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "explain");
    auto params = context.getParams();
    const std::string name = params.getName();
    const std::string ns = name.substr(0, name.find('/'));
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MaySee(principal_, "explain", ns);
    if (s.ok()) {
      return d_.Explain(name, params.getAt(), params.getFormat())
          .attach(kj::mv(timer))
          .then([this, context](kj::Own<Result<std::string>> text) mutable {
            if (text->ok()) {
              context.getResults().setText(**text);
              return;
            }
            Count(text->status(), "explain");
            ToError(text->status(), context.getResults().initError());
          });
    }
    Count(s, "explain");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> snapshot(SnapshotContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "snapshot");
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MayOperate(principal_, "snapshot");
    if (s.ok()) {
      auto text = RenderSnapshot(d_.service_, d_.options_.snapshot_path,
                                 context.getParams().getFormat());
      if (text.ok()) {
        context.getResults().setText(*text);
        return kj::READY_NOW;
      }
      s = text.status();
    }
    Count(s, "snapshot");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> listSnapshots(ListSnapshotsContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "listSnapshots");
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MayRead(principal_, "list snapshots");
    if (s.ok()) {
      auto list = d_.snapshots_.List();
      if (list.ok()) {
        auto out = context.getResults().initSequences(static_cast<unsigned>(list->size()));
        for (unsigned i = 0; i < list->size(); ++i) out.set(i, (*list)[i]);
        return kj::READY_NOW;
      }
      s = list.status();
    }
    Count(s, "listSnapshots");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> readSnapshot(ReadSnapshotContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "readSnapshot");
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MayRead(principal_, "read snapshots");
    if (s.ok()) {
      auto snap = d_.snapshots_.Read(context.getParams().getAfter());
      if (snap.ok()) {
        context.getResults().setBytes(DataOf(snap->bytes));
        context.getResults().setStoredHash(
            capnp::Data::Reader(snap->stored_hash.data(), snap->stored_hash.size()));
        return kj::READY_NOW;
      }
      s = snap.status();
    }
    Count(s, "readSnapshot");
    ToError(s, context.getResults().initError());
    return kj::READY_NOW;
  }

  kj::Promise<void> watch(WatchContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "watch");
    auto params = context.getParams();
    auto watcher = kj::heap<Watcher>(params.getSink());
    watcher->principal = principal_;
    watcher->kinds = Texts(params.getFilter().getKinds());
    watcher->namespaces = Texts(params.getFilter().getNamespaces());
    watcher->cluster_queues = Texts(params.getFilter().getClusterQueues());
    watcher->checks = Texts(params.getFilter().getChecks());
    watcher->asked_namespaces = watcher->namespaces;
    watcher->asked_checks = watcher->checks;
    watcher->next = std::max<uint64_t>(params.getFromSequence(), 1);
    Status s = Admit();
    if (s.ok()) {
      s = d_.policy_.MayWatch(principal_, &watcher->namespaces, &watcher->checks,
                              d_.service_.engine());
    }
    if (s.ok() && d_.shutting_down_) s = Status(Code::kUnavailable, "admitd is shutting down");
    if (s.ok() && d_.watchers_.size() >= kWatchersMax) {
      s = Status(Code::kOverloaded, std::to_string(d_.watchers_.size()) +
                                        " watchers are open (the limit is " +
                                        std::to_string(kWatchersMax) + ")");
    }
    if (!s.ok()) {
      Count(s, "watch");
      ToError(s, context.getResults().initError());
      return kj::READY_NOW;
    }
    const uint64_t id = d_.next_watch_id_++;
    watcher->id = id;
    Watcher& w = *watcher;
    d_.watchers_[id] = kj::mv(watcher);
    context.getResults().setHandle(kj::heap<WatchHandleImpl>(d_, id));
    d_.Pump(w);
    return kj::READY_NOW;
  }

 private:
  // Every connection past a limit is closed before it gets a capability; kept as the one
  // place a per-connection refusal would go.
  Status Admit() const { return Status::Ok(); }
  // Reads of the decider's state: refused while it may be ahead of the ledger (an append
  // failed and the ledger has not been folded again), so a read never shows what the ledger
  // does not hold.
  Status Current() const {
    if (!d_.service_.broken()) return Status::Ok();
    return Status(Code::kUnavailable,
                  "the ledger's last append failed and its state is being folded again; retry");
  }
  void Count(const Status& s, const char* method) {
    if (s.ok()) return;
    ++d_.stats_.refusals[{method, CodeName(s.code())}];
    if (s.code() == Code::kPermissionDenied) {
      ++d_.stats_.refused_calls;
      spdlog::warn("refused {}: {}", method, s.message());
    }
  }

  Daemon& d_;
  const std::string principal_;
};

Ledger::Client NewLedgerCapability(Daemon& daemon, std::string principal) {
  return kj::heap<Daemon::LedgerImpl>(daemon, std::move(principal));
}

}  // namespace admission::ops::rpc
