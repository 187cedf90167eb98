// kafka_bench: KafkaLog against raw librdkafka on the same broker, in the same run.
//
//   append  appends through a KafkaLog writer in batches of 64 and 256 events and from 64
//           concurrent callers (one event each), against raw librdkafka transactions carrying
//           the same stored bytes and headers in the same transaction sizes (one transactional
//           producer, as a ledger has one writer: the concurrent callers take turns). Rounds
//           alternate ours and raw on fresh topics.
//   replay  `admitctl --ledger kafka://... replay --verify`'s work on the batch-256 topic: a fresh
//           KafkaLog reader (every record checked and copied into a fresh local state) and the
//           replay with verify, against a raw read_committed consumer reading the same records
//           and decoding each value.
//
// The broker comes from KAFKA_BOOTSTRAP, as the Kafka tests take it, or the bench starts its
// own with ops/kafka/kafka.sh (and stops it). Prints `name: value unit` lines and the goals
// (append.ratio >= 0.7: the smallest of the three append ratios; replay.ratio >= 0.5); goals
// are printed, never enforced: the exit status is 1 only when something misbehaves (a refused
// append, a ledger that does not verify, a raw transaction that fails).
// See docs/benchmarks.md for the command, figures and reading.

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "ledger/kafka_log.h"
#include "ledger/kafka_record.h"
#include "ledger/memory_log.h"
#include "ledger/verify.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"
#include "tests/bench/bench_util.h"
#include "tests/unit/event_gen.h"

#ifndef ADMISSION_SOURCE_DIR
#error "ADMISSION_SOURCE_DIR must name the source tree (for ops/kafka/kafka.sh)"
#endif

