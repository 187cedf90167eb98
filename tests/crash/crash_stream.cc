#include "tests/crash/crash_stream.h"

#include <charconv>

#include <capnp/message.h>

namespace admission::crash {

namespace {

// Longest free-text field of a stream event: events range from ~100 bytes to ~1 KB, so an
// Append's group commit varies in size as well as in count.
constexpr size_t kTextBytesMax = 700;

// `length` letters derived from `h`, so a stored byte that changed is caught by the comparison.
std::string Filler(uint64_t h, size_t length) {
  std::string out(length, ' ');
  for (size_t k = 0; k < length; ++k) {
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    out[k] = static_cast<char>('a' + (h >> 33) % 26);
  }
  return out;
}

void FillRef(int thread, uint64_t index, uint64_t h, schema::WorkloadRef::Builder ref) {
  ref.setNamespace("crash-ns-" + std::to_string(thread));
  ref.setName("wl-" + std::to_string(thread) + "-" + std::to_string(index) + "-" +
              Filler(h, h % 48));
  ref.setUid(std::to_string(Mix(h, 1)));
}

}  // namespace

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::string IdempotencyKey(int thread, uint64_t index) {
  return "t" + std::to_string(thread) + "-" + std::to_string(index);
}

std::optional<StreamEvent> ParseIdempotencyKey(std::string_view key) {
  if (key.size() < 4 || key.front() != 't') return std::nullopt;
  const char* const end = key.data() + key.size();
  StreamEvent event;
  auto [dash, thread_error] = std::from_chars(key.data() + 1, end, event.thread);
  if (thread_error != std::errc() || dash == end || *dash != '-') return std::nullopt;
  auto [rest, index_error] = std::from_chars(dash + 1, end, event.index);
  if (index_error != std::errc() || rest != end) return std::nullopt;
  // Only the canonical spelling: "t01-2" or "t1-+2" would be another key for the same event.
  if (IdempotencyKey(event.thread, event.index) != key) return std::nullopt;
  return event;
}

size_t BatchSize(uint64_t seed, int thread, uint64_t first_index) {
  return 1 + Mix(Mix(seed, static_cast<uint64_t>(thread)), first_index) % kBatchEventsMax;
}

void BuildEvent(int thread, uint64_t index, int64_t recorded_at_ns,
                schema::Event::Builder root) {
  const uint64_t h = Mix(static_cast<uint64_t>(thread) + 1, index);
  root.setRecordedAtNs(recorded_at_ns);
  root.setActor("crash-appender-" + std::to_string(thread));
  root.setIdempotencyKey(IdempotencyKey(thread, index));
  schema::Event::Body::Builder body = root.initBody();
  // Three body kinds with different shapes, all derived from (thread, index).
  switch (h % 3) {
    case 0:
      FillRef(thread, index, h, body.initWorkloadDeleted().initWorkload());
      break;
    case 1: {
      schema::WorkloadFinished::Builder finished = body.initWorkloadFinished();
      FillRef(thread, index, h, finished.initWorkload());
      finished.setMessage(Filler(Mix(h, 2), Mix(h, 3) % kTextBytesMax));
      break;
    }
    default: {
      schema::PodsReported::Builder pods = body.initPodsReported();
      FillRef(thread, index, h, pods.initWorkload());
      pods.setReport(static_cast<schema::PodsReport>(Mix(h, 4) % 4));
      pods.setFencingToken(Filler(Mix(h, 5), Mix(h, 6) % 64));
      break;
    }
  }
}

std::string EncodeStreamEvent(int thread, uint64_t index, int64_t recorded_at_ns) {
  capnp::MallocMessageBuilder message;
  BuildEvent(thread, index, recorded_at_ns, message.initRoot<schema::Event>());
  return schema::EncodeEvent(message);
}

std::string ExpectedStoredBytes(int thread, uint64_t index, int64_t recorded_at_ns,
                                uint64_t sequence, const schema::Hash& prev_hash) {
  capnp::MallocMessageBuilder message;
  schema::Event::Builder root = message.initRoot<schema::Event>();
  BuildEvent(thread, index, recorded_at_ns, root);
  root.setSequence(sequence);
  root.setPrevHash(capnp::Data::Reader(prev_hash.data(), prev_hash.size()));
  return schema::EncodeEvent(message);
}

}  // namespace admission::crash
