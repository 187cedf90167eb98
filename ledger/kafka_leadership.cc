#include "ledger/kafka_leadership.h"
#include "ledger/kafka_client.h"

#include <librdkafka/rdkafka.h>

#include <random>

namespace admission::ledger {

namespace {

constexpr int kMembershipPollMs = 100;


void RebalanceCallback(rd_kafka_t*, rd_kafka_resp_err_t error,
                       rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  static_cast<KafkaLeadership*>(opaque)->OnRebalance(error, partitions);
}

}  // namespace

std::string KafkaLeadershipGroup(const std::string& topic) { return "admission-ledger." + topic; }

Result<std::unique_ptr<KafkaLeadership>> KafkaLeadership::Join(
    const KafkaLeadershipOptions& options) {
  std::unique_ptr<KafkaLeadership> self(new KafkaLeadership(options));
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  std::random_device random;
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", options.address.bootstrap},
      {"group.id", KafkaLeadershipGroup(options.address.topic)},
      {"client.id", options.advertised.empty() ? "admitd-" + std::to_string(random())
                                               : options.advertised},
      {"session.timeout.ms", std::to_string(options.session_timeout_ms)},
      {"heartbeat.interval.ms", std::to_string(std::max(500, options.session_timeout_ms / 5))},
      // Incremental rebalancing with sticky assignment: a member joining or leaving does not
      // move the partition away from a writer that is still in the group (an eager rebalance
      // would revoke it from everyone first).
      {"partition.assignment.strategy", "cooperative-sticky"},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"allow.auto.create.topics", "false"},
      {"log_level", "3"},
  };
  for (const auto& [name, value] : settings) {
    Status s = SetKafkaConf(conf, name, value);
    if (!s.ok()) {
      rd_kafka_conf_destroy(conf);
      return s;
    }
  }
  for (const auto& [name, value] : options.client_config) {
    Status s = SetKafkaConf(conf, name, value);
    if (!s.ok()) {
      rd_kafka_conf_destroy(conf);
      return s;
    }
  }
  rd_kafka_conf_set_rebalance_cb(conf, RebalanceCallback);
  rd_kafka_conf_set_opaque(conf, self.get());
  char error_text[512];
  self->consumer_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error_text, sizeof(error_text));
  if (self->consumer_ == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Status(Code::kInvalidArgument, std::string("joining the ledger's group: ") + error_text);
  }
  rd_kafka_poll_set_consumer(self->consumer_);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, options.address.topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t err = rd_kafka_subscribe(self->consumer_, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status(Code::kUnavailable,
                  std::string("joining the ledger's group: ") + rd_kafka_err2str(err));
  }
  self->thread_ = std::thread([raw = self.get()] { raw->Run(); });
  return self;
}

KafkaLeadership::~KafkaLeadership() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  if (consumer_ != nullptr) {
    // Leaves the group: the coordinator gives the partition to another member now, not after
    // the session timeout.
    rd_kafka_consumer_close(consumer_);
    rd_kafka_destroy(consumer_);
  }
}

void KafkaLeadership::Run() {
  while (!stop_.load(std::memory_order_acquire)) {
    // Heartbeats and rebalances are served in here; the ledger's records are not wanted (the
    // partition is assigned at its end and paused), so any record that arrives is dropped.
    rd_kafka_message_t* message = rd_kafka_consumer_poll(consumer_, kMembershipPollMs);
    if (message != nullptr) rd_kafka_message_destroy(message);
  }
}

void KafkaLeadership::OnRebalance(int error, void* raw_partitions) {
  auto* partitions = static_cast<rd_kafka_topic_partition_list_t*>(raw_partitions);
  if (error == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    bool holds = false;
    for (int i = 0; i < partitions->cnt; ++i) {
      partitions->elems[i].offset = RD_KAFKA_OFFSET_END;
      if (partitions->elems[i].partition == kKafkaLedgerPartition) holds = true;
    }
    if (rd_kafka_error_t* e = rd_kafka_incremental_assign(consumer_, partitions)) {
      rd_kafka_error_destroy(e);
    }
    rd_kafka_pause_partitions(consumer_, partitions);
    if (holds) {
      assignments_.fetch_add(1, std::memory_order_acq_rel);
      leader_.store(true, std::memory_order_release);
    }
  } else {
    bool held = false;
    for (int i = 0; i < partitions->cnt; ++i) {
      if (partitions->elems[i].partition == kKafkaLedgerPartition) held = true;
    }
    if (held && leader_.exchange(false, std::memory_order_acq_rel)) {
      revocations_.fetch_add(1, std::memory_order_acq_rel);
    }
    if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(consumer_, partitions)) {
      rd_kafka_error_destroy(e);
    }
  }
}

Result<std::optional<std::string>> KafkaLeadership::Holder() {
  rd_kafka_queue_t* queue = rd_kafka_queue_new(consumer_);
  rd_kafka_AdminOptions_t* admin_options =
      rd_kafka_AdminOptions_new(consumer_, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
  char error_text[512];
  rd_kafka_AdminOptions_set_request_timeout(admin_options, options_.operation_timeout_ms,
                                            error_text, sizeof(error_text));
  const std::string group = KafkaLeadershipGroup(options_.address.topic);
  const char* groups[] = {group.c_str()};
  rd_kafka_DescribeConsumerGroups(consumer_, groups, 1, admin_options, queue);
  rd_kafka_AdminOptions_destroy(admin_options);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, options_.operation_timeout_ms + 1000);
  Result<std::optional<std::string>> holder = std::optional<std::string>();
  if (event == nullptr) {
    holder = Status(Code::kUnavailable, "describing group " + group + ": no answer");
  } else if (rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    holder = Status(Code::kUnavailable,
                    "describing group " + group + ": " + rd_kafka_event_error_string(event));
  } else {
    size_t count = 0;
    const rd_kafka_ConsumerGroupDescription_t** descriptions =
        rd_kafka_DescribeConsumerGroups_result_groups(
            rd_kafka_event_DescribeConsumerGroups_result(event), &count);
    for (size_t g = 0; g < count; ++g) {
      for (size_t m = 0; m < rd_kafka_ConsumerGroupDescription_member_count(descriptions[g]);
           ++m) {
        const rd_kafka_MemberDescription_t* member =
            rd_kafka_ConsumerGroupDescription_member(descriptions[g], m);
        const rd_kafka_topic_partition_list_t* assigned = rd_kafka_MemberAssignment_partitions(
            rd_kafka_MemberDescription_assignment(member));
        for (int i = 0; assigned != nullptr && i < assigned->cnt; ++i) {
          if (assigned->elems[i].partition == kKafkaLedgerPartition &&
              options_.address.topic == assigned->elems[i].topic) {
            holder = std::optional<std::string>(rd_kafka_MemberDescription_client_id(member));
          }
        }
      }
    }
  }
  if (event != nullptr) rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  return holder;
}

}  // namespace admission::ledger
