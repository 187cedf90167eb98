#pragma once
// Small pieces every client of a ledger topic shares (KafkaLog, KafkaLeadership, the billing
// consumer): properties with clear refusals, and the view of a consumed record.

#include <librdkafka/rdkafka.h>

#include <optional>
#include <string>
#include <string_view>

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

// A consumed record of a ledger topic as the record check reads it: its offset, value and the
// ledger's headers, viewed in the message (valid while it is).
inline KafkaRecordView ViewKafkaMessage(const rd_kafka_message_t* message) {
  KafkaRecordView view;
  view.offset = message->offset;
  view.value = std::string_view(static_cast<const char*>(message->payload), message->len);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return view;
  auto get = [&](const char* name) -> std::optional<std::string_view> {
    const void* value = nullptr;
    size_t size = 0;
    if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return std::nullopt;
    }
    return std::string_view(static_cast<const char*>(value), size);
  };
  view.format = get(kKafkaFormatHeader);
  view.sequence = get(kKafkaSequenceHeader);
  view.hash = get(kKafkaHashHeader);
  return view;
}

}  // namespace admission::ledger
