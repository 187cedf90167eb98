// libFuzzer target: bytes as a ledger event, through every decoder of stored or untrusted
// event bytes (schema/event_codec.h). Asserts, besides no crash, no uncaught exception and no
// sanitizer report:
// - the one-pass check and the general decode agree: IsPlainCanonicalEvent(bytes) implies
//   DecodeEvent accepts them as canonical, and DecodeEventWords decides as DecodeEvent does;
// - an accepted event's canonical bytes decode again, are a fixed point, equal the input when
//   DecodeEvent called it canonical, and equal CanonicalBytesInto's (with and without a size
//   hint); they differ from the decoded event in no payload field;
// - the stored layout (MakeStoredEventTemplate, FillStoredEvent) is exactly the canonical
//   bytes of the event with its sequence and prevHash set, and TakePlainEvent, when it takes
//   the event, lays it out the same and reads the same time and idempotency key;
// - PeekEvent reads the body DecodeEvent read; the JSON rendering does not throw.

#include <capnp/message.h>
#include <kj/exception.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::fuzz {
namespace {

// Inputs beyond this teach the fuzzer nothing new (the codec's own limit is kEventBytesMax).
constexpr size_t kInputBytesMax = 64 << 10;
constexpr uint64_t kStoredSequence = 7;

// The canonical bytes of `event` with the two fields the ledger sets.
std::string WithSequence(schema::Event::Reader event, const schema::Hash& prev_hash) {
  capnp::MallocMessageBuilder message;
  message.setRoot(event);
  auto root = message.getRoot<schema::Event>();
  root.setSequence(kStoredSequence);
  root.setPrevHash(capnp::Data::Reader(prev_hash.data(), prev_hash.size()));
  return schema::EncodeEvent(message);
}

void RunOne(std::string_view bytes) {
  Result<schema::DecodedEvent> decoded = schema::DecodeEvent(bytes);
  if (schema::IsPlainCanonicalEvent(bytes)) {
    ADM_CHECK(decoded.ok() && decoded->canonical(),
              "IsPlainCanonicalEvent accepted bytes DecodeEvent refused or found non-canonical");
  }
  std::unique_ptr<capnp::word[]> words;
  const size_t word_count = bytes.size() / sizeof(capnp::word);
  if (bytes.size() % sizeof(capnp::word) == 0 && word_count > 0) {
    words = std::make_unique<capnp::word[]>(word_count);
    std::memcpy(words.get(), bytes.data(), bytes.size());
    auto in_place = schema::DecodeEventWords(kj::arrayPtr(words.get(), word_count));
    ADM_CHECK(in_place.ok() == decoded.ok(), "DecodeEventWords %s what DecodeEvent %s",
              in_place.ok() ? "accepted" : "refused", decoded.ok() ? "accepted" : "refused");
    if (decoded.ok()) {
      ADM_CHECK(in_place->canonical() == decoded->canonical(), "canonical differs");
    }
  }
  if (!decoded.ok()) return;
  // Each check reads its own decode, as each reader in the project decodes for itself: a
  // reader's traversal budget (EventReaderOptions) is spent by every walk of the event, and a
  // small message whose pointers share their targets costs many words per walk.
  auto fresh = [&]() {
    auto d = schema::DecodeEvent(bytes);
    ADM_CHECK(d.ok(), "DecodeEvent decided differently the second time");
    return std::move(*d);
  };

  // Each walk of an accepted event (here a copy) fits its reader's traversal budget.
  const std::string canonical = schema::CanonicalBytes(fresh().root());
  if (decoded->canonical() && canonical != bytes) {
    size_t at = 0;
    while (at < canonical.size() && at < bytes.size() && canonical[at] == bytes[at]) ++at;
    ADM_CHECK(false, "bytes DecodeEvent called canonical canonicalize differently: %zu then %zu "
              "bytes, first difference at byte %zu", bytes.size(), canonical.size(), at);
  }
  auto again = schema::DecodeEvent(canonical);
  ADM_CHECK(again.ok(), "canonical bytes of an accepted event refused: %s",
            again.status().ToString().c_str());
  ADM_CHECK(again->canonical(), "canonical bytes not found canonical");
  ADM_CHECK(schema::CanonicalBytes(again->root()) == canonical, "canonical form is no fixed point");
  auto fresh_canonical = [&]() {
    auto d = schema::DecodeEvent(canonical);
    ADM_CHECK(d.ok(), "DecodeEvent decided differently the second time");
    return std::move(*d);
  };
  {
    const std::string differing =
        schema::FirstDifferingPayloadField(fresh().root(), fresh_canonical().root());
    ADM_CHECK(differing.empty(), "canonical form differs in %s", differing.c_str());
  }
  schema::WordBuffer buffer;
  ADM_CHECK(schema::CanonicalBytesInto(fresh().root(), &buffer) == canonical,
            "CanonicalBytesInto differs");
  ADM_CHECK(schema::CanonicalBytesInto(fresh().root(), &buffer, bytes.size()) == canonical,
            "CanonicalBytesInto with a size hint differs");

  schema::Hash prev_hash;
  for (size_t i = 0; i < prev_hash.size(); ++i) prev_hash[i] = static_cast<uint8_t>(i * 7 + 1);
  auto stored = schema::MakeStoredEventTemplate(bytes, fresh());
  if (stored.ok()) {
    schema::FillStoredEvent(kStoredSequence, prev_hash, &*stored);
    ADM_CHECK(stored->bytes == WithSequence(fresh_canonical().root(), prev_hash),
              "the stored layout is not the canonical event with its sequence and prevHash");
    auto read_back = schema::DecodeEvent(stored->bytes);
    ADM_CHECK(read_back.ok() && read_back->canonical(), "a stored event does not decode");
    ADM_CHECK(read_back->root().getSequence() == kStoredSequence, "sequence lost");
    ADM_CHECK(schema::HashFromData(read_back->root().getPrevHash()) == prev_hash, "prevHash lost");

    schema::StoredEventTemplate plain;
    int64_t recorded_at_ns = 0;
    std::string_view key;
    if (schema::TakePlainEvent(bytes, &plain, &recorded_at_ns, &key)) {
      schema::FillStoredEvent(kStoredSequence, prev_hash, &plain);
      ADM_CHECK(plain.bytes == stored->bytes, "TakePlainEvent laid the event out differently");
      schema::Event::Reader event = again->root();
      ADM_CHECK(recorded_at_ns == event.getRecordedAtNs(), "TakePlainEvent read another time");
      ADM_CHECK(key == std::string_view(event.getIdempotencyKey().cStr(),
                                        event.getIdempotencyKey().size()),
                "TakePlainEvent read another idempotency key");
    }
  }

  if (words != nullptr) {
    auto envelope = schema::PeekEvent(kj::arrayPtr(words.get(), word_count));
    ADM_CHECK(envelope.ok(), "PeekEvent refused an event DecodeEvent accepted: %s",
              envelope.status().ToString().c_str());
    ADM_CHECK(envelope->body == again->root().getBody().which(), "PeekEvent read another body");
  }
  // Rendering reads every field; DecodeEvent promised they are all readable.
  const std::string json = schema::EventToJson(fresh().root());
  (void)schema::EventFromJson(json);
  (void)schema::BodyName(fresh().root());
}

}  // namespace
}  // namespace admission::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > admission::fuzz::kInputBytesMax) return -1;
  admission::fuzz::RunOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
