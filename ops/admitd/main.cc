// admitd: the admission service. Owns the ledger (the one writer) and serves admitd's RPC API
// (schema/admission_rpc.capnp) on Unix sockets and TLS. See docs/admitd.md.
//
// Exit codes: 0 after SIGTERM or SIGINT (everything answered is durable); 1 could not start
// (reason on stderr); 2 usage; 3 the Kafka ledger stopped this daemon: fenced by a newer
// writer, a fatal producer error, or a fork in the topic; nothing more is written, the ready
// file is removed.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <functional>
#include <iostream>

#include <CLI/CLI.hpp>

#include "ops/args/parse_args.h"
#include <kj/async-unix.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "ledger/kafka_leadership.h"
#include "ledger/kafka_log.h"
#include "ledger/rocksdb_log.h"
#include "ledger/snapshot_store.h"
#include "ops/admitd/flags.h"
#include "ops/admitd/role_loop.h"
#include "ops/service/clock.h"
#include "ops/http/http_listener.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"

namespace admission::ops::admitd {
namespace {

int Fail(const Status& s) {
  std::cerr << "admitd: " << s.ToString() << "\n";
  return 1;
}

// File descriptors beyond the connections' (the ledger's files, the metrics listener, logs).
constexpr uint64_t kSpareFileDescriptors = 256;

// The connection limits (ops/rpc/transport.h) need file descriptors: the soft limit is raised
// to the hard one, and a limit still below what they may use is a warning (accepts would fail
// first: retried, counted, not ready; docs/admitd.md, "Limits").
void RaiseFileLimit() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      spdlog::info("open files limit raised from {} to {}", before, limit.rlim_cur);
    } else {
      limit.rlim_cur = before;
    }
  }
  const uint64_t needed = rpc::kConnectionsMax + rpc::kAdminReserveConnections +
                          rpc::kTlsHandshakesMax + rpc::kRefusalsInFlightMax + kSpareFileDescriptors;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    spdlog::warn("the open files limit is {}, below the {} the connection limits may use: "
                 "accepts will fail before the connection limits are reached (raise ulimit -n)",
                 limit.rlim_cur, needed);
  }
}

kj::Promise<void> OnHangup(kj::UnixEventPort& port, rpc::Daemon& daemon) {
  return port.onSignal(SIGHUP).then([&port, &daemon](siginfo_t) {
    Status s = daemon.ReloadPolicy();
    if (s.ok()) {
      spdlog::info("SIGHUP: policy reloaded");
    } else {
      spdlog::error("SIGHUP: the new policy is refused, the running one stays: {}", s.ToString());
    }
    return OnHangup(port, daemon);
  });
}

// The ledger admitd serves: the embedded RocksDB ledger, or the Kafka ledger with its local
// copy in --state.
struct OpenedLedger {
  std::unique_ptr<ledger::EventLog> log;
  ledger::KafkaLog* kafka = nullptr;  // log, when it is a Kafka ledger
};

// What a standby of a Kafka ledger needs to refuse a write: the group, joined once listening.
struct Standby {
  std::unique_ptr<ledger::KafkaLeadership> leadership;
  StandbyAnswer answer;
};

Result<std::vector<rpc::Endpoint>> ParseListen(const Args& args) {
  std::vector<rpc::Endpoint> endpoints;
  for (const std::string& text : args.listen) {
    auto e = rpc::ParseEndpoint(text);
    if (!e.ok()) return e.status();
    endpoints.push_back(*e);
  }
  return endpoints;
}

Result<rpc::Policy> LoadPolicy(const Args& args) {
  if (args.policy.empty()) return rpc::Policy();
  return rpc::Policy::Load(args.policy);
}

Result<OpenedLedger> OpenKafkaLedger(const Args& args) {
  auto address = ledger::ParseKafkaLedger(args.ledger_dir);
  if (!address.ok()) return address.status();
  if (args.state_dir.empty()) {
    return Status(Code::kInvalidArgument,
                  "--ledger " + args.ledger_dir + " needs --state DIR (the local copy of "
                  "the topic and the snapshots)");
  }
  ledger::KafkaLogOptions kafka_options;
  kafka_options.address = *address;
  kafka_options.state_dir = args.state_dir;
  // Opened for reading; it becomes the writer when Kafka gives this daemon the ledger's
  // partition in the group (docs/kafka.md, "Failover").
  kafka_options.writer = false;
  kafka_options.create_topic = args.create_topic;
  kafka_options.operation_timeout_ms = args.kafka_timeout_ms;
  kafka_options.transaction_timeout_ms = args.transaction_timeout_ms;
  auto drill = DrillFromEnvironment();
  if (!drill.ok()) return drill.status();
  kafka_options.drill = std::move(*drill);
  spdlog::info("opening the Kafka ledger {} (state in {})", address->ToString(), args.state_dir);
  auto log = ledger::KafkaLog::Open(kafka_options);
  if (!log.ok()) return log.status();
  OpenedLedger opened;
  opened.kafka = log->get();
  opened.log = std::move(*log);
  return opened;
}

