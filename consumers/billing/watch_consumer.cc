#include "consumers/billing/watch_consumer.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "consumers/billing/relay.h"
#include "consumers/billing/store.h"
#include "consumers/billing/usage.h"
#include "schema/event_codec.h"

namespace admission::consumers::billing {

namespace {

constexpr int kRewatchMs = 500;  // after a stream that ended or a daemon out of reach
// admitd pushes up to this many events at a time while a watcher catches up
// (ops/rpc/transport.h kWatchPushEventsMax); a shorter push means the watcher is live.
constexpr size_t kCatchUpPushEvents = 512;

}  // namespace

struct BillingIngest::Pending {
  Cursor cursor;  // after the events folded
  std::vector<std::pair<OutboxPosition, UsageRecord>> records;
  size_t events = 0;
  std::optional<OutboxPosition> published;
};

BillingIngest::BillingIngest(BillingStore& store, UsageFold& fold, int64_t bucket_ms,
                             std::optional<OutboxPosition> published, std::string state_dir)
    : store_(store),
      fold_(fold),
      bucket_ms_(bucket_ms),
      state_dir_(std::move(state_dir)),
      pending_(std::make_unique<Pending>()) {
  pending_->cursor = store.cursor();
  pending_->published = published;
}

BillingIngest::~BillingIngest() = default;

uint64_t BillingIngest::cursor() const { return pending_->cursor.sequence; }

Status BillingIngest::Add(const std::vector<ledger::StoredEvent>& events) {
  Cursor& cursor = pending_->cursor;
  for (const ledger::StoredEvent& e : events) {
    if (e.sequence <= cursor.sequence) continue;  // sent again after a re-watch
    if (e.sequence != cursor.sequence + 1) {
      return Status(Code::kCorruption, "the watch skipped from sequence " +
                                           std::to_string(cursor.sequence) + " to " +
                                           std::to_string(e.sequence));
    }
    auto decoded = schema::DecodeEvent(e.bytes);
    if (!decoded.ok()) {
      return Status(Code::kCorruption,
                    "event " + std::to_string(e.sequence) + ": " + decoded.status().message());
    }
    if (schema::HashFromData(decoded->root().getPrevHash()) != cursor.hash) {
      return Status(Code::kCorruption,
                    "event " + std::to_string(e.sequence) +
                        " does not follow the chain this consumer folded (its prevHash is not "
                        "the chain value after " + std::to_string(cursor.sequence) +
                        "): a different or edited ledger; delete " + state_dir_ +
                        " to bill this one from its start");
    }
    fold_.Apply(e.sequence, decoded->root());
    uint32_t index = 0;
    for (const Interval& interval : fold_.closed()) {
      for (UsageRecord& r : RecordsOf(interval, bucket_ms_, e.sequence)) {
        pending_->records.emplace_back(OutboxPosition{e.sequence, index++}, std::move(r));
      }
    }
    fold_.DropClosed();
    cursor.sequence = e.sequence;
    cursor.hash = schema::ChainHash(cursor.hash, e.bytes);
    ++pending_->events;
    ++events_folded_;
    if (pending_->events >= kIngestEventsPerBatch) ADM_RETURN_IF_ERROR(Flush());
  }
  return Status::Ok();
}

Status BillingIngest::Flush(bool* wrote) {
  if (wrote != nullptr) *wrote = false;
  if (pending_->events == 0) return Status::Ok();
  ADM_RETURN_IF_ERROR(
      store_.Commit(pending_->cursor, fold_.TakeChanges(), pending_->records, pending_->published));
  pending_->records.clear();
  pending_->events = 0;
  ++batches_;
  if (wrote != nullptr) *wrote = true;
  return Status::Ok();
}

namespace {

// What the ingest thread and the relay (the calling thread) tell each other.
struct Handoff {
  std::mutex mu;
  std::condition_variable changed;  // an ingest batch was written, or the ingest ended
  bool ingest_done = false;         // guarded by mu
  bool relay_failed = false;        // guarded by mu
  Status ingest_status;             // guarded by mu; set once ingest_done
};

// Drops the outbox records that an earlier run published (the relay's transactional id knows
// how far it got), and loads the fold the store holds.
Status Resume(BillingStore& store, OutboxRelay& relay, UsageFold* fold,
              std::optional<OutboxPosition>* published, WatchConsumerStats* stats) {
  auto position = relay.PublishedPosition();
  if (!position.ok()) return position.status();
  *published = *position;
  stats->resumed_after = store.cursor().sequence;
  if (*published) {
    auto before = store.OutboxSize();
    if (!before.ok()) return before.status();
    ADM_RETURN_IF_ERROR(store.RemoveOutboxThrough(**published));
    auto after = store.OutboxSize();
    if (!after.ok()) return after.status();
    stats->outbox_published_before = *before - *after;
  }
  ADM_RETURN_IF_ERROR(store.LoadFold(fold));
  fold->TrackChanges(true);
  return Status::Ok();
}

// The ingest: runs on its own thread and on the source's (on_events and idle run where the
// source calls them), watching again after a stream that ended, until `options.until`, a
// failure, or `cancelled`.
void Ingest(const WatchConsumerOptions& options, const EventSource& source, BillingStore& state,
            UsageFold& fold, std::optional<OutboxPosition> publish_after,
            const std::function<bool()>& cancelled, Handoff& handoff, WatchConsumerStats& stats) {
  BillingIngest in(state, fold, options.bucket_ms, publish_after, options.state_dir);
  Status failure;
  auto reached = [&] { return options.until && in.cursor() >= *options.until; };
  auto flush = [&] {
    bool wrote = false;
    if (failure.ok()) failure = in.Flush(&wrote);
    if (!failure.ok()) return false;
    if (wrote) {
      handoff.changed.notify_all();
      if (options.drill) options.drill("ingested", in.batches());
    }
    return true;
  };
  auto on_events = [&](const std::vector<ledger::StoredEvent>& events) -> bool {
    const uint64_t batches = in.batches();
    failure = in.Add(events);
    if (!failure.ok()) return false;
    if (in.batches() != batches) {
      handoff.changed.notify_all();
      if (options.drill) options.drill("ingested", in.batches());
    }
    // A push shorter than a catch-up push: the stream is live; write what it brought.
    if ((events.size() < kCatchUpPushEvents || reached()) && !flush()) return false;
    return !reached() && !cancelled();
  };
  auto idle = [&]() -> bool { return !flush() || cancelled(); };
  while (failure.ok() && !reached() && !cancelled()) {
    Status s = source(in.cursor() + 1, on_events, idle);
    if (!flush() || reached() || cancelled()) break;
    if (!s.ok() && s.code() != Code::kUnavailable) {
      failure = s;
      break;
    }
    if (options.log) {
      options.log(s.ok() ? "the watch ended; watching again after sequence " +
                               std::to_string(in.cursor())
                         : s.message() + "; watching again in " +
                               std::to_string(kRewatchMs) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kRewatchMs));
  }
  flush();
  std::lock_guard lock(handoff.mu);
  stats.events_folded = in.events_folded();
  handoff.ingest_status = failure;
  handoff.ingest_done = true;
  handoff.changed.notify_all();
}

// The relay: publishes the outbox in transactions and removes what was published, until the
// ingest is done and the outbox empty, or a failure.
Status Relay(const WatchConsumerOptions& options, BillingStore& state, OutboxRelay& relay,
             Handoff& handoff, WatchConsumerStats& stats) {
  for (;;) {
    auto entries = state.ReadOutbox(options.records_per_transaction);
    if (!entries.ok()) return entries.status();
    if (entries->empty()) {
      std::unique_lock lock(handoff.mu);
      if (handoff.ingest_done) {
        // The ingest's last batch may have landed after the read above.
        lock.unlock();
        auto last = state.ReadOutbox(1);
        if (last.ok() && last->empty()) return Status::Ok();
        continue;
      }
      handoff.changed.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    const uint64_t n = stats.transactions + 1;
    ADM_RETURN_IF_ERROR(relay.Publish(*entries, [&] {
      if (options.drill) options.drill("produced", n);
    }));
    stats.transactions = n;
    stats.records_published += entries->size();
    if (options.drill) options.drill("committed", n);
    ADM_RETURN_IF_ERROR(state.RemoveOutboxThrough(entries->back().position));
  }
}

}  // namespace

Result<WatchConsumerStats> RunWatchConsumer(const WatchConsumerOptions& options,
                                            const EventSource& source) {
  auto store = BillingStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  auto relay = OutboxRelay::Open(options.output, options.transactional_id,
                                 options.operation_timeout_ms);
  if (!relay.ok()) return relay.status();
  WatchConsumerStats stats;
  UsageFold fold;
  std::optional<OutboxPosition> publish_after;
  ADM_RETURN_IF_ERROR(Resume(**store, **relay, &fold, &publish_after, &stats));

  Handoff handoff;
  BillingStore& state = **store;
  auto stopping = [&] { return options.stop && options.stop(); };
  const std::function<bool()> cancelled = [&] {
    if (stopping()) return true;
    std::lock_guard lock(handoff.mu);
    return handoff.relay_failed;
  };
  std::thread ingest([&] {
    Ingest(options, source, state, fold, publish_after, cancelled, handoff, stats);
  });
  const Status relay_status = Relay(options, state, **relay, handoff, stats);
  {
    std::lock_guard lock(handoff.mu);
    handoff.relay_failed = !relay_status.ok();
  }
  // A failed relay stops the ingest at its next push or re-watch; `stop` ends a live watch.
  ingest.join();
  ADM_RETURN_IF_ERROR(relay_status);
  ADM_RETURN_IF_ERROR(handoff.ingest_status);
  stats.cursor = state.cursor().sequence;
  return stats;
}

}  // namespace admission::consumers::billing
