// The one intake: every call of every client (admitctl in process, admitd's RPC, the
// simulator) is stamped, keyed, checked and decided here, one input after the other, before
// group commit (group_commit.cc) appends it. Each input arrives decoded once (DecodeInputs, or
// the RPC server's RecordCallOf), is laid out once into a message it is stamped in, is folded
// by the decider from that message and is encoded once for the append.

#include <algorithm>
#include <set>

#include "ops/service/staging.h"
#include "schema/time_format.h"

namespace admission::ops {

std::string RequestInputKey(std::string_view actor, std::string_view request_id, size_t index) {
  ADM_CHECK(!request_id.empty(), "a request key needs a request id");
  std::string key = "req/";
  key.append(actor).append("/").append(request_id).append("/").append(std::to_string(index));
  return key;
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

Result<int64_t> StampTime(const IntakeOptions& options, int64_t head_time_ns,
                          uint64_t head_sequence, Clock& clock) {
  if (!options.at_ns) return std::max(clock.NowNs(), head_time_ns);
  if (*options.at_ns < head_time_ns) {
    return Status(Code::kTimeWentBackwards,
                  "--at " + FormatRfc3339(*options.at_ns) +
                      " is earlier than the ledger's last event at " +
                      FormatRfc3339(head_time_ns) + " (sequence " +
                      std::to_string(head_sequence) + "); time never goes backwards in a ledger");
  }
  return *options.at_ns;
}

Result<std::vector<schema::DecodedEvent>> DecodeInputs(const std::vector<std::string>& inputs) {
  std::vector<schema::DecodedEvent> decoded;
  decoded.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Result<schema::DecodedEvent> one = schema::DecodeEvent(inputs[i]);
    if (!one.ok()) {
      return Status(Code::kInvalidArgument,
                    "input " + std::to_string(i) + ": " + one.status().message());
    }
    decoded.push_back(std::move(*one));
  }
  return decoded;
}

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

namespace {

// The key input i is recorded under: its own, in its actor's namespace of keys (PrincipalKey),
// or, without one, its request's (RequestInputKey); empty: none.
Result<std::string> InputKey(schema::Event::Reader event, const IntakeOptions& options,
                             size_t i) {
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
  return key;
}

// An input laid out to be written: a copy stamped with its sequence, time, the decider version
// that sequences it (replay decides its batch as this version did), actor and key.
std::unique_ptr<capnp::MallocMessageBuilder> LayOut(const schema::DecodedEvent& input,
                                                    uint64_t sequence, int64_t at,
                                                    const IntakeOptions& options,
                                                    const std::string& key) {
  // One segment the size of the input and what stamping adds (capnp's default first segment
  // is 8 KiB, zeroed: most of an input's cost in the daemon's allocator).
  const size_t words =
      input.word_count() + (options.actor.size() + key.size()) / sizeof(capnp::word) + 16;
  auto message = std::make_unique<capnp::MallocMessageBuilder>(static_cast<unsigned>(words));
  message->setRoot(input.root());
  schema::Event::Builder root = message->getRoot<schema::Event>();
  root.setSequence(sequence);
  root.setRecordedAtNs(at);
  root.setEngineVersion(projections::kEngineVersion);
  if (options.force_actor || root.getActor().size() == 0) root.setActor(options.actor);
  if (!key.empty()) root.setIdempotencyKey(key);
  return message;
}

// The workload a submission or an import names: NS/NAME and uid (empty for other inputs).
std::pair<std::string, std::string> SubmittedWorkload(schema::Event::Reader event) {
  const auto which = event.getBody().which();
  if (which != schema::Event::Body::WORKLOAD_SUBMITTED &&
      which != schema::Event::Body::WORKLOAD_IMPORTED) {
    return {};
  }
  auto w = which == schema::Event::Body::WORKLOAD_SUBMITTED
               ? event.getBody().getWorkloadSubmitted().getWorkload()
               : event.getBody().getWorkloadImported().getWorkload();
  return {std::string(w.getNamespace().cStr()) + "/" + w.getName().cStr(), w.getUid().cStr()};
}

}  // namespace

Result<Service::Staged> Service::Stage(const RecordCall& call, GroupState& group,
                                       bool* engine_touched) {
  const size_t inputs = call.inputs.size();
  if (inputs == 0 || inputs > ledger::kAppendBatchEventsMax / 2) {
    return Status(Code::kInvalidArgument,
                  "a batch holds 1 to " + std::to_string(ledger::kAppendBatchEventsMax / 2) +
                      " inputs, not " + std::to_string(inputs));
  }
  Result<int64_t> at =
      StampTime(call.options, group.recorded_at_ns, group.next_sequence - 1, clock_);
  if (!at.ok()) return at.status();
  Staged staged;
  staged.outcome.sequences.assign(inputs, 0);
  staged.outcome.unchanged.assign(inputs, false);
  staged.outcome.configured.assign(inputs, false);
  staged.first_sequence = group.next_sequence;
  CallState state;
  state.next_sequence = group.next_sequence;
  for (size_t i = 0; i < inputs; ++i) {
    ADM_RETURN_IF_ERROR(StageInput(call, i, *at, group, staged, state));
  }
  if (staged.laid_out.empty()) {
    if (state.key_duplicates == inputs) ADM_RETURN_IF_ERROR(AnswerRetry(staged, state));
    return staged;
  }
  ADM_RETURN_IF_ERROR(Decide(staged, group, *at, engine_touched));
  return staged;
}

Status Service::StageInput(const RecordCall& call, size_t i, int64_t at, const GroupState& group,
                           Staged& staged, CallState& state) {
  RecordOutcome& outcome = staged.outcome;
  const schema::Event::Reader event = call.inputs[i].root();
  if (schema::IsDecision(event.getBody().which())) {
    return Status(Code::kInvalidArgument, "input " + std::to_string(i) + " is a decision (" +
                                              schema::BodyName(event) +
                                              "); only the decider makes decisions");
  }
  // A key recorded before (in the ledger, or by an earlier call of this group) with the same
  // payload is a no-op; with another it is refused.
  Result<std::string> key = InputKey(event, call.options, i);
  if (!key.ok()) return key.status();
  if (!key->empty()) {
    Result<std::optional<uint64_t>> recorded =
        RecordedUnder(*key, event, i, group, state.fresh_keys);
    if (!recorded.ok()) return recorded.status();
    if (recorded->has_value()) {
      outcome.sequences[i] = **recorded;
      outcome.unchanged[i] = true;
      ++state.key_duplicates;
      state.latest_duplicate = std::max(state.latest_duplicate, **recorded);
      return Status::Ok();
    }
  }
  std::unique_ptr<capnp::MallocMessageBuilder> message =
      LayOut(call.inputs[i], state.next_sequence, at, call.options, *key);
  const schema::Event::Reader root = message->getRoot<schema::Event>().asReader();
  std::string def_key;
  bool existed = false;
  if (UnchangedDefinition(root, group, staged, &existed, &def_key)) {
    outcome.unchanged[i] = true;
    return Status::Ok();
  }
  // What the decider cannot see yet: earlier inputs of this call. A workload submitted in it
  // may be finished or deleted in it; a uid or name may be submitted only once in it.
  const auto [submitted, uid] = SubmittedWorkload(root);
  if (!submitted.empty() &&
      (state.workloads.count(submitted) != 0 || (!uid.empty() && state.uids.count(uid) != 0))) {
    return Status(Code::kConflict, "input " + std::to_string(i) + ": workload " + submitted +
                                       " (uid " + uid + ") is submitted twice in one request");
  }
  // The decider's own view: a report from the wrong identity, for a stale generation or with a
  // stale token is refused; an identical repeat is a no-op that says so.
  projections::InputVerdict verdict = engine_->Validate(root);
  if (verdict.status.code() == Code::kNotFound &&
      SubmittedInCall(root, state.workloads, state.uids)) {
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
    return Status::Ok();
  }
  outcome.sequences[i] = state.next_sequence++;
  outcome.configured[i] = existed;
  if (!key->empty()) state.fresh_keys.push_back(*key);
  if (!submitted.empty()) {
    state.workloads.insert(submitted);
    if (!uid.empty()) state.uids.emplace(uid, submitted);
  }
  staged.laid_out.push_back(std::move(message));
  return Status::Ok();
}

bool Service::UnchangedDefinition(schema::Event::Reader event, const GroupState& group,
                                  Staged& staged, bool* existed, std::string* def_key) {
  *def_key = projections::DefinitionKey(event);
  if (def_key->empty()) return false;
  std::string body = projections::DefinitionBody(event);
  const std::string* current = nullptr;
  if (auto it = staged.definitions.find(*def_key); it != staged.definitions.end()) {
    current = &it->second;
  } else if (auto g = group.definitions.find(*def_key); g != group.definitions.end()) {
    current = &g->second;
  } else if (auto d = definitions_.find(*def_key); d != definitions_.end()) {
    current = &d->second;
  }
  *existed = current != nullptr;
  if (current != nullptr && *current == body) return true;
  staged.definitions[*def_key] = std::move(body);
  return false;
}

Status Service::AnswerRetry(Staged& staged, const CallState& state) {
  RecordOutcome& outcome = staged.outcome;
  outcome.retried = true;
  // An original still in this group's unwritten part has no stored decisions yet.
  if (state.latest_duplicate <= log_.GetHead().sequence) {
    auto decisions = DecisionsOfBatch(state.latest_duplicate, &outcome.first_decision_sequence);
    if (!decisions.ok()) return decisions.status();
    outcome.decisions = std::move(*decisions);
  }
  return Status::Ok();
}

Status Service::Decide(Staged& staged, GroupState& group, int64_t at, bool* engine_touched) {
  staged.laid_out.back()->getRoot<schema::Event>().setEndsBatch(true);
  *engine_touched = true;
  for (const auto& message : staged.laid_out) {
    engine_->ApplyInput(message->getRoot<schema::Event>().asReader());
  }
  const size_t inputs = staged.laid_out.size();
  const uint64_t last_input = staged.first_sequence + inputs - 1;
  std::vector<std::string> decisions = engine_->EndBatch(last_input, at);
  if (inputs + decisions.size() > options_.append_events_max) {
    // The engine has applied what the ledger will not hold: RecordGroup folds the ledger again
    // (engine_touched) before any other call is staged.
    return Status(Code::kInvalidArgument,
                  std::to_string(inputs) + " inputs caused " + std::to_string(decisions.size()) +
                      " decisions: more than one append holds (" +
                      std::to_string(options_.append_events_max) +
                      " events); submit the file in smaller parts. Nothing was written.");
  }
  // Each input encoded once; each key's sequence and bytes, for a later call of the group that
  // retries this one.
  staged.events.reserve(inputs + decisions.size());
  for (const auto& message : staged.laid_out) {
    staged.events.push_back(schema::EncodeEvent(*message));
    const schema::Event::Reader root = message->getRoot<schema::Event>().asReader();
    if (root.getIdempotencyKey().size() > 0) {
      group.keys[root.getIdempotencyKey().cStr()] = {root.getSequence(), staged.events.back()};
    }
  }
  staged.laid_out.clear();
  staged.inputs_written = inputs;
  staged.outcome.first_decision_sequence = last_input + 1;
  staged.events.insert(staged.events.end(), std::make_move_iterator(decisions.begin()),
                       std::make_move_iterator(decisions.end()));
  for (auto& [k, v] : staged.definitions) group.definitions[k] = v;
  group.next_sequence = staged.first_sequence + staged.events.size();
  group.recorded_at_ns = at;
  return Status::Ok();
}

}  // namespace admission::ops
