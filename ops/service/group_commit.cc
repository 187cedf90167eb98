// Group commit: the calls admitd gathers are staged by the intake (intake.cc) one after the
// other and written with as few appends as the batch limit allows, each append durable before
// any call is answered. One call's refusal does not affect the others.

#include <algorithm>

#include <spdlog/spdlog.h>

#include "ops/service/staging.h"

namespace admission::ops {

// The calls of a group appended together: each call's staging or refusal, the staged calls of
// the current run and their events, the sequence its first event gets, and the failure that
// stopped the group (ok: none).
struct Service::Run {
  std::vector<std::optional<Staged>> staged;
  std::vector<Status> refused;
  std::vector<size_t> calls;
  std::vector<std::string> events;
  uint64_t first = 0;
  Status failure;
};

namespace {

const char kBrokenMessage[] = "an earlier append failed; reopen the ledger to continue";

// The ledger gave the run's events the sequences the intake laid them out at.
Status CheckSequences(const ledger::AppendAck& ack, uint64_t first) {
  for (size_t j = 0; j < ack.sequences.size(); ++j) {
    if (ack.sequences[j] != first + j || ack.duplicate[j]) {
      return Status(Code::kIoError, "the ledger gave event " + std::to_string(j) +
                                        " of the batch sequence " +
                                        std::to_string(ack.sequences[j]) + ", not " +
                                        std::to_string(first + j) +
                                        " (another writer?); reopen the ledger");
    }
  }
  return Status::Ok();
}

}  // namespace

Status Service::WriteRefusal() {
  // While the ledger's disk refuses appends, refuse before the decider sees the inputs.
  if (std::optional<ledger::DiskState> disk = log_.Disk(); disk && disk->refusing) {
    log_.CountRefusedForSpace();
    return Status(Code::kNoSpace, disk->why);
  }
  if (broken_ && broken_by_no_space_) {
    spdlog::info("disk space is back: folding the ledger again after the append it refused");
    ADM_RETURN_IF_ERROR(Load(nullptr));
    broken_by_no_space_ = false;
  }
  if (broken_) return Status(Code::kIoError, kBrokenMessage);
  if (options_.write_gate) return options_.write_gate();
  return Status::Ok();
}

std::vector<Result<RecordOutcome>> Service::RecordGroup(const std::vector<RecordCall>& calls) {
  ADM_CHECK(calls.size() <= kGroupCallsMax, "%zu calls in one group", calls.size());
  std::vector<Result<RecordOutcome>> results;
  results.reserve(calls.size());
  if (Status refused = WriteRefusal(); !refused.ok()) {
    for (size_t i = 0; i < calls.size(); ++i) results.emplace_back(refused);
    return results;
  }
  const ledger::Head head = log_.GetHead();
  GroupState group;
  group.next_sequence = head.sequence + 1;
  group.recorded_at_ns = head.recorded_at_ns;
  Run run;
  run.staged.resize(calls.size());
  run.refused.resize(calls.size());
  run.first = head.sequence + 1;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (broken_ || !run.failure.ok()) {
      run.refused[i] = run.failure.ok() ? Status(Code::kIoError, kBrokenMessage) : run.failure;
      continue;
    }
    bool engine_touched = false;
    Result<Staged> s = StageCaught(calls[i], group, &engine_touched);
    if (!s.ok()) {
      run.refused[i] = s.status();
      if (engine_touched && !broken_) RecoverFromRefusedCall(run, group, s.status());
      continue;
    }
    if (run.events.size() + s->events.size() > options_.append_events_max) AppendRun(run);
    // The events move into the run; the call keeps their count, for SettleRun.
    s->event_count = s->events.size();
    run.events.insert(run.events.end(), std::make_move_iterator(s->events.begin()),
                      std::make_move_iterator(s->events.end()));
    s->events.clear();
    run.calls.push_back(i);
    run.staged[i] = std::move(*s);
  }
  AppendRun(run);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!run.refused[i].ok()) {
      results.emplace_back(run.refused[i]);
    } else {
      results.emplace_back(std::move(run.staged[i]->outcome));
    }
  }
  return results;
}