Result<OpenedLedger> OpenRocksDbLedger(const Args& args) {
  if (!args.state_dir.empty() || args.create_topic) {
    return Status(Code::kInvalidArgument,
                  "--state and --create-topic are for a Kafka ledger (--ledger "
                  "kafka://HOST:PORT/TOPIC)");
  }
  ledger::RocksDbLogOptions ledger_options;
  ledger_options.min_free_bytes = args.min_free_bytes;
  ledger_options.history_progress = [](uint64_t done, uint64_t total) {
    spdlog::info("indexing the ledger's history (once, for this version): {} of {} events",
                 done, total);
  };
  auto log = ledger::RocksDbLog::Open(args.ledger_dir, ledger_options);
  if (!log.ok()) return log.status();
  OpenedLedger opened;
  opened.log = std::move(*log);
  return opened;
}

// The service folds the ledger (from its newest snapshot); on a Kafka ledger its writes are
// refused while this daemon is a standby.
Result<std::unique_ptr<Service>> OpenService(const Args& args, const OpenedLedger& opened,
                                             ledger::FileSnapshotStore& snapshots, Clock& clock,
                                             Standby& standby) {
  ServiceOptions service_options;
  service_options.snapshots = &snapshots;
  service_options.snapshot_every_events = args.snapshot_every;
  if (ledger::KafkaLog* kafka = opened.kafka; kafka != nullptr) {
    service_options.write_gate = [kafka, &standby]() {
      if (kafka->writer()) return Status::Ok();
      return standby.answer.Refusal(*kafka, standby.leadership.get());
    };
  }
  return Service::Open(
      *opened.log, clock,
      [](uint64_t done, uint64_t total) {
        if (total > 100000) spdlog::info("loading the ledger: {} / {} events", done, total);
      },
      service_options);
}

// Metrics and health over HTTP on --metrics-listen (none without it): the ledger's metrics
// fold catches up from the genesis first. Appends the listener's URL to *bound.
Result<std::unique_ptr<http::HttpListener>> StartHttpListener(
    const Args& args, kj::AsyncIoContext& io, Service& service, ledger::EventLog& log,
    ledger::FileSnapshotStore& snapshots, rpc::Daemon& daemon, const ReadyFile& ready,
    std::vector<std::string>* bound) {
  if (args.metrics_listen.empty()) return std::unique_ptr<http::HttpListener>();
  // Not ready while appends are refused for lack of disk space (reads are still served).
  ledger::EventLog* disk_log = &log;
  const Service* served = &service;
  // Nor while accepting connections fails (file descriptors exhausted: retried meanwhile).
  auto metrics = std::make_unique<http::HttpListener>(
      io, service, log, snapshots, daemon, [&ready, disk_log, &daemon, served] {
        if (!ready.marked()) return false;
        if (!daemon.accepting()) return false;
        // An append failed and the decider may be ahead of the ledger until it is folded again.
        if (served->broken()) return false;
        const std::optional<ledger::DiskState> disk = disk_log->Disk();
        return !disk || !disk->refusing;
      });
  metrics->set_render_options({.local_queues = args.local_queue_metrics});
  Status folded = metrics->CatchUp();
  if (!folded.ok()) return folded;
  auto url = metrics->Listen(args.metrics_listen, io.waitScope);
  if (!url.ok()) return url.status();
  bound->push_back(*url);
  return metrics;
}

// A Kafka ledger's daemon joins the group that gives one member the ledger's partition.
Result<std::unique_ptr<ledger::KafkaLeadership>> JoinGroup(const Args& args,
                                                           const ledger::KafkaLog& kafka,
                                                           const std::string& first_bound) {
  ledger::KafkaLeadershipOptions leadership_options;
  leadership_options.address = kafka.options().address;
  leadership_options.advertised = args.advertise.empty() ? first_bound : args.advertise;
  leadership_options.session_timeout_ms = args.session_timeout_ms;
  leadership_options.operation_timeout_ms = args.kafka_timeout_ms;
  return ledger::KafkaLeadership::Join(leadership_options);
}

// How serving ended: a signal, or the Kafka ledger's writer halted.
struct Stop {
  int signal = 0;
  std::optional<Status> halted;
};

// Serves until SIGTERM or SIGINT, or until the role loop stops (a halted Kafka writer).
Stop Serve(kj::AsyncIoContext& io, const OpenedLedger& opened,
           ledger::KafkaLeadership* leadership, Service& service, rpc::Daemon& daemon,
           ReadyFile& ready) {
  auto& port = io.unixEventPort;
  Stop stop;
  ErrorThrottle throttle;
  port.onSignal(SIGTERM)
      .exclusiveJoin(port.onSignal(SIGINT))
      .then([&stop](siginfo_t info) { stop.signal = info.si_signo; })
      .exclusiveJoin(
          FollowOrLead(io, opened.kafka, leadership, service, daemon, &stop.halted, throttle,
                       ready))
      .wait(io.waitScope);
  return stop;
}

