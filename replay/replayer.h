#pragma once
// Replay: fold the recorded inputs of a ledger through a fresh decider and compare every
// decision it makes with the recorded one, byte for byte. See docs/replay.md.
//
// A replay starts from a `ReplayStart`: a decider holding the state after some sequence, which
// must be the last event of an append (a batch boundary): the genesis (an empty decider before
// sequence 1) or a decider loaded from a snapshot (replay/snapshots.h).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ledger/event_log.h"
#include "projections/engine.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::replay {

using ledger::Sequence;

// Limits.
inline constexpr size_t kReplayReadChunk = 16384;  // events per EventLog::Read
inline constexpr size_t kChunksReadAheadMax = 2;      // chunks read before the fold needs them
inline constexpr size_t kComparisonsInFlightMax = 3;  // folded chunks awaiting comparison
inline constexpr int kHelperNice = 5;  // reading and comparing threads: nice + 5
inline constexpr uint64_t kProgressEveryEvents = 65536;

// The state a replay continues from: the decider after event `after`.
// REQUIRES: `after` is 0 or the last event of an append (see IsBatchBoundary).
struct ReplayStart {
  std::unique_ptr<projections::Engine> engine;
  Sequence after = 0;
};

// An empty decider before sequence 1.
ReplayStart Genesis();

// Whether decisions of this engine version can be reproduced by this build: the current version,
// and v4, whose decisions v5 reproduces for every ledger v4's intake could write (v5 added
// only retention; docs/semantics.md, "Engine versions and replay").
bool EngineVersionReplayable(uint32_t version);

// The first place where the ledger and the replayed decider disagree.
struct Divergence {
  Sequence sequence = 0;
  // Cap'n Proto JSON of each side (schema::EventToJson). The replayed decision is shown with the
  // recorded event's sequence and prevHash, as the ledger would have stored it. Empty when that
  // side has no event there: the decider made no further decision in the batch (replayed
  // empty), or it made one more than the ledger holds (recorded is then the next input, or
  // empty past the head).
  std::string recorded_json;
  std::string replayed_json;
  std::string recorded_type;  // body name, "" when none
  std::string replayed_type;
  // schema::FirstDifferingPayloadField of the two, when both are events; else a sentence.
  std::string first_differing_field;
};

// Called every so often with (events folded so far, events to fold).
using ReplayProgress = std::function<void(uint64_t done, uint64_t total)>;

// Called with every event folded, in order, after the decider has seen it (inputs applied; a
// batch's last input also ended the batch).
using EventObserver = std::function<void(Sequence sequence, schema::Event::Reader event)>;

// Called likewise with every event's sequence, and an input itself (nullptr for a decision,
// which changes no state). Cheaper than an EventObserver: a decision need not be decoded whole
// for it, only compared (an EventObserver makes the reading thread walk every decision).
using FoldObserver = std::function<void(Sequence sequence, const schema::Event::Reader* input)>;

// Test seam, standing in for a deliberately changed decider: given the canonical bytes of a
// decision the decider just made, returns the bytes replay compares instead. Production code
// leaves it empty.
using DecisionAlteration = std::function<std::string(const std::string& produced)>;

struct ReplayOptions {
  // Decisions with sequence in [compare_from, to] are compared and hashed; the events before
  // compare_from are folded without comparing (the state they lead to is what the compared
  // decisions were made from). 0 and 1 both mean "compare everything folded".
  Sequence compare_from = 1;
  Sequence to = 0;     // last event folded; 0: the head
  bool verify = true;  // false: fold only (state at a sequence, explain)
  ReplayProgress progress;
  EventObserver observer;
  FoldObserver fold_observer;  // called after `observer` when both are set
  DecisionAlteration alter_replayed;
  size_t read_chunk = kReplayReadChunk;  // events per read (tests use small ones)
};

struct ReplayReport {
  Sequence first = 0;   // first event folded (start.after + 1)
  Sequence last = 0;    // last event folded
  uint64_t events = 0;  // events folded: last - first + 1
  uint64_t inputs = 0;
  uint64_t decisions_compared = 0;  // recorded decisions with sequence in [compare_from, last]
  double seconds = 0;
  double events_per_second = 0;
  // CPU time of each thread's part (CLOCK_THREAD_CPUTIME_ID): the folding thread from start to
  // end, and the jobs of the reading and comparing helpers. Where the time goes, for the bench.
  double fold_cpu_seconds = 0;
  double read_cpu_seconds = 0;
  double compare_cpu_seconds = 0;
  // SHA-256 chain over the canonical bytes of every compared decision, as stored (with its
  // sequence and prevHash), in ledger order: D(0) = 32 zero bytes,
  // D(k) = SHA-256(D(k-1) || stored bytes of the k-th decision). With no divergence the replayed
  // decisions hash the same, byte for byte. Stops at the divergence when there is one.
  schema::Hash decision_stream_hash = schema::kGenesisHash;
  std::optional<Divergence> divergence;
};

// Folds a ledger from a start, comparing decisions.
// Thread safety: one thread at a time; `log` must outlive it and not change under it.
class Replayer {
 public:
  Replayer(ledger::EventLog& log, ReplayStart start);

  // Folds events (position(), options.to] and compares the recorded decisions with those the
  // decider makes. Stops at the first divergence (reported, not an error). The comparison of a
  // read chunk's decisions runs on a helper thread while the fold goes on, so after a divergence
  // engine() may have folded up to kComparisonsInFlightMax chunks past position() (the event
  // before the divergence).
  // REQUIRES: position() < options.to (or the head, when to is 0).
  // Errors: kInvalidArgument (a range outside the ledger, or a recorded decision whose engine
  // version this build cannot reproduce: the message names both versions), kCorruption (an
  // event that does not decode), kIoError.
  Result<ReplayReport> Run(const ReplayOptions& options);

  // The decider after position().
  const projections::Engine& engine() const { return *engine_; }
  std::unique_ptr<projections::Engine> TakeEngine() { return std::move(engine_); }
  // The last event folded (start.after before Run).
  Sequence position() const { return position_; }

 private:
  ledger::EventLog& log_;
  std::unique_ptr<projections::Engine> engine_;
  Sequence position_;
};

// Replays the whole ledger from the genesis, comparing every decision (`admitctl replay
// --verify`, and the demo's last step). A divergence is in the report, not an error.
Result<ReplayReport> ReplayAndVerify(ledger::EventLog& log,
                                     const ReplayProgress& progress = nullptr);

// Whether event `sequence` ends an append: the next event is an input and this one is a
// decision or the input that ended its batch (endsBatch), or this is the head. 0 is a boundary.
// Errors: kInvalidArgument (sequence beyond the head), kCorruption, kIoError.
Result<bool> IsBatchBoundary(ledger::EventLog& log, Sequence sequence);

// The last event of the append holding event `sequence` (itself when it ends an append): the
// state "after N" is the state after the append that wrote N, since the decider's admission
// cycles run once per append and its state inside one never existed on its own.
// Errors: as IsBatchBoundary.
Result<Sequence> EndOfAppend(ledger::EventLog& log, Sequence sequence);

// The decider after event `at`, rounded up to the end of its append (state_at.at says where it
// stopped). at == 0: the head. Decisions are not compared, but their engine versions are
// checked as in Replayer::Run.
struct StateAt {
  std::unique_ptr<projections::Engine> engine;
  Sequence requested = 0;
  Sequence at = 0;
};
Result<StateAt> FoldToSequence(ledger::EventLog& log, Sequence at,
                               const ReplayProgress& progress = nullptr,
                               const EventObserver& observer = nullptr);

}  // namespace admission::replay
