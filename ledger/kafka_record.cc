#include "ledger/kafka_record.h"

#include <charconv>

namespace admission::ledger {

namespace {

std::string At(int64_t offset) { return "record at offset " + std::to_string(offset); }

Status Malformed(int64_t offset, const std::string& why) {
  return Status(Code::kCorruption, At(offset) + " is not a ledger event: " + why);
}

std::optional<Sequence> ParseSequence(std::string_view text) {
  Sequence value = 0;
  if (text.empty() || text.size() > 20 || text[0] == '0') return std::nullopt;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

KafkaRecordHeaders MakeKafkaRecordHeaders(Sequence sequence, const schema::Hash& hash) {
  KafkaRecordHeaders headers;
  headers.sequence = std::to_string(sequence);
  headers.hash = schema::HashHex(hash);
  return headers;
}

Status KafkaForkError(Sequence sequence, int64_t first_offset, int64_t second_offset) {
  return Status(Code::kCorruption,
                "fork in the ledger topic at sequence " + std::to_string(sequence) +
                    ": the records at offsets " + std::to_string(first_offset) + " and " +
                    std::to_string(second_offset) +
                    " both claim it with different events (a second writer with another "
                    "transactional id, or an edited topic); reading stops here");
}

Result<CheckedRecord> CheckKafkaRecord(const KafkaRecordView& record, const Head& head,
                                       int64_t head_offset) {
  if (!record.format) return Malformed(record.offset, "no " + std::string(kKafkaFormatHeader) +
                                                          " header");
  if (*record.format != kKafkaFormatVersion) {
    return Malformed(record.offset, std::string(kKafkaFormatHeader) + " is '" +
                                        std::string(*record.format) + "', this reader knows '" +
                                        kKafkaFormatVersion + "'");
  }
  if (!record.sequence || !record.hash) {
    return Malformed(record.offset, std::string("no ") +
                                        (!record.sequence ? kKafkaSequenceHeader
                                                          : kKafkaHashHeader) +
                                        " header");
  }
  std::optional<Sequence> header_sequence = ParseSequence(*record.sequence);
  if (!header_sequence) {
    return Malformed(record.offset, std::string(kKafkaSequenceHeader) + " '" +
                                        std::string(*record.sequence) +
                                        "' is not a positive decimal sequence");
  }
  Result<schema::DecodedEvent> decoded = schema::DecodeEvent(record.value);
  if (!decoded.ok()) return Malformed(record.offset, decoded.status().message());
  if (!decoded->canonical()) return Malformed(record.offset, "the value is not canonical");
  schema::Event::Reader event = decoded->root();
  CheckedRecord checked;
  checked.sequence = event.getSequence();
  if (checked.sequence != *header_sequence) {
    return Malformed(record.offset, "the value records sequence " +
                                        std::to_string(checked.sequence) + ", its " +
                                        kKafkaSequenceHeader + " header " +
                                        std::string(*record.sequence));
  }
  if (event.getPrevHash().size() != schema::Hash().size()) {
    return Malformed(record.offset,
                     "prevHash has " + std::to_string(event.getPrevHash().size()) + " bytes");
  }
  const schema::Hash prev = schema::HashFromData(event.getPrevHash());
  checked.hash = schema::ChainHash(prev, record.value);
  if (*record.hash != schema::HashHex(checked.hash)) {
    return Malformed(record.offset, std::string(kKafkaHashHeader) + " " +
                                        std::string(*record.hash) +
                                        " is not the chain value of its value and prevHash (" +
                                        schema::HashHex(checked.hash) + ")");
  }
  checked.key = event.getIdempotencyKey().cStr();
  checked.recorded_at_ns = event.getRecordedAtNs();
  if (checked.sequence <= head.sequence) {
    checked.kind = CheckedRecord::Kind::kRepeat;
    return checked;
  }
  if (checked.sequence > head.sequence + 1) {
    return Status(Code::kCorruption,
                  At(record.offset) + " holds sequence " + std::to_string(checked.sequence) +
                      " but the ledger read so far ends at " + std::to_string(head.sequence) +
                      ": sequences " + std::to_string(head.sequence + 1) + " to " +
                      std::to_string(checked.sequence - 1) + " are missing; reading stops here");
  }
  if (prev != head.hash) {
    return Status(Code::kCorruption,
                  "fork in the ledger topic at sequence " + std::to_string(checked.sequence) +
                      ": " + At(record.offset) +
                      " links to a chain value other than that of sequence " +
                      std::to_string(head.sequence) + " (offset " +
                      std::to_string(head_offset) +
                      ") (a second writer with another transactional id, or an edited "
                      "topic); reading stops here");
  }
  checked.kind = CheckedRecord::Kind::kNext;
  return checked;
}

}  // namespace admission::ledger
