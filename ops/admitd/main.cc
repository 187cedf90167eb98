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
#include "ops/service/clock.h"
#include "ops/http/http_listener.h"
#include "ops/rpc/server.h"
#include "ops/service/service.h"

namespace admission::ops {
namespace {

struct Args {
  std::string ledger_dir;
  std::string state_dir;
  bool create_topic = false;
  int kafka_timeout_ms = 30'000;
  int transaction_timeout_ms = 60'000;
  int session_timeout_ms = 10'000;
  std::string advertise;
  std::vector<std::string> listen;
  rpc::TlsFiles tls;
  std::string policy;
  std::string ready_file;
  std::string metrics_listen;
  bool local_queue_metrics = false;
  std::string log_level = "info";
  uint64_t snapshot_every = kSnapshotEveryEventsDefault;
  std::optional<uint64_t> min_free_bytes;  // unset: ledger::DefaultMinFreeBytes of the disk
};

// The Kafka ledger's role loop runs this often (a standby's lag behind the writer, and how soon
// a writer notices it lost the partition).
constexpr int64_t kRolePollMs = 100;
// The role loop repeats an unchanged error at most this often.
constexpr int64_t kErrorRepeatMs = 5000;
// A standby asks the group who the writer is at most this often.
constexpr int64_t kHolderRefreshMs = 1000;

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

// ADMITD_KAFKA_DRILL=POINT:N:ACTION[:MS], for fault drills only (docs/kafka.md, "Drills"): at
// POINT (produced, committing) of the Nth transaction, ACTION: kill (SIGKILL, after MS ms on
// another thread if given: during the commit), stop (SIGSTOP: a zombie once resumed), stall
// (sleep MS ms: past transaction.timeout.ms).
Result<std::function<bool(std::string_view, uint64_t)>> DrillFromEnvironment() {
  const char* spec = std::getenv("ADMITD_KAFKA_DRILL");
  if (spec == nullptr || *spec == '\0') return std::function<bool(std::string_view, uint64_t)>();
  std::vector<std::string> parts;
  std::string part;
  for (const char* p = spec;; ++p) {
    if (*p == ':' || *p == '\0') {
      parts.push_back(part);
      part.clear();
      if (*p == '\0') break;
    } else {
      part.push_back(*p);
    }
  }
  const auto invalid = Status(Code::kInvalidArgument,
                              std::string("ADMITD_KAFKA_DRILL='") + spec +
                                  "': expected POINT:N:ACTION[:MS], POINT produced or committing, "
                                  "ACTION kill, stop or stall");
  if (parts.size() < 3 || parts.size() > 4) return invalid;
  const std::string point = parts[0];
  const std::string action = parts[2];
  uint64_t n = 0;
  int64_t ms = 0;
  try {
    n = std::stoull(parts[1]);
    if (parts.size() == 4) ms = std::stoll(parts[3]);
  } catch (const std::exception&) {
    return invalid;
  }
  if ((point != "produced" && point != "committing") ||
      (action != "kill" && action != "stop" && action != "stall")) {
    return invalid;
  }
  spdlog::warn("fault drill armed: {} of transaction {}: {} {} ms", point, n, action, ms);
  return std::function<bool(std::string_view, uint64_t)>(
      [point, n, action, ms](std::string_view at, uint64_t transaction) {
        if (at != point || transaction != n) return false;
        spdlog::warn("fault drill: {} at {} of transaction {}", action, point, transaction);
        if (action == "stop") {
          raise(SIGSTOP);
        } else if (action == "stall") {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        } else if (ms == 0) {
          raise(SIGKILL);
        } else {
          std::thread([ms] {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
            raise(SIGKILL);
          }).detach();
        }
        return false;
      });
}

// What a standby answers a write: the active writer's address, as the group names it (asked at
// most every kHolderRefreshMs).
class StandbyAnswer {
 public:
  Status Refusal(ledger::KafkaLog& kafka, ledger::KafkaLeadership* leadership) {
    const auto now = std::chrono::steady_clock::now();
    if (leadership != nullptr && now - asked_ > std::chrono::milliseconds(kHolderRefreshMs)) {
      asked_ = now;
      auto holder = leadership->Holder();
      holder_ = holder.ok() && holder->has_value() ? **holder : "";
    }
    return Status(Code::kUnavailable,
                  "this admitd is a standby of the Kafka ledger " +
                      kafka.options().address.ToString() + ": it answers reads, and writes go to " +
                      (holder_.empty() ? std::string("the active writer (being chosen now)")
                                       : "the active writer at " + holder_));
  }

