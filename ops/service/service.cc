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

std::string PrincipalKey(std::string_view actor, std::string_view key) {
  ADM_CHECK(!actor.empty(), "a principal's key needs the principal");
  // The actor is one path segment: '%' and '/' (a check controller's name such as
  // example.com/scan has one) escaped as in a URL, so no two actors' keys can alias.
  std::string scoped = "by/";
  for (char c : actor) {
    if (c == '%') {
      scoped.append("%25");
    } else if (c == '/') {
      scoped.append("%2F");
    } else {
      scoped.push_back(c);
    }
  }
  scoped.append("/").append(key);
  return scoped;
}

namespace {
// Whether a finish or deletion names a workload an earlier input of the same call submitted
// (the decider, which has not seen the call yet, does not know it).
bool SubmittedInCall(schema::Event::Reader event, const std::set<std::string>& workloads,
                     const std::map<std::string, std::string>& uids) {
  schema::WorkloadRef::Reader ref;
  if (event.getBody().which() == schema::Event::Body::WORKLOAD_FINISHED) {
    ref = event.getBody().getWorkloadFinished().getWorkload();
  } else if (event.getBody().which() == schema::Event::Body::WORKLOAD_DELETED) {
    ref = event.getBody().getWorkloadDeleted().getWorkload();
  } else {
    return false;
  }
  const std::string ns = ref.getNamespace().cStr();
  if (ref.getName().size() > 0) {
    if (workloads.count(ns + "/" + ref.getName().cStr()) == 0) return false;
    if (ref.getUid().size() == 0) return true;
    auto it = uids.find(ref.getUid().cStr());
    return it != uids.end() && it->second == ns + "/" + ref.getName().cStr();
  }
  auto it = uids.find(ref.getUid().cStr());
  return it != uids.end() && it->second.rfind(ns + "/", 0) == 0;
}
}  // namespace

std::string RequestInputKey(std::string_view actor, std::string_view request_id, size_t index) {
  ADM_CHECK(!request_id.empty(), "a request key needs a request id");
  std::string key = "req/";
  key.append(actor).append("/").append(request_id).append("/").append(std::to_string(index));
  return key;
}

// A call of a group after Stage: its outcome so far and its events, sequenced from
// `first_sequence` on (inputs, then the decisions they caused).
struct Service::Staged {
  RecordOutcome outcome;
  std::vector<std::string> events;
  size_t inputs_written = 0;
  uint64_t first_sequence = 0;
  std::map<std::string, std::string> definitions;  // DefinitionKey -> body, once written
};

// What the calls staged so far in a group add to the head: the next sequence and time, the
// definitions and idempotency keys they write (key -> sequence and the input's bytes).
struct Service::GroupState {
  uint64_t next_sequence = 0;
  int64_t recorded_at_ns = 0;
  std::map<std::string, std::string> definitions;
  std::map<std::string, std::pair<uint64_t, std::string>> keys;
};

Result<std::vector<std::string>> Service::DecisionsOfBatch(uint64_t sequence, uint64_t* first) {
  // A batch is its inputs (the last one ends it) followed by the decisions they caused.
  std::vector<std::string> decisions;
  uint64_t next = sequence;
  bool inputs_ended = false;
  for (size_t reads = 0; reads < 4; ++reads) {  // a batch holds at most kAppendBatchEventsMax
    auto chunk = log_.Read(next, ledger::kAppendBatchEventsMax);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) return decisions;
    for (ledger::StoredEvent& e : *chunk) {
      auto decoded = schema::DecodeEvent(e.bytes);
      if (!decoded.ok()) return decoded.status();
      const bool decision = schema::IsDecision(decoded->root().getBody().which());
      if (!inputs_ended) {
        if (decision) return decisions;  // not an input: no batch starts here
        inputs_ended = decoded->root().getEndsBatch();
        next = e.sequence + 1;
        continue;
      }
      if (!decision) return decisions;
      if (decisions.empty()) *first = e.sequence;
      decisions.push_back(std::move(e.bytes));
      next = e.sequence + 1;
    }
  }
  return decisions;
}

