#include "ops/rpc/server.h"

#include <chrono>

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <mutex>
#include <deque>
#include <condition_variable>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include "ops/service/api.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "schema/event_codec.h"

namespace admission::ops::rpc {

namespace {

// Group commit gathering (docs/admitd.md, "Group commit"): a group waits for a call from each
// caller of the last two groups, but never longer than kGatherWaitMaxUs after its first call,
// nor kGatherIdleMaxUs after the latest. Measured with admitd_bench on 2 vCPUs shared with the
// clients: an idle limit of 150 us ended 94 % of the groups at 64 clients early (34.5 events
// per fsync; the clients' thread is often off its core that long), 400 us lets 97 % fill
// (62.8); the wait limit bounds what a caller waits for stragglers.
constexpr int64_t kGatherIdleMaxUs = 400;
constexpr int64_t kGatherWaitMaxUs = 4000;
// Reads of the ledger one watcher pump makes before it yields to the loop.
constexpr int kPumpReadsMax = 16;
// A manifest parsed of at least this many bytes is followed by malloc_trim: the parser's tree
// (about 150 times the manifest's bytes at worst, docs/admitd.md "Limits") is freed to the
// allocator, which would otherwise keep it resident.
constexpr size_t kTrimAfterManifestBytes = size_t{256} << 10;

// A peer that goes away fails the tasks that were talking to it (a watcher's end): that is
// debug. Anything else is a fault worth seeing.
class LoggingErrorHandler final : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& exception) override {
    if (exception.getType() == kj::Exception::Type::DISCONNECTED) {
      spdlog::debug("admitd task ended: {}", exception.getDescription().cStr());
    } else {
      spdlog::warn("admitd task failed: {}", exception.getDescription().cStr());
    }
  }
};

