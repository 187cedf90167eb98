#include "ops/service.h"

#include <capnp/message.h>
#include <spdlog/spdlog.h>

#include "schema/time_format.h"
#include "schema/event_codec.h"

namespace admission::ops {

namespace {
constexpr size_t kFoldReadChunk = 4096;
}

Result<std::unique_ptr<Service>> Service::Open(
    ledger::EventLog& log, Clock& clock,
    const std::function<void(uint64_t, uint64_t)>& progress, const ServiceOptions& options) {
  std::unique_ptr<Service> service(new Service(log, clock, options));
  uint64_t after = 0;
  if (options.snapshots != nullptr) {
    auto start = replay::StartFromNewestSnapshot(log, *options.snapshots);
    if (!start.ok()) return start.status();
    for (const std::string& why : start->skipped) {
      spdlog::warn("skipping {} (folding from an older snapshot or the genesis instead)", why);
    }
    service->skipped_snapshots_ = std::move(start->skipped);
    service->engine_ = std::move(start->start.engine);
    service->definitions_ = std::move(start->definitions);
    service->loaded_snapshot_ = start->loaded;
    after = start->start.after;
  } else {
    service->engine_ = std::make_unique<projections::Engine>();
  }
  const uint64_t head = log.GetHead().sequence;
  ADM_RETURN_IF_ERROR(service->Fold(after, progress));
  service->events_folded_at_open_ = head - after;
  if (service->loaded_snapshot_) {
    spdlog::info("loaded snapshot at {}, folded {} events after it", after, head - after);
  } else if (options.snapshots != nullptr) {
    spdlog::info("no snapshot loaded, folded {} events from the genesis", head);
  }
  return service;
}

Status Service::Fold(uint64_t after, const std::function<void(uint64_t, uint64_t)>& progress) {
  const ledger::Head head = log_.GetHead();
  uint64_t next = after + 1;
  while (next <= head.sequence) {
    auto chunk = log_.Read(next, kFoldReadChunk);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) break;
    for (const ledger::StoredEvent& stored : *chunk) {
      auto decoded = schema::DecodeEvent(stored.bytes);
      if (!decoded.ok()) {
        return Status(Code::kCorruption, "event " + std::to_string(stored.sequence) + ": " +
                                             decoded.status().message());
      }
      schema::Event::Reader event = decoded->root();
      next = stored.sequence + 1;
      if (schema::IsDecision(event.getBody().which())) continue;
      engine_->ApplyInput(event);
      projections::TrackDefinition(event, &definitions_);
      if (event.getEndsBatch()) {
        // The decisions are in the ledger already; replay --verify compares them.
        (void)engine_->EndBatch(stored.sequence, event.getRecordedAtNs());
      }
    }
    if (progress) progress(next - 1, head.sequence);
  }
  return Status::Ok();
}

Result<replay::TakenSnapshot> Service::Snapshot() {
  if (options_.snapshots == nullptr) {
    return Status(Code::kInvalidArgument, "this service keeps no snapshots");
  }
  if (broken_) {
    return Status(Code::kIoError, "an earlier append failed; reopen the ledger to continue");
  }
  const uint64_t head = log_.GetHead().sequence;
  if (head == 0) return Status(Code::kInvalidArgument, "the ledger is empty");
  return replay::TakeSnapshot(log_, *options_.snapshots, *engine_, head, definitions_);
}

void Service::MaybeSnapshot(uint64_t head_before, uint64_t head) {
  const uint64_t every = options_.snapshot_every_events;
  if (options_.snapshots == nullptr || every == 0 || head_before / every == head / every) return;
  // The append is durable whatever happens here: a failed snapshot is a warning, and the next
  // boundary tries again.
  auto taken = replay::TakeSnapshot(log_, *options_.snapshots, *engine_, head, definitions_);
  if (!taken.ok()) {
    spdlog::warn("snapshot at sequence {} failed: {}", head, taken.status().ToString());
    return;
  }
  spdlog::info("snapshot at sequence {}: {} bytes, sha256 {}", head, taken->bytes,
               schema::HashHex(taken->hash));
  Status pruned = ledger::PruneSnapshots(*options_.snapshots);
  if (!pruned.ok()) spdlog::warn("removing old snapshots failed: {}", pruned.ToString());
}