// Idempotency key already recorded (in the ledger, or by an earlier call of this group): the
// same payload is a retry (its sequence), another is refused (kConflict); a key twice in one
// request is refused (kInvalidArgument). Nullopt: the key is new.
Result<std::optional<uint64_t>> Service::RecordedUnder(const std::string& key,
                                                       schema::Event::Reader event, size_t i,
                                                       const GroupState& group,
                                                       const std::vector<std::string>& fresh_keys) {
  std::optional<uint64_t> recorded_sequence;
  std::string recorded_bytes;
  if (auto in_group = group.keys.find(key); in_group != group.keys.end()) {
    recorded_sequence = in_group->second.first;
    recorded_bytes = in_group->second.second;
  } else if (std::find(fresh_keys.begin(), fresh_keys.end(), key) != fresh_keys.end()) {
    return Status(Code::kInvalidArgument, "input " + std::to_string(i) + ": key '" + key +
                                              "' appears twice in one request");
  } else {
    auto found = log_.FindKey(key);
    if (!found.ok()) return found.status();
    if (!found->has_value()) return std::optional<uint64_t>();
    auto stored = log_.Read(**found, 1);
    if (!stored.ok()) return stored.status();
    if (stored->empty()) {
      return Status(Code::kCorruption, "the idempotency index names sequence " +
                                           std::to_string(**found) + ", past the head");
    }
    recorded_sequence = **found;
    recorded_bytes = std::move(stored->front().bytes);
  }
  if (!recorded_sequence) return std::optional<uint64_t>();
  auto recorded = schema::DecodeEvent(recorded_bytes);
  if (!recorded.ok()) return recorded.status();
  // The actor is who asked; a retry by someone else is still the same request.
  std::string field = schema::FirstDifferingRequestField(recorded->root(), event);
  if (!field.empty()) {
    return Status(Code::kConflict, "input " + std::to_string(i) + ": '" + key +
                                       "' was recorded at sequence " +
                                       std::to_string(*recorded_sequence) +
                                       " with different content; first differing field: " + field);
  }
  return recorded_sequence;
}

