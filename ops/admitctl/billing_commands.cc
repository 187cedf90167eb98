// admitctl billing report: GPU-seconds (and every other resource's) used and idle per tenant,
// queue, flavor and bucket over a period of ledger time, from the usage fold
// (consumers/billing). Reads any ledger admitctl reads: embedded, Kafka, or admitd's.

#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <signal.h>

#include <cstdlib>

#include "consumers/billing/report.h"
#include "consumers/billing/store.h"
#include "consumers/billing/stream.h"
#include "consumers/billing/watch_consumer.h"
#include "ledger/kafka_log.h"
#include "ops/admitctl/common.h"
#include "ops/rpc/client.h"
#include "replay/snapshots.h"
#include "schema/time_format.h"

namespace admission::ops {

namespace {

// The price book: YAML `currency: EUR` and `prices:`, a list of {flavor, resource, perHourMicro}
// (micro-units of the currency per unit of the resource per hour, an integer). Errors name the
// entry and the field.
Status LoadPriceBook(const std::string& path, consumers::billing::ReportOptions* options) {
  auto text = ReadAll(path);
  if (!text.ok()) return text.status();
  YAML::Node doc;
  try {
    doc = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Status(Code::kInvalidArgument, path + ": not YAML: " + e.what());
  }
  if (!doc.IsMap() || !doc["currency"] || !doc["currency"].IsScalar()) {
    return Status(Code::kInvalidArgument, path + ": needs currency: (e.g. EUR)");
  }
  options->currency = doc["currency"].as<std::string>();
  if (!doc["prices"] || !doc["prices"].IsSequence()) {
    return Status(Code::kInvalidArgument, path + ": needs prices: a list of {flavor, resource, "
                                                 "perHourMicro}");
  }
  size_t i = 0;
  for (const auto& entry : doc["prices"]) {
    const std::string where = path + ": prices[" + std::to_string(i++) + "]";
    for (const char* field : {"flavor", "resource", "perHourMicro"}) {
      if (!entry.IsMap() || !entry[field] || !entry[field].IsScalar()) {
        return Status(Code::kInvalidArgument, where + ": needs " + field);
      }
    }
    int64_t micro = -1;
    try {
      micro = entry["perHourMicro"].as<int64_t>();
    } catch (const YAML::Exception&) {
    }
    if (micro < 0) {
      return Status(Code::kInvalidArgument,
                    where + ".perHourMicro: '" + entry["perHourMicro"].as<std::string>() +
                        "' is not a non-negative integer (micro-units per unit-hour)");
    }
    auto key = std::make_pair(entry["flavor"].as<std::string>(), entry["resource"].as<std::string>());
    if (!options->price_micro_per_hour.emplace(key, micro).second) {
      return Status(Code::kInvalidArgument, where + ": a second price for " + key.second +
                                                " on " + key.first);
    }
  }
  return Status::Ok();
}

struct BillingArgs {
  std::string from, to, bucket, format = "table", prices, units = "hours";
  std::vector<std::string> by;
  bool closed_only = false;
};

struct RunArgs {
  std::string output_topic, group, bucket = "hour";
  bool until_end = false;
  size_t events_per_transaction = 4096;
  // From admitd's watch (--connect): the consumer's own state, the output cluster, the relay.
  std::string consumer_state, output_bootstrap, transactional_id;
};

volatile sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int) { g_stop_signal = 1; }

// `admitctl --connect ADDR billing run --consumer-state DIR --output-bootstrap HOST:PORT
// --output-topic OUT`: the consumer on admitd's watch (consumers/billing/watch_consumer.h).
int RunWatchBilling(const GlobalOptions& global, const RunArgs& args) {
  namespace billing = consumers::billing;
  if (args.consumer_state.empty() || args.output_bootstrap.empty()) {
    return Fail(Status(Code::kInvalidArgument,
                       "billing run from admitd (--connect) keeps its own state and publishes "
                       "to Kafka: give --consumer-state DIR and --output-bootstrap HOST:PORT"));
  }
  billing::WatchConsumerOptions options;
  options.state_dir = args.consumer_state;
  options.output = ledger::KafkaAddress{args.output_bootstrap, args.output_topic};
  options.transactional_id = args.transactional_id.empty()
                                 ? "admission-billing-relay." + args.output_topic
                                 : args.transactional_id;
  options.bucket_ms = args.bucket == "day" ? 86'400'000 : 3'600'000;
  options.records_per_transaction = args.events_per_transaction;
  options.operation_timeout_ms = global.kafka_timeout_ms;
  options.log = [](const std::string& message) { std::cerr << "admitctl: " << message << "\n"; };
  if (args.until_end) {
    auto client = Connect(global);
    if (!client.ok()) return Fail(client.status());
    auto head = rpc::RemoteLog(*client).Head();
    if (!head.ok()) return Fail(head.status());
    options.until = head->sequence;
  }
  signal(SIGTERM, OnStopSignal);
  signal(SIGINT, OnStopSignal);
  options.stop = [] { return g_stop_signal != 0; };
  // Drills: ADMITCTL_BILLING_DRILL=POINT:N (ingested, produced or committed) kills the
  // consumer there; ADMITCTL_BILLING_DRILL_KILL_AT=N is produced:N.
  std::string point;
  uint64_t at = 0;
  if (const char* drill = std::getenv("ADMITCTL_BILLING_DRILL")) {
    const std::string text = drill;
    const size_t colon = text.find(':');
    point = text.substr(0, colon);
    at = colon == std::string::npos ? 0 : std::strtoull(text.c_str() + colon + 1, nullptr, 10);
  } else if (const char* kill_at = std::getenv("ADMITCTL_BILLING_DRILL_KILL_AT")) {
    point = "produced";
    at = std::strtoull(kill_at, nullptr, 10);
  }
  if (!point.empty()) {
    options.drill = [point, at](const char* where, uint64_t n) {
      if (n == at && point == where) raise(SIGKILL);
    };
  }
  billing::EventSource source =
      [&global](uint64_t from,
                const std::function<bool(const std::vector<ledger::StoredEvent>&)>& on_events,
                const std::function<bool()>& cancelled) -> Status {
    auto client = Connect(global);
    if (!client.ok()) return client.status();
    rpc::WatchRequest request;
    request.from = from;
    uint64_t resume = 0;
    std::string reason;
    return (*client)->Watch(request, on_events, &resume, &reason, cancelled);
  };
  auto stats = billing::RunWatchConsumer(options, source);
  if (!stats.ok()) return Fail(stats.status());
  std::cout << "billing: resumed after sequence " << stats->resumed_after << ", "
            << stats->events_folded << " folded, " << stats->outbox_published_before
            << " outbox records found published before, " << stats->records_published
            << " usage records published to " << args.output_topic << " in "
            << stats->transactions << " transactions; cursor at " << stats->cursor << "\n";
  return 0;
}

struct StateArgs {
  std::string consumer_state, format = "table";
};

// `admitctl billing state --consumer-state DIR`: the watch consumer's cursor, outbox and
// aggregates (read while it is stopped: RocksDB locks a running consumer's state).
int RunBillingState(const StateArgs& args) {
  namespace billing = consumers::billing;
  auto store = billing::BillingStore::Open(args.consumer_state);
  if (!store.ok()) return Fail(store.status());
  auto outbox = (*store)->OutboxSize();
  if (!outbox.ok()) return Fail(outbox.status());
  const billing::Cursor& cursor = (*store)->cursor();
  nlohmann::ordered_json j;
  j["cursor"] = {{"sequence", cursor.sequence}, {"hash", schema::HashHex(cursor.hash)}};
  j["outbox"] = *outbox;
  j["rows"] = nlohmann::json::array();
  for (const auto& [k, v] : (*store)->aggregates()) {
    nlohmann::ordered_json row;
    for (const auto& [name, value] : billing::AttributionFields(k.to)) row[name] = *value;
    row["kind"] = k.kind == billing::UsageKind::kUsed ? "used" : "idle";
    row["bucket"] = FormatRfc3339(k.bucket_ms * 1'000'000);
    row["resourceSeconds"] = billing::ResourceSeconds(v);
    j["rows"].push_back(std::move(row));
  }
  if (args.format == "json") {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "cursor: sequence " << cursor.sequence << " (chain value "
            << schema::HashHex(cursor.hash) << ")\noutbox: " << *outbox
            << " records not yet published\n";
  std::map<std::pair<std::string, std::string>, __int128> totals;
  for (const auto& [k, v] : (*store)->aggregates()) {
    totals[{k.to.resource, k.kind == billing::UsageKind::kUsed ? "used" : "idle"}] += v;
  }
  for (const auto& [k, v] : totals) {
    std::cout << k.first << " " << k.second << ": " << billing::ResourceSeconds(v) << "\n";
  }
  return 0;
}

int RunBillingRun(const GlobalOptions& global, const RunArgs& args) {
  namespace billing = consumers::billing;
  if (global.connected()) return RunWatchBilling(global, args);
  if (!global.kafka()) {
    return Fail(Status(Code::kInvalidArgument,
                       "billing run follows the Kafka ledger (--ledger kafka://HOST:PORT/TOPIC) "
                       "or admitd's watch (--connect ADDR)"));
  }
  auto address = ledger::ParseKafkaLedger(global.ledger_dir);
  if (!address.ok()) return Fail(address.status());
  billing::StreamOptions options;
  options.ledger = *address;
  options.output_topic = args.output_topic;
  options.group = args.group;
  options.bucket_ms = args.bucket == "day" ? 86'400'000 : 3'600'000;
  options.operation_timeout_ms = global.kafka_timeout_ms;
  options.until_end = args.until_end;
  options.events_per_transaction = args.events_per_transaction;
  if (const char* drill = std::getenv("ADMITCTL_BILLING_DRILL_KILL_AT")) {
    const uint64_t at = std::strtoull(drill, nullptr, 10);
    options.drill = [at](uint64_t transaction) {
      if (transaction == at) raise(SIGKILL);  // fault drills: between produce and commit
    };
  }
  auto stats = billing::RunBillingStream(options);
  if (!stats.ok()) return Fail(stats.status());
  std::cout << "billing: " << stats->events_rebuilt << " events folded again (published before), "
            << stats->events_folded << " folded, " << stats->records_published
            << " usage records published to " << args.output_topic << " in "
            << stats->transactions << " transactions\n";
  return 0;
}

// The budget policies the ledger defines at its head and where each stands (the decider's
// state, folded from the latest snapshot when there is one); none for a ledger without any.
Result<std::vector<consumers::billing::BudgetNow>> BudgetsAtHead(const GlobalOptions& global,
                                                                 ledger::EventLog& log) {
  auto snapshots = OpenSnapshots(global);
  if (!snapshots.ok()) return snapshots.status();
  std::vector<std::string> skipped;
  auto state = replay::FoldToSequenceFromSnapshot(log, **snapshots, log.GetHead().sequence,
                                                  nullptr, &skipped);
  if (!state.ok()) return state.status();
  std::vector<consumers::billing::BudgetNow> out;
  for (const auto& [name, policy] : state->engine->budget_policies()) {
    out.push_back({policy, state->engine->BudgetStandings(policy)});
  }
  return out;
}

int RunBillingReport(const GlobalOptions& global, const BillingArgs& args) {
  namespace billing = consumers::billing;
  billing::ReportOptions options;
  for (const std::string& k : args.by) {
    auto key = billing::ParseGroupKey(k);
    if (!key.ok()) return Fail(key.status());
    options.by.push_back(*key);
  }
  options.closed_only = args.closed_only;
  if (!args.prices.empty()) {
    Status loaded = LoadPriceBook(args.prices, &options);
    if (!loaded.ok()) return Fail(loaded);
  }
  if (args.bucket == "hour") options.bucket_ms = 3'600'000;
  if (args.bucket == "day") options.bucket_ms = 86'400'000;
  auto log = OpenLedgerToRead(global);
  if (!log.ok()) return Fail(log.status());
  Progress progress("billing");
  auto fold = billing::FoldLedger(**log);
  if (!fold.ok()) return Fail(fold.status());
  auto time = [](const std::string& name, const std::string& text) -> Result<int64_t> {
    auto ns = ParseRfc3339(text);
    if (!ns.ok()) {
      return Status(Code::kInvalidArgument, "--" + name + " '" + text + "': " +
                                                ns.status().message());
    }
    return *ns / 1'000'000;
  };
  // Defaults: the whole ledger, up to and including its last event's millisecond.
  options.from_ms = 0;
  options.to_ms = fold->last_time_ms() + 1;
  options.exact_seconds = args.units == "seconds";
  if (!args.from.empty()) {
    auto v = time("from", args.from);
    if (!v.ok()) return Fail(v.status());
    options.from_ms = *v;
  }
  if (!args.to.empty()) {
    auto v = time("to", args.to);
    if (!v.ok()) return Fail(v.status());
    options.to_ms = *v;
  }
  if (options.from_ms >= options.to_ms) {
    return Fail(Status(Code::kInvalidArgument, "--from must be before --to"));
  }
  billing::Report report = billing::BuildReport(*fold, options);
  auto budgets = BudgetsAtHead(global, **log);
  if (!budgets.ok()) return Fail(budgets.status());
  report.budgets = billing::BudgetRows(*fold, *budgets, options, fold->last_time_ms());
  if (args.format == "json") {
    std::cout << billing::ReportJson(report);
  } else if (args.format == "csv") {
    std::cout << billing::ReportCsv(report);
  } else {
    std::cout << billing::ReportTable(report);
  }
  return 0;
}

}  // namespace

void AddBillingCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto* billing = app.add_subcommand(
      "billing", "usage for finance: resource-seconds per tenant, queue and flavor, from the ledger");
  billing->require_subcommand(1);
  auto args = std::make_shared<BillingArgs>();
  auto* report = billing->add_subcommand(
      "report",
      "resource-seconds used (from the pods' release to the quota's release) and idle (quota "
      "held with no pods yet) per group and bucket, exact to the millisecond, in ledger time; "
      "the same ledger range gives the same bytes");
  report->add_option("--from", args->from, "start of the period, RFC 3339 (default: the ledger's start)");
  report->add_option("--to", args->to, "end of the period, exclusive (default: just after the ledger's last event)");
  report->add_option("--by", args->by,
                     "group by namespace, localqueue, clusterqueue, cohort, flavor or priority "
                     "(repeatable; rows are always per resource)")
      ->check(CLI::IsMember({"namespace", "localqueue", "clusterqueue", "cohort", "flavor", "priority"}));
  report->add_option("--bucket", args->bucket, "hour or day (UTC): split intervals at bucket boundaries")
      ->check(CLI::IsMember({"hour", "day"}));
  report->add_option("-o,--output", args->format, "table (default), csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  report->add_option("--units", args->units,
                     "the table's and CSV's amounts: hours (default: GPU-hours, core-hours, "
                     "GiB-hours, rounded to 3 decimals) or seconds (exact resource-seconds, "
                     "as -o json always has them)")
      ->check(CLI::IsMember({"hours", "seconds"}));
  report->add_option("--prices", args->prices,
                     "a price book (YAML: currency, and prices of {flavor, resource, "
                     "perHourMicro}): adds a cost column, what was held at those prices");
  report->add_flag("--closed-only", args->closed_only,
                   "only reservations whose quota was released (what billing run has published)");
  report->callback([&global, args, exit_code]() { *exit_code = RunBillingReport(global, *args); });

