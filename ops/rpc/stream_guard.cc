#include "ops/rpc/stream_guard.h"

#include <algorithm>
#include <cstring>

#include <kj/debug.h>
#include <spdlog/spdlog.h>

namespace admission::ops::rpc {

namespace {

// Cap'n Proto refuses a message of more segments than this (capnp/serialize.c++); the tracker
// only needs to stay small until the reader refuses it.
constexpr uint64_t kSegmentsTracked = 513;

uint32_t Le32(const kj::byte* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

uint64_t FrameTracker::Consume(const kj::byte* bytes, size_t size) {
  uint64_t completed = 0;
  while (size > 0) {
    size_t take = 0;
    if (in_body_) {
      take = static_cast<size_t>(std::min<uint64_t>(size, body_left_));
      body_left_ -= take;
    } else {
      // The segment table: its first 4 bytes say how long it is.
      const uint64_t want = header_bytes_ == 0 ? 4 : header_bytes_;
      take = static_cast<size_t>(std::min<uint64_t>(size, want - header_.size()));
      header_.insert(header_.end(), bytes, bytes + take);
      if (header_bytes_ == 0 && header_.size() == 4) {
        const uint64_t segments = std::min<uint64_t>(uint64_t{Le32(header_.data())} + 1,
                                                     kSegmentsTracked);
        header_bytes_ = 8 * (segments / 2 + 1);
      }
      if (header_bytes_ != 0 && header_.size() == header_bytes_) {
        const uint64_t segments = (header_bytes_ / 8 - 1) * 2 + 1;
        uint64_t words = 0;
        for (uint64_t i = 0; i < segments && 4 + 4 * i + 4 <= header_.size(); ++i) {
          words += Le32(header_.data() + 4 + 4 * i);
        }
        body_left_ = words * 8;
        in_body_ = true;
      }
    }
    received_ += take;
    bytes += take;
    size -= take;
    if (in_body_ && body_left_ == 0) {
      completed += received_;
      received_ = 0;
      in_body_ = false;
      header_bytes_ = 0;
      header_.clear();
    }
  }
  return completed;
}

GuardedStream::GuardedStream(kj::Own<kj::AsyncIoStream> inner, kj::Timer& timer,
                             PartialMessageBudget& budget, StreamGuardLimits limits,
                             std::string peer)
    : inner_(kj::mv(inner)),
      timer_(timer),
      budget_(budget),
      limits_(limits),
      peer_(std::move(peer)) {}

GuardedStream::~GuardedStream() noexcept(false) { budget_.bytes -= counted_; }

kj::Promise<size_t> GuardedStream::tryRead(void* buffer, size_t min_bytes, size_t max_bytes) {
  auto* out = static_cast<kj::byte*>(buffer);
  const size_t got = TakeBuffered(out, max_bytes);
  if (got >= min_bytes) return got;
  return ReadSome(out, min_bytes, max_bytes, got);
}

size_t GuardedStream::TakeBuffered(kj::byte* out, size_t max_bytes) {
  const size_t n = std::min(max_bytes, buffered_end_ - buffered_begin_);
  if (n > 0) std::memcpy(out, read_buffer_.begin() + buffered_begin_, n);
  buffered_begin_ += n;
  return n;
}

// One read of at least a byte at a time, so that every byte that arrives counts as progress
// (a single read of min_bytes would not say that half of them came). A read for less than
// kReadBufferBytes reads up to that much into the stream's buffer: Cap'n Proto reads a
// message's first word, then the rest, so a whole message arrives in one system call.
kj::Promise<size_t> GuardedStream::ReadSome(kj::byte* buffer, size_t min_bytes, size_t max_bytes,
                                            size_t got) {
  if (got >= max_bytes) return got;
  const bool buffered = max_bytes - got < kReadBufferBytes;
  if (buffered && read_buffer_.size() == 0) {
    read_buffer_ = kj::heapArray<kj::byte>(kReadBufferBytes);
  }
  kj::Promise<size_t> read = buffered ? inner_->tryRead(read_buffer_.begin(), 1, kReadBufferBytes)
                                      : inner_->tryRead(buffer + got, 1, max_bytes - got);
  if (tracker_.partial()) read = GuardedRead(kj::mv(read));
  return read.then([this, buffer, min_bytes, max_bytes, got,
                    buffered](size_t n) mutable -> kj::Promise<size_t> {
    if (n == 0) return got;  // end of stream
    if (buffered) {
      Consumed(read_buffer_.begin(), n);
      buffered_begin_ = 0;
      buffered_end_ = n;
      got += TakeBuffered(buffer + got, max_bytes - got);
    } else {
      Consumed(buffer + got, n);
      got += n;
    }
    if (got >= min_bytes) return got;
    return ReadSome(buffer, min_bytes, max_bytes, got);
  });
}

kj::Promise<size_t> GuardedStream::GuardedRead(kj::Promise<size_t> read) {
  const kj::TimePoint silence_end =
      timer_.now() + limits_.partial_message_timeout_ms * kj::MILLISECONDS;
  const kj::TimePoint message_end =
      message_started_ + limits_.message_receive_max_ms * kj::MILLISECONDS;
  const bool slow = message_end < silence_end;
  return read.exclusiveJoin(
      timer_.atTime(slow ? message_end : silence_end).then([this, slow]() -> kj::Promise<size_t> {
        std::string why;
        if (slow) {
          ++budget_.closed_slow;
          why = "a message was not complete " + std::to_string(limits_.message_receive_max_ms) +
                " ms after its first byte";
        } else {
          ++budget_.closed_stalled;
          why = "no byte for " + std::to_string(limits_.partial_message_timeout_ms) +
                " ms in the middle of a message (" + std::to_string(tracker_.received()) +
                " bytes of it in)";
        }
        uint64_t held_back = 0;
        if (budget_.log.Allow(&held_back)) {
          spdlog::warn("closed the connection of {}: {} ({} such closes not logged before)",
                       peer_, why, held_back);
        }
        return KJ_EXCEPTION(DISCONNECTED, "admitd closed the connection", why);
      }));
}

void GuardedStream::Consumed(const kj::byte* bytes, size_t size) {
  const bool was_partial = tracker_.partial();
  const uint64_t completed = tracker_.Consume(bytes, size);
  if (tracker_.partial() && (!was_partial || completed > 0)) message_started_ = timer_.now();
  budget_.bytes -= counted_;
  counted_ = tracker_.received();
  budget_.bytes += counted_;
  if (budget_.bytes > budget_.bytes_max) {
    ++budget_.closed_over_budget;
    const std::string why = "the bytes of incomplete messages on all connections would be " +
                            std::to_string(budget_.bytes) + " (the limit is " +
                            std::to_string(budget_.bytes_max) + ")";
    uint64_t held_back = 0;
    if (budget_.log.Allow(&held_back)) {
      spdlog::warn("closed the connection of {}: {} ({} such closes not logged before)", peer_,
                   why, held_back);
    }
    kj::throwFatalException(KJ_EXCEPTION(DISCONNECTED, "admitd closed the connection", why));
  }
}

}  // namespace admission::ops::rpc
