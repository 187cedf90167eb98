#include "ledger/sequencer.h"


namespace admission::ledger {

namespace {

std::string Describe(size_t index, size_t size) {
  return "event " + std::to_string(index) + " of " + std::to_string(size);
}

Status KeyTooLong(size_t index, size_t size) {
  return Status(Code::kInvalidArgument, Describe(index, size) + ": idempotency key longer than " +
                                            std::to_string(kIdempotencyKeyBytesMax));
}

// Compares a new event with the one recorded under the same key. Both are decoded here: this
// runs only for a key seen before, so the common path (a new key) never decodes twice.
Status CompareWithRecorded(std::string_view key, Sequence recorded_sequence,
                           std::string_view recorded_bytes, std::string_view incoming_bytes,
                           size_t index, size_t size) {
  Result<schema::DecodedEvent> old = schema::DecodeEvent(recorded_bytes);
  if (!old.ok()) {
    return Status(Code::kCorruption, "event " + std::to_string(recorded_sequence) +
                                         " (indexed by idempotency key '" + std::string(key) +
                                         "'): " + old.status().message());
  }
  Result<schema::DecodedEvent> incoming = schema::DecodeEvent(incoming_bytes);
  ADM_CHECK(incoming.ok(), "event passed its check but does not decode: %s",
            incoming.status().ToString().c_str());
  std::string field = schema::FirstDifferingPayloadField(old->root(), incoming->root());
  if (!field.empty()) {
    return Status(Code::kConflict,
                  Describe(index, size) + ": idempotency key '" + std::string(key) +
                      "' was recorded at sequence " + std::to_string(recorded_sequence) +
                      " with a different payload; first differing field: " + field);
  }
  return Status::Ok();
}

// The event recorded with `key` before: in this request, in an earlier request of the group,
// or in the log's index (then *durable owns the bytes *recorded views).
Status FindRecorded(const std::string& key, const GroupKeys& own_keys,
                    const GroupKeys& group_keys, const KeyLookup& lookup,
                    std::optional<GroupKey>* recorded, std::optional<RecordedKey>* durable) {
  if (auto it = own_keys.find(key); it != own_keys.end()) {
    *recorded = it->second;
  } else if (auto it2 = group_keys.find(key); it2 != group_keys.end()) {
    *recorded = it2->second;
  } else {
    Result<std::optional<RecordedKey>> found = lookup(key);
    if (!found.ok()) return found.status();
    *durable = std::move(*found);
    if (*durable) *recorded = GroupKey{(*durable)->sequence, (*durable)->bytes};
  }
  return Status::Ok();
}

}  // namespace

CheckedBatch CheckBatch(std::span<const std::string> batch) {
  ADM_CHECK(!batch.empty() && batch.size() <= kAppendBatchEventsMax, "a check of %zu events",
            batch.size());
  CheckedBatch checked;
  checked.events.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    // The common form in one pass; anything else through the general decode below.
    {
      schema::StoredEventTemplate stored;
      int64_t recorded_at_ns = 0;
      std::string_view key;
      if (schema::TakePlainEvent(batch[i], &stored, &recorded_at_ns, &key)) {
        if (key.size() > kIdempotencyKeyBytesMax) {
          checked.failure = KeyTooLong(i, batch.size());
          break;
        }
        checked.events.push_back(
            CheckedEvent{std::move(stored), std::string(key), recorded_at_ns, Status::Ok()});
        continue;
      }
    }
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(batch[i]);
    if (!decoded.ok()) {
      checked.failure = Status(Code::kInvalidArgument,
                              Describe(i, batch.size()) + ": " + decoded.status().message());
      break;
    }
    schema::Event::Reader event = decoded->root();
    std::string_view key(event.getIdempotencyKey().cStr(), event.getIdempotencyKey().size());
    if (key.size() > kIdempotencyKeyBytesMax) {
      checked.failure = KeyTooLong(i, batch.size());
      break;
    }
    CheckedEvent& e = checked.events.emplace_back();
    e.key = std::string(key);
    e.recorded_at_ns = event.getRecordedAtNs();
    Result<schema::StoredEventTemplate> stored =
        schema::MakeStoredEventTemplate(batch[i], *decoded);
    if (stored.ok()) {
      e.stored = std::move(*stored);
    } else {
      // Only a new event is stored; a duplicate of a recorded one is not refused for this.
      e.unstorable = Status(Code::kInvalidArgument,
                            Describe(i, batch.size()) + ": " + stored.status().message());
    }
  }
  ADM_CHECK(checked.events.size() == batch.size() || !checked.failure.ok(),
            "the check stopped at %zu of %zu events without a reason", checked.events.size(),
            batch.size());
  return checked;
}