Result<Service::Staged> Service::Stage(const RecordCall& call, GroupState& group,
                                       bool* engine_touched) {
  const std::vector<std::string>& inputs = call.inputs;
  const IntakeOptions& options = call.options;
  if (inputs.empty() || inputs.size() > ledger::kAppendBatchEventsMax / 2) {
    return Status(Code::kInvalidArgument,
                  "a batch holds 1 to " + std::to_string(ledger::kAppendBatchEventsMax / 2) +
                      " inputs, not " + std::to_string(inputs.size()));
  }
  int64_t at = 0;
  if (options.at_ns) {
    if (*options.at_ns < group.recorded_at_ns) {
      return Status(Code::kTimeWentBackwards,
                    "--at " + FormatRfc3339(*options.at_ns) +
                        " is earlier than the ledger's last event at " +
                        FormatRfc3339(group.recorded_at_ns) + " (sequence " +
                        std::to_string(group.next_sequence - 1) +
                        "); time never goes backwards in a ledger");
    }
    at = *options.at_ns;
  } else {
    at = std::max(clock_.NowNs(), group.recorded_at_ns);
  }

  Staged staged;
  RecordOutcome& outcome = staged.outcome;
  outcome.sequences.assign(inputs.size(), 0);
  outcome.unchanged.assign(inputs.size(), false);
  std::vector<std::string>& fresh = staged.events;  // stamped inputs to write
  // The inputs to write, laid out, until the batch's last is known (it carries endsBatch).
  std::vector<std::unique_ptr<capnp::MallocMessageBuilder>> laid_out;
  std::vector<std::string> fresh_keys;
  std::set<std::string> call_workloads;         // NS/NAME submitted by this call
  std::map<std::string, std::string> call_uids;  // their uids -> NS/NAME
  size_t key_duplicates = 0;
  uint64_t latest_duplicate = 0;
  uint64_t next_sequence = group.next_sequence;
  staged.first_sequence = next_sequence;
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
    // Idempotency key already recorded (in the ledger, or by an earlier call of this group):
    // the same payload is a no-op, another is refused. An input without a key gets its
    // request's (RequestInputKey), stamped when it is laid out below.
    std::string key = event.getIdempotencyKey().cStr();
    const std::string actor = options.force_actor || event.getActor().size() == 0
                                  ? options.actor
                                  : std::string(event.getActor().cStr());
    if (key.empty() && !options.request_id.empty()) {
      key = RequestInputKey(options.actor, options.request_id, i);
    } else if (!key.empty() && !actor.empty()) {
      key = PrincipalKey(actor, key);
    }
    if (key.size() > ledger::kIdempotencyKeyBytesMax) {
      return Status(Code::kInvalidArgument,
                    "input " + std::to_string(i) + ": its idempotency key would be " +
                        std::to_string(key.size()) + " bytes ('" + key.substr(0, 64) +
                        "...'); at most " + std::to_string(ledger::kIdempotencyKeyBytesMax) +
                        " are allowed (a shorter request id or key)");
    }
    if (!key.empty()) {
      Result<std::optional<uint64_t>> recorded = RecordedUnder(key, event, i, group, fresh_keys);
      if (!recorded.ok()) return recorded.status();
      if (recorded->has_value()) {
        outcome.sequences[i] = **recorded;
        outcome.unchanged[i] = true;
        ++key_duplicates;
        latest_duplicate = std::max(latest_duplicate, **recorded);
        continue;
      }
    }
    // A definition identical to the current one changes nothing.
    std::string def_key = projections::DefinitionKey(event);
    if (!def_key.empty()) {
      std::string body = projections::DefinitionBody(event);
      const std::string* current = nullptr;
      if (auto it = staged.definitions.find(def_key); it != staged.definitions.end()) {
        current = &it->second;
      } else if (auto g = group.definitions.find(def_key); g != group.definitions.end()) {
        current = &g->second;
      } else if (auto d = definitions_.find(def_key); d != definitions_.end()) {
        current = &d->second;
      }
      if (current != nullptr && *current == body) {
        outcome.unchanged[i] = true;
        continue;
      }
      staged.definitions[def_key] = std::move(body);
    }
    auto message = std::make_unique<capnp::MallocMessageBuilder>();
    message->setRoot(event);
    schema::Event::Builder root = message->getRoot<schema::Event>();
    root.setSequence(next_sequence);
    root.setRecordedAtNs(at);
    // The decider version that sequences it: replay decides its batch as this version did.
    root.setEngineVersion(projections::kEngineVersion);
    if (options.force_actor || root.getActor().size() == 0) root.setActor(options.actor);
    if (!key.empty()) root.setIdempotencyKey(key);
    // What the decider cannot see yet: earlier inputs of this call. A workload submitted in
    // it may be finished or deleted in it; a uid or name may be submitted only once in it.
    const schema::Event::Body::Which which = root.getBody().which();
    std::string submitted_key, submitted_uid;
    if (which == schema::Event::Body::WORKLOAD_SUBMITTED ||
        which == schema::Event::Body::WORKLOAD_IMPORTED) {
      auto w = which == schema::Event::Body::WORKLOAD_SUBMITTED
                   ? root.asReader().getBody().getWorkloadSubmitted().getWorkload()
                   : root.asReader().getBody().getWorkloadImported().getWorkload();
      submitted_key = std::string(w.getNamespace().cStr()) + "/" + w.getName().cStr();
      submitted_uid = w.getUid().cStr();
      if (call_workloads.count(submitted_key) != 0 ||
          (!submitted_uid.empty() && call_uids.count(submitted_uid) != 0)) {
        return Status(Code::kConflict, "input " + std::to_string(i) + ": workload " +
                                           submitted_key + " (uid " + submitted_uid +
                                           ") is submitted twice in one request");
      }
    }
    // The decider's own view: a report from the wrong identity, for a stale generation or
    // with a stale token is refused; an identical repeat is a no-op that says so.
    projections::InputVerdict verdict = engine_->Validate(root.asReader());
    if (verdict.status.code() == Code::kNotFound && SubmittedInCall(root.asReader(), call_workloads,
                                                                    call_uids)) {
      verdict = projections::InputVerdict{};
    }
    if (!verdict.status.ok()) {
      return Status(verdict.status.code(),
                    "input " + std::to_string(i) + " refused: " + verdict.status.message());
    }
    if (verdict.noop) {
      outcome.unchanged[i] = true;
      outcome.notes.push_back(verdict.note);
      staged.definitions.erase(def_key);
      continue;
    }
    outcome.sequences[i] = next_sequence++;
    if (!key.empty()) fresh_keys.push_back(key);
    if (!submitted_key.empty()) {
      call_workloads.insert(submitted_key);
      if (!submitted_uid.empty()) call_uids.emplace(submitted_uid, submitted_key);
    }
    laid_out.push_back(std::move(message));
  }
  // Mark the batch's end, then encode each input once.
  if (!laid_out.empty()) laid_out.back()->getRoot<schema::Event>().setEndsBatch(true);
  fresh.reserve(laid_out.size());
  for (const auto& message : laid_out) fresh.push_back(schema::EncodeEvent(*message));
  laid_out.clear();
  if (fresh.empty()) {
    // A retry of a call whose every input was recorded: answer with its original decisions.
    if (key_duplicates == inputs.size()) {
      outcome.retried = true;
      // An original still in this group's unwritten part has no stored decisions yet.
      if (latest_duplicate <= log_.GetHead().sequence) {
        auto decisions = DecisionsOfBatch(latest_duplicate, &outcome.first_decision_sequence);
        if (!decisions.ok()) return decisions.status();
        outcome.decisions = std::move(*decisions);
      }
    }
    return staged;
  }

  // Let the decider fold the inputs and decide.
  *engine_touched = true;
  for (const std::string& input : fresh) {
    auto decoded = schema::DecodeEvent(input);
    ADM_CHECK(decoded.ok(), "stamped input does not decode: %s",
              decoded.status().ToString().c_str());
    engine_->ApplyInput(decoded->root());
  }
  staged.inputs_written = fresh.size();
  std::vector<std::string> decisions = engine_->EndBatch(next_sequence - 1, at);
  if (fresh.size() + decisions.size() > options_.append_events_max) {
    // The engine has applied what the ledger will not hold: RecordGroup folds the ledger again
    // (engine_touched) before any other call is staged.
    return Status(Code::kInvalidArgument,
                  std::to_string(fresh.size()) + " inputs caused " +
                      std::to_string(decisions.size()) + " decisions: more than one append holds (" +
                      std::to_string(options_.append_events_max) +
                      " events); submit the file in smaller parts. Nothing was written.");
  }
  // Each key's sequence and bytes, for a later call of the group that retries this one.
  for (const std::string& input : fresh) {
    auto decoded = schema::DecodeEvent(input);
    std::string key = decoded->root().getIdempotencyKey().cStr();
    if (!key.empty()) group.keys[key] = {decoded->root().getSequence(), input};
  }
  outcome.first_decision_sequence = next_sequence;
  fresh.insert(fresh.end(), std::make_move_iterator(decisions.begin()),
               std::make_move_iterator(decisions.end()));
  for (auto& [k, v] : staged.definitions) group.definitions[k] = v;
  group.next_sequence = staged.first_sequence + fresh.size();
  group.recorded_at_ns = at;
  return staged;
}

