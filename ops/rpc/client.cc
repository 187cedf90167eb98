// GCC 12 misreads kj's ExceptionOr<Status> (a Status holds a std::string) in the promise nodes
// it instantiates here as maybe-uninitialized, depending on what it inlines (the same false
// positive server.cc avoids by passing results behind a pointer; here Status is the type of
// every call's promise). Before any include, so that it covers their instantiations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "ops/rpc/client.h"

#include <cstdio>
#include <cstring>
#include <future>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/compat/tls.h>

namespace admission::ops::rpc {

namespace {

// The daemon's answers are trusted more than a peer's requests (a `read` page is at most
// kReadPageBytesMax and one event; a snapshot or a rendered text may be larger).
constexpr uint64_t kReplyWordsMax = uint64_t{64} << 20;  // 512 MiB

Status FromException(const kj::Exception& e) {
  std::string what = e.getDescription().cStr();
  if (what.find("ssl") != std::string::npos || what.find("SSL") != std::string::npos) {
    what += " (admitd refused the TLS handshake: the certificate must come from the daemon's "
            "--client-ca and be valid now; or the daemon's certificate is not from --ca)";
  }
  if (e.getType() == kj::Exception::Type::OVERLOADED) {
    return Status(Code::kOverloaded, "admitd is overloaded: " + what);
  }
  return Status(Code::kUnavailable, "admitd: " + what);
}

// What connecting failed of: a refusal that no retry changes gets a permanent code. The daemon
// refuses a certificate with a TLS alert (another CA, expired, none: OpenSSL's "...alert...")
// or, past the handshake, with an RPC Abort whose reason is the Status (a name reserved for
// Unix peers: PermissionDenied; a connection limit: Overloaded).
Status FromConnectException(const kj::Exception& e, bool tls) {
  const std::string what = e.getDescription().cStr();
  if (auto told = FromAbort(what)) return *told;
  if (tls && what.find("alert") != std::string::npos) {
    return Status(Code::kPermissionDenied,
                  "admitd refused this client's certificate (--cert): " + what +
                      " (it must be signed by the daemon's --client-ca and valid now)");
  }
  if (tls && what.find("certificate verify failed") != std::string::npos) {
    return Status(Code::kInvalidArgument,
                  "admitctl refused admitd's certificate: " + what +
                      " (it must be signed by --ca and name the host connected to)");
  }
  return FromException(e);
}

std::vector<ledger::StoredEvent> ToEvents(capnp::List<StoredEvent>::Reader list) {
  std::vector<ledger::StoredEvent> events;
  events.reserve(list.size());
  for (StoredEvent::Reader e : list) {
    auto bytes = e.getBytes();
    events.push_back({e.getSequence(),
                      std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size())});
  }
  return events;
}

void SetTexts(capnp::List<capnp::Text>::Builder list, const std::vector<std::string>& values) {
  for (unsigned i = 0; i < values.size(); ++i) list.set(i, values[i]);
}

// The client's end of a watch: pushes go to the callback, `end` finishes the watch.
class SinkImpl final : public EventSink::Server {
 public:
  SinkImpl(const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
           kj::Own<kj::PromiseFulfiller<Status>> done, uint64_t* resume, std::string* reason)
      : on_events_(on_events), done_(kj::mv(done)), resume_(resume), reason_(reason) {}

