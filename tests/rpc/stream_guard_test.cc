// GuardedStream (ops/rpc/stream_guard.h): a peer that stops in the middle of a message is
// closed, one that is idle between messages is not, and the bytes of incomplete messages are
// bounded across connections. A manual timer and in-memory pipes: deterministic.

#include "ops/rpc/stream_guard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <kj/async-io.h>
#include <kj/timer.h>

namespace admission::ops::rpc {
namespace {

// A Cap'n Proto frame: the segment table of these segment sizes (in words), then the segments.
std::vector<kj::byte> Frame(std::vector<uint32_t> words) {
  std::vector<kj::byte> out;
  auto put32 = [&out](uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<kj::byte>(v >> (8 * i)));
  };
  put32(static_cast<uint32_t>(words.size() - 1));
  for (uint32_t w : words) put32(w);
  if (out.size() % 8 != 0) put32(0);
  uint64_t body = 0;
  for (uint32_t w : words) body += uint64_t{w} * 8;
  out.insert(out.end(), body, kj::byte{0xab});
  return out;
}

TEST(FrameTracker, FollowsOneMessageByteByByte) {
  const std::vector<kj::byte> frame = Frame({3});
  FrameTracker tracker;
  EXPECT_FALSE(tracker.partial());
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    EXPECT_EQ(tracker.Consume(&frame[i], 1), 0u) << i;
    EXPECT_TRUE(tracker.partial()) << i;
    EXPECT_EQ(tracker.received(), i + 1);
  }
  EXPECT_EQ(tracker.Consume(&frame.back(), 1), frame.size());
  EXPECT_FALSE(tracker.partial());
}

TEST(FrameTracker, ReadsPaddedTablesAndMessagesBackToBack) {
  // Two segments: a table of 12 bytes padded to 16; then three segments (16, no padding).
  std::vector<kj::byte> stream = Frame({1, 2});
  ASSERT_EQ(stream.size(), 16u + 24u);
  const std::vector<kj::byte> second = Frame({1, 0, 1});
  ASSERT_EQ(second.size(), 16u + 16u);
  stream.insert(stream.end(), second.begin(), second.end());
  const std::vector<kj::byte> third = Frame({2});
  stream.insert(stream.end(), third.begin(), third.begin() + 5);  // and 5 bytes of a third
  FrameTracker tracker;
  EXPECT_EQ(tracker.Consume(stream.data(), stream.size()), 40u + 32u);
  EXPECT_TRUE(tracker.partial());
  EXPECT_EQ(tracker.received(), 5u);
}

TEST(FrameTracker, AnEmptySegmentEndsWithItsTable) {
  const std::vector<kj::byte> frame = Frame({0});
  FrameTracker tracker;
  EXPECT_EQ(tracker.Consume(frame.data(), frame.size()), 8u);
  EXPECT_FALSE(tracker.partial());
}

class GuardedStreamTest : public ::testing::Test {
 protected:
  GuardedStreamTest() : ws_(loop_), timer_(kj::origin<kj::TimePoint>()) {
    budget_.bytes_max = uint64_t{1} << 20;
  }
  // kj's loop may throw from its destructor; gtest's fixtures may not.
  ~GuardedStreamTest() noexcept override {}

  // A guarded end and the peer's end of a pipe.
  struct Ends {
    kj::Own<GuardedStream> guarded;
    kj::Own<kj::AsyncIoStream> peer;
  };
  Ends Open() {
    auto pipe = kj::newTwoWayPipe();
    StreamGuardLimits limits;
    limits.partial_message_timeout_ms = 100;
    limits.message_receive_max_ms = 1000;
    return {kj::heap<GuardedStream>(kj::mv(pipe.ends[0]), timer_, budget_, limits, "test peer"),
            kj::mv(pipe.ends[1])};
  }
  void Send(kj::AsyncIoStream& peer, const std::vector<kj::byte>& bytes, size_t from, size_t to) {
    peer.write(bytes.data() + from, to - from).wait(ws_);
  }
  void At(uint64_t ms) {
    timer_.advanceTo(kj::origin<kj::TimePoint>() + ms * kj::MILLISECONDS);
  }

