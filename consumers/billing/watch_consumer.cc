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

}  // namespace

Result<WatchConsumerStats> RunWatchConsumer(const WatchConsumerOptions& options,
                                            const EventSource& source) {
  auto store = BillingStore::Open(options.state_dir);
  if (!store.ok()) return store.status();
  auto relay = OutboxRelay::Open(options.output, options.transactional_id,
                                 options.operation_timeout_ms);
  if (!relay.ok()) return relay.status();
  auto published = (*relay)->PublishedPosition();
  if (!published.ok()) return published.status();
  WatchConsumerStats stats;
  stats.resumed_after = (*store)->cursor().sequence;
  if (*published) {
    auto before = (*store)->OutboxSize();
    if (!before.ok()) return before.status();
    ADM_RETURN_IF_ERROR((*store)->RemoveOutboxThrough(**published));
    auto after = (*store)->OutboxSize();
    if (!after.ok()) return after.status();
    stats.outbox_published_before = *before - *after;
  }
  UsageFold fold;
  ADM_RETURN_IF_ERROR((*store)->LoadFold(&fold));
  fold.TrackChanges(true);

  std::mutex mu;
  std::condition_variable changed;
  bool ingest_done = false;
  bool relay_failed = false;
  Status ingest_status;
  BillingStore& state = **store;
  const std::optional<OutboxPosition> publish_after = *published;
  auto stopping = [&] { return options.stop && options.stop(); };
  const std::function<bool()> cancelled = [&] {
    if (stopping()) return true;
    std::lock_guard lock(mu);
    return relay_failed;
  };

  // The ingest: this thread and the source's (on_events runs where the source calls it).
  std::thread ingest([&] {
    uint64_t batches = 0;
    Status failure;
    auto reached = [&] { return options.until && state.cursor().sequence >= *options.until; };
    auto on_events = [&](const std::vector<ledger::StoredEvent>& events) -> bool {
      Cursor cursor = state.cursor();
      std::vector<std::pair<OutboxPosition, UsageRecord>> records;
      for (const ledger::StoredEvent& e : events) {
        if (e.sequence <= cursor.sequence) continue;  // sent again after a re-watch
        if (e.sequence != cursor.sequence + 1) {
          failure = Status(Code::kCorruption, "the watch skipped from sequence " +
                                                  std::to_string(cursor.sequence) + " to " +
                                                  std::to_string(e.sequence));
          return false;
        }
        auto decoded = schema::DecodeEvent(e.bytes);
        if (!decoded.ok()) {
          failure = Status(Code::kCorruption, "event " + std::to_string(e.sequence) + ": " +
                                                  decoded.status().message());
          return false;
        }
        if (schema::HashFromData(decoded->root().getPrevHash()) != cursor.hash) {
          failure = Status(Code::kCorruption,
                           "event " + std::to_string(e.sequence) +
                               " does not follow the chain this consumer folded (its prevHash "
                               "is not the chain value after " + std::to_string(cursor.sequence) +
                               "): a different or edited ledger; delete " + options.state_dir +
                               " to bill this one from its start");
          return false;
        }
        fold.Apply(e.sequence, decoded->root());
        uint32_t index = 0;
        for (const Interval& interval : fold.closed()) {
          for (UsageRecord& r : RecordsOf(interval, options.bucket_ms, e.sequence)) {
            records.emplace_back(OutboxPosition{e.sequence, index++}, std::move(r));
          }
        }
        fold.DropClosed();
        cursor.sequence = e.sequence;
        cursor.hash = schema::ChainHash(cursor.hash, e.bytes);
        ++stats.events_folded;
      }
      if (cursor.sequence == state.cursor().sequence) return !reached() && !cancelled();
      failure = state.Commit(cursor, fold.TakeChanges(), records, publish_after);
      if (!failure.ok()) return false;
      changed.notify_all();
      if (options.drill) options.drill("ingested", ++batches);
      return !reached() && !cancelled();
    };
    while (failure.ok() && !reached() && !cancelled()) {
      Status s = source(state.cursor().sequence + 1, on_events, cancelled);
      if (!failure.ok() || reached() || cancelled()) break;
      if (!s.ok() && s.code() != Code::kUnavailable) {
        failure = s;
        break;
      }
      if (options.log) {
        options.log(s.ok() ? "the watch ended; watching again after sequence " +
                                 std::to_string(state.cursor().sequence)
                           : s.message() + "; watching again in " +
                                 std::to_string(kRewatchMs) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kRewatchMs));
    }
    std::lock_guard lock(mu);
    ingest_status = failure;
    ingest_done = true;
    changed.notify_all();
  });

  // The relay, on this thread.
  Status relay_status;
  for (;;) {
    auto entries = state.ReadOutbox(options.records_per_transaction);
    if (!entries.ok()) {
      relay_status = entries.status();
      break;
    }
    if (entries->empty()) {
      std::unique_lock lock(mu);
      if (ingest_done) {
        // The ingest's last batch may have landed after the read above.
        lock.unlock();
        auto last = state.ReadOutbox(1);
        if (last.ok() && last->empty()) break;
        continue;
      }
      changed.wait_for(lock, std::chrono::milliseconds(200));
      continue;
    }
    const uint64_t n = stats.transactions + 1;
    relay_status = (*relay)->Publish(*entries, [&] {
      if (options.drill) options.drill("produced", n);
    });
    if (!relay_status.ok()) break;
    stats.transactions = n;
    stats.records_published += entries->size();
    if (options.drill) options.drill("committed", n);
    relay_status = state.RemoveOutboxThrough(entries->back().position);
    if (!relay_status.ok()) break;
  }
  {
    std::lock_guard lock(mu);
    relay_failed = !relay_status.ok();
  }
  // A failed relay stops the ingest at its next push or re-watch; `stop` ends a live watch.
  ingest.join();
  ADM_RETURN_IF_ERROR(relay_status);
  ADM_RETURN_IF_ERROR(ingest_status);
  stats.cursor = state.cursor().sequence;
  return stats;
}

}  // namespace admission::consumers::billing