 protected:
  kj::Promise<void> push(PushContext context) override {
    if (!done_->isWaiting()) return kj::READY_NOW;
    if (!on_events_(ToEvents(context.getParams().getEvents()))) {
      done_->fulfill(Status::Ok());
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> end(EndContext context) override {
    // Once the watch is over, the caller's variables may be gone: touch nothing.
    if (!done_->isWaiting()) return kj::READY_NOW;
    *resume_ = context.getParams().getResumeSequence();
    *reason_ = context.getParams().getReason();
    done_->fulfill(Status::Ok());
    return kj::READY_NOW;
  }

 private:
  const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events_;
  kj::Own<kj::PromiseFulfiller<Status>> done_;
  uint64_t* resume_;
  std::string* reason_;
};

// Resolves (Ok) once `cancelled` returns true, asked every 200 ms.
kj::Promise<Status> PollUntil(kj::Timer& timer, const std::function<bool()>& cancelled) {
  return timer.afterDelay(200 * kj::MILLISECONDS).then([&timer, &cancelled]() -> kj::Promise<Status> {
    if (cancelled()) return Status::Ok();
    return PollUntil(timer, cancelled);
  });
}

}  // namespace

Result<std::unique_ptr<RpcClient>> RpcClient::Connect(const ClientOptions& options) {
  if (options.endpoint.kind == Endpoint::Kind::kTls &&
      (options.tls.cert.empty() || options.tls.key.empty() || options.tls.ca.empty())) {
    return Status(Code::kInvalidArgument,
                  "--connect " + options.endpoint.text +
                      ": a TLS connection needs --cert, --key and --ca (the client certificate "
                      "whose common name is your principal, its key, and the daemon's CA)");
  }
  std::unique_ptr<RpcClient> client(new RpcClient());
  std::promise<void> ready;
  auto connected = ready.get_future();
  RpcClient* raw = client.get();
  client->call_timeout_ms_ = options.call_timeout_ms;
  client->address_ = options.endpoint.text;
  client->thread_ = std::thread([raw, options, &ready]() { raw->Loop(options, &ready); });
  connected.wait();
  if (!client->connect_status_.ok()) {
    client->thread_.join();
    return client->connect_status_;
  }
  return client;
}

namespace {
// Waits for `promise`, but not past `deadline` (when given): then *timed_out is set and the
// wait throws.
// Forwards to a stream and keeps the description of the first read error in *error.
// REQUIRES: error outlives the stream.
class ReadErrorRecorder final : public kj::AsyncIoStream {
 public:
  ReadErrorRecorder(kj::Own<kj::AsyncIoStream> inner, std::string* error)
      : inner_(kj::mv(inner)), error_(error) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return kj::evalNow([&]() { return inner_->tryRead(buffer, min_bytes, max_bytes); })
        .catch_([this](kj::Exception&& e) -> kj::Promise<size_t> {
          if (error_->empty()) *error_ = e.getDescription().cStr();
          return kj::mv(e);
        });
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }

 private:
  kj::Own<kj::AsyncIoStream> inner_;
  std::string* error_;
};

// REQUIRES: deadline is null (no limit) or outlives the wait.
template <typename T>
T WaitUntil(kj::Promise<T>&& promise, kj::Timer& timer, const kj::TimePoint* deadline,
            kj::WaitScope& ws, bool* timed_out);

// The first call on a new connection (ping), which says whether the daemon took it. With TLS
// 1.3 the daemon checks our certificate after our side of the handshake is done: a refusal is
// an alert the read side gets (ReadErrorRecorder), while the write side may fail first ("ssl
// connection ended during write"); the read side's word is the one thrown.
void FirstCall(Ledger::Client& ledger, kj::Timer& timer, const kj::TimePoint* deadline,
               kj::WaitScope& ws, bool* timed_out, const std::string& read_error) {
  KJ_IF_MAYBE(failed, kj::runCatchingExceptions([&]() {
    WaitUntil(ledger.pingRequest().send(), timer, deadline, ws, timed_out);
  })) {
    ws.poll();
    if (!*timed_out && !read_error.empty()) {
      kj::throwFatalException(kj::Exception(kj::Exception::Type::DISCONNECTED, __FILE__, __LINE__,
                                            kj::heapString(read_error)));
    }
    kj::throwFatalException(kj::mv(*failed));
  }
}

// REQUIRES: deadline is null (no limit) or outlives the wait.
template <typename T>
T WaitUntil(kj::Promise<T>&& promise, kj::Timer& timer, const kj::TimePoint* deadline,
            kj::WaitScope& ws, bool* timed_out) {
  if (deadline == nullptr) return promise.wait(ws);
  return promise
      .exclusiveJoin(timer.atTime(*deadline).then([timed_out]() -> kj::Promise<T> {
        *timed_out = true;
        return KJ_EXCEPTION(DISCONNECTED, "timed out");
      }))
      .wait(ws);
}

std::string Seconds(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(ms) / 1000);
  return std::string(text) + "s";
}
}  // namespace