namespace admission::bench {
namespace {

using ledger::KafkaLog;
using ledger::KafkaLogOptions;

struct Params {
  bool quick = false;
  int rounds = 3;
  size_t batch_events = 6400;       // events per round of each batch phase
  size_t concurrent_appends = 640;  // appends per round of the concurrent phase (64 callers)
};

std::string g_bootstrap;

std::string Topic(const std::string& what) {
  static std::mt19937_64 random(std::random_device{}());
  return "bench-" + what + "-" + std::to_string(getpid()) + "-" +
         std::to_string(random() % 1000000007);
}

// Unkeyed inputs as intake stamps them, ~200 bytes each.
std::vector<std::string> Inputs(size_t n, int64_t at) {
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(testing::BuildEvent(
        testing::EventSpec{0, "bench", "w" + std::to_string(i),
                           std::string(64, 'u') + std::to_string(i), 0, "", "bench"},
        at));
  }
  return out;
}

std::unique_ptr<KafkaLog> OpenWriter(const std::string& topic, const std::string& state,
                                     bool writer = true) {
  KafkaLogOptions options;
  options.address = ledger::KafkaAddress{g_bootstrap, topic};
  options.state_dir = state;
  options.writer = writer;
  options.create_topic = writer;
  auto log = KafkaLog::Open(options);
  ADM_CHECK(log.ok(), "%s", log.status().ToString().c_str());
  return std::move(*log);
}

// Raw librdkafka: one transactional producer, records with the ledger's bytes and headers.
class RawWriter {
 public:
  explicit RawWriter(const std::string& topic) : topic_(topic) {
    ledger::KafkaAddress address{g_bootstrap, topic};
    ADM_CHECK(ledger::CreateKafkaTopic(address, -1, 30'000).ok(), "creating %s", topic.c_str());
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    char err[512];
    auto set = [&](const char* k, const std::string& v) {
      ADM_CHECK(rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK, "%s",
                err);
    };
    set("bootstrap.servers", g_bootstrap);
    set("transactional.id", "bench-raw." + topic);
    set("enable.idempotence", "true");
    set("acks", "all");
    set("linger.ms", "5");
    // The rest of KafkaLog's producer settings (ledger/kafka_log.cc).
    set("retry.backoff.ms", "5");
    set("transaction.timeout.ms", "60000");
    set("message.timeout.ms", "60000");
    set("log_level", "3");
    // A delivery callback, as every producer that checks its writes has (and KafkaLog has):
    // without one, librdkafka 2.0.2's flush inside commit_transaction polls for the last
    // delivery in 10-30 ms steps instead of being woken by it (measured).
    rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void*) {
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) Fail(std::string("raw delivery: ") + rd_kafka_err2str(m->err));
    });
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ADM_CHECK(producer_ != nullptr, "%s", err);
    Check(rd_kafka_init_transactions(producer_, 30'000), "init_transactions");
  }
  ~RawWriter() { rd_kafka_destroy(producer_); }

  // One transaction of records [from, from + n).
  void Transaction(const std::vector<ledger::StoredEvent>& events,
                   const std::vector<ledger::KafkaRecordHeaders>& headers, size_t from,
                   size_t n) {
    Check(rd_kafka_begin_transaction(producer_), "begin_transaction");
    for (size_t i = from; i < from + n; ++i) {
      const ledger::KafkaRecordHeaders& h = headers[i];
      for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            producer_, RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_VALUE(const_cast<char*>(events[i].bytes.data()), events[i].bytes.size()),
            RD_KAFKA_V_HEADER(ledger::kKafkaFormatHeader, h.format.data(),
                              static_cast<ssize_t>(h.format.size())),
            RD_KAFKA_V_HEADER(ledger::kKafkaSequenceHeader, h.sequence.data(),
                              static_cast<ssize_t>(h.sequence.size())),
            RD_KAFKA_V_HEADER(ledger::kKafkaHashHeader, h.hash.data(),
                              static_cast<ssize_t>(h.hash.size())),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) break;
        ADM_CHECK(e == RD_KAFKA_RESP_ERR__QUEUE_FULL, "produce: %s", rd_kafka_err2str(e));
        rd_kafka_poll(producer_, 10);
      }
    }
    Check(rd_kafka_commit_transaction(producer_, 30'000), "commit_transaction");
  }

 private:
  static void Check(rd_kafka_error_t* error, const char* what) {
    if (error == nullptr) return;
    Fail(std::string("raw ") + what + ": " + rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
  }
  std::string topic_;
  rd_kafka_t* producer_ = nullptr;
};

// The stored bytes and record headers of `inputs` appended in batches of `batch`.
struct Sequenced {
  std::vector<ledger::StoredEvent> events;
  std::vector<ledger::KafkaRecordHeaders> headers;
};
Sequenced Sequence(const std::vector<std::string>& inputs, size_t batch) {
  ledger::MemoryLog memory;
  for (size_t i = 0; i < inputs.size(); i += batch) {
    std::vector<std::string> b(inputs.begin() + static_cast<ptrdiff_t>(i),
                               inputs.begin() + static_cast<ptrdiff_t>(std::min(inputs.size(), i + batch)));
    ADM_CHECK(memory.Append(b).ok(), "memory append");
  }
  Sequenced out;
  auto read = memory.Read(1, inputs.size());
  ADM_CHECK(read.ok(), "memory read");
  out.events = std::move(*read);
  schema::Hash chain = schema::kGenesisHash;
  for (const ledger::StoredEvent& e : out.events) {
    chain = schema::ChainHash(chain, e.bytes);
    out.headers.push_back(ledger::MakeKafkaRecordHeaders(e.sequence, chain));
  }
  return out;
}

struct Totals {
  uint64_t events = 0;
  double seconds = 0;
  std::vector<double> transaction_ms;  // each timed transaction (batch phases)
  double rate() const { return seconds > 0 ? static_cast<double>(events) / seconds : 0; }
};

void Verify(ledger::EventLog& log, uint64_t expected, const std::string& what) {
  auto report = ledger::VerifyChain(log, 1, schema::kGenesisHash, false);
  if (!report.ok() || report->fault || report->events_checked != expected) {
    Fail(what + ": the ledger does not verify with " + std::to_string(expected) + " events");
  }
}

// One round of a batch phase: ours on a fresh topic, then raw with the same bytes.
// Rounds alternate which contender goes first: the broker may still be busy after the other.
void BatchRound(const std::string& dir, size_t batch, size_t n, bool raw_first, Totals* ours,
                Totals* raw, std::string* replay_topic) {
  const std::vector<std::string> inputs = Inputs(n, 1000);
  const std::string topic = Topic("b" + std::to_string(batch));
  auto run_ours = [&] {
    auto log = OpenWriter(topic, dir + "/" + topic);
    std::optional<Stopwatch> watch;
    for (size_t i = 0; i < n; i += batch) {
      // The first transaction of a new producer is not timed (librdkafka 2.0.2 takes about a
      // second over it), for either contender.
      if (i == batch) watch.emplace();
      std::vector<std::string> b(inputs.begin() + static_cast<ptrdiff_t>(i),
                                 inputs.begin() + static_cast<ptrdiff_t>(std::min(n, i + batch)));
      const Clock::time_point t0 = Clock::now();
      auto ack = log->Append(b);
      if (!ack.ok()) Fail("append: " + ack.status().ToString());
      if (watch) ours->transaction_ms.push_back(1000 * Seconds(t0, Clock::now()));
    }
    ADM_CHECK(watch.has_value(), "a batch round needs two transactions");
    const Span span = watch->Stop();
    ours->events += n - batch;
    ours->seconds += span.seconds;
    Verify(*log, n, "batch " + std::to_string(batch));
  };
  if (replay_topic != nullptr) *replay_topic = topic;
  if (!raw_first) run_ours();
  const Sequenced sequenced = Sequence(inputs, batch);
  {
  RawWriter writer(Topic("raw-b" + std::to_string(batch)));
  std::optional<Stopwatch> watch;
  for (size_t i = 0; i < n; i += batch) {
    if (i == batch) watch.emplace();
    const Clock::time_point t0 = Clock::now();
    writer.Transaction(sequenced.events, sequenced.headers, i, std::min(batch, n - i));
    if (watch) raw->transaction_ms.push_back(1000 * Seconds(t0, Clock::now()));
  }
  const Span span = watch->Stop();
  raw->events += n - batch;
  raw->seconds += span.seconds;
  }
  if (raw_first) run_ours();
}

// One round of the concurrent phase: 64 callers, one event per append.
void ConcurrentRound(const std::string& dir, size_t appends, bool raw_first, Totals* ours,
                     Totals* raw) {
  constexpr size_t kCallers = 64;
  const std::vector<std::string> inputs = Inputs(appends, 1000);
  const std::string topic = Topic("c64");
  auto run_ours = [&] {
    auto log = OpenWriter(topic, dir + "/" + topic);
    std::atomic<size_t> next{1};
    ADM_CHECK(log->Append(std::span<const std::string>(&inputs[0], 1)).ok(), "warm-up append");
    Stopwatch watch;
    std::vector<std::thread> callers;
    for (size_t t = 0; t < kCallers; ++t) {
      callers.emplace_back([&] {
        for (size_t i = next++; i < appends; i = next++) {
          auto ack = log->Append(std::span<const std::string>(&inputs[i], 1));
          if (!ack.ok()) Fail("append: " + ack.status().ToString());
        }
      });
    }
    for (auto& c : callers) c.join();
    const Span span = watch.Stop();
    ours->events += appends - 1;
    ours->seconds += span.seconds;
    Verify(*log, appends, "concurrent");
  };
  if (!raw_first) run_ours();
  const Sequenced sequenced = Sequence(inputs, 1);
  {
  RawWriter writer(Topic("raw-c64"));
  std::mutex turn;  // one transactional producer: one transaction at a time
  std::atomic<size_t> next{1};
  writer.Transaction(sequenced.events, sequenced.headers, 0, 1);  // warm-up, untimed
  Stopwatch watch;
  std::vector<std::thread> callers;
  for (size_t t = 0; t < kCallers; ++t) {
    callers.emplace_back([&] {
      for (size_t i = next++; i < appends; i = next++) {
        std::lock_guard<std::mutex> lock(turn);
        writer.Transaction(sequenced.events, sequenced.headers, i, 1);
      }
    });
  }
  for (auto& c : callers) c.join();
  const Span span = watch.Stop();
  raw->events += appends - 1;
  raw->seconds += span.seconds;
  }
  if (raw_first) run_ours();
}

// Replay: a fresh KafkaLog reader and replay --verify, against a raw consumer decoding each
// record, both over `topic` (n events).
void ReplayRound(const std::string& dir, const std::string& topic, uint64_t n, Totals* ours,
                 Totals* raw, Totals* catch_up) {
  {
    Stopwatch watch;
    auto reader = OpenWriter(topic, dir + "/replay-" + std::to_string(ours->events), false);
    const Span opened = watch.Stop();
    auto report = replay::ReplayAndVerify(*reader);
    const Span span = watch.Stop();
    if (!report.ok() || report->divergence || reader->GetHead().sequence != n) {
      Fail("replay of " + topic + " failed");
    }
    ours->events += n;
    ours->seconds += span.seconds;
    catch_up->events += n;
    catch_up->seconds += opened.seconds;
  }
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"bootstrap.servers", g_bootstrap},
           {"group.id", "bench-raw-reader-" + std::to_string(getpid())},
           {"isolation.level", "read_committed"},
           {"enable.partition.eof", "true"},
           {"enable.auto.commit", "false"},
           {"fetch.wait.max.ms", "50"},
           {"log_level", "3"}}) {
    ADM_CHECK(rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK,
              "%s", err);
  }
  Stopwatch watch;
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  ADM_CHECK(consumer != nullptr, "%s", err);
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0)->offset = 0;
  rd_kafka_assign(consumer, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  uint64_t decoded = 0;
  for (;;) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 1000);
    if (m == nullptr) continue;
    const bool eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      auto event = schema::DecodeEvent(
          std::string_view(static_cast<const char*>(m->payload), m->len));
      if (event.ok()) ++decoded;
    }
    rd_kafka_message_destroy(m);
    if (eof) break;
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  const Span span = watch.Stop();
  if (decoded != n) Fail("the raw reader decoded " + std::to_string(decoded) + " of " + std::to_string(n));
  raw->events += n;
  raw->seconds += span.seconds;
}