  kj::EventLoop loop_;
  kj::WaitScope ws_;
  kj::TimerImpl timer_;
  PartialMessageBudget budget_;
};

TEST_F(GuardedStreamTest, APeerSilentInTheMiddleOfAMessageIsClosed) {
  Ends ends = Open();
  const std::vector<kj::byte> frame = Frame({64});
  std::vector<kj::byte> buffer(frame.size());
  auto read = ends.guarded->tryRead(buffer.data(), buffer.size(), buffer.size());
  Send(*ends.peer, frame, 0, 100);
  EXPECT_FALSE(read.poll(ws_));
  EXPECT_EQ(budget_.bytes, 100u);
  At(99);
  EXPECT_FALSE(read.poll(ws_));
  At(101);
  ASSERT_TRUE(read.poll(ws_));
  KJ_IF_MAYBE(e, kj::runCatchingExceptions([&]() { read.wait(ws_); })) {
    EXPECT_EQ(e->getType(), kj::Exception::Type::DISCONNECTED);
    EXPECT_NE(std::string(e->getDescription().cStr()).find("no byte for 100 ms"), std::string::npos)
        << e->getDescription().cStr();
  } else {
    ADD_FAILURE() << "the stalled read did not fail";
  }
  EXPECT_EQ(budget_.closed_stalled, 1u);
  ends.guarded = nullptr;
  EXPECT_EQ(budget_.bytes, 0u);
}

TEST_F(GuardedStreamTest, BytesThatKeepComingKeepTheConnection) {
  Ends ends = Open();
  const std::vector<kj::byte> frame = Frame({64});
  std::vector<kj::byte> buffer(frame.size());
  auto read = ends.guarded->tryRead(buffer.data(), buffer.size(), buffer.size());
  // A byte every 90 ms: never 100 ms of silence, and done before the 1000 ms bound.
  size_t sent = 0;
  for (uint64_t ms = 0; sent < frame.size(); ms += 90) {
    At(ms);
    const size_t next = std::min(frame.size(), sent + 64);
    Send(*ends.peer, frame, sent, next);
    sent = next;
    EXPECT_EQ(read.poll(ws_), sent == frame.size()) << ms;
  }
  EXPECT_EQ(read.wait(ws_), frame.size());
  EXPECT_EQ(budget_.bytes, 0u);
  EXPECT_EQ(budget_.closed_stalled, 0u);
}

TEST_F(GuardedStreamTest, AnIdleConnectionBetweenMessagesIsKept) {
  Ends ends = Open();
  const std::vector<kj::byte> frame = Frame({2});
  std::vector<kj::byte> buffer(frame.size());
  auto first = ends.guarded->tryRead(buffer.data(), buffer.size(), buffer.size());
  Send(*ends.peer, frame, 0, frame.size());
  EXPECT_EQ(first.wait(ws_), frame.size());
  auto next = ends.guarded->tryRead(buffer.data(), 8, buffer.size());
  At(3'600'000);
  EXPECT_FALSE(next.poll(ws_));
  EXPECT_EQ(budget_.closed_stalled, 0u);
}

TEST_F(GuardedStreamTest, AMessageThatNeverEndsIsClosedAtTheReceiveBound) {
  Ends ends = Open();
  const std::vector<kj::byte> frame = Frame({4096});
  std::vector<kj::byte> buffer(frame.size());
  auto read = ends.guarded->tryRead(buffer.data(), buffer.size(), buffer.size());
  size_t sent = 0;
  uint64_t ms = 0;
  for (; ms <= 2000; ms += 50) {
    At(ms);
    if (read.poll(ws_)) break;
    Send(*ends.peer, frame, sent, sent + 1);  // a byte now and then
    ++sent;
  }
  EXPECT_TRUE(read.poll(ws_));
  EXPECT_GE(ms, 1000u);
  EXPECT_LE(ms, 1050u);
  EXPECT_ANY_THROW(read.wait(ws_));
  EXPECT_EQ(budget_.closed_slow, 1u);
}

