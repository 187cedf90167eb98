#pragma once
// The checks a crash test makes of a ledger its appender streams (crash_stream.h) wrote before
// the crash: the SIGKILL test (crash_test.cc) and the power-cut test (power_loss_test.cc) use
// the same ones. Every stored event must be the next event of one stream, byte for byte; the
// part checked before must be unchanged; every acknowledged append must be stored where its
// ack says.

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ledger/event_log.h"
#include "ledger/verify.h"
#include "schema/event_codec.h"
#include "tests/crash/crash_stream.h"

namespace admission::crash {

using ledger::Sequence;

// Events read per Read call while checking.
inline constexpr size_t kCheckReadChunk = 4096;

// What the ledger held at the last check, per appender stream.
struct LedgerContents {
  Sequence head = 0;
  schema::Hash head_hash = schema::kGenesisHash;  // the chain value after `head`
  int64_t head_recorded_at_ns = 0;
  // sequences[t][i]: where event t:i is stored. Each stream's events are t:0..t:k, so the
  // vector's size is how far that stream got; it has one entry per appender stream.
  std::vector<std::vector<Sequence>> sequences;

  explicit LedgerContents(int streams) : sequences(static_cast<size_t>(streams)) {}
  int streams() const { return static_cast<int>(sequences.size()); }
};

// VerifyChain over the whole ledger, with the idempotency index: no fault, every event checked.
inline ::testing::AssertionResult WholeChainVerifies(ledger::EventLog& log,
                                                     ledger::VerifyReport* report) {
  Result<ledger::VerifyReport> verified =
      ledger::VerifyChain(log, 1, schema::kGenesisHash, /*check_index=*/true);
  if (!verified.ok()) return ::testing::AssertionFailure() << verified.status().ToString();
  if (verified->fault) {
    return ::testing::AssertionFailure() << "chain fault at sequence " << verified->fault->sequence
                                         << ": " << verified->fault->reason;
  }
  if (verified->events_checked != verified->head) {
    return ::testing::AssertionFailure() << "checked " << verified->events_checked
                                         << " events of " << verified->head;
  }
  *report = *verified;
  return ::testing::AssertionSuccess();
}

// Why `stored` is not the expected bytes: the first differing payload field, or the envelope.
inline std::string DescribeMismatch(const std::string& stored, const std::string& expected) {
  Result<schema::DecodedEvent> a = schema::DecodeEvent(stored);
  Result<schema::DecodedEvent> b = schema::DecodeEvent(expected);
  if (!a.ok() || !b.ok()) return "undecodable";
  std::string field = schema::FirstDifferingPayloadField(a->root(), b->root());
  return field.empty() ? "the envelope (sequence, prevHash or recordedAtNs) differs"
                       : "first differing field: " + field;
}

// Reads events [from, to] of `log` in chunks, calling `check` on each one in order; fails on a
// gap or on the first event `check` fails.
template <typename Check>
::testing::AssertionResult ForEachEvent(ledger::EventLog& log, Sequence from, Sequence to,
                                        Check check) {
  Sequence expected = from;
  while (expected <= to) {
    Result<std::vector<ledger::StoredEvent>> chunk =
        log.Read(expected, std::min<Sequence>(kCheckReadChunk, to - expected + 1));
    if (!chunk.ok()) {
      return ::testing::AssertionFailure() << "Read(" << expected
                                           << "): " << chunk.status().ToString();
    }
    if (chunk->empty()) {
      return ::testing::AssertionFailure() << "event " << expected << " is missing";
    }
    for (const ledger::StoredEvent& stored : *chunk) {
      if (stored.sequence != expected) {
        return ::testing::AssertionFailure() << "expected event " << expected << ", read "
                                             << stored.sequence;
      }
      if (::testing::AssertionResult ok = check(stored); !ok) return ok;
      ++expected;
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks that the ledger is still `contents` followed by new events, and that every new event
// is the next one of its appender stream with exactly the bytes that stream's generator, the
// chain and its recorded time make; then extends `contents` by the new events.
// The old part is rehashed, not re-decoded: the chain value at the old head is unchanged only
// if every old byte is, and those bytes were checked one by one when they were new. This keeps
// an iteration's cost to hashing the ledger plus decoding what the last run appended.
inline ::testing::AssertionResult CheckAndExtend(ledger::EventLog& log,
                                                 LedgerContents* contents) {
  const ledger::Head head = log.GetHead();
  if (head.sequence < contents->head) {
    return ::testing::AssertionFailure() << "the ledger shrank from " << contents->head
                                         << " to " << head.sequence << " events";
  }
  schema::Hash chain = schema::kGenesisHash;
  ::testing::AssertionResult old_part =
      ForEachEvent(log, 1, contents->head, [&](const ledger::StoredEvent& stored) {
        chain = schema::ChainHash(chain, stored.bytes);
        return ::testing::AssertionSuccess();
      });
  if (!old_part) return old_part;
  if (chain != contents->head_hash) {
    return ::testing::AssertionFailure()
           << "the first " << contents->head << " events changed since the last check (chain "
           << schema::HashHex(chain) << ", was " << schema::HashHex(contents->head_hash) << ")";
  }

  int64_t last_recorded_at_ns = contents->head_recorded_at_ns;
  ::testing::AssertionResult new_part = ForEachEvent(
      log, contents->head + 1, head.sequence,
      [&](const ledger::StoredEvent& stored) -> ::testing::AssertionResult {
        const Sequence s = stored.sequence;
        Result<schema::DecodedEvent> decoded = schema::DecodeEvent(stored.bytes);
        if (!decoded.ok()) {
          return ::testing::AssertionFailure() << "event " << s << ": "
                                               << decoded.status().ToString();
        }
        const schema::Event::Reader event = decoded->root();
        const std::string key = event.getIdempotencyKey().cStr();
        const std::optional<StreamEvent> position = ParseIdempotencyKey(key);
        if (!position || position->thread < 0 || position->thread >= contents->streams()) {
          return ::testing::AssertionFailure() << "event " << s << " has idempotency key '"
                                               << key << "', of no appender stream";
        }
        std::vector<Sequence>& stream = contents->sequences[position->thread];
        if (position->index != stream.size()) {
          return ::testing::AssertionFailure()
                 << "event " << s << " is " << key << ", but stream t" << position->thread
                 << " has " << stream.size() << " events before it: not a prefix of the stream";
        }
        if (event.getRecordedAtNs() < last_recorded_at_ns) {
          return ::testing::AssertionFailure() << "event " << s << " recordedAtNs "
                                               << event.getRecordedAtNs() << " < "
                                               << last_recorded_at_ns << " before it";
        }
        last_recorded_at_ns = event.getRecordedAtNs();
        const std::string want = ExpectedStoredBytes(position->thread, position->index,
                                                     event.getRecordedAtNs(), s, chain);
        if (stored.bytes != want) {
          return ::testing::AssertionFailure() << "event " << s << " (" << key
                                               << ") is not what its stream appended: "
                                               << DescribeMismatch(stored.bytes, want);
        }
        chain = schema::ChainHash(chain, stored.bytes);
        stream.push_back(s);
        return ::testing::AssertionSuccess();
      });
  if (!new_part) return new_part;
  if (chain != head.hash) {
    return ::testing::AssertionFailure() << "the head record's hash " << schema::HashHex(head.hash)
                                         << " is not the chain value " << schema::HashHex(chain);
  }
  contents->head = head.sequence;
  contents->head_hash = chain;
  contents->head_recorded_at_ns = last_recorded_at_ns;
  return ::testing::AssertionSuccess();
}

// Checks every line of the ack file against the ledger: the acknowledged events are stored,
// densely from the acknowledged sequence, and each stream's acks move forward.
inline ::testing::AssertionResult CheckAcks(const std::string& ack_text,
                                            const LedgerContents& contents, size_t* ack_count) {
  std::vector<int64_t> last_acked(contents.sequences.size(), -1);
  *ack_count = 0;
  size_t line_start = 0;
  while (line_start < ack_text.size()) {
    const size_t newline = ack_text.find('\n', line_start);
    if (newline == std::string::npos) {
      // The kill interrupted the write(2) of this line, so it acknowledges nothing (the
      // next appender cuts it off before it appends). Earlier lines cannot be torn.
      std::printf("ack file ends in a torn line '%s' (ignored)\n",
                  ack_text.substr(line_start).c_str());
      break;
    }
    const std::string line = ack_text.substr(line_start, newline - line_start);
    line_start = newline + 1;
    std::istringstream fields(line);
    int t = -1;
    uint64_t first = 0;
    uint64_t last = 0;
    Sequence seq_first = 0;
    std::string rest;
    if (!(fields >> t >> first >> last >> seq_first) || (fields >> rest) || t < 0 ||
        t >= contents.streams() || first > last || last - first >= kBatchEventsMax ||
        seq_first == 0) {
      return ::testing::AssertionFailure() << "malformed ack line '" << line << "'";
    }
    if (static_cast<int64_t>(first) <= last_acked[t]) {
      return ::testing::AssertionFailure() << "ack '" << line << "' does not follow t" << t
                                           << "'s previous ack, which ended at " << last_acked[t];
    }
    last_acked[t] = static_cast<int64_t>(last);
    const std::vector<Sequence>& stream = contents.sequences[t];
    for (uint64_t i = first; i <= last; ++i) {
      if (i >= stream.size()) {
        return ::testing::AssertionFailure()
               << "acknowledged event " << IdempotencyKey(t, i) << " (ack '" << line
               << "') is lost: the ledger holds only " << stream.size() << " events of t" << t;
      }
      if (stream[i] != seq_first + (i - first)) {
        return ::testing::AssertionFailure()
               << "acknowledged event " << IdempotencyKey(t, i) << " (ack '" << line
               << "') is stored at sequence " << stream[i] << ", not "
               << seq_first + (i - first);
      }
    }
    ++*ack_count;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace admission::crash