void Ratio(const std::string& name, const Totals& ours, const Totals& raw, double goal,
           double* smallest) {
  Line(name + ".ours.events_per_s", Fixed(ours.rate(), 0),
       "events/s (" + Int(ours.events) + " events in " + Fixed(ours.seconds, 3) + " s)");
  Line(name + ".raw.events_per_s", Fixed(raw.rate(), 0),
       "events/s (" + Int(raw.events) + " events in " + Fixed(raw.seconds, 3) + " s)");
  for (const auto& [who, totals] : {std::pair<std::string, const Totals*>{"ours", &ours},
                                    std::pair<std::string, const Totals*>{"raw", &raw}}) {
    if (totals->transaction_ms.empty()) continue;
    Line(name + "." + who + ".transaction_ms",
         "p50 " + Fixed(Percentile(totals->transaction_ms, 0.5), 2) + " p90 " +
             Fixed(Percentile(totals->transaction_ms, 0.9), 2) + " p99 " +
             Fixed(Percentile(totals->transaction_ms, 0.99), 2),
         "ms per transaction (" + Int(totals->transaction_ms.size()) + ")");
  }
  const double ratio = raw.rate() > 0 ? ours.rate() / raw.rate() : 0;
  Line(name + ".ratio", Fixed(ratio, 3),
       "(ours/raw" + std::string(goal > 0 ? "; goal >= " + Fixed(goal, 1) : "") + ")");
  if (smallest != nullptr) *smallest = std::min(*smallest, ratio);
}