capnp::Data::Reader DataOf(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

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

std::vector<std::string> Texts(capnp::List<capnp::Text>::Reader list) {
  std::vector<std::string> out;
  for (auto t : list) out.emplace_back(t.cStr());
  return out;
}

// Reads and drops what `stream` sends until it ends (a refused peer's calls).
kj::Promise<void> Drain(kj::AsyncIoStream& stream, kj::Array<kj::byte> buffer) {
  auto read = stream.tryRead(buffer.begin(), 1, buffer.size());
  return read.then([&stream, buffer = kj::mv(buffer)](size_t n) mutable -> kj::Promise<void> {
    if (n == 0) return kj::READY_NOW;
    return Drain(stream, kj::mv(buffer));
  });
}

bool In(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The workload an event is about, if any: (namespace, name) of its body's `workload` field
// (a WorkloadRef or a Workload), or a revocation's target workload.
std::optional<std::pair<std::string, std::string>> WorkloadOf(schema::Event::Reader event) {
  capnp::DynamicStruct::Reader body =
      capnp::DynamicStruct::Reader(event).get("body").as<capnp::DynamicStruct>();
  KJ_IF_MAYBE(field, body.which()) {
    auto value = body.get(*field);
    if (value.getType() != capnp::DynamicValue::STRUCT) return std::nullopt;
    auto member = value.as<capnp::DynamicStruct>();
    if (event.getBody().which() == schema::Event::Body::REVOCATION_REQUESTED) {
      auto target = event.getBody().getRevocationRequested().getTarget();
      if (!target.isWorkload()) return std::nullopt;
      return std::make_pair(std::string(target.getWorkload().getNamespace()),
                            std::string(target.getWorkload().getName()));
    }
    KJ_IF_MAYBE(w, member.getSchema().findFieldByName("workload")) {
      auto ref = member.get(*w).as<capnp::DynamicStruct>();
      return std::make_pair(std::string(ref.get("namespace").as<capnp::Text>().cStr()),
                            std::string(ref.get("name").as<capnp::Text>().cStr()));
    }
  }
  return std::nullopt;
}

}  // namespace

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

Status ManifestPreCheck(const Policy& policy, const std::string& principal, std::string_view mode,
                        size_t manifest_bytes) {
  if (mode != "apply" && mode != "submit" && mode != "delete") {
    return Status(Code::kInvalidArgument, "recordManifest: mode '" + std::string(mode) +
                                              "' is not 'apply', 'submit' or 'delete'");
  }
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
  if (mode != "apply" && mode != "submit" && mode != "delete") {
    return Status(Code::kInvalidArgument, "recordManifest: mode '" + std::string(mode) +
                                              "' is not 'apply', 'submit' or 'delete'");
  }
  if (text.size() > kManifestBytesMax) {
    return Status(Code::kInvalidArgument,
                  "recordManifest: the manifest is " + std::to_string(text.size()) +
                      " bytes; at most " + std::to_string(kManifestBytesMax) + " are allowed");
  }
  SubmitContext ctx;
  ctx.name_seed = name_seed;
  // A retry (the same request id) is the same workload, another request a new one.
  ctx.uid_seed = request_id;
  Result<std::vector<ParsedObject>> objects = mode == "apply"    ? ParseApplyYaml(text)
                                              : mode == "delete" ? ParseDeleteYaml(text)
                                                                 : ParseSubmitYaml(text, ctx);
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
  // A workload is submitted once: WorkloadKey names the object, as admitctl submit keys it.
  if (mode == "submit") {
    parsed.inputs = KeyedWorkloadEvents("submit", *objects);
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

// One record call waiting for its group.
struct Daemon::PendingCall {
  RecordCall call;
  const void* caller = nullptr;  // the connection's capability: who will call again
  // The result travels behind a pointer: GCC 12 misreads a std::variant held inside
  // kj's ExceptionOr as maybe-uninitialized.
  kj::Own<kj::PromiseFulfiller<kj::Own<Result<RecordOutcome>>>> fulfiller;
};

struct Daemon::Watcher {
  uint64_t id = 0;
  std::string principal;
  EventSink::Client sink;
  std::vector<std::string> kinds, namespaces, cluster_queues, checks;
  // The namespaces and checks the watch asked for, before the policy narrowed them (a reload
  // narrows them again: RecheckWatches).
  std::vector<std::string> asked_namespaces, asked_checks;
  uint64_t next = 1;               // the first sequence not yet looked at
  bool busy = false;               // a push is unanswered
  uint64_t appended_while_busy = 0;
  explicit Watcher(EventSink::Client s) : sink(kj::mv(s)) {}
};

struct Daemon::Connection {
  // The budget the connection took (docs/admitd.md, "Limits"), given back when it closes.
  enum class Budget { kPrincipal, kUnknownPeers, kAdminReserve };
  std::string principal;
  Budget budget = Budget::kPrincipal;
  // Set by Start, once the connection has its budget. Destroyed in reverse: the RPC system,
  // its network, then the stream they read.
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyVatNetwork> network;
  kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc;
  void Start(std::string p, kj::Own<kj::AsyncIoStream> s, capnp::Capability::Client bootstrap) {
    principal = std::move(p);
    stream = kj::mv(s);
    network = kj::heap<capnp::TwoPartyVatNetwork>(*stream, capnp::rpc::twoparty::Side::SERVER,
                                                  PeerReaderOptions());
    rpc = kj::heap(capnp::makeRpcServer(*network, kj::mv(bootstrap)));
    rpc->setFlowLimit(kConnectionFlowLimitBytes / sizeof(capnp::word));
  }
  ~Connection() {
    rpc = nullptr;
    network = nullptr;
    stream = nullptr;
  }
};

class Daemon::WatchHandleImpl final : public WatchHandle::Server {
 public:
  WatchHandleImpl(Daemon& daemon, uint64_t id) : daemon_(daemon), id_(id) {}
  ~WatchHandleImpl() { daemon_.StopWatch(id_); }

 private:
  Daemon& daemon_;
  uint64_t id_;
};

// Runs reads that fold the ledger (explain) on a thread of their own, so that they never hold
// the event loop and the writes behind it. One thread, a bounded queue; each task answers its
// call through a cross-thread fulfiller (a call dropped meanwhile is answered into nothing).
class Daemon::ReadWorker {
 public:
  // At most queue_max tasks wait (kReadQueueMax for explains, kManifestQueueMax for parsing).
  explicit ReadWorker(size_t queue_max) : queue_max_(queue_max), thread_([this] { Run(); }) {}
  ~ReadWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      queue_.clear();  // their calls are gone with the daemon
    }
    cv_.notify_one();
    thread_.join();  // a task running now finishes first
  }
  // False when queue_max tasks are waiting already.
  bool Submit(kj::Function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || queue_.size() >= queue_max_) return false;
      queue_.push_back(kj::mv(task));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void Run() {
    for (;;) {
      kj::Function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        task = kj::mv(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  const size_t queue_max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<kj::Function<void()>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                        // GUARDED_BY(mu_)
  std::thread thread_;
};

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
      auto results = context.getResults();
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

  kj::Promise<void> get(GetContext context) override {
    auto timer = kj::heap<CallTimer>(d_.stats_, "get");
    Status s = Admit();
    if (s.ok()) s = d_.policy_.MaySee(principal_, "get", "");
    if (s.ok()) s = Current();
    if (s.ok()) {
      NamespaceScope scope{d_.policy_.ScopeOf(principal_)};
      if (principal_ == kAdminPrincipal) scope.namespaces.clear();
      auto text = RenderGet(d_.service_.engine(), context.getParams().getKind(),
                            context.getParams().getFormat(), scope);
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

Daemon::Daemon(kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
               ledger::SnapshotStore& snapshots, Policy policy, DaemonOptions options)
    : io_(io),
      service_(service),
      log_(log),
      snapshots_(snapshots),
      policy_(std::move(policy)),
      options_(std::move(options)),
      error_handler_(kj::heap<LoggingErrorHandler>()),
      tasks_(kj::heap<kj::TaskSet>(*error_handler_)),
      accepting_(kj::heap<kj::Canceler>()),
      readers_(std::make_unique<ReadWorker>(kReadQueueMax)),
      manifests_(std::make_unique<ReadWorker>(kManifestQueueMax)) {
  partial_messages_.bytes_max = kPartialMessageBytesMax;
}

Daemon::~Daemon() {
  connections_.clear();
  watchers_.clear();
  readers_.reset();  // joins the worker while the log it reads is still there
  manifests_.reset();
}

Result<std::vector<std::string>> Daemon::Listen(kj::WaitScope& wait_scope) {
  std::vector<std::string> bound;
  for (const Endpoint& e : options_.listen) {
    if (e.kind == Endpoint::Kind::kTls && !tls_) {
      if (options_.tls.cert.empty() || options_.tls.key.empty() || options_.tls.ca.empty()) {
        return Status(Code::kInvalidArgument,
                      "--listen " + e.text +
                          ": TLS needs --tls-cert, --tls-key and --client-ca (the daemon's "
                          "certificate and key, and the CA of the clients it accepts)");
      }
      auto ca = ReadFileText(options_.tls.ca, "--client-ca");
      auto cert = ReadFileText(options_.tls.cert, "--tls-cert");
      auto key = ReadFileText(options_.tls.key, "--tls-key");
      for (auto* r : {&ca, &cert, &key}) {
        if (!r->ok()) return r->status();
      }
      KJ_IF_MAYBE(ex, kj::runCatchingExceptions([&]() {
        client_ca_ = kj::heap<kj::TlsCertificate>(kj::StringPtr(ca->c_str()));
        keypair_ = kj::heap<kj::TlsKeypair>(kj::TlsKeypair{
            kj::TlsPrivateKey(kj::StringPtr(key->c_str())),
            kj::TlsCertificate(kj::StringPtr(cert->c_str()))});
        kj::TlsContext::Options tls_options;
        tls_options.useSystemTrustStore = false;
        tls_options.verifyClients = true;
        tls_options.trustedCertificates = kj::arrayPtr(client_ca_.get(), 1);
        tls_options.defaultKeypair = *keypair_;
        // kTlsAcceptTimeoutMs is applied by Daemon::Handshake, with kTlsHandshakesMax.
        tls_ = kj::heap<kj::TlsContext>(kj::mv(tls_options));
      })) {
        return Status(Code::kInvalidArgument,
                      std::string("TLS files: ") + ex->getDescription().cStr());
      }
    }
    if (e.kind == Endpoint::Kind::kUnix) {
      std::error_code ec;
      if (std::filesystem::is_socket(e.path, ec)) std::filesystem::remove(e.path, ec);
    }
    kj::Own<kj::ConnectionReceiver> receiver;
    uint16_t port = 0;
    KJ_IF_MAYBE(ex, kj::runCatchingExceptions([&]() {
      auto address = io_.provider->getNetwork().parseAddress(e.KjAddress()).wait(wait_scope);
      receiver = address->listen();
      if (options_.wrap_receiver) receiver = options_.wrap_receiver(kj::mv(receiver));
      if (e.kind == Endpoint::Kind::kTls) port = static_cast<uint16_t>(receiver->getPort());
    })) {
      return Status(Code::kIoError,
                    "--listen " + e.text + ": " + std::string(ex->getDescription().cStr()));
    }
    if (e.kind == Endpoint::Kind::kUnix) {
      // Anyone on the machine may connect; the policy decides what each uid may do.
      ::chmod(e.path.c_str(), 0666);
      bound.push_back("unix:" + e.path);
    } else {
      bound.push_back("tls:" + e.host + ":" + std::to_string(port));
    }
    // The loop retries failed accepts; should it end anyway, the daemon says so and is not
    // ready from then on.
    tasks_->add(accepting_->wrap(AcceptLoop(*receiver, e.kind == Endpoint::Kind::kTls, 0))
                    .catch_([this, text = e.text](kj::Exception&& ex) {
                      if (shutting_down_) return;
                      ++listeners_failing_;
                      spdlog::error("admitd stopped accepting connections on {}: {}", text,
                                    ex.getDescription().cStr());
                    }));
    receivers_.push_back(kj::mv(receiver));
  }
  return bound;
}

kj::Promise<void> Daemon::AcceptLoop(kj::ConnectionReceiver& receiver, bool tls,
                                     uint64_t retry_ms) {
  // retry_ms > 0: this listener's last accept failed, and it waited that long. A TLS listener
  // accepts only when a handshake may start (kTlsHandshakesMax).
  kj::Promise<void> slot = tls ? HandshakeSlot() : kj::Promise<void>(kj::READY_NOW);
  // (kj's accept throws at once when accept(2) fails at once: inside the promise, so that the
  // error branch gets it.)
  return slot.then([&receiver]() { return kj::evalNow([&]() { return receiver.acceptAuthenticated(); }); }).then(
      [this, &receiver, tls, retry_ms](kj::AuthenticatedStream stream) -> kj::Promise<void> {
        if (retry_ms > 0) {
          --listeners_failing_;
          spdlog::warn("accepting connections again");
        }
        KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
          if (tls) {
            Handshake(kj::mv(stream));
          } else {
            Serve(kj::mv(stream), false);
          }
        })) {
          spdlog::warn("a new connection failed: {}", e->getDescription().cStr());
        }
        return AcceptLoop(receiver, tls, 0);
      },
      [this, &receiver, tls, retry_ms](kj::Exception&& e) -> kj::Promise<void> {
        // The listener is still there; this accept failed (file descriptors exhausted: EMFILE,
        // ENFILE, or memory). The connection waits in the listen backlog: retry after a
        // backoff, counted, logged at warn (throttled), not ready meanwhile.
        if (retry_ms == 0) ++listeners_failing_;
        ++stats_.accept_errors;
        const uint64_t wait_ms =
            retry_ms == 0 ? kAcceptRetryFirstMs : std::min(retry_ms * 2, kAcceptRetryMaxMs);
        uint64_t held_back = 0;
        if (accept_log_.Allow(&held_back)) {
          spdlog::warn("accepting a {} connection failed ({} failures not logged before); "
                       "retrying in {} ms, not ready meanwhile: {}",
                       tls ? "TLS" : "Unix", held_back, wait_ms, e.getDescription().cStr());
        }
        return io_.provider->getTimer().afterDelay(wait_ms * kj::MILLISECONDS).then(
            [this, &receiver, tls, wait_ms]() { return AcceptLoop(receiver, tls, wait_ms); });
      });
}

void Daemon::Handshake(kj::AuthenticatedStream stream) {
  std::string peer = "a TLS peer";
  KJ_IF_MAYBE(address, kj::dynamicDowncastIfAvailable<kj::NetworkPeerIdentity>(
                           *stream.peerIdentity)) {
    peer = "TLS peer " + std::string(address->getAddress().toString().cStr());
  }
  // The accept loop waited for a slot (HandshakeSlot): there is one now, or the oldest
  // handshake has stalled past kTlsHandshakeEvictAfterMs and gives way.
  if (handshakes_.size() >= kTlsHandshakesMax) {
    auto oldest = handshakes_.begin();
    oldest->second.evict->fulfill();
    handshakes_.erase(oldest);
  }
  const uint64_t id = next_handshake_id_++;
  auto socket = kj::refcounted<SharedSocket>(kj::mv(stream.stream));
  kj::AuthenticatedStream shared{kj::heap<SharedStream>(kj::addRef(*socket)),
                                 kj::mv(stream.peerIdentity)};
  auto evicted = kj::newPromiseAndFulfiller<void>();
  handshakes_.emplace(id, PendingHandshake{kj::mv(evicted.fulfiller), io_.provider->getTimer().now()});
  auto ours = std::make_shared<std::string>();  // why we dropped it, when we did
  auto timeout = io_.provider->getTimer().afterDelay(kTlsAcceptTimeoutMs * kj::MILLISECONDS).then(
      [ours]() -> kj::Promise<kj::AuthenticatedStream> {
        *ours = "handshake_timeout";
        return KJ_EXCEPTION(DISCONNECTED, "the TLS handshake took longer than " +
                                              std::to_string(kTlsAcceptTimeoutMs) + " ms");
      });
  auto dropped = evicted.promise.then([ours]() -> kj::Promise<kj::AuthenticatedStream> {
    *ours = "handshake_evicted";
    return KJ_EXCEPTION(DISCONNECTED, "dropped, the oldest of " +
                                          std::to_string(kTlsHandshakesMax) +
                                          " TLS handshakes in progress");
  });
  tasks_->add(tls_->wrapServer(kj::mv(shared))
                  .exclusiveJoin(kj::mv(timeout))
                  .exclusiveJoin(kj::mv(dropped))
                  .then(
                      [this, id](kj::AuthenticatedStream secured) {
                        HandshakeDone(id);
                        Serve(kj::mv(secured), true);
                      },
                      [this, id, ours, peer, socket = kj::mv(socket)](kj::Exception&& e) mutable {
                        // No certificate, another CA, an expired certificate, too slow, or
                        // evicted: only this connection is closed.
                        HandshakeDone(id);
                        ++stats_.connections_closed[ours->empty() ? "handshake_failed" : *ours];
                        uint64_t held_back = 0;
                        if (refusal_log_.Allow(&held_back)) {
                          spdlog::warn("refused a TLS connection from {} ({} refusals not logged "
                                       "before): {}",
                                       peer, held_back, e.getDescription().cStr());
                        }
                        if (ours->empty()) Linger(kj::mv(socket));
                      }));
}

void Daemon::HandshakeDone(uint64_t id) {
  handshakes_.erase(id);
  if (handshakes_.size() >= kTlsHandshakesMax) return;
  for (auto& waiter : slot_waiters_) waiter->fulfill();
  slot_waiters_.clear();
}

kj::Promise<void> Daemon::HandshakeSlot() {
  if (handshakes_.size() < kTlsHandshakesMax) return kj::READY_NOW;
  // All slots taken: wait for one to free, or for the oldest to be old enough to drop. A burst
  // of honest clients waits in the listen backlog instead of dropping each other's handshakes.
  const kj::TimePoint evictable =
      handshakes_.begin()->second.started + kTlsHandshakeEvictAfterMs * kj::MILLISECONDS;
  if (io_.provider->getTimer().now() >= evictable) return kj::READY_NOW;
  auto freed = kj::newPromiseAndFulfiller<void>();
  std::erase_if(slot_waiters_, [](kj::Own<kj::PromiseFulfiller<void>>& w) { return !w->isWaiting(); });
  slot_waiters_.push_back(kj::mv(freed.fulfiller));
  return freed.promise.exclusiveJoin(io_.provider->getTimer().atTime(evictable))
      .then([this]() { return HandshakeSlot(); });
}

void Daemon::Linger(kj::Own<SharedSocket> socket) {
  // The handshake failed on its own (a refused certificate): OpenSSL wrote its alert. The
  // socket is shut for writing and what the peer still sends (its first call, written as soon
  // as its side of the handshake was done) is read and dropped, so that the alert is not lost
  // to a reset, for at most kRefusalWriteTimeoutMs.
  if (*refusals_in_flight_ >= kRefusalsInFlightMax) return;
  ++*refusals_in_flight_;
  kj::AsyncIoStream& s = *socket->stream;
  auto drained = kj::evalNow([&s]() {
    s.shutdownWrite();
    return Drain(s, kj::heapArray<kj::byte>(4096));
  });
  tasks_->add(
      drained
          .exclusiveJoin(
              io_.provider->getTimer().afterDelay(kRefusalWriteTimeoutMs * kj::MILLISECONDS))
          .catch_([](kj::Exception&&) {})
          .attach(kj::mv(socket), kj::defer([count = refusals_in_flight_]() { --*count; })));
}

void Daemon::Refuse(kj::Own<kj::AsyncIoStream> stream, const std::string& reason,
                    const Status& why, const std::string& peer) {
  ++stats_.connections_closed[reason];
  uint64_t held_back = 0;
  if (refusal_log_.Allow(&held_back)) {
    spdlog::warn("closed a connection of {} ({} refusals not logged before): {}", peer, held_back,
                 why.ToString());
  }
  if (*refusals_in_flight_ >= kRefusalsInFlightMax) return;  // closed without a word
  // One RPC message, Abort, whose reason the client's calls fail with (its type: OVERLOADED,
  // retry later; FAILED, refused for good); then what the peer sends is read and dropped until
  // it closes, so that the Abort is not lost to a reset, for at most kRefusalWriteTimeoutMs.
  capnp::MallocMessageBuilder message;
  auto abort = message.initRoot<capnp::rpc::Message>().initAbort();
  // The reason is the Status as text, `CODE: message`: Cap'n Proto turns an Abort into a
  // DISCONNECTED exception whatever its type, so the client reads the code from here
  // (rpc::FromAbort).
  abort.setReason(why.ToString());
  abort.setType(why.code() == Code::kOverloaded || why.code() == Code::kUnavailable
                    ? capnp::rpc::Exception::Type::OVERLOADED
                    : capnp::rpc::Exception::Type::FAILED);
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  kj::AsyncIoStream& s = *stream;
  auto bytes = words.asBytes();
  auto told = s.write(bytes.begin(), bytes.size()).then([&s]() {
    s.shutdownWrite();
    return Drain(s, kj::heapArray<kj::byte>(4096));
  });
  ++*refusals_in_flight_;
  tasks_->add(
      told.exclusiveJoin(io_.provider->getTimer().afterDelay(kRefusalWriteTimeoutMs * kj::MILLISECONDS))
          .catch_([](kj::Exception&&) {})
          .attach(kj::mv(stream), kj::mv(words),
                  kj::defer([count = refusals_in_flight_]() { --*count; })));
}

Status Daemon::AdmitConnection(const std::string& principal, Connection& connection,
                               std::string* reason) {
  const bool admin = principal == kAdminPrincipal;
  const size_t regular = connections_.size() - admin_reserve_connections_;
  if (!admin && policy_.Find(principal) == nullptr) {
    // Principals the policy does not name share one small budget: they may only call whoami
    // and ping, and must not crowd out those it names.
    if (unknown_connections_ >= kUnknownPeerConnectionsMax) {
      *reason = "unknown_peers_limit";
      return Status(Code::kOverloaded,
                    "principal '" + principal + "' is not in the policy, and principals it does "
                    "not name have " + std::to_string(unknown_connections_) +
                    " connections open (the limit for all of them together is " +
                    std::to_string(kUnknownPeerConnectionsMax) + ")");
    }
    if (regular >= kConnectionsMax) {
      *reason = "global_limit";
      return Status(Code::kOverloaded, std::to_string(regular) + " connections are open (the "
                                       "limit is " + std::to_string(kConnectionsMax) + ")");
    }
    connection.budget = Connection::Budget::kUnknownPeers;
    ++unknown_connections_;
    return Status::Ok();
  }
  auto it = connections_by_principal_.find(principal);
  const size_t mine = it == connections_by_principal_.end() ? 0 : it->second;
  if (mine >= kConnectionsPerPrincipalMax) {
    *reason = "principal_limit";
    return Status(Code::kOverloaded, "principal '" + principal + "' has " + std::to_string(mine) +
                                         " connections open (the limit is " +
                                         std::to_string(kConnectionsPerPrincipalMax) + ")");
  }
  if (regular < kConnectionsMax) {
    connection.budget = Connection::Budget::kPrincipal;
  } else if (admin && admin_reserve_connections_ < kAdminReserveConnections) {
    // The daemon's own uid gets in when everyone else is refused.
    connection.budget = Connection::Budget::kAdminReserve;
    ++admin_reserve_connections_;
  } else {
    *reason = admin ? "admin_reserve" : "global_limit";
    return Status(Code::kOverloaded,
                  std::to_string(regular) + " connections are open (the limit is " +
                      std::to_string(kConnectionsMax) +
                      (admin ? ", and admin's " + std::to_string(kAdminReserveConnections) +
                                   " more are taken"
                             : std::string()) +
                      ")");
  }
  ++connections_by_principal_[principal];
  return Status::Ok();
}

void Daemon::ReleaseConnection(const Connection& connection) {
  switch (connection.budget) {
    case Connection::Budget::kUnknownPeers:
      --unknown_connections_;
      return;
    case Connection::Budget::kAdminReserve:
      --admin_reserve_connections_;
      break;
    case Connection::Budget::kPrincipal:
      break;
  }
  auto it = connections_by_principal_.find(connection.principal);
  if (it != connections_by_principal_.end() && --it->second == 0) connections_by_principal_.erase(it);
}

void Daemon::Serve(kj::AuthenticatedStream stream, bool tls) {
  std::string principal;
  std::string peer;
  if (tls) {
    auto& identity = kj::downcast<kj::TlsPeerIdentity>(*stream.peerIdentity);
    peer = "a TLS peer";
    KJ_IF_MAYBE(address, kj::dynamicDowncastIfAvailable<kj::NetworkPeerIdentity>(
                             identity.getNetworkIdentity())) {
      peer = "TLS peer " + std::string(address->getAddress().toString().cStr());
    }
    if (!identity.hasCertificate()) {
      Refuse(kj::mv(stream.stream), "handshake_failed",
             Status(Code::kPermissionDenied,
                    "admitd refused the connection: it carries no client certificate"),
             peer);
      return;
    }
    principal = identity.getCommonName().cStr();
    peer = "'" + principal + "' (" + peer + ")";
    // 'admin' and 'uid:N' name Unix peers (the daemon's own uid, other uids): a certificate
    // must not take them, or any certificate the client CA signed with that name would be the
    // built-in admin whatever the policy says.
    if (principal == kAdminPrincipal || principal.rfind("uid:", 0) == 0) {
      Refuse(kj::mv(stream.stream), "reserved_name",
             Status(Code::kPermissionDenied,
                    "admitd refused the client certificate named '" + principal +
                        "': that name is reserved for Unix peers"),
             peer);
      return;
    }
  } else {
    auto& identity = kj::downcast<kj::LocalPeerIdentity>(*stream.peerIdentity);
    auto creds = identity.getCredentials();
    KJ_IF_MAYBE(uid, creds.uid) {
      principal = (*uid == 0 || *uid == ::getuid()) ? std::string(kAdminPrincipal)
                                                     : "uid:" + std::to_string(*uid);
      peer = "'" + principal + "' (Unix peer)";
    } else {
      Refuse(kj::mv(stream.stream), "no_credentials",
             Status(Code::kPermissionDenied,
                    "admitd refused a Unix connection without peer credentials"),
             "a Unix peer");
      return;
    }
  }
  if (shutting_down_) {
    Refuse(kj::mv(stream.stream), "shutting_down",
           Status(Code::kUnavailable, "admitd is shutting down"), peer);
    return;
  }
  auto connection = kj::heap<Connection>();
  std::string reason;
  Status admitted = AdmitConnection(principal, *connection, &reason);
  if (!admitted.ok()) {
    Refuse(kj::mv(stream.stream), reason, admitted, peer);
    return;
  }
  spdlog::debug("connection from {}", peer);
  StreamGuardLimits limits;
  limits.partial_message_timeout_ms = kPartialMessageTimeoutMs;
  limits.message_receive_max_ms = kMessageReceiveMaxMs;
  connection->Start(principal,
                    kj::heap<GuardedStream>(kj::mv(stream.stream), io_.provider->getTimer(),
                                            partial_messages_, limits, peer),
                    kj::heap<LedgerImpl>(*this, principal));
  Connection* raw = connection.get();
  connections_[raw] = kj::mv(connection);
  tasks_->add(raw->network->onDisconnect().then([this, raw]() {
    auto it = connections_.find(raw);
    if (it == connections_.end()) return;
    ReleaseConnection(*raw);
    // Not from inside its own callback: the network is the one that called.
    kj::Own<Connection> dying = kj::mv(it->second);
    connections_.erase(it);
    tasks_->add(kj::evalLater([d = kj::mv(dying)]() mutable { d = nullptr; }));
  }));
}

// Gathering reads a precise clock: the loop's timer only moves when the loop polls, and a
// flush (stage, append, fsync) runs on the loop, so after one the timer is behind by the
// flush's time. A timer set from its stale time fires early; ScheduleFlush then finds the
// wait not over and sets it again from the fresh time.
namespace {
kj::TimePoint GatherNow() { return kj::systemPreciseMonotonicClock().now(); }
}  // namespace

void Daemon::Enqueue(kj::Own<PendingCall> call) {
  const kj::TimePoint now = GatherNow();
  if (pending_.empty()) first_pending_ = now;
  last_arrival_ = now;
  pending_.push_back(kj::mv(call));
  ScheduleFlush();
}

void Daemon::ScheduleFlush() {
  if (pending_.empty() || flush_scheduled_) return;
  const kj::TimePoint now = GatherNow();
  const bool full = pending_.size() >= std::min(gather_target_, kGroupCallsMax);
  const bool waited = now - first_pending_ >= kGatherWaitMaxUs * kj::MICROSECONDS ||
                      now - last_arrival_ >= kGatherIdleMaxUs * kj::MICROSECONDS;
  if (full || waited || shutting_down_) {
    flush_scheduled_ = true;
    if (full) {
      ++stats_.flushes_full;
    } else if (now - first_pending_ >= kGatherWaitMaxUs * kj::MICROSECONDS) {
      ++stats_.flushes_waited;
    } else {
      ++stats_.flushes_idle;
    }
    // After every call already queued on the loop has arrived.
    tasks_->add(kj::evalLast([this]() {
      flush_scheduled_ = false;
      Flush();
    }));
    return;
  }
  if (timer_armed_) return;
  timer_armed_ = true;
  tasks_->add(io_.provider->getTimer().afterDelay(kGatherIdleMaxUs * kj::MICROSECONDS).then([this]() {
    timer_armed_ = false;
    ScheduleFlush();
  }));
}

void Daemon::Flush() {
  if (pending_.empty()) return;
  const size_t take = std::min(pending_.size(), kGroupCallsMax);
  std::vector<kj::Own<PendingCall>> group;
  group.reserve(take);
  for (size_t i = 0; i < take; ++i) group.push_back(kj::mv(pending_[i]));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(take));
  // The next group waits for every caller of this group and of the one before: callers that
  // split into two groups taking turns (one is written while the other arrives) merge again.
  // A caller that stops calling drops out after two groups; the idle and wait limits bound
  // what waiting for it costs.
  std::vector<const void*> callers;
  callers.reserve(take + previous_callers_.size());
  std::vector<RecordCall> calls;
  calls.reserve(take);
  for (auto& c : group) {
    calls.push_back(std::move(c->call));
    callers.push_back(c->caller);
  }
  std::sort(callers.begin(), callers.end());
  callers.erase(std::unique(callers.begin(), callers.end()), callers.end());
  std::vector<const void*> recent;
  recent.reserve(callers.size() + previous_callers_.size());
  std::set_union(callers.begin(), callers.end(), previous_callers_.begin(),
                 previous_callers_.end(), std::back_inserter(recent));
  gather_target_ = std::max<size_t>(1, recent.size());
  previous_callers_ = std::move(callers);
  const uint64_t head_before = log_.GetHead().sequence;
  const auto started = std::chrono::steady_clock::now();
  std::vector<Result<RecordOutcome>> results = service_.RecordGroup(calls);
  const uint64_t us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::steady_clock::now() - started)
                                                .count());
  stats_.append_duration.Observe(us);
  ++stats_.groups;
  stats_.group_calls += take;
  stats_.record_calls += take;
  for (size_t i = 0; i < take; ++i) group[i]->fulfiller->fulfill(kj::heap<Result<RecordOutcome>>(std::move(results[i])));
  stats_.appended_events += log_.GetHead().sequence - head_before;
  AfterAppend(head_before, log_.GetHead().sequence);
  if (!pending_.empty()) {
    first_pending_ = GatherNow();
    ScheduleFlush();
  }
}