Result<RecordOutcome> Service::Record(const std::vector<std::string>& inputs,
                                      const IntakeOptions& options) {
  if (broken_) {
    return Status(Code::kIoError, "an earlier append failed; reopen the ledger to continue");
  }
  if (inputs.empty() || inputs.size() > ledger::kAppendBatchEventsMax / 2) {
    return Status(Code::kInvalidArgument,
                  "a batch holds 1 to " + std::to_string(ledger::kAppendBatchEventsMax / 2) +
                      " inputs, not " + std::to_string(inputs.size()));
  }
  const ledger::Head head = log_.GetHead();
  int64_t at = 0;
  if (options.at_ns) {
    if (*options.at_ns < head.recorded_at_ns) {
      return Status(Code::kTimeWentBackwards,
                    "--at " + FormatRfc3339(*options.at_ns) +
                        " is earlier than the ledger's last event at " +
                        FormatRfc3339(head.recorded_at_ns) + " (sequence " +
                        std::to_string(head.sequence) + "); time never goes backwards in a ledger");
    }
    at = *options.at_ns;
  } else {
    at = std::max(clock_.NowNs(), head.recorded_at_ns);
  }

  RecordOutcome outcome;
  outcome.sequences.assign(inputs.size(), 0);
  outcome.unchanged.assign(inputs.size(), false);
  std::vector<std::string> fresh;             // stamped inputs to write
  std::vector<size_t> fresh_index;
  std::map<std::string, std::string> batch_definitions;
  uint64_t next_sequence = head.sequence + 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto decoded = schema::DecodeEvent(inputs[i]);
    if (!decoded.ok()) {
      return Status(Code::kInvalidArgument,
                    "input " + std::to_string(i) + ": " + decoded.status().message());
    }
    schema::Event::Reader event = decoded->root();
    if (schema::IsDecision(event.getBody().which())) {
      return Status(Code::kInvalidArgument, "input " + std::to_string(i) + " is a decision (" +
                                                schema::BodyName(event) +
                                                "); only the decider makes decisions");
    }
    // Idempotency key already recorded: the same payload is a no-op, another is refused.
    std::string key = event.getIdempotencyKey().cStr();
    if (!key.empty()) {
      auto found = log_.FindKey(key);
      if (!found.ok()) return found.status();
      if (found->has_value()) {
        auto stored = log_.Read(**found, 1);
        if (!stored.ok()) return stored.status();
        auto recorded = schema::DecodeEvent(stored->front().bytes);
        if (!recorded.ok()) return recorded.status();
        std::string field = schema::FirstDifferingPayloadField(recorded->root(), event);
        // The actor is who asked; a retry by someone else is still the same request.
        if (!field.empty() && field != "actor") {
          return Status(Code::kConflict, "input " + std::to_string(i) + ": '" + key +
                                             "' was recorded at sequence " +
                                             std::to_string(**found) +
                                             " with different content; first differing field: " +
                                             field);
        }
        outcome.sequences[i] = **found;
        outcome.unchanged[i] = true;
        continue;
      }
    }
    // A definition identical to the current one changes nothing.
    std::string def_key = projections::DefinitionKey(event);
    std::string body;
    if (!def_key.empty()) {
      body = projections::DefinitionBody(event);
      auto current = batch_definitions.count(def_key) != 0 ? batch_definitions.find(def_key)
                                                          : definitions_.find(def_key);
      auto end = batch_definitions.count(def_key) != 0 ? batch_definitions.end()
                                                      : definitions_.end();
      if (current != end && current->second == body) {
        outcome.unchanged[i] = true;
        continue;
      }
      batch_definitions[def_key] = body;
    }
    capnp::MallocMessageBuilder message;
    message.setRoot(event);
    schema::Event::Builder root = message.getRoot<schema::Event>();
    root.setSequence(next_sequence);
    root.setRecordedAtNs(at);
    if (root.getActor().size() == 0) root.setActor(options.actor);
    // The decider's own view: a report from the wrong identity, for a stale generation or
    // with a stale token is refused; an identical repeat is a no-op that says so.
    projections::InputVerdict verdict = engine_->Validate(root.asReader());
    if (!verdict.status.ok()) {
      return Status(verdict.status.code(),
                    "input " + std::to_string(i) + " refused: " + verdict.status.message());
    }
    if (verdict.noop) {
      outcome.unchanged[i] = true;
      outcome.notes.push_back(verdict.note);
      continue;
    }
    outcome.sequences[i] = next_sequence++;
    fresh.push_back(schema::EncodeEvent(message));
    fresh_index.push_back(i);
  }
  if (fresh.empty()) return outcome;

  // Mark the batch's end, then let the decider fold the inputs and decide.
  {
    auto last = schema::DecodeEvent(fresh.back());
    capnp::MallocMessageBuilder message;
    message.setRoot(last->root());
    message.getRoot<schema::Event>().setEndsBatch(true);
    fresh.back() = schema::EncodeEvent(message);
  }
  for (const std::string& input : fresh) {
    auto decoded = schema::DecodeEvent(input);
    ADM_CHECK(decoded.ok(), "stamped input does not decode: %s",
              decoded.status().ToString().c_str());
    engine_->ApplyInput(decoded->root());
  }
  std::vector<std::string> decisions = engine_->EndBatch(next_sequence - 1, at);
  std::vector<std::string> batch = fresh;
  batch.insert(batch.end(), decisions.begin(), decisions.end());
  if (batch.size() > ledger::kAppendBatchEventsMax) {
    broken_ = true;  // the engine has applied what the ledger will not hold
    return Status(Code::kInvalidArgument,
                  std::to_string(fresh.size()) + " inputs caused " +
                      std::to_string(decisions.size()) + " decisions: more than one append holds (" +
                      std::to_string(ledger::kAppendBatchEventsMax) +
                      " events); submit the file in smaller parts. Nothing was written.");
  }
  auto ack = log_.Append(batch);
  if (!ack.ok()) {
    broken_ = true;
    return ack.status();
  }
  for (size_t j = 0; j < batch.size(); ++j) {
    if (ack->sequences[j] != head.sequence + 1 + j || ack->duplicate[j]) {
      broken_ = true;
      return Status(Code::kIoError,
                    "the ledger gave event " + std::to_string(j) + " of the batch sequence " +
                        std::to_string(ack->sequences[j]) + ", not " +
                        std::to_string(head.sequence + 1 + j) +
                        " (another writer?); reopen the ledger");
    }
  }
  for (auto& [k, v] : batch_definitions) definitions_[k] = v;
  MaybeSnapshot(head.sequence, head.sequence + batch.size());
  outcome.first_decision_sequence = head.sequence + 1 + fresh.size();
  auto stored = log_.Read(outcome.first_decision_sequence, decisions.size());
  if (stored.ok()) {
    for (auto& e : *stored) outcome.decisions.push_back(std::move(e.bytes));
  }
  return outcome;
}

}  // namespace admission::ops