void RpcClient::Loop(const ClientOptions& options, std::promise<void>* ready) {
  bool signalled = false;
  bool timed_out = false;
  auto fail = [&](Status status) {
    connect_status_ = std::move(status);
    if (!signalled) ready->set_value();
    signalled = true;
  };
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
    auto io = kj::setupAsyncIo();
    kj::WaitScope& ws = io.waitScope;
    kj::Timer& timer = io.provider->getTimer();
    // Connecting, the handshake and the first call, together, within the call timeout.
    const kj::TimePoint deadline_at = timer.now() + options.call_timeout_ms * kj::MILLISECONDS;
    const kj::TimePoint* deadline = options.call_timeout_ms > 0 ? &deadline_at : nullptr;
    std::string read_error;  // the first read error on the TLS stream (ReadErrorRecorder)
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<kj::TlsContext> tls;
    {
      auto address = io.provider->getNetwork().parseAddress(options.endpoint.KjAddress()).wait(ws);
      stream = WaitUntil(address->connect(), timer, deadline, ws, &timed_out);
    }
    if (options.endpoint.kind == Endpoint::Kind::kTls) {
      auto ca = ReadFileText(options.tls.ca, "--ca");
      auto cert = ReadFileText(options.tls.cert, "--cert");
      auto key = ReadFileText(options.tls.key, "--key");
      for (auto* r : {&ca, &cert, &key}) {
        if (!r->ok()) {
          fail(r->status());
          return;
        }
      }
      kj::TlsCertificate ca_cert(kj::StringPtr(ca->c_str()));
      kj::TlsKeypair keypair{kj::TlsPrivateKey(kj::StringPtr(key->c_str())),
                             kj::TlsCertificate(kj::StringPtr(cert->c_str()))};
      kj::TlsContext::Options tls_options;
      tls_options.useSystemTrustStore = false;
      tls_options.trustedCertificates = kj::arrayPtr(&ca_cert, 1);
      tls_options.defaultKeypair = keypair;
      tls = kj::heap<kj::TlsContext>(kj::mv(tls_options));
      stream = WaitUntil(tls->wrapClient(kj::mv(stream), options.endpoint.host), timer, deadline,
                         ws, &timed_out);
      stream = kj::heap<ReadErrorRecorder>(kj::mv(stream), &read_error);
    }
    capnp::ReaderOptions reader;
    reader.traversalLimitInWords = kReplyWordsMax;
    capnp::TwoPartyVatNetwork network(*stream, capnp::rpc::twoparty::Side::CLIENT, reader);
    auto rpc = capnp::makeRpcClient(network);
    capnp::word scratch[4];
    memset(scratch, 0, sizeof(scratch));
    capnp::MallocMessageBuilder message(scratch);
    auto vat_id = message.getRoot<capnp::rpc::twoparty::VatId>();
    vat_id.setSide(capnp::rpc::twoparty::Side::SERVER);
    Ledger::Client ledger = rpc.bootstrap(vat_id).castAs<Ledger>();
    // The handshake is done on our side. With TLS 1.3 the daemon checks our certificate after
    // that: a refusal is an alert the read side gets, while the write side may fail first
    // ("ended during write"); the read side's word is the one reported.
    FirstCall(ledger, timer, deadline, ws, &timed_out, read_error);
    ledger_ = &ledger;
    timer_ = &io.provider->getTimer();
    executor_ = &kj::getCurrentThreadExecutor();
    auto stop = kj::newPromiseAndFulfiller<void>();
    stop_ = stop.fulfiller.get();
    connect_status_ = Status::Ok();
    signalled = true;
    ready->set_value();
    stop.promise.wait(ws);
    ledger_ = nullptr;
  })) {
    if (timed_out) {
      fail(Status(Code::kDeadlineExceeded,
                  "timed out: admitd at " + options.endpoint.text + " did not answer within " +
                      Seconds(options.call_timeout_ms) + " (connecting; --timeout)"));
    } else {
      fail(FromConnectException(*e, options.endpoint.kind == Endpoint::Kind::kTls));
    }
  }
}

RpcClient::~RpcClient() {
  if (thread_.joinable()) {
    if (executor_ != nullptr) {
      kj::runCatchingExceptions([&]() { executor_->executeSync([this]() { stop_->fulfill(); }); });
    }
    thread_.join();
  }
}

