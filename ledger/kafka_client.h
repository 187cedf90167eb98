#pragma once
// Small pieces the Kafka ledger's clients share (KafkaLog, KafkaLeadership). Internal to ledger/.

#include <librdkafka/rdkafka.h>

#include <string>

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

}  // namespace admission::ledger