Result<Service::Staged> Service::StageCaught(const RecordCall& call, GroupState& group,
                                             bool* engine_touched) {
  // A call's inputs come from a client: reading one must not throw (DecodeEvent bounds every
  // walk of an accepted event), but if one does, only that call is refused. A throw once the
  // decider has applied inputs leaves it ahead of the ledger: the service stops writing.
  Result<Staged> s = Status(Code::kInvalidArgument, "not staged");
  kj::Maybe<kj::Exception> thrown =
      kj::runCatchingExceptions([&]() { s = Stage(call, group, engine_touched); });
  KJ_IF_MAYBE(e, thrown) {
    s = Status(*engine_touched ? Code::kIoError : Code::kInvalidArgument,
               std::string(*engine_touched ? "the decider failed on the call's inputs: "
                                           : "the call's inputs could not be read: ") +
                   e->getDescription().cStr());
  }
  return s;
}

void Service::RecoverFromRefusedCall(Run& run, GroupState& group, const Status& why) {
  // The decider applied a call the ledger will not hold: write the calls staged before it,
  // then bring a decider to the ledger again, so that neither the calls after it nor any read
  // sees a state the ledger does not have.
  AppendRun(run);
  if (!run.failure.ok()) return;
  spdlog::info("a refused call had reached the decider: folding the ledger again ({})",
               why.message());
  Status reloaded = Load(nullptr);
  if (!reloaded.ok()) {
    broken_ = true;
    run.failure = reloaded;
  }
  group.next_sequence = run.first;
}

void Service::AppendRun(Run& run) {
  if (!run.events.empty() && run.failure.ok()) {
    auto ack = log_.Append(run.events);
    run.failure = ack.ok() ? CheckSequences(*ack, run.first) : ack.status();
    if (run.failure.ok()) {
      SettleRun(run);
    } else {
      broken_ = true;
      // Nothing of a NoSpace append was written: fold the ledger again now, so that reads show
      // only what it holds; if that fails too, the next call tries again.
      if (run.failure.code() == Code::kNoSpace) broken_by_no_space_ = !Load(nullptr).ok();
    }
  }
  if (!run.events.empty() && !run.failure.ok()) {
    for (size_t index : run.calls) run.refused[index] = run.failure;
  }
  run.calls.clear();
  run.events.clear();
}

void Service::SettleRun(Run& run) {
  // The decisions as stored (sequence and prevHash filled in), read back once per run, and only
  // when the run holds any (a run of inputs that decided nothing, such as node reports, reads
  // nothing back).
  const bool decided = std::any_of(run.calls.begin(), run.calls.end(), [&](size_t index) {
    return run.staged[index]->event_count > run.staged[index]->inputs_written;
  });
  auto stored = decided ? log_.Read(run.first, run.events.size())
                        : Result<std::vector<ledger::StoredEvent>>(
                              std::vector<ledger::StoredEvent>());
  if (decided && stored.ok() && stored->size() == run.events.size()) {
    for (size_t index : run.calls) {
      Staged& s = *run.staged[index];
      if (s.event_count == 0) continue;
      s.outcome.decisions.clear();
      const size_t begin = s.first_sequence - run.first + s.inputs_written;
      const size_t end = s.first_sequence - run.first + s.event_count;
      for (size_t k = begin; k < end; ++k) {
        s.outcome.decisions.push_back(std::move((*stored)[k].bytes));
      }
    }
  }
  for (size_t index : run.calls) {
    for (auto& [k, v] : run.staged[index]->definitions) definitions_[k] = v;
  }
  const uint64_t before = run.first - 1;
  run.first += run.events.size();
  position_ = run.first - 1;
  MaybeSnapshot(before, run.first - 1);
}

Result<RecordOutcome> Service::Record(const std::vector<std::string>& inputs,
                                      const IntakeOptions& options) {
  Result<std::vector<schema::DecodedEvent>> decoded = DecodeInputs(inputs);
  if (!decoded.ok()) return decoded.status();
  std::vector<RecordCall> calls(1);
  calls[0].inputs = std::move(*decoded);
  calls[0].options = options;
  return std::move(RecordGroup(calls).front());
}

}  // namespace admission::ops