Status SequenceBatch(std::span<const std::string> batch, CheckedBatch& checked,
                     const Head& head, GroupKeys& group_keys, const KeyLookup& lookup,
                     AppendAck* ack, PreparedAppend* out) {
  ADM_CHECK(checked.events.size() <= batch.size(), "a check of %zu events for %zu",
            checked.events.size(), batch.size());
  AppendAck result;
  result.sequences.reserve(batch.size());
  result.duplicate.reserve(batch.size());
  PreparedAppend prepared;
  prepared.head = head;
  // Reserved, so the views that own_keys and group_keys keep of the stored bytes stay valid.
  prepared.events.reserve(checked.events.size());
  GroupKeys own_keys;  // keys of this request, merged into group_keys only on success
  own_keys.reserve(checked.events.size());

  for (size_t i = 0; i < batch.size(); ++i) {
    if (i == checked.events.size()) return checked.failure;
    CheckedEvent& e = checked.events[i];
    if (!e.key.empty()) {
      std::optional<GroupKey> recorded;
      std::optional<RecordedKey> durable;  // owns the bytes `recorded` views, if from the index
      ADM_RETURN_IF_ERROR(FindRecorded(e.key, own_keys, group_keys, lookup, &recorded, &durable));
      if (recorded) {
        ADM_RETURN_IF_ERROR(CompareWithRecorded(e.key, recorded->sequence, recorded->bytes,
                                                batch[i], i, batch.size()));
        result.sequences.push_back(recorded->sequence);
        result.duplicate.push_back(true);
        continue;
      }
    }

    // A new event: give it its place in the chain. (A duplicate keeps its recorded time, so
    // only new events must not go back in time.)
    if (e.recorded_at_ns < prepared.head.recorded_at_ns) {
      return Status(Code::kTimeWentBackwards,
                    Describe(i, batch.size()) + ": recordedAtNs " +
                        std::to_string(e.recorded_at_ns) +
                        " is earlier than the ledger's head time " +
                        std::to_string(prepared.head.recorded_at_ns) +
                        "; time never goes backwards in a ledger");
    }
    if (!e.unstorable.ok()) return e.unstorable;
    const Sequence sequence = prepared.head.sequence + 1;
    schema::FillStoredEvent(sequence, prepared.head.hash, &e.stored);
    ADM_CHECK(e.stored.bytes.size() <= schema::kEventBytesMax, "stored event of %zu bytes",
              e.stored.bytes.size());

    prepared.head.hash = schema::ChainHash(prepared.head.hash, e.stored.bytes);
    prepared.head.sequence = sequence;
    prepared.head.recorded_at_ns = e.recorded_at_ns;
    prepared.events.push_back(StoredEvent{sequence, std::move(e.stored.bytes)});
    if (!e.key.empty()) {
      own_keys.emplace(e.key, GroupKey{sequence, prepared.events.back().bytes});
      prepared.index_entries.emplace_back(e.key, sequence);
    }
    result.sequences.push_back(sequence);
    result.duplicate.push_back(false);
    ++result.written;
  }

  ADM_CHECK(result.sequences.size() == batch.size(), "%zu sequences for %zu events",
            result.sequences.size(), batch.size());
  group_keys.merge(own_keys);
  *ack = std::move(result);
  *out = std::move(prepared);  // moves the events' buffer: the views stay valid
  return Status::Ok();
}

Status PrepareAppend(std::span<const std::string> batch, const Head& head,
                     GroupKeys& group_keys, const KeyLookup& lookup, AppendAck* ack,
                     PreparedAppend* out) {
  if (batch.empty() || batch.size() > kAppendBatchEventsMax) {
    return Status(Code::kInvalidArgument, "an append holds 1 to " +
                                              std::to_string(kAppendBatchEventsMax) +
                                              " events, not " + std::to_string(batch.size()));
  }
  CheckedBatch checked = CheckBatch(batch);
  return SequenceBatch(batch, checked, head, group_keys, lookup, ack, out);
}

}  // namespace admission::ledger
