// admitctl kafka ...: the Kafka ledger's topic. `kafka check` prints the settings that decide
// whether the topic keeps the audit record, and with --create-topic creates a missing topic
// with them. See docs/kafka.md.

#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ledger/kafka_log.h"
#include "ops/admitctl/common.h"

namespace admission::ops {

namespace {

struct KafkaCheckArgs {
  bool create_topic = false;
  int replication_factor = -1;
  std::string format = "text";
};

int RunKafkaCheck(const GlobalOptions& global, const KafkaCheckArgs& args) {
  auto address = ledger::ParseKafkaLedger(global.ledger_dir);
  if (!address.ok()) return Fail(address.status());
  auto settings = ledger::DescribeKafkaTopic(*address, global.kafka_timeout_ms);
  if (!settings.ok()) return Fail(settings.status());
  bool created = false;
  if (!settings->has_value() && args.create_topic) {
    Status s = ledger::CreateKafkaTopic(*address, args.replication_factor, global.kafka_timeout_ms);
    if (!s.ok()) return Fail(s);
    created = true;
    settings = ledger::DescribeKafkaTopic(*address, global.kafka_timeout_ms);
    if (!settings.ok()) return Fail(settings.status());
  }
  if (!settings->has_value()) {
    return Fail(Status(Code::kNotFound, "no topic " + address->topic + " on " +
                                            address->bootstrap +
                                            " (--create-topic creates it with the settings a "
                                            "ledger needs)"));
  }
  const ledger::KafkaTopicSettings& s = **settings;
  const Status verdict = ledger::CheckKafkaTopicSettings(*address, s);
  if (args.format == "json") {
    nlohmann::json out = {{"ledger", address->ToString()},
                          {"topic", address->topic},
                          {"created", created},
                          {"partitions", s.partitions},
                          {"cleanup.policy", s.cleanup_policy},
                          {"retention.ms", s.retention_ms},
                          {"retention.bytes", s.retention_bytes},
                          {"ok", verdict.ok()}};
    if (!verdict.ok()) out["reason"] = verdict.message();
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "topic " << address->topic << " on " << address->bootstrap
              << (created ? " (created)" : "") << "\n"
              << "  partitions       " << s.partitions << "\n"
              << "  cleanup.policy   " << s.cleanup_policy << "\n"
              << "  retention.ms     " << s.retention_ms << "\n"
              << "  retention.bytes  " << s.retention_bytes << "\n"
              << (verdict.ok() ? "ok: the topic keeps every event" : "REFUSED: " + verdict.message())
              << "\n";
  }
  return verdict.ok() ? 0 : 1;
}

}  // namespace

void AddKafkaCommands(CLI::App& app, GlobalOptions& global, int* exit_code) {
  auto* kafka = app.add_subcommand("kafka", "the Kafka ledger's topic (--ledger kafka://HOST:PORT/TOPIC)");
  kafka->require_subcommand(1);
  auto args = std::make_shared<KafkaCheckArgs>();
  auto* check = kafka->add_subcommand(
      "check", "print the topic's settings and whether a ledger may live in it (one partition, "
               "cleanup.policy=delete, retention.ms=-1, retention.bytes=-1); exit 1 if not");
  check->add_flag("--create-topic", args->create_topic,
                  "create the topic with those settings when it does not exist");
  check->add_option("--replication-factor", args->replication_factor,
                    "for --create-topic (default: the broker's default.replication.factor)");
  check->add_option("-o,--output", args->format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  check->callback([&global, args, exit_code]() { *exit_code = RunKafkaCheck(global, *args); });
}

}  // namespace admission::ops