Status RpcClient::Run(const std::function<kj::Promise<Status>(Ledger::Client&)>& call) {
  return RunFor(call, call_timeout_ms_);
}

Status RpcClient::RunFor(const std::function<kj::Promise<Status>(Ledger::Client&)>& call,
                         uint64_t timeout_ms) {
  Status result;
  bool timed_out = false;  // set on the connection's thread, read after executeSync returns
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() {
    result = executor_->executeSync([&]() -> kj::Promise<Status> {
      if (ledger_ == nullptr) return Status(Code::kUnavailable, "admitd: the connection is closed");
      kj::Promise<Status> answered = call(*ledger_);
      if (timeout_ms == 0) return answered;
      // Past the timeout the call is dropped (Cap'n Proto tells the daemon so).
      return answered.exclusiveJoin(
          timer_->afterDelay(timeout_ms * kj::MILLISECONDS).then([&timed_out]() -> kj::Promise<Status> {
            timed_out = true;
            return KJ_EXCEPTION(DISCONNECTED, "timed out");
          }));
    });
  })) {
    if (timed_out) {
      return Status(Code::kDeadlineExceeded, "timed out: admitd at " + address_ +
                                                 " did not answer within " + Seconds(timeout_ms) +
                                                 " (--timeout)");
    }
    return FromException(*e);
  }
  return result;
}

Status RpcClient::Watch(
    const WatchRequest& request,
    const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
    uint64_t* resume, std::string* reason, const std::function<bool()>& cancelled) {
  // A stream: it lasts as long as the watcher wants it, so no call timeout.
  return RunFor([&](Ledger::Client& ledger) -> kj::Promise<Status> {
    auto done = kj::newPromiseAndFulfiller<Status>();
    auto call = ledger.watchRequest();
    call.setFromSequence(request.from);
    auto filter = call.initFilter();
    SetTexts(filter.initKinds(request.kinds.size()), request.kinds);
    SetTexts(filter.initNamespaces(request.namespaces.size()), request.namespaces);
    SetTexts(filter.initClusterQueues(request.cluster_queues.size()), request.cluster_queues);
    SetTexts(filter.initChecks(request.checks.size()), request.checks);
    call.setSink(kj::heap<SinkImpl>(on_events, kj::mv(done.fulfiller), resume, reason));
    // The handle stays on this thread, held by the branch that waits: when the watch is
    // over, the join drops the branch and with it the handle, which stops the daemon's side.
    auto answered = call.send().then(
        [](capnp::Response<Ledger::WatchResults> response) -> kj::Promise<Status> {
          Status s = FromError(response.getError());
          if (!s.ok()) return s;
          return kj::Promise<Status>(kj::NEVER_DONE).attach(response.getHandle());
        });
    kj::Promise<Status> watched = done.promise.exclusiveJoin(kj::mv(answered));
    if (!cancelled) return watched;
    return watched.exclusiveJoin(PollUntil(*timer_, cancelled));
  }, 0);
}

Result<ledger::AppendAck> RemoteLog::Append(std::span<const std::string>) {
  return Status(Code::kInvalidArgument,
                "a connected client does not append to the ledger; it records through admitd");
}

Result<std::vector<ledger::StoredEvent>> RemoteLog::Read(ledger::Sequence from,
                                                          size_t max_count) {
  // EventLog's contract: fewer than max_count only at the head. The daemon answers a page
  // (kReadPageEventsMax events, kReadPageBytesMax bytes, at least one event below its head):
  // ask again after the last event until there are max_count, or a page comes back empty.
  // Each round adds an event or ends, so there are at most max_count + 1 rounds.
  std::vector<ledger::StoredEvent> events;
  while (events.size() < max_count) {
    const ledger::Sequence next = events.empty() ? from : events.back().sequence + 1;
    const size_t before = events.size();
    Status s = client_.Run([&](Ledger::Client& ledger) {
      auto call = ledger.readRequest();
      call.setFrom(next);
      call.setMaxCount(static_cast<uint32_t>(max_count - before));
      return call.send().then([&](capnp::Response<Ledger::ReadResults> r) {
        Status status = FromError(r.getError());
        if (!status.ok()) return status;
        auto page = r.getEvents();
        if (page.size() > max_count - before) {
          return Status(Code::kCorruption, "admitd answered a read of " +
                                               std::to_string(max_count - before) + " events with " +
                                               std::to_string(page.size()));
        }
        for (StoredEvent::Reader e : page) {
          auto bytes = e.getBytes();
          events.push_back({e.getSequence(), std::string(reinterpret_cast<const char*>(bytes.begin()),
                                                         bytes.size())});
        }
        return Status::Ok();
      });
    });
    if (!s.ok()) return s;
    if (events.size() == before) break;  // the head
  }
  return events;
}