void Daemon::AfterAppend(uint64_t head_before, uint64_t head) {
  if (head == head_before) return;
  std::vector<uint64_t> behind;
  for (auto& [id, w] : watchers_) {
    if (w->busy) {
      w->appended_while_busy += head - head_before;
      if (w->appended_while_busy > kWatchBufferEventsMax) behind.push_back(id);
    } else {
      Pump(*w);
    }
  }
  for (uint64_t id : behind) {
    EndWatch(id, "the watcher fell more than " + std::to_string(kWatchBufferEventsMax) +
                     " events behind; resume from the sequence given");
  }
}

bool Daemon::Matches(const Watcher& w, schema::Event::Reader event) const {
  if (!w.kinds.empty() && !In(w.kinds, schema::BodyName(event))) return false;
  if (w.namespaces.empty() && w.cluster_queues.empty() && w.checks.empty()) return true;
  auto body = event.getBody();
  auto workload = WorkloadOf(event);
  const projections::WorkloadState* wl = nullptr;
  if (workload) {
    auto it = service_.engine().workloads().find(workload->first + "/" + workload->second);
    if (it != service_.engine().workloads().end()) wl = &it->second;
  }
  if (!w.namespaces.empty()) {
    std::string ns = workload ? workload->first : "";
    if (body.which() == schema::Event::Body::LOCAL_QUEUE_DEFINED) {
      ns = body.getLocalQueueDefined().getNamespace();
    }
    if (!In(w.namespaces, ns)) return false;
  }
  if (!w.cluster_queues.empty()) {
    std::string cq = wl != nullptr ? wl->cluster_queue : "";
    if (body.which() == schema::Event::Body::QUOTA_RESERVED) {
      cq = body.getQuotaReserved().getAdmission().getClusterQueue();
    } else if (body.which() == schema::Event::Body::CLUSTER_QUEUE_DEFINED) {
      cq = body.getClusterQueueDefined().getName();
    } else if (body.which() == schema::Event::Body::LOCAL_QUEUE_DEFINED) {
      cq = body.getLocalQueueDefined().getClusterQueue();
    }
    if (!In(w.cluster_queues, cq)) return false;
  }
  if (!w.checks.empty()) {
    bool hit = false;
    if (body.which() == schema::Event::Body::CHECK_STATE_REPORTED) {
      hit = In(w.checks, body.getCheckStateReported().getCheck());
    } else if (body.which() == schema::Event::Body::ADMISSION_CHECK_DEFINED) {
      hit = In(w.checks, body.getAdmissionCheckDefined().getName());
    } else if (body.which() == schema::Event::Body::REVOCATION_REQUESTED &&
               body.getRevocationRequested().getTarget().isCheck()) {
      hit = In(w.checks, body.getRevocationRequested().getTarget().getCheck());
    } else if (body.which() == schema::Event::Body::QUOTA_RESERVED) {
      // A reservation needs the checks its ClusterQueue requires.
      auto cq = service_.engine().cluster_queues().find(
          body.getQuotaReserved().getAdmission().getClusterQueue());
      if (cq != service_.engine().cluster_queues().end() && cq->second.spec) {
        for (const auto& [check, flavors] : cq->second.spec->admission_checks) {
          if (In(w.checks, check)) hit = true;
        }
      }
    } else if (wl != nullptr) {
      for (const auto& [check, status] : wl->checks) {
        if (In(w.checks, check)) hit = true;
      }
    }
    if (!hit) return false;
  }
  return true;
}

