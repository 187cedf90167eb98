#pragma once
// Private to ops/rpc: the Daemon's inner types and the helpers that its Cap'n Proto methods
// (server.cc), its serving loop and group commit (daemon.cc) and its watches (watch.cc) share.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>

#include "ops/rpc/server.h"

namespace admission::ops::rpc {

// The capability a connection of `principal` gets (Daemon::LedgerImpl, server.cc).
Ledger::Client NewLedgerCapability(Daemon& daemon, std::string principal);

// Sets list[i] to events[i]. REQUIRES: list.size() == events.size().
void FillEvents(capnp::List<StoredEvent>::Builder list,
                const std::vector<ledger::StoredEvent>& events);

// One page of the ledger for a `read` reply: up to max_count events from `from` on, only as
// many as fit in kReadPageBytesMax stored bytes, and always the first (a client that asked for
// events below the head gets at least one, so it makes progress).
Result<std::vector<ledger::StoredEvent>> ReadPage(ledger::EventLog& log, uint64_t from,
                                                  size_t max_count);

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

}  // namespace admission::ops::rpc