int Main(int argc, char** argv) {
  Params p;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      p.quick = true;
      p.rounds = 1;
      p.batch_events = 1024;
      p.concurrent_appends = 128;
    } else if (arg == "--rounds" && i + 1 < argc) {
      p.rounds = std::atoi(argv[++i]);
    } else if (arg == "--events" && i + 1 < argc) {
      p.batch_events = static_cast<size_t>(std::atoll(argv[++i]));
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: kafka_bench [--quick] [--rounds R] [--events N]\n"
          "  KafkaLog appends (batches of 64 and 256, 64 concurrent callers) and replay against\n"
          "  raw librdkafka on the same broker: $KAFKA_BOOTSTRAP, or one started with\n"
          "  ops/kafka/kafka.sh. --events: events per round of each batch phase (default 6400).\n");
      return 0;
    } else {
      std::fprintf(stderr, "kafka_bench: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  WorkDir work(tmp ? tmp : "/tmp", "kafka_bench");
  const std::string kafka_sh = std::string(ADMISSION_SOURCE_DIR) + "/ops/kafka/kafka.sh";
  bool own_broker = false;
  if (const char* b = std::getenv("KAFKA_BOOTSTRAP"); b != nullptr && *b != '\0') {
    g_bootstrap = b;
  } else {
    const std::string command = kafka_sh + " start " + work.path() + "/broker";
    FILE* out = ::popen(command.c_str(), "r");
    ADM_CHECK(out != nullptr, "cannot run %s", command.c_str());
    char line[256] = {};
    if (std::fgets(line, sizeof line, out) != nullptr) g_bootstrap = line;
    ADM_CHECK(::pclose(out) == 0 && !g_bootstrap.empty(), "%s failed", command.c_str());
    while (!g_bootstrap.empty() && (g_bootstrap.back() == '\n' || g_bootstrap.back() == '\r')) {
      g_bootstrap.pop_back();
    }
    own_broker = true;
  }
  std::printf("# kafka_bench: %s\n", CommandLine(argc, argv).c_str());
  PrintMachine(work.path(), work.path(), p.quick);
  Line("params.broker", g_bootstrap + (own_broker ? " (started by the bench)" : " (KAFKA_BOOTSTRAP)"));
  Line("params.rounds", Int(static_cast<uint64_t>(p.rounds)), "(ours first in even rounds, raw first in odd ones)");
  Line("params.batch_events", Int(p.batch_events), "events per round of each batch phase");
  Line("params.concurrent_appends", Int(p.concurrent_appends), "one-event appends per round, 64 callers");

  Totals b64_ours, b64_raw, b256_ours, b256_raw, c_ours, c_raw, r_ours, r_raw, r_catch_up;
  for (int round = 0; round < p.rounds; ++round) {
    std::string replay_topic;
    const bool raw_first = round % 2 == 1;
    BatchRound(work.path(), 64, p.batch_events, raw_first, &b64_ours, &b64_raw, nullptr);
    BatchRound(work.path(), 256, p.batch_events, raw_first, &b256_ours, &b256_raw, &replay_topic);
    ConcurrentRound(work.path(), p.concurrent_appends, raw_first, &c_ours, &c_raw);
    ReplayRound(work.path(), replay_topic, p.batch_events, &r_ours, &r_raw, &r_catch_up);
  }
  double smallest = 1e9;
  Ratio("append.batch64", b64_ours, b64_raw, 0.7, &smallest);
  Ratio("append.batch256", b256_ours, b256_raw, 0.7, &smallest);
  Ratio("append.concurrent64", c_ours, c_raw, 0.7, &smallest);
  Line("append.ratio", Fixed(smallest, 3),
       std::string("(the smallest of the three; goal >= 0.7: ") + (smallest >= 0.7 ? "met" : "NOT met") + ")");
  Line("replay.catch_up.events_per_s", Fixed(r_catch_up.rate(), 0),
       "events/s (a fresh reader's read, check and copy into its local state, of the replay below)");
  Ratio("replay", r_ours, r_raw, 0.5, nullptr);
  const double replay_ratio = r_raw.rate() > 0 ? r_ours.rate() / r_raw.rate() : 0;
  Line("replay.goal", replay_ratio >= 0.5 ? "met" : "NOT met", "(replay.ratio >= 0.5)");

  if (own_broker) {
    const std::string command = kafka_sh + " stop " + work.path() + "/broker 2>/dev/null";
    (void)std::system(command.c_str());
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace admission::bench

int main(int argc, char** argv) { return admission::bench::Main(argc, argv); }
