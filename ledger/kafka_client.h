#pragma once
// Small pieces every client of a ledger topic shares (KafkaLog, KafkaLeadership, the billing
// consumer): properties with clear refusals, and the view of a consumed record.

#include <librdkafka/rdkafka.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/kafka_record.h"
#include "schema/result.h"

namespace admission::ledger {

// Sets one librdkafka property; a refusal names the property, its value and why.
inline Status SetKafkaConf(rd_kafka_conf_t* conf, const std::string& name,
                           const std::string& value) {
  char error_text[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), error_text, sizeof(error_text)) !=
      RD_KAFKA_CONF_OK) {
    return Status(Code::kInvalidArgument,
                  "Kafka client setting " + name + "=" + value + ": " + error_text);
  }
  return Status::Ok();
}

using KafkaSettings = std::vector<std::pair<std::string, std::string>>;

// A new client configuration with `settings`; a refusal names the setting (and the
// configuration is freed). The caller owns the result until it hands it to rd_kafka_new.
inline Result<rd_kafka_conf_t*> NewKafkaConf(const KafkaSettings& settings) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : settings) {
    Status s = SetKafkaConf(conf, name, value);
    if (!s.ok()) {
      rd_kafka_conf_destroy(conf);
      return s;
    }
  }
  return conf;
}

// The configuration of a billing consumer's output producer: transactional (exactly once),
// idempotent, acknowledged by every in-sync replica, short linger and retry backoff.
inline Result<rd_kafka_conf_t*> NewTransactionalProducerConf(const std::string& bootstrap,
                                                             const std::string& transactional_id) {
  return NewKafkaConf({{"bootstrap.servers", bootstrap},
                       {"transactional.id", transactional_id},
                       {"enable.idempotence", "true"},
                       {"acks", "all"},
                       {"linger.ms", "5"},
                       {"retry.backoff.ms", "5"},
                       {"log_level", "3"}});
}

// The last header `name` of a message, viewed in it; nullopt when absent.
inline std::optional<std::string_view> KafkaHeader(const rd_kafka_message_t* message,
                                                   const char* name) {
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::nullopt;
  }
  const void* value = nullptr;
  size_t size = 0;
  if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::nullopt;
  }
  return std::string_view(static_cast<const char*>(value), size);
}

// A transactional call's error as a Status (kUnavailable, "WHAT: librdkafka's message"), and
// frees it; *abortable says whether the transaction must be aborted before another try.
inline Status KafkaTxnStatus(rd_kafka_error_t* error, const std::string& what,
                             bool* abortable = nullptr) {
  if (error == nullptr) return Status::Ok();
  if (abortable != nullptr) *abortable = rd_kafka_error_txn_requires_abort(error);
  Status s(Code::kUnavailable, what + ": " + rd_kafka_error_string(error));
  rd_kafka_error_destroy(error);
  return s;
}

// A consumed record of a ledger topic as the record check reads it: its offset, value and the
// ledger's headers, viewed in the message (valid while it is).
inline KafkaRecordView ViewKafkaMessage(const rd_kafka_message_t* message) {
  KafkaRecordView view;
  view.offset = message->offset;
  view.value = std::string_view(static_cast<const char*>(message->payload), message->len);
  view.format = KafkaHeader(message, kKafkaFormatHeader);
  view.sequence = KafkaHeader(message, kKafkaSequenceHeader);
  view.hash = KafkaHeader(message, kKafkaHashHeader);
  return view;
}

}  // namespace admission::ledger
