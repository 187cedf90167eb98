#include "ledger/sequencer.h"

#include <capnp/message.h>

namespace admission::ledger {

namespace {

std::string Describe(size_t index, size_t size) {
  return "event " + std::to_string(index) + " of " + std::to_string(size);
}

// Compares a new event with the one recorded under the same key.
Status CompareWithRecorded(std::string_view key, const RecordedKey& recorded,
                           schema::Event::Reader incoming, size_t index, size_t size,
                           bool* duplicate) {
  Result<schema::DecodedEvent> old = schema::DecodeEvent(recorded.bytes);
  if (!old.ok()) {
    return Status(Code::kCorruption, "event " + std::to_string(recorded.sequence) +
                                         " (indexed by idempotency key '" + std::string(key) +
                                         "'): " + old.status().message());
  }
  std::string field = schema::FirstDifferingPayloadField(old->root(), incoming);
  if (!field.empty()) {
    return Status(Code::kConflict,
                  Describe(index, size) + ": idempotency key '" + std::string(key) +
                      "' was recorded at sequence " + std::to_string(recorded.sequence) +
                      " with a different payload; first differing field: " + field);
  }
  *duplicate = true;
  return Status::Ok();
}

}  // namespace

Status PrepareAppend(std::span<const std::string> batch, const Head& head,
                     GroupKeys& group_keys, const KeyLookup& lookup, AppendAck* ack,
                     PreparedAppend* out) {
  if (batch.empty() || batch.size() > kAppendBatchEventsMax) {
    return Status(Code::kInvalidArgument, "an append holds 1 to " +
                                              std::to_string(kAppendBatchEventsMax) +
                                              " events, not " + std::to_string(batch.size()));
  }
  AppendAck result;
  PreparedAppend prepared;
  prepared.head = head;
  GroupKeys own_keys;  // keys of this request, merged into group_keys only on success

  for (size_t i = 0; i < batch.size(); ++i) {
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(batch[i]);
    if (!decoded.ok()) {
      return Status(Code::kInvalidArgument,
                    Describe(i, batch.size()) + ": " + decoded.status().message());
    }
    schema::Event::Reader event = decoded->root();
    std::string_view key(event.getIdempotencyKey().cStr(), event.getIdempotencyKey().size());
    if (key.size() > kIdempotencyKeyBytesMax) {
      return Status(Code::kInvalidArgument, Describe(i, batch.size()) +
                                                ": idempotency key longer than " +
                                                std::to_string(kIdempotencyKeyBytesMax));
    }
    if (!key.empty()) {
      std::optional<RecordedKey> recorded;
      if (auto it = own_keys.find(key); it != own_keys.end()) {
        recorded = it->second;
      } else if (auto it2 = group_keys.find(key); it2 != group_keys.end()) {
        recorded = it2->second;
      } else {
        Result<std::optional<RecordedKey>> found = lookup(key);
        if (!found.ok()) return found.status();
        recorded = std::move(*found);
      }
      if (recorded) {
        bool duplicate = false;
        ADM_RETURN_IF_ERROR(
            CompareWithRecorded(key, *recorded, event, i, batch.size(), &duplicate));
        result.sequences.push_back(recorded->sequence);
        result.duplicate.push_back(true);
        continue;
      }
    }

    // A new event: give it its place in the chain. (A duplicate keeps its recorded time, so
    // only new events must not go back in time.)
    if (event.getRecordedAtNs() < prepared.head.recorded_at_ns) {
      return Status(Code::kTimeWentBackwards,
                    Describe(i, batch.size()) + ": recordedAtNs " +
                        std::to_string(event.getRecordedAtNs()) +
                        " is earlier than the ledger's head time " +
                        std::to_string(prepared.head.recorded_at_ns) +
                        "; time never goes backwards in a ledger");
    }
    const Sequence sequence = prepared.head.sequence + 1;
    capnp::MallocMessageBuilder message(
        static_cast<unsigned>(batch[i].size() / sizeof(capnp::word) + 8));
    message.setRoot(event);
    schema::Event::Builder root = message.getRoot<schema::Event>();
    root.setSequence(sequence);
    root.setPrevHash(capnp::Data::Reader(prepared.head.hash.data(), prepared.head.hash.size()));
    std::string canonical = schema::CanonicalBytes(root.asReader());
    ADM_CHECK(canonical.size() <= schema::kEventBytesMax + 64, "canonical event of %zu bytes",
              canonical.size());

    prepared.head.hash = schema::ChainHash(prepared.head.hash, canonical);
    prepared.head.sequence = sequence;
    prepared.head.recorded_at_ns = event.getRecordedAtNs();
    if (!key.empty()) {
      own_keys.emplace(std::string(key), RecordedKey{sequence, canonical});
      prepared.index_entries.emplace_back(std::string(key), sequence);
    }
    prepared.events.push_back(StoredEvent{sequence, std::move(canonical)});
    result.sequences.push_back(sequence);
    result.duplicate.push_back(false);
    ++result.written;
  }

  ADM_CHECK(result.sequences.size() == batch.size(), "%zu sequences for %zu events",
            result.sequences.size(), batch.size());
  group_keys.merge(own_keys);
  *ack = std::move(result);
  *out = std::move(prepared);
  return Status::Ok();
}

}  // namespace admission::ledger