void Daemon::Pump(Watcher& w) {
  if (w.busy) return;
  const uint64_t head = log_.GetHead().sequence;
  // A push holds at most kWatchPushEventsMax matching events and, past its first, only as many
  // as fit in kReadPageBytesMax stored bytes: the event that would not fit starts the next push.
  std::vector<ledger::StoredEvent> matched;
  size_t matched_bytes = 0;
  for (int reads = 0; reads < kPumpReadsMax && w.next <= head && matched.empty(); ++reads) {
    auto shown = log_.Scan(w.next, kWatchPushEventsMax,
                           [&](ledger::Sequence sequence, std::string_view bytes) {
      auto decoded = schema::DecodeEvent(bytes);
      if (decoded.ok() && Matches(w, decoded->root())) {
        if (!matched.empty() && matched_bytes + bytes.size() > kReadPageBytesMax) return false;
        matched_bytes += bytes.size();
        matched.push_back(ledger::StoredEvent{sequence, std::string(bytes)});
      }
      w.next = sequence + 1;
      return true;
    });
    if (!shown.ok()) {
      EndWatch(w.id, "reading the ledger failed: " + shown.status().ToString());
      return;
    }
    if (*shown == 0) break;
  }
  if (matched.empty()) {
    if (w.next <= head) {
      // Nothing matched in this many reads: go on after the loop has done other work.
      const uint64_t id = w.id;
      tasks_->add(kj::evalLater([this, id]() {
        auto it = watchers_.find(id);
        if (it != watchers_.end()) Pump(*it->second);
      }));
    }
    return;
  }
  w.busy = true;
  w.appended_while_busy = 0;
  auto push = w.sink.pushRequest();
  FillEvents(push.initEvents(static_cast<unsigned>(matched.size())), matched);
  const uint64_t id = w.id;
  tasks_->add(push.send().then(
      [this, id](capnp::Response<EventSink::PushResults>) {
        auto it = watchers_.find(id);
        if (it == watchers_.end()) return;
        it->second->busy = false;
        Pump(*it->second);
      },
      [this, id](kj::Exception&&) { watchers_.erase(id); }));
}

