#include "replay/replayer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <future>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "projections/engine_version.h"
#include "replay/serial_worker.h"

namespace admission::replay {

namespace {

double ThreadCpuSeconds() {
  struct timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Status CorruptAt(Sequence sequence, const Status& status) {
  return Status(Code::kCorruption,
                "event " + std::to_string(sequence) + " does not decode: " + status.message());
}

// The refusal for a decision, or a batch, of a version this build cannot decide as.
Status VersionRefusal(Sequence sequence, uint32_t recorded) {
  return Status(
      Code::kInvalidArgument,
      "the event at sequence " + std::to_string(sequence) + " was made by engine v" +
          std::to_string(recorded) + " (" + projections::EngineVersionNote(recorded) +
          "); this build runs engine v" + std::to_string(projections::kEngineVersion) + " (" +
          projections::EngineVersionNote(projections::kEngineVersion) + ") and decides as v" +
          std::to_string(projections::kEngineVersionOldestDecidable) + " to v" +
          std::to_string(projections::kEngineVersion) +
          " only, so it cannot reproduce that batch's decisions. Replay this ledger with a "
          "build of engine v" + std::to_string(recorded) +
          " (docs/semantics.md, \"Engine versions and replay\")");
}

// A chunk of the ledger, read and looked at off the folding thread. The events' bytes lie in
// one buffer (one allocation per chunk, not per event, and word-aligned, so nothing is copied
// to decode them). Inputs are decoded whole; of a decision only the envelope is read
// (schema::PeekEvent), because replay compares its stored bytes whole with the replayed one:
// any fault in them is a difference there. A decision is decoded whole only to render it.
struct FetchedEvent {
  Sequence sequence = 0;
  size_t offset = 0;  // in words, into FetchedChunk::words
  size_t bytes = 0;
  Status error;  // it does not decode
  schema::EventEnvelope envelope{};
  std::optional<schema::DecodedEvent> decoded;  // inputs (every event when asked)
};
// An allocator whose resize() leaves new words uninitialized: a chunk's buffer is grown event
// by event and each event's bytes are copied over its words at once, so zeroing them first
// would write every byte twice.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialized: no zeroing for a trivial type
  }
  // Growing moves the words it had: as bytes (capnp::word may be copied only under GCC;
  // schema/word_buffer.h).
  void construct(capnp::word* p, capnp::word&& from) noexcept {
    std::memcpy(static_cast<void*>(p), &from, sizeof(*p));
  }
  void construct(capnp::word* p, const capnp::word& from) noexcept {
    std::memcpy(static_cast<void*>(p), &from, sizeof(*p));
  }
  template <typename U, typename... Args>
    requires(!std::is_same_v<U, capnp::word> || sizeof...(Args) > 1)
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct FetchedChunk {
  Status status;
  double cpu_seconds = 0;  // the reading thread's, to fetch it
  std::vector<capnp::word, UninitializedAllocator<capnp::word>> words;
  std::vector<FetchedEvent> events;

  kj::ArrayPtr<const capnp::word> Words(size_t i) const {
    const FetchedEvent& e = events[i];
    return kj::arrayPtr(words.data() + e.offset, e.bytes / sizeof(capnp::word));
  }
  std::string_view Bytes(size_t i) const {
    return std::string_view(reinterpret_cast<const char*>(words.data() + events[i].offset),
                            events[i].bytes);
  }
  // Event i decoded whole (now, when the fetch only read its envelope).
  Result<schema::Event::Reader> Whole(size_t i) {
    FetchedEvent& e = events[i];
    if (!e.error.ok()) return e.error;
    if (!e.decoded) {
      auto decoded = schema::DecodeEventWords(Words(i));
      if (!decoded.ok()) return decoded.status();
      e.decoded = std::move(*decoded);
    }
    return e.decoded->root();
  }
};

// Spent chunks, kept for their buffers: the reader fills one again instead of growing fresh
// buffers, which the comparison thread would then free (freeing memory another thread's arena
// gave is costly in glibc's malloc). Thread-safe.
class ChunkPool {
 public:
  FetchedChunk Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.empty()) return FetchedChunk{};
    FetchedChunk chunk = std::move(spare_.back());
    spare_.pop_back();
    return chunk;
  }
  // Empties the chunk (its buffers keep their capacity) and keeps it, up to a few.
  void Give(FetchedChunk chunk) {
    chunk.status = Status::Ok();
    chunk.cpu_seconds = 0;
    chunk.events.clear();
    chunk.words.clear();
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.size() < kSpareChunksMax) spare_.push_back(std::move(chunk));
  }

 private:
  // Chunks in flight: read ahead, folding, awaiting comparison.
  static constexpr size_t kSpareChunksMax = kChunksReadAheadMax + 1 + kComparisonsInFlightMax;
  std::mutex mu_;
  std::vector<FetchedChunk> spare_;
};