TEST_F(GuardedStreamTest, PartialBytesAreBoundedAcrossConnections) {
  budget_.bytes_max = 150;
  Ends first = Open();
  Ends second = Open();
  const std::vector<kj::byte> frame = Frame({64});
  std::vector<kj::byte> a(frame.size()), b(frame.size());
  auto read_a = first.guarded->tryRead(a.data(), a.size(), a.size());
  auto read_b = second.guarded->tryRead(b.data(), b.size(), b.size());
  Send(*first.peer, frame, 0, 100);
  EXPECT_FALSE(read_a.poll(ws_));
  Send(*second.peer, frame, 0, 60);  // 160 in all: past the bound
  ASSERT_TRUE(read_b.poll(ws_));
  EXPECT_ANY_THROW(read_b.wait(ws_));
  EXPECT_EQ(budget_.closed_over_budget, 1u);
  second.guarded = nullptr;
  EXPECT_EQ(budget_.bytes, 100u);
  // The first one finishes its message.
  Send(*first.peer, frame, 100, frame.size());
  EXPECT_EQ(read_a.wait(ws_), frame.size());
  EXPECT_EQ(budget_.bytes, 0u);
}

// Forwards to a stream and counts the reads made of it.
class CountingStream final : public kj::AsyncIoStream {
 public:
  CountingStream(kj::Own<kj::AsyncIoStream> inner, size_t* reads)
      : inner_(kj::mv(inner)), reads_(reads) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    ++*reads_;
    return inner_->tryRead(buffer, min_bytes, max_bytes);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }

 private:
  kj::Own<kj::AsyncIoStream> inner_;
  size_t* reads_;
};

TEST_F(GuardedStreamTest, MessagesThatArrivedTogetherAreReadWithOneReadInOrder) {
  auto pipe = kj::newTwoWayPipe();
  size_t reads = 0;
  GuardedStream guarded(kj::heap<CountingStream>(kj::mv(pipe.ends[0]), &reads), timer_,
                        budget_, StreamGuardLimits{100, 1000}, "test peer");
  // Two messages of different bytes, sent at once, read as Cap'n Proto reads them: a message's
  // first word, then the rest.
  std::vector<kj::byte> first = Frame({3});
  std::vector<kj::byte> second = Frame({1, 2});
  for (size_t i = 16; i < second.size(); ++i) second[i] = static_cast<kj::byte>(i);  // its segments
  std::vector<kj::byte> both = first;
  both.insert(both.end(), second.begin(), second.end());
  // An in-memory pipe's write completes once it is read.
  auto sent = pipe.ends[1]->write(both.data(), both.size());
  std::vector<kj::byte> got(both.size());
  size_t at = 0;
  for (const std::vector<kj::byte>* frame : {&first, &second}) {
    EXPECT_EQ(guarded.tryRead(got.data() + at, 8, 8).wait(ws_), 8u);
    const size_t rest = frame->size() - 8;
    EXPECT_EQ(guarded.tryRead(got.data() + at + 8, rest, rest).wait(ws_), rest);
    at += frame->size();
  }
  sent.wait(ws_);
  EXPECT_EQ(got, both);
  EXPECT_EQ(reads, 1u);
  EXPECT_EQ(budget_.bytes, 0u);
  // A read larger than the buffer goes to the socket directly.
  const std::vector<kj::byte> large = Frame({2048});
  auto sent_large = pipe.ends[1]->write(large.data(), large.size());
  std::vector<kj::byte> large_got(large.size());
  EXPECT_EQ(guarded.tryRead(large_got.data(), large.size(), large.size()).wait(ws_),
            large.size());
  sent_large.wait(ws_);
  EXPECT_EQ(large_got, large);
  EXPECT_EQ(reads, 2u);
}

}  // namespace
}  // namespace admission::ops::rpc