void Daemon::EndWatch(uint64_t id, const std::string& reason) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto end = it->second->sink.endRequest();
  end.setResumeSequence(it->second->next);
  end.setReason(reason);
  spdlog::info("ending watch {} of {} at {}: {}", id, it->second->principal, it->second->next,
               reason);
  tasks_->add(end.send().ignoreResult());
  watchers_.erase(it);
}

void Daemon::StopWatch(uint64_t id) { watchers_.erase(id); }

Status Daemon::ReloadPolicy() {
  if (options_.policy_path.empty()) return Status::Ok();
  auto policy = Policy::Load(options_.policy_path);
  if (!policy.ok()) return policy.status();
  policy_ = std::move(*policy);
  RecheckWatches();
  return Status::Ok();
}

namespace {
// Whether a watch narrowed to `now` shows nothing `allowed` would not (empty: everything).
bool Within(const std::vector<std::string>& now, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  if (now.empty()) return false;
  return std::all_of(now.begin(), now.end(), [&](const std::string& v) { return In(allowed, v); });
}
}  // namespace

void Daemon::RecheckWatches() {
  // Each open watch as if it were asked for now: one the policy refuses, or would narrow to
  // less than it shows, is ended with its resume sequence (the watcher may ask again and get
  // what it may see now). Calls are checked one by one already, so nothing else outlives a
  // principal's removal.
  std::vector<std::pair<uint64_t, std::string>> ended;
  for (auto& [id, w] : watchers_) {
    std::vector<std::string> namespaces = w->asked_namespaces;
    std::vector<std::string> checks = w->asked_checks;
    Status s = policy_.MayWatch(w->principal, &namespaces, &checks, service_.engine());
    if (!s.ok()) {
      ended.emplace_back(id, "the reloaded policy refuses this watch: " + s.message());
    } else if (!Within(w->namespaces, namespaces) || !Within(w->checks, checks)) {
      ended.emplace_back(id, "the reloaded policy narrows what '" + w->principal +
                                 "' may watch; watch again from the sequence given");
    }
  }
  for (const auto& [id, reason] : ended) EndWatch(id, reason);
}