FetchedChunk Fetch(ledger::EventLog& log, Sequence from, size_t count, bool decode_all,
                   ChunkPool& pool) {
  FetchedChunk chunk = pool.Take();
  chunk.events.reserve(count);
  // Each event is looked at right after its copy, while its words are in cache (a chunk is
  // megabytes: looked at after the whole scan, every event would be a miss again). A whole
  // decode views the buffer, which moves when it grows; the decodes made before the last move
  // are made again at the end (a pooled buffer rarely grows).
  const capnp::word* base = nullptr;  // the buffer's address as last seen
  size_t decoded_before_move = 0;     // events before this index may hold stale views
  auto look = [&](size_t i) {
    FetchedEvent& e = chunk.events[i];
    e.error = Status::Ok();
    e.decoded.reset();
    if (e.bytes % sizeof(capnp::word) != 0) {
      e.error = schema::DecodeEvent(chunk.Bytes(i)).status();  // names the size
      return;
    }
    auto envelope = schema::PeekEvent(chunk.Words(i));
    if (!envelope.ok()) {
      e.error = envelope.status();
      return;
    }
    e.envelope = *envelope;
    if (decode_all || !schema::IsDecision(e.envelope.body)) {
      auto decoded = schema::DecodeEventWords(chunk.Words(i));
      if (decoded.ok()) {
        e.decoded = std::move(*decoded);
      } else {
        e.error = decoded.status();
      }
    }
  };
  auto shown = log.Scan(from, count, [&](Sequence sequence, std::string_view bytes) {
    FetchedEvent e;
    e.sequence = sequence;
    e.offset = chunk.words.size();
    e.bytes = bytes.size();
    const size_t word_count = (bytes.size() + sizeof(capnp::word) - 1) / sizeof(capnp::word);
    chunk.words.resize(e.offset + word_count);
    if (word_count > 0) {
      // A partial last word (the event is malformed) is zero past its bytes.
      std::memset(static_cast<void*>(&chunk.words[e.offset + word_count - 1]), 0,
                  sizeof(capnp::word));
      std::memcpy(chunk.words.data() + e.offset, bytes.data(), bytes.size());
    }
    if (chunk.words.data() != base) {
      base = chunk.words.data();
      decoded_before_move = chunk.events.size();
    }
    chunk.events.push_back(std::move(e));
    look(chunk.events.size() - 1);
    return true;
  });
  if (!shown.ok()) {
    chunk.status = shown.status();
    return chunk;
  }
  // The buffer no longer moves: decoded events may view it.
  for (size_t i = 0; i < decoded_before_move; ++i) {
    if (chunk.events[i].decoded) look(i);
  }
  return chunk;
}

// The bytes the ledger would have stored for a decision the decider made, had it been appended
// at the recorded position: the ledger's own layout step (schema::MakeStoredEventTemplate, what
// the Sequencer runs on every append) with the recorded event's sequence and prevHash filled in.
// Every other field is the decider's. So "equal to the stored bytes" means: the same canonical
// Event in every field, the two that the ledger assigns taken from the record.
Result<std::string> AsStored(const std::string& produced, Sequence sequence,
                             const schema::Hash& prev_hash) {
  auto decoded = schema::DecodeEvent(produced);
  if (!decoded.ok()) {
    return Status(Code::kCorruption,
                  "the replayed decision does not decode: " + decoded.status().message());
  }
  auto stored = schema::MakeStoredEventTemplate(produced, *decoded);
  if (!stored.ok()) return stored.status();
  schema::FillStoredEvent(sequence, prev_hash, &*stored);
  return std::move(stored->bytes);
}