 private:
  std::chrono::steady_clock::time_point asked_{};
  std::string holder_;
};

// The Kafka ledger's role loop, every kRolePollMs on the event loop: a standby reads the topic
// and folds what the writer appended (watchers see it), and becomes the writer once Kafka gives
// it the ledger's partition; a writer that lost the partition is a standby again; a writer that
// was fenced (a newer writer took its transactional id) stops for good. Resolves when it has
// stopped (never for a RocksDB ledger).
// --ready-file: the bound addresses, one per line, written once (atomically: a temporary file
// renamed) when the daemon answers calls as it will from now on.
class ReadyFile {
 public:
  ReadyFile(std::string path, std::string lines)
      : path_(std::move(path)), lines_(std::move(lines)) {}
  bool marked() const { return marked_; }
  void Mark() {
    if (marked_) return;
    marked_ = true;
    if (path_.empty()) return;
    const std::string tmp = path_ + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << lines_;
    }
    std::rename(tmp.c_str(), path_.c_str());
  }

 private:
  std::string path_;
  std::string lines_;
  bool marked_ = false;
};

// Logs an error of the role loop when it changes, else at most every kErrorRepeatMs (the loop
// runs every kRolePollMs while a broker is away).
class ErrorThrottle {
 public:
  void Error(const std::string& what, const Status& s) {
    const auto now = std::chrono::steady_clock::now();
    const std::string text = what + ": " + s.ToString();
    if (text == last_ && now - logged_ < std::chrono::milliseconds(kErrorRepeatMs)) return;
    spdlog::error("{}", text);
    last_ = text;
    logged_ = now;
  }