  auto run_args = std::make_shared<RunArgs>();
  auto* run = billing->add_subcommand(
      "run",
      "the streaming consumer: follow the Kafka ledger (--ledger kafka://...) or admitd's watch "
      "(--connect ADDR, with --consumer-state and --output-bootstrap) and publish one usage "
      "record per closed interval and bucket to --output-topic, each exactly once");
  run->add_option("--output-topic", run_args->output_topic, "the topic of usage records (created if missing)")
      ->required();
  run->add_option("--group", run_args->group,
                  "consumer group holding the input position (default admission-billing.TOPIC)");
  run->add_option("--bucket", run_args->bucket, "hour (default) or day")
      ->check(CLI::IsMember({"hour", "day"}));
  run->add_option("--events-per-transaction", run_args->events_per_transaction,
                  "Kafka ledger: ledger events folded per output transaction; --connect: records per "
                  "transaction (at most; default 4096)")
      ->check(CLI::Range(1, 4096));
  run->add_flag("--until-end", run_args->until_end,
                "stop at the ledger's end once everything before it is published");
  run->add_option("--consumer-state", run_args->consumer_state,
                  "with --connect: the consumer's own state (RocksDB: cursor, fold, aggregates, "
                  "outbox); rebuilt from the ledger if deleted");
  run->add_option("--output-bootstrap", run_args->output_bootstrap,
                  "with --connect: the Kafka cluster of --output-topic (HOST:PORT)");
  run->add_option("--transactional-id", run_args->transactional_id,
                  "with --connect: the relay's transactional id (default "
                  "admission-billing-relay.OUTPUT_TOPIC)");

  auto state_args = std::make_shared<StateArgs>();
  auto* state = billing->add_subcommand(
      "state", "the watch consumer's own state: its cursor, its outbox and its aggregates");
  state->add_option("--consumer-state", state_args->consumer_state, "the consumer's state folder")
      ->required();
  state->add_option("-o,--output", state_args->format, "table (default) or json")
      ->check(CLI::IsMember({"table", "json"}));
  state->callback([state_args, exit_code]() { *exit_code = RunBillingState(*state_args); });
  run->callback([&global, run_args, exit_code]() { *exit_code = RunBillingRun(global, *run_args); });
}

}  // namespace admission::ops