// The decisions of one batch as the decider built them, encoded (and, in tests, altered) on
// demand: replay lays them out on its comparison thread, not on the folding one.
struct Produced {
  projections::Engine::BatchDecisions batch;
  const DecisionAlteration* alter = nullptr;  // options.alter_replayed, or null
  std::string Bytes(size_t i) const {
    std::string bytes = batch.Encode(i);
    return alter != nullptr && *alter ? (*alter)(bytes) : bytes;
  }
  // Decision i as the ledger would have stored it at `sequence` after `prev_hash`, viewed in
  // `layout` (or, altered in tests, in `altered`). The two fields the ledger assigns are set on
  // the built event and the whole is laid out canonically: the ledger's layout is exactly that
  // (schema::StoredEventTemplate), so no decode and re-layout is needed. Writes into the
  // batch's arena: one thread at a time.
  Result<std::string_view> Stored(size_t i, Sequence sequence, const schema::Hash& prev_hash,
                                  size_t stored_bytes, schema::WordBuffer* layout,
                                  std::string* altered) {
    if (alter != nullptr && *alter) {
      auto bytes = AsStored(Bytes(i), sequence, prev_hash);
      if (!bytes.ok()) return bytes.status();
      *altered = std::move(*bytes);
      return std::string_view(*altered);
    }
    schema::Event::Builder e = batch.events[i].get();
    e.setSequence(sequence);
    e.setPrevHash(capnp::Data::Reader(prev_hash.data(), prev_hash.size()));
    return schema::CanonicalBytesInto(e.asReader(), layout, stored_bytes);
  }
};

// One chunk's recorded decisions and the replayed ones to compare them with.
struct Comparison {
  size_t index;                        // in the chunk
  std::shared_ptr<Produced> produced;  // the batch holding the replayed decision
  size_t decision;                     // its place in the batch
};
struct VerifyJob {
  FetchedChunk chunk;
  std::vector<Comparison> items;
};
struct Verified {
  Status status;
  std::optional<size_t> diverged;  // chunk index of the first mismatch
  std::string diverged_bytes;      // that replayed decision as the ledger would store it
  schema::Hash hash;               // the decision-stream hash after the matching items
  uint64_t compared = 0;
};

// Lays each replayed decision out as the ledger would have stored it, compares it with the
// stored bytes and extends the decision-stream hash, in order, up to the first mismatch.
Verified VerifyItems(FetchedChunk& chunk, const std::vector<Comparison>& items,
                     schema::Hash hash) {
  thread_local schema::WordBuffer layout;  // reused by every comparison on this thread
  std::string altered;
  Verified v;
  for (const Comparison& item : items) {
    const FetchedEvent& recorded = chunk.events[item.index];
    auto as_stored = item.produced->Stored(item.decision, recorded.sequence,
                                           recorded.envelope.prev_hash, recorded.bytes, &layout,
                                           &altered);
    if (!as_stored.ok()) {
      v.status = as_stored.status();
      break;
    }
    const std::string_view stored = chunk.Bytes(item.index);
    if (*as_stored != stored) {
      v.diverged = item.index;
      v.diverged_bytes = std::string(*as_stored);
      break;
    }
    hash = schema::ChainHash(hash, stored);
    ++v.compared;
  }
  v.hash = hash;
  return v;
}

std::string JsonOf(const std::string& bytes) {
  auto decoded = schema::DecodeEvent(bytes);
  if (!decoded.ok()) return "\"(does not decode: " + decoded.status().message() + ")\"";
  return schema::EventToJson(decoded->root());
}

// The comparison thread's own: the decision-stream hash after the decisions it compared, and
// whether it stopped (at a mismatch or an error; later chunks are then not compared).
struct ComparerState {
  schema::Hash hash;
  bool stopped = false;
};

// A folded chunk's comparison, done or in flight.
struct InFlight {
  VerifyJob job;  // kept for rendering a mismatch from its recorded event
  Verified result;
  double cpu_seconds = 0;  // the comparing thread's, for this job
};

// What a step of the fold returns: nothing to go on, or the replay's result (its report, or the
// error that ended it).
using Stop = std::optional<Result<ReplayReport>>;