 private:
  std::string last_;
  std::chrono::steady_clock::time_point logged_{};
};

kj::Promise<void> FollowOrLead(kj::AsyncIoContext& io, ledger::KafkaLog* kafka,
                               ledger::KafkaLeadership* leadership, Service& service,
                               rpc::Daemon& daemon, std::optional<Status>* halted,
                               ErrorThrottle& throttle, ReadyFile& ready) {
  if (kafka == nullptr) return kj::NEVER_DONE;
  if (kafka->writer() && !leadership->leader()) {
    // Kafka took the partition away (this member missed its session: stopped, cut off, or the
    // broker was away). Another member may write now; this one reads until it is given the
    // partition again, and then writes under a new producer epoch.
    kafka->Demote();
    spdlog::warn("this admitd lost the Kafka ledger's partition in group {}: standby now",
                 ledger::KafkaLeadershipGroup(kafka->options().address.topic));
  }
  if (auto why = kafka->Halted()) {
    *halted = *why;
    return kj::READY_NOW;
  }
  if (service.broken()) {
    // An append failed (the broker was away, or its outcome stayed unknown): the log settles
    // what the topic holds by reading its tail, then the decider is rebuilt on it.
    const uint64_t before = service.position();
    auto head = kafka->CatchUp();
    Status s = head.ok() ? service.Reload() : head.status();
    if (s.ok()) {
      spdlog::warn("the Kafka ledger answers again: decider rebuilt at sequence {}",
                   service.position());
      daemon.LedgerAdvanced(std::min(before, service.position()), service.position());
    } else {
      throttle.Error("recovering after a failed append", s);
    }
  }
  if (!kafka->writer()) {
    const uint64_t before = service.position();
    Status s = Status::Ok();
    if (leadership->leader()) {
      s = kafka->BecomeWriter();
      if (s.ok()) spdlog::info("Kafka gave this admitd the ledger's partition: it is the writer now");
    } else {
      auto head = kafka->CatchUp();
      if (!head.ok()) s = head.status();
    }
    if (s.ok()) {
      auto folded = service.Follow();
      if (!folded.ok()) s = folded.status();
    }
    if (!s.ok()) {
      throttle.Error("following the Kafka ledger", s);
      if (s.code() == Code::kCorruption || s.code() == Code::kInvalidArgument) {
        *halted = s;  // a fork, or a topic that may not be written: nothing to wait for
        return kj::READY_NOW;
      }
    }
    daemon.LedgerAdvanced(before, service.position());
  }
  if (!ready.marked()) {
    if (kafka->writer()) {
      ready.Mark();
    } else if (auto holder = leadership->Holder();
               holder.ok() && holder->has_value() && **holder != leadership->advertised()) {
      // A standby of a known writer. When the group names this daemon, the partition is on
      // its way here: ready once it writes, never as a standby that refuses writes naming
      // itself as the writer.
      ready.Mark();
    }
  }
  return io.provider->getTimer()
      .afterDelay(kRolePollMs * kj::MILLISECONDS)
      .then([&io, kafka, leadership, &service, &daemon, halted, &throttle, &ready]() {
        return FollowOrLead(io, kafka, leadership, service, daemon, halted, throttle, ready);
      });
}

int Run(const Args& args) {
  // Before any thread starts (RocksDB's among them): the signals are blocked in every thread
  // and delivered to the event loop, never to a thread that would take the default action.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::UnixEventPort::captureSignal(SIGHUP);
  RaiseFileLimit();
  std::vector<rpc::Endpoint> endpoints;
  for (const std::string& text : args.listen) {
    auto e = rpc::ParseEndpoint(text);
    if (!e.ok()) return Fail(e.status());
    endpoints.push_back(*e);
  }
  rpc::Policy policy;
  if (!args.policy.empty()) {
    auto loaded = rpc::Policy::Load(args.policy);
    if (!loaded.ok()) return Fail(loaded.status());
    policy = std::move(*loaded);
  }
  // The embedded RocksDB ledger, or the Kafka ledger with its local copy in --state.
  std::unique_ptr<ledger::EventLog> log;
  ledger::KafkaLog* kafka = nullptr;
  if (ledger::IsKafkaLedger(args.ledger_dir)) {
    auto address = ledger::ParseKafkaLedger(args.ledger_dir);
    if (!address.ok()) return Fail(address.status());
    if (args.state_dir.empty()) {
      return Fail(Status(Code::kInvalidArgument,
                         "--ledger " + args.ledger_dir + " needs --state DIR (the local copy of "
                         "the topic and the snapshots)"));
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
    if (!drill.ok()) return Fail(drill.status());
    kafka_options.drill = std::move(*drill);
    spdlog::info("opening the Kafka ledger {} (state in {})", address->ToString(), args.state_dir);
    auto opened = ledger::KafkaLog::Open(kafka_options);
    if (!opened.ok()) return Fail(opened.status());
    kafka = opened->get();
    log = std::move(*opened);
  } else {
    if (!args.state_dir.empty() || args.create_topic) {
      return Fail(Status(Code::kInvalidArgument,
                         "--state and --create-topic are for a Kafka ledger (--ledger "
                         "kafka://HOST:PORT/TOPIC)"));
    }
    ledger::RocksDbLogOptions ledger_options;
    ledger_options.min_free_bytes = args.min_free_bytes;
    ledger_options.history_progress = [](uint64_t done, uint64_t total) {
      spdlog::info("indexing the ledger's history (once, for this version): {} of {} events",
                   done, total);
    };
    auto opened = ledger::RocksDbLog::Open(args.ledger_dir, ledger_options);
    if (!opened.ok()) return Fail(opened.status());
    log = std::move(*opened);
  }
  ledger::FileSnapshotStore snapshots(kafka != nullptr ? args.state_dir : args.ledger_dir);
  SystemClock clock;
  ServiceOptions service_options;
  service_options.snapshots = &snapshots;
  service_options.snapshot_every_events = args.snapshot_every;
  std::unique_ptr<ledger::KafkaLeadership> leadership;
  StandbyAnswer standby_answer;
  if (kafka != nullptr) {
    service_options.write_gate = [kafka, &leadership, &standby_answer]() {
      if (kafka->writer()) return Status::Ok();
      return standby_answer.Refusal(*kafka, leadership.get());
    };
  }
  auto service = Service::Open(
      *log, clock,
      [](uint64_t done, uint64_t total) {
        if (total > 100000) spdlog::info("loading the ledger: {} / {} events", done, total);
      },
      service_options);
  if (!service.ok()) return Fail(service.status());

  auto io = kj::setupAsyncIo();
  rpc::DaemonOptions options;
  options.listen = endpoints;
  options.tls = args.tls;
  options.policy_path = args.policy;
  options.snapshot_path = [&snapshots](uint64_t after) { return snapshots.PathOf(after); };
  rpc::Daemon daemon(io, **service, *log, snapshots, std::move(policy), std::move(options));
  auto bound = daemon.Listen(io.waitScope);
  if (!bound.ok()) return Fail(bound.status());
  std::string lines;
  for (const std::string& b : *bound) lines += b + "\n";
  // Metrics and health over HTTP: the ledger's metrics fold catches up from the genesis first.
  const ReadyFile* ready_file = nullptr;
  std::unique_ptr<http::HttpListener> metrics;
  if (!args.metrics_listen.empty()) {
    // Not ready while appends are refused for lack of disk space (reads are still served).
    ledger::EventLog* disk_log = log.get();
    const Service* served = service->get();
    // Nor while accepting connections fails (file descriptors exhausted: retried meanwhile).
    metrics = std::make_unique<http::HttpListener>(io, **service, *log, snapshots, daemon, [&ready_file, disk_log, &daemon, served] {
      if (ready_file == nullptr || !ready_file->marked()) return false;
      if (!daemon.accepting()) return false;
      // An append failed and the decider may be ahead of the ledger until it is folded again.
      if (served->broken()) return false;
      const std::optional<ledger::DiskState> disk = disk_log->Disk();
      return !disk || !disk->refusing;
    });
    metrics->set_render_options({.local_queues = args.local_queue_metrics});
    Status folded = metrics->CatchUp();
    if (!folded.ok()) return Fail(folded);
    auto url = metrics->Listen(args.metrics_listen, io.waitScope);
    if (!url.ok()) return Fail(url.status());
    lines += *url + "\n";
    bound->push_back(*url);
  }
  // The ready file appears once calls are answered as they will be from now on: at once on a
  // RocksDB ledger; on a Kafka ledger once this daemon is the writer or a standby of a known
  // writer (the role loop calls this), so that a caller waiting on it never meets the moment
  // the group is still choosing.
  ReadyFile ready(args.ready_file, lines);
  ready_file = &ready;
  if (kafka == nullptr) ready.Mark();
  if (kafka != nullptr) {
    ledger::KafkaLeadershipOptions leadership_options;
    leadership_options.address = kafka->options().address;
    leadership_options.advertised = args.advertise.empty() ? bound->front() : args.advertise;
    leadership_options.session_timeout_ms = args.session_timeout_ms;
    leadership_options.operation_timeout_ms = args.kafka_timeout_ms;
    auto joined = ledger::KafkaLeadership::Join(leadership_options);
    if (!joined.ok()) return Fail(joined.status());
    leadership = std::move(*joined);
  }
  std::cout << "admitd: serving " << args.ledger_dir << " (head " << log->GetHead().sequence
            << ") on";
  for (const std::string& b : *bound) std::cout << " " << b;
  std::cout << (kafka != nullptr ? " (standby until Kafka gives it the ledger's partition)" : "")
            << std::endl;

  auto& port = io.unixEventPort;
  auto hangups = OnHangup(port, daemon).eagerlyEvaluate(nullptr);
  int signal = 0;
  std::optional<Status> halted;
  ErrorThrottle throttle;
  port.onSignal(SIGTERM)
      .exclusiveJoin(port.onSignal(SIGINT))
      .then([&signal](siginfo_t info) { signal = info.si_signo; })
      .exclusiveJoin(
          FollowOrLead(io, kafka, leadership.get(), **service, daemon, &halted, throttle,
                       ready))
      .wait(io.waitScope);
  if (halted) {
    // Not ready any more: whoever waits on the ready file must not take this daemon for a writer.
    if (!args.ready_file.empty()) std::remove(args.ready_file.c_str());
    spdlog::critical("the Kafka ledger's writer stopped: {}; answering the calls in flight, "
                     "then exiting 3", halted->ToString());
  } else {
    spdlog::info("signal {}: stopping (answering the calls in flight)", signal);
  }
  daemon.Shutdown()
      .exclusiveJoin(io.provider->getTimer().afterDelay(rpc::kShutdownMaxMs * kj::MILLISECONDS))
      .wait(io.waitScope);
  const rpc::DaemonStats stats = daemon.stats();
  spdlog::info("stopped at head {}: {} record calls in {} groups, {} refused",
               log->GetHead().sequence, stats.record_calls, stats.groups, stats.refused_calls);
  return halted ? 3 : 0;
}

}  // namespace
}  // namespace admission::ops