Result<ledger::Head> RemoteLog::Head() {
  ledger::Head head;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    return ledger.headRequest().send().then([&](capnp::Response<Ledger::HeadResults> r) {
      Status status = FromError(r.getError());
      if (!status.ok()) return status;
      auto h = r.getHead();
      head.sequence = h.getSequence();
      head.recorded_at_ns = h.getRecordedAtNs();
      auto hash = h.getHash();
      if (hash.size() == head.hash.size()) std::memcpy(head.hash.data(), hash.begin(), hash.size());
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return head;
}

ledger::Head RemoteLog::GetHead() {
  // EventLog::GetHead cannot fail: OpenLedger asked Head() once before handing the log out,
  // and a daemon gone since then shows as an empty ledger whose reads report the error.
  auto head = Head();
  return head.ok() ? *head : ledger::Head{};
}

Result<std::optional<ledger::Sequence>> RemoteLog::FindKey(std::string_view) {
  return Status(Code::kInvalidArgument, "a connected client does not look up idempotency keys");
}

Result<std::vector<ledger::Sequence>> RemoteSnapshotStore::List() {
  std::vector<ledger::Sequence> list;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    return ledger.listSnapshotsRequest().send().then(
        [&](capnp::Response<Ledger::ListSnapshotsResults> r) {
          Status status = FromError(r.getError());
          for (uint64_t after : r.getSequences()) list.push_back(after);
          return status;
        });
  });
  if (!s.ok()) return s;
  return list;
}