// One Replayer::Run: the fold on this thread; reading and decoding the next chunks on one
// helper thread, comparing folded chunks' decisions on another. The next chunk is read while
// this one is folded: reading and decoding do not depend on the decider, and the fold is the
// longer of the two.
class ReplayRun {
 public:
  // REQUIRES: position < to <= head.sequence; the replayer outlives this run.
  ReplayRun(ledger::EventLog& log, projections::Engine& engine, Sequence& position,
            const ReplayOptions& options, const ledger::Head& head, Sequence to,
            Sequence compare_from)
      : log_(log),
        engine_(engine),
        position_(position),
        options_(options),
        head_(head),
        to_(to),
        compare_from_(compare_from),
        total_(to - position),
        read_chunk_(std::max<size_t>(options.read_chunk, 1)),
        decode_all_(static_cast<bool>(options.observer)),
        reader_(kHelperNice, "replay-read"),
        comparer_(kHelperNice, "replay-compare"),
        fetched_to_(position) {
    report_.first = position + 1;
  }

  Result<ReplayReport> Run();

 private:
  bool ProducedLeft() const { return produced_ != nullptr && produced_next_ < produced_->batch.size(); }
  ReplayReport Finish();
  // Records the first divergence: at `sequence`, the recorded event (null past the head) and
  // the decision the replayed decider made there (null when it made none).
  void Diverge(Sequence sequence, schema::Event::Reader* recorded,
               const std::string* replayed_bytes);
  std::future<FetchedChunk> StartFetch();
  // Reads ahead by kChunksReadAheadMax chunks.
  void ReadAhead();
  // Applies a comparison's result; true when it ended the replay (a mismatch or an error, in
  // `ended_`).
  bool Apply(FetchedChunk& chunk, Verified& v);
  // Applies the oldest comparison in flight, waiting for it; true when it ended the replay.
  bool SettleOne();
  // Applies every comparison in flight, in order; true when one ended the replay. Afterwards
  // the comparison thread is idle, so compared_so_far_ may be read and written here.
  bool Settle();
  // Findings of the comparisons done so far, without waiting; then room for one more.
  Stop SettleReady();
  // The replay ended by a comparison (`ended_`): its error, or the report.
  Result<ReplayReport> Ended();
  // A finding of the fold: the comparisons before it (earlier chunks', then this chunk's so
  // far) come first.
  Result<ReplayReport> FoldFound(VerifyJob& job, Sequence sequence,
                                 schema::Event::Reader* recorded, const std::string* replayed);
  // Folds every event of the chunk, advancing `*next` and position_.
  Stop FoldChunk(VerifyJob& job, Sequence* next);
  Stop FoldDecision(VerifyJob& job, size_t i, bool compared);
  Stop FoldInput(VerifyJob& job, size_t i, bool compared);
  // Hands the chunk's comparisons to the comparison thread.
  void SubmitComparison(VerifyJob job);
  // Decisions the decider made that the ledger does not hold: they would have been recorded
  // right after `to`, before the next input (or past the head).
  Result<ReplayReport> CheckDecisionsAfterTo();

  ledger::EventLog& log_;
  projections::Engine& engine_;
  Sequence& position_;  // the replayer's
  const ReplayOptions& options_;
  const ledger::Head head_;
  const Sequence to_;
  const Sequence compare_from_;
  ReplayReport report_;
  const uint64_t total_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const double fold_cpu_start_ = ThreadCpuSeconds();
  // The decisions the decider made at the end of the last batch, not yet matched with the
  // recorded ones that follow that batch's last input.
  std::shared_ptr<Produced> produced_;  // null before the first batch ends
  size_t produced_next_ = 0;
  const size_t read_chunk_;
  // An observer sees every event whole; otherwise a decision's envelope is enough until it is
  // rendered (FetchedChunk).
  const bool decode_all_;
  // Declared before the futures they fill, so they are joined after those are settled or
  // abandoned: a worker's destructor runs the jobs still queued.
  ChunkPool pool_;  // outlives the workers that use it
  ComparerState compared_so_far_{report_.decision_stream_hash};
  // Both below the folding thread's priority: the fold is the critical path, and the two
  // helpers together need less than it, so they share what the fold leaves.
  SerialWorker reader_;
  SerialWorker comparer_;
  Sequence fetched_to_;  // last sequence asked for
  // A folded chunk's decisions are compared on the comparison thread while the fold goes on
  // (one comparison at a time, in order, so the hash chains in ledger order; the chain value
  // lives with that thread). Up to kComparisonsInFlightMax chunks may wait for it, so neither
  // side waits for the other at every chunk. A mismatch it finds lies before anything the fold
  // finds later, so every finding of the fold first waits for the comparisons before it.
  std::deque<std::future<InFlight>> verifying_;  // oldest first
  std::optional<Status> ended_;
  std::deque<std::future<FetchedChunk>> reading_;
};