std::vector<Result<RecordOutcome>> Service::RecordGroup(const std::vector<RecordCall>& calls) {
  ADM_CHECK(calls.size() <= kGroupCallsMax, "%zu calls in one group", calls.size());
  std::vector<Result<RecordOutcome>> results;
  results.reserve(calls.size());
  auto refuse_all = [&](const Status& why) {
    for (size_t i = 0; i < calls.size(); ++i) results.emplace_back(why);
    return results;
  };
  // While the ledger's disk refuses appends, refuse before the decider sees the inputs.
  if (std::optional<ledger::DiskState> disk = log_.Disk(); disk && disk->refusing) {
    log_.CountRefusedForSpace();
    return refuse_all(Status(Code::kNoSpace, disk->why));
  }
  if (broken_ && broken_by_no_space_) {
    spdlog::info("disk space is back: folding the ledger again after the append it refused");
    Status reloaded = Load(nullptr);
    if (!reloaded.ok()) return refuse_all(reloaded);
    broken_by_no_space_ = false;
  }
  if (broken_) {
    for (size_t i = 0; i < calls.size(); ++i) {
      results.emplace_back(
          Status(Code::kIoError, "an earlier append failed; reopen the ledger to continue"));
    }
    return results;
  }
  if (options_.write_gate) {
    Status gate = options_.write_gate();
    if (!gate.ok()) {
      for (size_t i = 0; i < calls.size(); ++i) results.emplace_back(gate);
      return results;
    }
  }
  const ledger::Head head = log_.GetHead();
  GroupState group;
  group.next_sequence = head.sequence + 1;
  group.recorded_at_ns = head.recorded_at_ns;
  // Calls are staged in order and appended in runs that fit one append; `pending` holds the
  // staged calls of the current run (their index in `calls`).
  std::vector<std::optional<Staged>> staged(calls.size());
  std::vector<Status> refused(calls.size());
  std::vector<size_t> run;
  std::vector<std::string> run_events;
  uint64_t run_first = head.sequence + 1;
  Status failure;
  auto flush = [&]() {
    if (run_events.empty()) {
      run.clear();
      return;
    }
    if (failure.ok()) {
      auto ack = log_.Append(run_events);
      if (!ack.ok()) {
        failure = ack.status();
      } else {
        for (size_t j = 0; j < run_events.size(); ++j) {
          if (ack->sequences[j] != run_first + j || ack->duplicate[j]) {
            failure = Status(Code::kIoError,
                             "the ledger gave event " + std::to_string(j) +
                                 " of the batch sequence " + std::to_string(ack->sequences[j]) +
                                 ", not " + std::to_string(run_first + j) +
                                 " (another writer?); reopen the ledger");
            break;
          }
        }
      }
      if (failure.ok()) {
        // The decisions as stored (sequence and prevHash filled in), read back once per run.
        auto stored = log_.Read(run_first, run_events.size());
        if (stored.ok() && stored->size() == run_events.size()) {
          for (size_t index : run) {
            Staged& s = *staged[index];
            if (s.events.empty()) continue;
            s.outcome.decisions.clear();
            const size_t begin = s.first_sequence - run_first + s.inputs_written;
            const size_t end = s.first_sequence - run_first + s.events.size();
            for (size_t k = begin; k < end; ++k) {
              s.outcome.decisions.push_back(std::move((*stored)[k].bytes));
            }
          }
        }
        for (size_t index : run) {
          for (auto& [k, v] : staged[index]->definitions) definitions_[k] = v;
        }
        const uint64_t before = run_first - 1;
        run_first += run_events.size();
        position_ = run_first - 1;
        MaybeSnapshot(before, run_first - 1);
      } else {
        broken_ = true;
        if (failure.code() == Code::kNoSpace) {
          // Nothing of it was written: fold the ledger again now, so that reads show only what
          // it holds; if that fails too, the next call tries again.
          broken_by_no_space_ = !Load(nullptr).ok();
        }
      }
    }
    if (!failure.ok()) {
      for (size_t index : run) refused[index] = failure;
    }
    run.clear();
    run_events.clear();
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    if (broken_ || !failure.ok()) {
      refused[i] = failure.ok() ? Status(Code::kIoError,
                                         "an earlier append failed; reopen the ledger to continue")
                                : failure;
      continue;
    }
    // A call's inputs come from a client: reading one must not throw (DecodeEvent bounds every
    // walk of an accepted event), but if one does, only that call is refused. A throw once the
    // decider has applied inputs leaves it ahead of the ledger: the service stops writing.
    Result<Staged> s = Status(Code::kInvalidArgument, "not staged");
    bool engine_touched = false;
    kj::Maybe<kj::Exception> thrown =
        kj::runCatchingExceptions([&]() { s = Stage(calls[i], group, &engine_touched); });
    KJ_IF_MAYBE(e, thrown) {
      s = Status(engine_touched ? Code::kIoError : Code::kInvalidArgument,
                 std::string(engine_touched ? "the decider failed on the call's inputs: "
                                            : "the call's inputs could not be read: ") +
                     e->getDescription().cStr());
    }
    if (!s.ok()) {
      refused[i] = s.status();
      if (engine_touched && !broken_) {
        // The decider applied a call the ledger will not hold: write the calls staged before
        // it, then bring a decider to the ledger again, so that neither the calls after it nor
        // any read sees a state the ledger does not have.
        flush();
        if (failure.ok()) {
          spdlog::info("a refused call had reached the decider: folding the ledger again ({})",
                       s.status().message());
          Status reloaded = Load(nullptr);
          if (!reloaded.ok()) {
            broken_ = true;
            failure = reloaded;
          }
          group.next_sequence = run_first;
        }
      }
      continue;
    }
    if (run_events.size() + s->events.size() > options_.append_events_max) flush();
    for (const std::string& e : s->events) run_events.push_back(e);
    run.push_back(i);
    staged[i] = std::move(*s);
  }
  flush();
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!refused[i].ok()) {
      results.emplace_back(refused[i]);
    } else {
      results.emplace_back(std::move(staged[i]->outcome));
    }
  }
  return results;
}

Result<RecordOutcome> Service::Record(const std::vector<std::string>& inputs,
                                      const IntakeOptions& options) {
  std::vector<RecordCall> calls(1);
  calls[0].inputs = inputs;
  calls[0].options = options;
  return std::move(RecordGroup(calls).front());
}

}  // namespace admission::ops
