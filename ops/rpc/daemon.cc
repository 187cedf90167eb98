// admitd's serving loop: listening and accepting (TLS handshakes within their limits), each
// connection's budget, group commit (gather the record calls, then flush them in one
// Service::RecordGroup), policy reloads and the shutdown. The Cap'n Proto methods are in
// server.cc, the watches in watch.cc.

#include "ops/rpc/server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <capnp/message.h>
#include <capnp/rpc-twoparty.h>
#include <capnp/rpc.capnp.h>
#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include "ops/rpc/daemon_internal.h"
#include "ops/service/api.h"
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

// Reads and drops what `stream` sends until it ends (a refused peer's calls).
kj::Promise<void> Drain(kj::AsyncIoStream& stream, kj::Array<kj::byte> buffer) {
  auto read = stream.tryRead(buffer.begin(), 1, buffer.size());
  return read.then([&stream, buffer = kj::mv(buffer)](size_t n) mutable -> kj::Promise<void> {
    if (n == 0) return kj::READY_NOW;
    return Drain(stream, kj::mv(buffer));
  });
}

}  // namespace

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
                    NewLedgerCapability(*this, principal));
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

Status Daemon::ReloadPolicy() {
  if (options_.policy_path.empty()) return Status::Ok();
  auto policy = Policy::Load(options_.policy_path);
  if (!policy.ok()) return policy.status();
  policy_ = std::move(*policy);
  RecheckWatches();
  return Status::Ok();
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