ReplayReport ReplayRun::Finish() {
  report_.last = position_;
  report_.events = position_ + 1 - report_.first;
  report_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  report_.events_per_second =
      report_.seconds > 0 ? static_cast<double>(report_.events) / report_.seconds : 0;
  report_.fold_cpu_seconds = ThreadCpuSeconds() - fold_cpu_start_;
  return report_;
}

void ReplayRun::Diverge(Sequence sequence, schema::Event::Reader* recorded,
                        const std::string* replayed_bytes) {
  Divergence d;
  d.sequence = sequence;
  std::optional<schema::DecodedEvent> replayed;
  if (replayed_bytes != nullptr) {
    d.replayed_json = JsonOf(*replayed_bytes);
    auto decoded = schema::DecodeEvent(*replayed_bytes);
    if (decoded.ok()) {
      d.replayed_type = schema::BodyName(decoded->root());
      replayed = std::move(*decoded);
    }
  }
  if (recorded != nullptr) {
    d.recorded_json = schema::EventToJson(*recorded);
    d.recorded_type = schema::BodyName(*recorded);
  }
  const bool recorded_decision =
      recorded != nullptr && schema::IsDecision(recorded->getBody().which());
  if (recorded == nullptr) {
    d.first_differing_field =
        "the ledger ends here; the replayed decider made one more decision (" +
        d.replayed_type + ")";
  } else if (replayed_bytes == nullptr) {
    d.first_differing_field = "the replayed decider made no decision here";
  } else if (!recorded_decision) {
    d.first_differing_field = "the replayed decider made one more decision (" +
                              d.replayed_type + ") where the ledger has the next input";
  } else if (!replayed) {
    d.first_differing_field = "the replayed decision does not decode";
  } else {
    d.first_differing_field = schema::FirstDifferingPayloadField(*recorded, replayed->root());
    if (d.first_differing_field.empty()) {
      d.first_differing_field = recorded->getRecordedAtNs() != replayed->root().getRecordedAtNs()
                                    ? "recordedAtNs"
                                    : "(no field differs, but the canonical bytes do)";
    }
  }
  report_.divergence = std::move(d);
}

std::future<FetchedChunk> ReplayRun::StartFetch() {
  const Sequence from = fetched_to_ + 1;
  const size_t want = static_cast<size_t>(std::min<Sequence>(read_chunk_, to_ - from + 1));
  fetched_to_ = from + want - 1;
  return reader_.Submit([&log = log_, from, want, decode_all = decode_all_, &pool = pool_]() {
    const double cpu_start = ThreadCpuSeconds();
    FetchedChunk chunk = Fetch(log, from, want, decode_all, pool);
    chunk.cpu_seconds = ThreadCpuSeconds() - cpu_start;
    return chunk;
  });
}

void ReplayRun::ReadAhead() {
  while (reading_.size() < kChunksReadAheadMax && fetched_to_ < to_) reading_.push_back(StartFetch());
}

bool ReplayRun::Apply(FetchedChunk& chunk, Verified& v) {
  report_.decision_stream_hash = v.hash;
  report_.decisions_compared += v.compared;
  if (!v.status.ok()) {
    ended_ = v.status;
    return true;
  }
  if (!v.diverged) return false;
  const Sequence at = chunk.events[*v.diverged].sequence;
  auto recorded = chunk.Whole(*v.diverged);
  if (!recorded.ok()) {
    ended_ = CorruptAt(at, recorded.status());
    return true;
  }
  Diverge(at, &*recorded, &v.diverged_bytes);
  position_ = at - 1;
  ended_ = Status::Ok();
  return true;
}

bool ReplayRun::SettleOne() {
  InFlight done = verifying_.front().get();
  verifying_.pop_front();
  report_.compare_cpu_seconds += done.cpu_seconds;
  return Apply(done.job.chunk, done.result);
}

bool ReplayRun::Settle() {
  while (!verifying_.empty()) {
    if (SettleOne()) return true;
  }
  return false;
}

