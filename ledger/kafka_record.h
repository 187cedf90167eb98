#pragma once
// The Kafka ledger's record format and the check every reader runs on each record. No Kafka
// here: the format is bytes and strings, tested without a broker. See docs/kafka.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/event_log.h"

namespace admission::ledger {

inline constexpr const char* kKafkaFormatHeader = "adm-format";
inline constexpr const char* kKafkaSequenceHeader = "adm-seq";
inline constexpr const char* kKafkaHashHeader = "adm-hash";
inline constexpr const char* kKafkaFormatVersion = "1";

// The headers of the record that carries a stored event (its value is the stored bytes).
struct KafkaRecordHeaders {
  std::string format = kKafkaFormatVersion;
  std::string sequence;  // decimal
  std::string hash;      // 64 lowercase hex digits: the chain value after the event
};
KafkaRecordHeaders MakeKafkaRecordHeaders(Sequence sequence, const schema::Hash& hash);

// One record as a reader got it. A missing header is nullopt.
struct KafkaRecordView {
  int64_t offset = -1;
  std::string_view value;
  std::optional<std::string_view> format;
  std::optional<std::string_view> sequence;
  std::optional<std::string_view> hash;
};

// What a record is, relative to the reader's head.
struct CheckedRecord {
  enum class Kind {
    kNext,    // the event after the head: sequence head+1, prevHash = the head's hash
    kRepeat,  // a sequence the reader already holds: the caller compares the bytes
  };
  Kind kind = Kind::kNext;
  Sequence sequence = 0;
  schema::Hash hash{};          // the chain value after this event
  std::string key;              // its idempotency key; empty: none
  int64_t recorded_at_ns = 0;
};

// Checks one record on its own (value decodes, is canonical and stored; headers present and
// agreeing with the value) and against `head`: its sequence is head+1 with prevHash = head's
// hash (kNext) or at most the head (kRepeat). Errors (kCorruption), naming the record's offset:
// a malformed record, a gap (sequence beyond head+1), or a fork (sequence head+1 linking to
// another chain value; `head_offset` is the offset of the head's own record, -1 if unknown).
Result<CheckedRecord> CheckKafkaRecord(const KafkaRecordView& record, const Head& head,
                                       int64_t head_offset);

// The fork a repeated sequence with other bytes is: both offsets named.
Status KafkaForkError(Sequence sequence, int64_t first_offset, int64_t second_offset);

}  // namespace admission::ledger
