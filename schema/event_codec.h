#pragma once
// Encoding, decoding, canonical form, hashing and JSON rendering of ledger events.
// Every decoder of stored or untrusted bytes goes through DecodeEvent, which bounds what a
// reader may traverse.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "schema/events.capnp.h"
#include "schema/result.h"

namespace admission::schema {

// Limits on one event. An event larger than this is refused at intake and at decode.
inline constexpr size_t kEventBytesMax = 1 << 20;
inline constexpr int kEventNestingMax = 32;

// SHA-256 digest.
using Hash = std::array<uint8_t, 32>;
inline constexpr Hash kGenesisHash{};  // the chain value before sequence 1

// The reader options used for every event: traversal bounded by the event size limit.
capnp::ReaderOptions EventReaderOptions();

// Canonical bytes of an event (capnp::canonicalize of the root), as a string so it can be
// stored and compared directly.
std::string CanonicalBytes(Event::Reader event);

// The chain value after an event: SHA-256(previous chain value || canonical bytes).
Hash ChainHash(const Hash& previous, std::string_view canonical_bytes);
std::string HashHex(const Hash& hash);
Hash HashFromData(capnp::Data::Reader data);  // REQUIRES: data.size() == 32 (else all zero)

// An event decoded from bytes, owning an aligned copy of them.
class DecodedEvent {
 public:
  Event::Reader root() const { return root_; }
  // The bytes were already in canonical form (what the ledger stores).
  bool canonical() const { return canonical_; }

 private:
  friend Result<DecodedEvent> DecodeEvent(std::string_view bytes);
  DecodedEvent() = default;
  std::unique_ptr<capnp::word[]> words_;
  size_t word_count_ = 0;
  kj::ArrayPtr<const capnp::word> segments_[1];
  std::unique_ptr<capnp::SegmentArrayMessageReader> reader_;
  Event::Reader root_;
  bool canonical_ = false;
};

// Decodes one event in the form every event travels and is stored in: canonical bytes (one
// segment, no segment table), as CanonicalBytes and EncodeEvent produce. Uses EventReaderOptions. Malformed, oversized or truncated bytes give
// kCorruption naming what failed; nothing throws.
Result<DecodedEvent> DecodeEvent(std::string_view bytes);

// The canonical bytes of the message's root Event, for handing events around.
std::string EncodeEvent(capnp::MessageBuilder& message);

// Human and machine rendering through Cap'n Proto's JSON codec (Data as hex).
std::string EventToJson(Event::Reader event);
// Parses JSON into a new event message. Unknown fields and type mismatches are refused.
Result<std::string> EventFromJson(std::string_view json);

// The name of the body's union member, e.g. "workloadSubmitted".
std::string BodyName(Event::Reader event);
bool IsDecision(Event::Body::Which which);

// The path of the first field where two events differ ("body.workloadSubmitted.workload.name"),
// ignoring the envelope fields the ledger and intake assign (sequence, recordedAtNs, prevHash).
// Empty when they are equal in every other field.
std::string FirstDifferingPayloadField(Event::Reader a, Event::Reader b);

}  // namespace admission::schema