Stop ReplayRun::SettleReady() {
  while (!verifying_.empty() &&
         (verifying_.size() >= kComparisonsInFlightMax ||
          verifying_.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
    if (SettleOne()) return Ended();
  }
  return std::nullopt;
}

Result<ReplayReport> ReplayRun::Ended() {
  if (!ended_->ok()) return *ended_;
  return Finish();
}

Result<ReplayReport> ReplayRun::FoldFound(VerifyJob& job, Sequence sequence,
                                          schema::Event::Reader* recorded,
                                          const std::string* replayed) {
  if (!Settle()) {
    Verified now = VerifyItems(job.chunk, job.items, compared_so_far_.hash);
    if (!Apply(job.chunk, now)) {
      Diverge(sequence, recorded, replayed);
      return Finish();
    }
  }
  return Ended();
}

Result<ReplayReport> ReplayRun::Run() {
  ReadAhead();
  Sequence next = position_ + 1;
  uint64_t since_progress = 0;
  while (next <= to_) {
    if (reading_.empty()) {
      return Status(Code::kCorruption,
                    "the ledger returned fewer events than asked below " + std::to_string(to_));
    }
    VerifyJob job;
    job.chunk = reading_.front().get();
    reading_.pop_front();
    report_.read_cpu_seconds += job.chunk.cpu_seconds;
    if (!job.chunk.status.ok()) return job.chunk.status;
    if (job.chunk.events.empty()) {
      return Status(Code::kCorruption, "the ledger has no event " + std::to_string(next) +
                                           " below its head " + std::to_string(head_.sequence));
    }
    ReadAhead();
    if (Stop stop = FoldChunk(job, &next)) return std::move(*stop);
    since_progress += job.chunk.events.size();
    if (Stop stop = SettleReady()) return std::move(*stop);
    if (!job.items.empty()) SubmitComparison(std::move(job));
    if (options_.progress && (since_progress >= kProgressEveryEvents || next > to_)) {
      options_.progress(position_ - report_.first + 1, total_);
      since_progress = 0;
    }
  }
  if (Settle()) return Ended();
  return CheckDecisionsAfterTo();
}

Stop ReplayRun::FoldChunk(VerifyJob& job, Sequence* next) {
  const FetchedChunk& chunk = job.chunk;
  for (size_t i = 0; i < chunk.events.size(); ++i) {
    const FetchedEvent& stored = chunk.events[i];
    if (stored.sequence != *next) {
      return Status(Code::kCorruption, "expected event " + std::to_string(*next) +
                                           ", the ledger gave " +
                                           std::to_string(stored.sequence));
    }
    if (!stored.error.ok()) return CorruptAt(stored.sequence, stored.error);
    const bool compared = options_.verify && stored.sequence >= compare_from_;
    Stop stop = schema::IsDecision(stored.envelope.body) ? FoldDecision(job, i, compared)
                                                         : FoldInput(job, i, compared);
    if (stop) return stop;
    position_ = stored.sequence;
    ++*next;
  }
  return std::nullopt;
}

Stop ReplayRun::FoldDecision(VerifyJob& job, size_t i, bool compared) {
  FetchedChunk& chunk = job.chunk;
  const FetchedEvent& stored = chunk.events[i];
  if (!EngineVersionReplayable(stored.envelope.engine_version)) {
    return VersionRefusal(stored.sequence, stored.envelope.engine_version);
  }
  const bool have = ProducedLeft();
  if (compared) {
    if (!have) {
      auto recorded = chunk.Whole(i);
      if (!recorded.ok()) return CorruptAt(stored.sequence, recorded.status());
      return FoldFound(job, stored.sequence, &*recorded, nullptr);
    }
    // A v4 decision is compared as recorded: its batch is decided as v5 (the same
    // decisions), and only the version it records differs.
    if (stored.envelope.engine_version == 4) {
      schema::Event::Builder made = produced_->batch.events[produced_next_].get();
      if (made.getEngineVersion() == 5) made.setEngineVersion(4);
    }
    job.items.push_back(Comparison{i, produced_, produced_next_});
  }
  if (have) ++produced_next_;
  if (options_.observer) options_.observer(stored.sequence, *chunk.Whole(i));
  if (options_.fold_observer) options_.fold_observer(stored.sequence, nullptr);
  return std::nullopt;
}

Stop ReplayRun::FoldInput(VerifyJob& job, size_t i, bool compared) {
  const FetchedEvent& stored = job.chunk.events[i];
  schema::Event::Reader event = stored.decoded->root();
  if (compared && ProducedLeft()) {
    // The decider made more decisions than the ledger recorded after the last batch.
    // The comparisons in flight write into the batch's arena: let them end first.
    if (Settle()) return Ended();
    const std::string extra = produced_->Bytes(produced_next_);
    return FoldFound(job, stored.sequence, &event, &extra);
  }
  produced_.reset();
  produced_next_ = 0;
  engine_.ApplyInput(event);
  ++report_.inputs;
  if (event.getEndsBatch()) {
    auto batch = std::make_shared<Produced>();
    const uint32_t version = projections::DecidingVersion(event.getEngineVersion());
    if (!projections::EngineVersionDecidable(version)) {
      return VersionRefusal(stored.sequence, version);
    }
    batch->batch = engine_.EndBatchDecisions(stored.sequence, event.getRecordedAtNs(), version);
    batch->alter = &options_.alter_replayed;
    produced_ = std::move(batch);
  }
  if (options_.observer) options_.observer(stored.sequence, event);
  if (options_.fold_observer) options_.fold_observer(stored.sequence, &event);
  return std::nullopt;
}

void ReplayRun::SubmitComparison(VerifyJob job) {
  verifying_.push_back(comparer_.Submit(
      [job = std::move(job), &compared_so_far = compared_so_far_, &pool = pool_]() mutable {
        const double cpu_start = ThreadCpuSeconds();
        InFlight done;
        if (compared_so_far.stopped) {
          done.result.hash = compared_so_far.hash;
        } else {
          done.result = VerifyItems(job.chunk, job.items, compared_so_far.hash);
          compared_so_far.hash = done.result.hash;
          compared_so_far.stopped = done.result.diverged || !done.result.status.ok();
        }
        // The chunk goes back to the reader from here, off the folding thread, unless a
        // mismatch is to be shown from it. (Left in the lambda, it would be freed with the
        // future's shared state, by the folding thread.)
        VerifyJob spent = std::move(job);
        if (done.result.diverged) {
          done.job = std::move(spent);
        } else {
          spent.items.clear();  // the batches' arenas, freed here too
          pool.Give(std::move(spent.chunk));
        }
        done.cpu_seconds = ThreadCpuSeconds() - cpu_start;
        return done;
      }));
}

Result<ReplayReport> ReplayRun::CheckDecisionsAfterTo() {
  if (!options_.verify || !ProducedLeft()) return Finish();
  const std::string extra = produced_->Bytes(produced_next_);
  if (to_ == head_.sequence) {
    Diverge(to_ + 1, nullptr, &extra);
    return Finish();
  }
  auto after = log_.Read(to_ + 1, 1);
  if (!after.ok()) return after.status();
  if (!after->empty()) {
    auto decoded = schema::DecodeEvent(after->front().bytes);
    if (!decoded.ok()) return CorruptAt(to_ + 1, decoded.status());
    schema::Event::Reader event = decoded->root();
    if (!schema::IsDecision(event.getBody().which())) {
      Diverge(to_ + 1, &event, &extra);
      return Finish();
    }
  }
  return Finish();
}

}  // namespace

