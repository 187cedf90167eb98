#include "ledger/verify.h"

#include <algorithm>

namespace admission::ledger {

namespace {

constexpr size_t kVerifyReadChunk = 4096;
constexpr Sequence kProgressEvery = 65536;

// The checks one stored event must pass on its own, and its claimed link.
struct EventCheck {
  std::optional<std::string> fault;
  schema::Hash recorded_prev{};
  std::string key;
};

EventCheck CheckOne(const StoredEvent& stored) {
  EventCheck check;
  Result<schema::DecodedEvent> decoded = schema::DecodeEvent(stored.bytes);
  if (!decoded.ok()) {
    check.fault = decoded.status().message();
    return check;
  }
  schema::Event::Reader event = decoded->root();
  if (!decoded->canonical()) {
    check.fault = "stored bytes are not in canonical form";
  } else if (event.getSequence() != stored.sequence) {
    check.fault = "event records sequence " + std::to_string(event.getSequence());
  } else if (event.getPrevHash().size() != schema::Hash().size()) {
    check.fault = "prevHash has " + std::to_string(event.getPrevHash().size()) + " bytes";
  }
  check.recorded_prev = schema::HashFromData(event.getPrevHash());
  check.key = event.getIdempotencyKey().cStr();
  return check;
}

}  // namespace

Result<VerifyReport> VerifyChain(EventLog& log, Sequence from, const schema::Hash& from_hash,
                                 bool check_index, const VerifyProgress& progress) {
  VerifyReport report;
  const Head head = log.GetHead();
  report.head = head.sequence;
  report.head_hash = head.hash;
  from = std::max<Sequence>(from, 1);
  schema::Hash chain = from_hash;  // H(expected - 1), recomputed from stored bytes
  Sequence expected = from;

  // The link into event `s` failed. If event s is consistent with what follows it (the next
  // event's prevHash, or the head record), s is intact and s-1 was changed; otherwise s was.
  auto blame = [&](const StoredEvent& s, const EventCheck& c) -> Result<ChainFault> {
    schema::Hash own = schema::ChainHash(c.recorded_prev, s.bytes);
    bool successor_agrees = false;
    if (s.sequence == head.sequence) {
      successor_agrees = own == head.hash;
    } else {
      Result<std::vector<StoredEvent>> next = log.Read(s.sequence + 1, 1);
      if (!next.ok()) return next.status();
      if (!next->empty() && next->front().sequence == s.sequence + 1) {
        EventCheck nc = CheckOne(next->front());
        successor_agrees = !nc.fault && nc.recorded_prev == own;
      }
    }
    if (successor_agrees && s.sequence > from) {
      return ChainFault{s.sequence - 1, "stored bytes do not match the hash that event " +
                                            std::to_string(s.sequence) + " records for them"};
    }
    return ChainFault{s.sequence, "prevHash does not match the chain value of the events "
                                  "before it"};
  };

  while (expected <= head.sequence && !report.fault) {
    size_t want = static_cast<size_t>(
        std::min<Sequence>(kVerifyReadChunk, head.sequence - expected + 1));
    Result<std::vector<StoredEvent>> chunk = log.Read(expected, want);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) {
      report.fault = ChainFault{expected, "event is missing (the head is " +
                                              std::to_string(head.sequence) + ")"};
      break;
    }
    for (const StoredEvent& stored : *chunk) {
      if (stored.sequence != expected) {
        report.fault = ChainFault{expected, "event is missing (next stored is " +
                                                std::to_string(stored.sequence) + ")"};
        break;
      }
      EventCheck check = CheckOne(stored);
      if (check.fault) {
        report.fault = ChainFault{stored.sequence, *check.fault};
        break;
      }
      if (check.recorded_prev != chain) {
        Result<ChainFault> fault = blame(stored, check);
        if (!fault.ok()) return fault.status();
        report.fault = std::move(*fault);
        break;
      }
      if (check_index && !check.key.empty()) {
        Result<std::optional<Sequence>> indexed = log.FindKey(check.key);
        if (!indexed.ok()) return indexed.status();
        if (!indexed->has_value() || **indexed != stored.sequence) {
          report.fault = ChainFault{
              stored.sequence,
              "idempotency index for key '" + check.key + "' points to " +
                  (indexed->has_value() ? std::to_string(**indexed) : std::string("nothing"))};
          break;
        }
      }
      chain = schema::ChainHash(chain, stored.bytes);
      ++report.events_checked;
      ++expected;
      if (progress && report.events_checked % kProgressEvery == 0) {
        progress(report.events_checked, head.sequence - from + 1);
      }
    }
  }
  if (!report.fault && chain != head.hash && head.sequence >= from) {
    report.fault = ChainFault{head.sequence,
                              "the head record's hash does not match the chain ending here"};
  }
  if (!report.fault && head.sequence > 0) {
    Result<std::vector<StoredEvent>> beyond = log.Read(head.sequence + 1, 1);
    if (!beyond.ok()) return beyond.status();
    if (!beyond->empty()) {
      report.fault = ChainFault{beyond->front().sequence,
                                "event stored beyond the head " + std::to_string(head.sequence)};
    }
  }
  if (progress) progress(report.events_checked, head.sequence >= from ? head.sequence - from + 1 : 0);
  return report;
}

Result<schema::Hash> ChainValueAfter(EventLog& log, Sequence after) {
  if (after == 0) return schema::kGenesisHash;
  const Head head = log.GetHead();
  if (after > head.sequence) {
    return Status(Code::kInvalidArgument, "sequence " + std::to_string(after) +
                                              " is beyond the ledger's head " +
                                              std::to_string(head.sequence));
  }
  Result<std::vector<StoredEvent>> read = log.Read(after, 1);
  if (!read.ok()) return read.status();
  if (read->empty() || read->front().sequence != after) {
    return Status(Code::kCorruption, "event " + std::to_string(after) + " is missing");
  }
  Result<schema::DecodedEvent> decoded = schema::DecodeEvent(read->front().bytes);
  if (!decoded.ok()) {
    return Status(Code::kCorruption, "event " + std::to_string(after) + ": " +
                                         decoded.status().message());
  }
  return schema::ChainHash(schema::HashFromData(decoded->root().getPrevHash()),
                           read->front().bytes);
}

}  // namespace admission::ledger