kj::Promise<void> Daemon::Shutdown() {
  shutting_down_ = true;
  accepting_->cancel("admitd is shutting down");
  receivers_.clear();
  for (const Endpoint& e : options_.listen) {
    if (e.kind == Endpoint::Kind::kUnix) ::unlink(e.path.c_str());
  }
  Flush();
  std::vector<uint64_t> ids;
  for (auto& [id, w] : watchers_) ids.push_back(id);
  for (uint64_t id : ids) EndWatch(id, "admitd is shutting down; resume from the sequence given");
  // Let the replies and the watchers' ends reach the sockets.
  return io_.provider->getTimer().afterDelay(100 * kj::MILLISECONDS);
}

kj::Promise<kj::Own<Result<std::string>>> Daemon::Explain(const std::string& name, uint64_t at,
                                                           const std::string& format) {
  // Explain reads the workload's history and folds from the newest snapshot: on the read
  // worker, not on the loop.
  ledger::EventLog& log = log_;
  ledger::SnapshotStore& snapshots = snapshots_;
  return OnReadWorker([&log, &snapshots, name, at, format]() {
    return RenderExplain(log, name, at, format, nullptr, &snapshots);
  });
}

kj::Promise<kj::Own<Result<std::string>>> Daemon::OnReadWorker(
    std::function<Result<std::string>()> job) {
  auto paf = kj::newPromiseAndCrossThreadFulfiller<kj::Own<Result<std::string>>>();
  const bool queued = readers_->Submit(
      [job = std::move(job), fulfiller = kj::mv(paf.fulfiller)]() mutable {
        fulfiller->fulfill(kj::heap<Result<std::string>>(job()));
      });
  if (!queued) {
    return kj::heap<Result<std::string>>(Status(
        Code::kOverloaded, std::to_string(kReadQueueMax) +
                               " whole-ledger reads are waiting already (the limit)"));
  }
  return kj::mv(paf.promise);
}

DaemonStats Daemon::stats() const {
  DaemonStats s = stats_;
  s.connections = connections_.size();
  s.watchers = watchers_.size();
  s.tls_handshakes = handshakes_.size();
  s.accept_failing = listeners_failing_ > 0;
  s.partial_message_bytes = partial_messages_.bytes;
  s.manifest_parse_bytes = manifest_bytes_->load();
  auto add = [&s](const char* reason, uint64_t n) {
    if (n > 0) s.connections_closed[reason] += n;
  };
  add("stalled", partial_messages_.closed_stalled);
  add("slow_message", partial_messages_.closed_slow);
  add("partial_bytes_limit", partial_messages_.closed_over_budget);
  return s;
}

}  // namespace admission::ops::rpc