ReplayStart Genesis() {
  ReplayStart start;
  start.engine = std::make_unique<projections::Engine>();
  start.after = 0;
  return start;
}

bool EngineVersionReplayable(uint32_t version) {
  // v5 added retention only (docs/semantics.md, "Engine versions and replay"): for every ledger
  // v4's intake could write, v5 makes the same decisions, so a v4 ledger replays under v5 rules.
  // v6 changed decisions, and older batches are decided as v5 decided them (DecidingVersion).
  return version == 4 || projections::EngineVersionDecidable(version);
}

Replayer::Replayer(ledger::EventLog& log, ReplayStart start)
    : log_(log), engine_(std::move(start.engine)), position_(start.after) {
  ADM_CHECK(engine_ != nullptr, "a replay needs a decider to start from (after %llu)",
            static_cast<unsigned long long>(position_));
}

Result<ReplayReport> Replayer::Run(const ReplayOptions& options) {
  ADM_CHECK(engine_ != nullptr, "Run after TakeEngine");
  const ledger::Head head = log_.GetHead();
  const Sequence to = options.to == 0 ? head.sequence : options.to;
  if (to > head.sequence) {
    return Status(Code::kInvalidArgument, "sequence " + std::to_string(to) +
                                              " is beyond the ledger's head " +
                                              std::to_string(head.sequence));
  }
  if (to <= position_) {
    return Status(Code::kInvalidArgument, "nothing to replay: the replay stands after sequence " +
                                              std::to_string(position_) +
                                              " and was asked to stop at " + std::to_string(to));
  }
  const Sequence compare_from = std::max<Sequence>(options.compare_from, 1);
  if (options.verify && compare_from > to) {
    return Status(Code::kInvalidArgument, "--from " + std::to_string(compare_from) +
                                              " is after --to " + std::to_string(to));
  }

  ReplayRun run(log_, *engine_, position_, options, head, to, compare_from);
  return run.Run();
}