int main(int argc, char** argv) {
  using namespace admission::ops;
  CLI::App app{
      "admitd: the admission service. Owns the ledger at --ledger (the one writer) and serves "
      "admitctl --connect, check controllers, the pod runtime, operators and auditors over "
      "Cap'n Proto RPC on Unix sockets (the peer's uid is its identity: this daemon's own uid "
      "and root are admin, others uid:N) and TLS (the client certificate's common name, from "
      "--client-ca). What each principal may do comes from --policy."};
  Args args;
  app.add_option("--ledger", args.ledger_dir,
                 "ledger directory (created if missing), or kafka://HOST:PORT/TOPIC: the Kafka "
                 "ledger, with this daemon as its one fenced writer")
      ->required();
  app.add_option("--state", args.state_dir,
                 "Kafka ledger: the folder of its local copy and snapshots (required with "
                 "kafka://; rebuilt from the topic when lost)");
  app.add_flag("--create-topic", args.create_topic,
               "Kafka ledger: create the topic when missing (one partition, "
               "cleanup.policy=delete, retention.ms=-1)");
  app.add_option("--kafka-timeout-ms", args.kafka_timeout_ms,
                 "Kafka ledger: how long to wait for the broker on start, commit and reads "
                 "(default 30000)")
      ->check(CLI::Range(100, 600'000));
  app.add_option("--transaction-timeout-ms", args.transaction_timeout_ms,
                 "Kafka ledger: the producer's transaction.timeout.ms (default 60000)")
      ->check(CLI::Range(1000, 900'000));
  app.add_option("--session-timeout-ms", args.session_timeout_ms,
                 "Kafka ledger: a writer that sends no heartbeat to the group for this long loses "
                 "the ledger to a standby (default 10000; the broker's minimum is 6000)")
      ->check(CLI::Range(1000, 300'000));
  app.add_option("--advertise", args.advertise,
                 "Kafka ledger: the address a standby names to callers it refuses writes "
                 "(default: the first --listen address, as bound)");
  app.add_option("--listen", args.listen, "unix:PATH or tls:HOST:PORT (repeatable; port 0 picks one)")
      ->required();
  app.add_option("--tls-cert", args.tls.cert, "the daemon's certificate (PEM), for tls: addresses");
  app.add_option("--tls-key", args.tls.key, "the daemon's private key (PEM)");
  app.add_option("--client-ca", args.tls.ca,
                 "the CA (PEM) whose client certificates are accepted; any other is refused");
  app.add_option("--policy", args.policy,
                 "principals and roles (YAML; reloaded on SIGHUP). Without it only admin may call");
  app.add_option("--metrics-listen", args.metrics_listen,
                 "HOST:PORT (port 0 picks one): serve /metrics (Prometheus text: Kueue's metric "
                 "names, a projection of the ledger), /healthz and /readyz over HTTP");
  app.add_flag("--local-queue-metrics", args.local_queue_metrics,
               "also serve Kueue's kueue_local_queue_* metrics (labels name, namespace; many "
               "series where LocalQueues are many)");
  app.add_option("--ready-file", args.ready_file,
                 "once listening, write the bound addresses here (one per line)");
  app.add_option("--snapshot-every", args.snapshot_every,
                 "take a snapshot after an append that crosses a multiple of this many events "
                 "(default 100000; 0: never)");
  app.add_option("--min-free-bytes", args.min_free_bytes,
                 "the free-space floor of the embedded ledger's disk: writes are refused "
                 "(\"no space\", nothing written, /readyz not ready) while less is free, and "
                 "resume by themselves when space returns (default: 64 MiB, or an eighth of a "
                 "disk smaller than 512 MiB; 0: only a full disk)");
  app.add_option("--log-level", args.log_level, "trace, debug, info (default), warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  if (auto stop = ParseArgs(app, argc, argv)) return *stop;
  auto logger = spdlog::stderr_color_mt("admitd");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(args.log_level));
  return Run(args);
}
