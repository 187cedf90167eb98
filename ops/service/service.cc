#include "ops/service/service.h"

#include <capnp/message.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

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
  ADM_RETURN_IF_ERROR(service->Load(progress));
  return service;
}

Status Service::Reload() { return Load(nullptr); }

Status Service::Load(const std::function<void(uint64_t, uint64_t)>& progress) {
  broken_ = true;  // until the fold below completes
  definitions_.clear();
  loaded_snapshot_.reset();
  skipped_snapshots_.clear();
  uint64_t after = 0;
  if (options_.snapshots != nullptr) {
    auto start = replay::StartFromNewestSnapshot(log_, *options_.snapshots);
    if (!start.ok()) return start.status();
    for (const std::string& why : start->skipped) {
      spdlog::warn("skipping {} (folding from an older snapshot or the genesis instead)", why);
    }
    skipped_snapshots_ = std::move(start->skipped);
    engine_ = std::move(start->start.engine);
    definitions_ = std::move(start->definitions);
    loaded_snapshot_ = start->loaded;
    after = start->start.after;
  } else {
    engine_ = std::make_unique<projections::Engine>();
  }
  const uint64_t head = log_.GetHead().sequence;
  position_ = after;
  ADM_RETURN_IF_ERROR(Fold(after, progress));
  events_folded_at_open_ = head - after;
  if (loaded_snapshot_) {
    spdlog::info("loaded snapshot at {}, folded {} events after it", after, head - after);
  } else if (options_.snapshots != nullptr) {
    spdlog::info("no snapshot loaded, folded {} events from the genesis", head);
  }
  broken_ = false;
  return Status::Ok();
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
        // The decisions are in the ledger already; replay --verify compares them. The batch
        // is decided as the version that sequenced it decided it.
        const uint32_t version = projections::DecidingVersion(event.getEngineVersion());
        if (!projections::EngineVersionDecidable(version)) {
          return Status(Code::kInvalidArgument,
                        "event " + std::to_string(stored.sequence) +
                            " was sequenced by engine v" + std::to_string(version) +
                            "; this build runs engine v" +
                            std::to_string(projections::kEngineVersion) +
                            " and decides as v" +
                            std::to_string(projections::kEngineVersionOldestDecidable) + " to v" +
                            std::to_string(projections::kEngineVersion) + " only");
        }
        (void)engine_->EndBatch(stored.sequence, event.getRecordedAtNs(), version);
      }
    }
    position_ = next - 1;
    if (progress) progress(next - 1, head.sequence);
  }
  return Status::Ok();
}

Result<uint64_t> Service::Follow() {
  if (broken_) return Status(Code::kIoError, "an earlier append failed; reopen the ledger");
  const uint64_t before = position_;
  if (log_.GetHead().sequence <= before) return uint64_t{0};
  ADM_RETURN_IF_ERROR(Fold(before, nullptr));
  MaybeSnapshot(before, position_);
  return position_ - before;
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


}  // namespace admission::ops