Result<ReplayReport> ReplayAndVerify(ledger::EventLog& log, const ReplayProgress& progress) {
  if (log.GetHead().sequence == 0) {
    ReplayReport empty;
    empty.first = 1;
    return empty;
  }
  Replayer replayer(log, Genesis());
  ReplayOptions options;
  options.progress = progress;
  return replayer.Run(options);
}

Result<bool> IsBatchBoundary(ledger::EventLog& log, Sequence sequence) {
  if (sequence == 0) return true;
  const ledger::Head head = log.GetHead();
  if (sequence > head.sequence) {
    return Status(Code::kInvalidArgument, "sequence " + std::to_string(sequence) +
                                              " is beyond the ledger's head " +
                                              std::to_string(head.sequence));
  }
  if (sequence == head.sequence) return true;
  auto pair = log.Read(sequence, 2);
  if (!pair.ok()) return pair.status();
  if (pair->size() != 2) {
    return Status(Code::kCorruption,
                  "the ledger has no event " + std::to_string(sequence + 1) + " below its head");
  }
  auto here = schema::DecodeEvent((*pair)[0].bytes);
  if (!here.ok()) return CorruptAt(sequence, here.status());
  auto after = schema::DecodeEvent((*pair)[1].bytes);
  if (!after.ok()) return CorruptAt(sequence + 1, after.status());
  if (schema::IsDecision(after->root().getBody().which())) return false;
  return schema::IsDecision(here->root().getBody().which()) || here->root().getEndsBatch();
}

Result<Sequence> EndOfAppend(ledger::EventLog& log, Sequence sequence) {
  if (sequence == 0) return Sequence{0};
  const ledger::Head head = log.GetHead();
  if (sequence > head.sequence) {
    return Status(Code::kInvalidArgument, "sequence " + std::to_string(sequence) +
                                              " is beyond the ledger's head " +
                                              std::to_string(head.sequence));
  }
  // Walk forward until an input follows a decision or a batch's last input.
  bool closes = false;  // the previous event was a decision or a batch's last input
  Sequence previous = 0;
  Sequence next = sequence;
  while (next <= head.sequence) {
    auto chunk = log.Read(next, kReplayReadChunk);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) break;
    for (const ledger::StoredEvent& stored : *chunk) {
      auto decoded = schema::DecodeEvent(stored.bytes);
      if (!decoded.ok()) return CorruptAt(stored.sequence, decoded.status());
      schema::Event::Reader event = decoded->root();
      const bool decision = schema::IsDecision(event.getBody().which());
      if (previous != 0 && !decision && closes) return previous;
      closes = decision || event.getEndsBatch();
      previous = stored.sequence;
      next = stored.sequence + 1;
    }
  }
  return head.sequence;
}

Result<StateAt> FoldToSequence(ledger::EventLog& log, Sequence at, const ReplayProgress& progress,
                               const EventObserver& observer) {
  StateAt state;
  const ledger::Head head = log.GetHead();
  state.requested = at == 0 ? head.sequence : at;
  auto end = EndOfAppend(log, state.requested);
  if (!end.ok()) return end.status();
  state.at = *end;
  Replayer replayer(log, Genesis());
  if (state.at > 0) {
    ReplayOptions options;
    options.verify = false;
    options.to = state.at;
    options.progress = progress;
    options.observer = observer;
    auto report = replayer.Run(options);
    if (!report.ok()) return report.status();
  }
  state.engine = replayer.TakeEngine();
  return state;
}

}  // namespace admission::replay