Result<ledger::StoredSnapshot> RemoteSnapshotStore::Read(ledger::Sequence after) {
  ledger::StoredSnapshot snapshot;
  snapshot.after = after;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.readSnapshotRequest();
    call.setAfter(after);
    return call.send().then([&](capnp::Response<Ledger::ReadSnapshotResults> r) {
      Status status = FromError(r.getError());
      if (!status.ok()) return status;
      auto bytes = r.getBytes();
      snapshot.bytes.assign(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
      auto hash = r.getStoredHash();
      if (hash.size() != snapshot.stored_hash.size()) {
        return Status(Code::kCorruption, "admitd sent a snapshot hash of " +
                                             std::to_string(hash.size()) + " bytes");
      }
      std::memcpy(snapshot.stored_hash.data(), hash.begin(), hash.size());
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return snapshot;
}

Result<schema::Hash> RemoteSnapshotStore::Write(ledger::Sequence, std::string_view) {
  return Status(Code::kInvalidArgument,
                "a connected client does not write snapshots; `admitctl snapshot` asks admitd");
}

Status RemoteSnapshotStore::Remove(ledger::Sequence) {
  return Status(Code::kInvalidArgument, "a connected client does not remove snapshots");
}

Result<RecordOutcome> RemoteApi::Record(std::vector<std::string> inputs,
                                        const IntakeOptions& options,
                                        const std::string& request_id) {
  RecordOutcome outcome;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.recordRequest();
    auto request = call.initRequest();
    request.setRequestId(request_id);
    auto list = request.initInputs(static_cast<unsigned>(inputs.size()));
    for (unsigned i = 0; i < inputs.size(); ++i) {
      list.set(i, capnp::Data::Reader(reinterpret_cast<const kj::byte*>(inputs[i].data()),
                                      inputs[i].size()));
    }
    request.setHasAt(options.at_ns.has_value());
    if (options.at_ns) request.setAtNs(*options.at_ns);
    return call.send().then([&](capnp::Response<Ledger::RecordResults> r) {
      Status status = FromError(r.getError());
      if (!status.ok()) return status;
      auto o = r.getOutcome();
      for (uint64_t seq : o.getSequences()) outcome.sequences.push_back(seq);
      for (bool u : o.getUnchanged()) outcome.unchanged.push_back(u);
      for (bool c : o.getConfigured()) outcome.configured.push_back(c);
      for (auto note : o.getNotes()) outcome.notes.emplace_back(note.cStr());
      for (auto d : o.getDecisions()) {
        outcome.decisions.emplace_back(reinterpret_cast<const char*>(d.begin()), d.size());
      }
      outcome.first_decision_sequence = o.getFirstDecisionSequence();
      outcome.retried = o.getRetried();
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return outcome;
}

Result<WorkloadInfo> RemoteApi::Workload(const std::string& ns_name) {
  WorkloadInfo info;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.workloadRequest();
    call.setName(ns_name);
    return call.send().then([&](capnp::Response<Ledger::WorkloadResults> r) {
      Status status = FromError(r.getError());
      if (!status.ok()) return status;
      auto w = r.getWorkload();
      info.ns = w.getNamespace();
      info.name = w.getName();
      info.uid = w.getUid();
      info.generation = w.getGeneration();
      info.fencing_token = w.getFencingToken();
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return info;
}

Result<ledger::Head> RemoteApi::GetHead() {
  RemoteLog log(owned_);
  return log.Head();
}

namespace {
// The text a rendering call returns, or its error.
template <typename Results>
kj::Promise<Status> TextOf(capnp::RemotePromise<Results>&& promise, std::string* text) {
  return promise.then([text](capnp::Response<Results> r) {
    Status status = FromError(r.getError());
    if (status.ok()) *text = r.getText();
    return status;
  });
}
}  // namespace

Result<std::string> RemoteApi::Get(const std::string& kind, const std::string& format,
                                   const GetQuery& query) {
  std::string text;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.getRequest();
    call.setKind(kind);
    call.setFormat(format);
    call.setName(query.name);
    call.setNamespace(query.ns);
    call.setSelector(query.selector);
    call.setClusterQueue(query.cluster_queue);
    call.setLocalQueue(query.local_queue);
    call.setLimit(query.limit);
    call.setOffset(query.offset);
    return TextOf(call.send(), &text);
  });
  if (!s.ok()) return s;
  return text;
}

Result<std::string> RemoteApi::Definition(const std::string& key) {
  std::string body;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.definitionRequest();
    call.setKey(key);
    return call.send().then([&body](capnp::Response<Ledger::DefinitionResults> r) -> Status {
      Status status = FromError(r.getError());
      if (!status.ok()) return status;
      auto data = r.getBody();
      body.assign(reinterpret_cast<const char*>(data.begin()), data.size());
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return body;
}

Result<std::string> RemoteApi::Explain(const std::string& ns_name, uint64_t at,
                                       const std::string& format) {
  std::string text;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.explainRequest();
    call.setName(ns_name);
    call.setAt(at);
    call.setFormat(format);
    return TextOf(call.send(), &text);
  });
  if (!s.ok()) return s;
  return text;
}

Result<std::string> RemoteApi::Snapshot(const std::string& format) {
  std::string text;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    auto call = ledger.snapshotRequest();
    call.setFormat(format);
    return TextOf(call.send(), &text);
  });
  if (!s.ok()) return s;
  return text;
}

Result<std::pair<std::string, std::vector<std::string>>> RemoteApi::WhoAmI() {
  std::pair<std::string, std::vector<std::string>> who;
  Status s = client_.Run([&](Ledger::Client& ledger) {
    return ledger.whoamiRequest().send().then([&](capnp::Response<Ledger::WhoamiResults> r) {
      who.first = r.getPrincipal();
      for (auto role : r.getRoles()) who.second.emplace_back(role.cStr());
      return Status::Ok();
    });
  });
  if (!s.ok()) return s;
  return who;
}

Status RemoteApi::Ping() {
  return client_.Run([](Ledger::Client& ledger) {
    return ledger.pingRequest().send().then(
        [](capnp::Response<Ledger::PingResults>) { return Status::Ok(); });
  });
}

}  // namespace admission::ops::rpc
