#pragma once
// What admitd reads from a connection, watched: a peer that stops in the middle of a message
// is closed (its partial message would otherwise hold memory for good), and the bytes of
// messages not yet complete are bounded across all connections. docs/admitd.md, "Limits".
//
// Thread safety: event loop thread only (each object belongs to the loop it was made on).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <kj/async-io.h>
#include <kj/timer.h>

namespace admission::ops::rpc {

// Follows Cap'n Proto's stream framing (a segment table: the segment count - 1 and each
// segment's size in words, padded to a word; then the segments) over the bytes a connection
// delivers, to know whether a message is partly received and how many of its bytes are in.
// Pure: no I/O, no clock.
class FrameTracker {
 public:
  // Consumes bytes in stream order; returns how many bytes of completed messages this call
  // ended (bytes that were counted as partial and no longer are).
  uint64_t Consume(const kj::byte* bytes, size_t size);
  // A message has started (at least one of its bytes arrived) and is not complete.
  bool partial() const { return received_ > 0; }
  // Bytes of the partial message received so far (0 between messages).
  uint64_t received() const { return received_; }

 private:
  // The segment table as far as it arrived (its size is known from its first 4 bytes).
  std::vector<kj::byte> header_;
  uint64_t header_bytes_ = 0;  // 0: not known yet
  uint64_t body_left_ = 0;     // bytes of segments still to come, once the table is complete
  bool in_body_ = false;
  uint64_t received_ = 0;
};

// Lets at most kLogLinesPerInterval log lines through per interval for a kind of event a peer
// can cause at will (refused connections, stalled peers, failed accepts), and counts those it
// held back (the next line that goes through says how many).
class LogThrottle {
 public:
  static constexpr uint64_t kLogLinesPerInterval = 10;
  explicit LogThrottle(uint64_t interval_ms) : interval_(std::chrono::milliseconds(interval_ms)) {}
  // True when this occurrence may be logged; then *held_back is how many were not since the
  // last one that was.
  bool Allow(uint64_t* held_back) {
    const auto now = std::chrono::steady_clock::now();
    if (lines_ == 0 || now - window_start_ >= interval_) {
      window_start_ = now;
      lines_ = 0;
    }
    if (lines_ >= kLogLinesPerInterval) {
      ++held_back_;
      return false;
    }
    ++lines_;
    *held_back = held_back_;
    held_back_ = 0;
    return true;
  }

 private:
  const std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point window_start_{};
  uint64_t lines_ = 0;  // logged in the window that started at window_start_
  uint64_t held_back_ = 0;
};

// Shared by every connection of a daemon: the bytes of incomplete messages, bounded.
struct PartialMessageBudget {
  uint64_t bytes = 0;       // received for messages not yet complete, all connections
  uint64_t bytes_max = 0;   // a read that would go past it closes its connection
  uint64_t closed_stalled = 0;     // connections closed for kPartialMessageTimeoutMs of silence
  uint64_t closed_slow = 0;        // ... for a message not complete in kMessageReceiveMaxMs
  uint64_t closed_over_budget = 0; // ... for going past bytes_max
  LogThrottle log{1000};           // ten warnings a second at most
};

struct StreamGuardLimits {
  uint64_t partial_message_timeout_ms = 0;  // silence allowed in the middle of a message
  uint64_t message_receive_max_ms = 0;      // from a message's first byte to its last
};

// An AsyncIoStream that forwards to `inner` and watches its reads: while a message is partly
// received, each read must bring a byte within partial_message_timeout_ms, and the message
// must be complete within message_receive_max_ms of its first byte; else the read fails
// (DISCONNECTED, naming the limit), which ends the connection's RPC system. Between messages
// a connection may be idle for as long as it likes (the connection limits bound those).
// A close is counted in `budget` and logged (throttled), naming `peer`. Small reads go through
// a buffer of the stream's own, so a message that arrived whole is read with one system call.
// REQUIRES: timer and budget outlive the stream.
class GuardedStream final : public kj::AsyncIoStream {
 public:
  GuardedStream(kj::Own<kj::AsyncIoStream> inner, kj::Timer& timer, PartialMessageBudget& budget,
                StreamGuardLimits limits, std::string peer);
  ~GuardedStream() noexcept(false);

  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override;
  kj::Maybe<uint64_t> tryGetLength() override { return inner_->tryGetLength(); }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }
  void abortRead() override { inner_->abortRead(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    inner_->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, kj::uint* length) override {
    inner_->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, kj::uint* length) override {
    inner_->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return inner_->getFd(); }

 private:
  // Reads of less than this go through the stream's buffer (one system call a message).
  static constexpr size_t kReadBufferBytes = 8192;

  kj::Promise<size_t> ReadSome(kj::byte* buffer, size_t min_bytes, size_t max_bytes, size_t got);
  // `read`, failing the connection when the partial message's limits pass first.
  kj::Promise<size_t> GuardedRead(kj::Promise<size_t> read);
  // Copies up to max_bytes of what the buffer holds to `out`; returns how many.
  size_t TakeBuffered(kj::byte* out, size_t max_bytes);
  void Consumed(const kj::byte* bytes, size_t size);

  kj::Own<kj::AsyncIoStream> inner_;
  kj::Timer& timer_;
  PartialMessageBudget& budget_;
  const StreamGuardLimits limits_;
  const std::string peer_;
  FrameTracker tracker_;
  uint64_t counted_ = 0;  // this stream's share of budget_.bytes
  kj::TimePoint message_started_ = kj::origin<kj::TimePoint>();
  // Bytes read from `inner` and not yet delivered: read_buffer_[buffered_begin_, buffered_end_).
  kj::Array<kj::byte> read_buffer_;
  size_t buffered_begin_ = 0;
  size_t buffered_end_ = 0;
};

// A socket held by more than one owner: the TLS handshake's stream (SharedStream) and the
// daemon, which, when the handshake fails, keeps the socket a moment to read what the peer
// still sends, so that OpenSSL's alert reaches it instead of a reset (the client can then say
// its certificate was refused).
struct SharedSocket : public kj::Refcounted {
  explicit SharedSocket(kj::Own<kj::AsyncIoStream> s) : stream(kj::mv(s)) {}
  kj::Own<kj::AsyncIoStream> stream;
};

// Forwards to a SharedSocket's stream.
class SharedStream final : public kj::AsyncIoStream {
 public:
  explicit SharedStream(kj::Own<SharedSocket> socket) : socket_(kj::mv(socket)) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    return socket_->stream->tryRead(buffer, min_bytes, max_bytes);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return socket_->stream->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return socket_->stream->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override {
    return socket_->stream->whenWriteDisconnected();
  }
  void shutdownWrite() override { socket_->stream->shutdownWrite(); }
  void abortRead() override { socket_->stream->abortRead(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    socket_->stream->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    socket_->stream->setsockopt(level, option, value, length);
  }
  void getsockname(struct sockaddr* addr, kj::uint* length) override {
    socket_->stream->getsockname(addr, length);
  }
  void getpeername(struct sockaddr* addr, kj::uint* length) override {
    socket_->stream->getpeername(addr, length);
  }
  kj::Maybe<int> getFd() const override { return socket_->stream->getFd(); }

 private:
  kj::Own<SharedSocket> socket_;
};

}  // namespace admission::ops::rpc