// Answers the calls in flight (for at most rpc::kShutdownMaxMs) and returns the exit code.
int ShutDown(const Args& args, kj::AsyncIoContext& io, rpc::Daemon& daemon,
             ledger::EventLog& log, const Stop& stop) {
  if (stop.halted) {
    // Not ready any more: whoever waits on the ready file must not take this daemon for a writer.
    if (!args.ready_file.empty()) std::remove(args.ready_file.c_str());
    spdlog::critical("the Kafka ledger's writer stopped: {}; answering the calls in flight, "
                     "then exiting 3", stop.halted->ToString());
  } else {
    spdlog::info("signal {}: stopping (answering the calls in flight)", stop.signal);
  }
  daemon.Shutdown()
      .exclusiveJoin(io.provider->getTimer().afterDelay(rpc::kShutdownMaxMs * kj::MILLISECONDS))
      .wait(io.waitScope);
  const rpc::DaemonStats stats = daemon.stats();
  spdlog::info("stopped at head {}: {} record calls in {} groups, {} refused",
               log.GetHead().sequence, stats.record_calls, stats.groups, stats.refused_calls);
  return stop.halted ? 3 : 0;
}

// The daemon's start, phase by phase: endpoints and policy, the ledger, the service, the RPC
// daemon, the HTTP listener, the ready file and the Kafka group; then serve, then shut down.
int Run(const Args& args) {
  // Before any thread starts (RocksDB's among them): the signals are blocked in every thread
  // and delivered to the event loop, never to a thread that would take the default action.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::UnixEventPort::captureSignal(SIGHUP);
  RaiseFileLimit();
  auto endpoints = ParseListen(args);
  if (!endpoints.ok()) return Fail(endpoints.status());
  auto policy = LoadPolicy(args);
  if (!policy.ok()) return Fail(policy.status());
  auto opened = ledger::IsKafkaLedger(args.ledger_dir) ? OpenKafkaLedger(args)
                                                       : OpenRocksDbLedger(args);
  if (!opened.ok()) return Fail(opened.status());
  ledger::EventLog& log = *opened->log;
  ledger::KafkaLog* kafka = opened->kafka;
  ledger::FileSnapshotStore snapshots(kafka != nullptr ? args.state_dir : args.ledger_dir);
  SystemClock clock;
  Standby standby;
  auto service = OpenService(args, *opened, snapshots, clock, standby);
  if (!service.ok()) return Fail(service.status());

  auto io = kj::setupAsyncIo();
  rpc::DaemonOptions options;
  options.listen = *endpoints;
  options.tls = args.tls;
  options.policy_path = args.policy;
  options.snapshot_path = [&snapshots](uint64_t after) { return snapshots.PathOf(after); };
  rpc::Daemon daemon(io, **service, log, snapshots, std::move(*policy), std::move(options));
  auto bound = daemon.Listen(io.waitScope);
  if (!bound.ok()) return Fail(bound.status());
  // The ready file appears once calls are answered as they will be from now on: at once on a
  // RocksDB ledger; on a Kafka ledger once this daemon is the writer or a standby of a known
  // writer (the role loop calls this), so that a caller waiting on it never meets the moment
  // the group is still choosing.
  ReadyFile ready(args.ready_file);
  auto metrics = StartHttpListener(args, io, **service, log, snapshots, daemon, ready, &*bound);
  if (!metrics.ok()) return Fail(metrics.status());
  std::string lines;
  for (const std::string& b : *bound) lines += b + "\n";
  ready.set_lines(std::move(lines));
  if (kafka == nullptr) ready.Mark();
  if (kafka != nullptr) {
    auto joined = JoinGroup(args, *kafka, bound->front());
    if (!joined.ok()) return Fail(joined.status());
    standby.leadership = std::move(*joined);
  }
  std::cout << "admitd: serving " << args.ledger_dir << " (head " << log.GetHead().sequence
            << ") on";
  for (const std::string& b : *bound) std::cout << " " << b;
  std::cout << (kafka != nullptr ? " (standby until Kafka gives it the ledger's partition)" : "")
            << std::endl;

  auto hangups = OnHangup(io.unixEventPort, daemon).eagerlyEvaluate(nullptr);
  const Stop stop = Serve(io, *opened, standby.leadership.get(), **service, daemon, ready);
  return ShutDown(args, io, daemon, log, stop);
}

}  // namespace
}  // namespace admission::ops::admitd

int main(int argc, char** argv) {
  using namespace admission::ops;
  using namespace admission::ops::admitd;
  CLI::App app{
      "admitd: the admission service. Owns the ledger at --ledger (the one writer) and serves "
      "admitctl --connect, check controllers, the pod runtime, operators and auditors over "
      "Cap'n Proto RPC on Unix sockets (the peer's uid is its identity: this daemon's own uid "
      "and root are admin, others uid:N) and TLS (the client certificate's common name, from "
      "--client-ca). What each principal may do comes from --policy."};
  Args args;
  AddFlags(app, args);
  if (auto stop = ParseArgs(app, argc, argv)) return *stop;
  auto logger = spdlog::stderr_color_mt("admitd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(args.log_level));
  return Run(args);
}
