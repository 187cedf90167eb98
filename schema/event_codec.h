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
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "schema/events.capnp.h"
#include "schema/result.h"
#include "schema/word_buffer.h"

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

// The same canonical bytes, laid out in `buffer` (reused from call to call, so a caller that
// canonicalizes many events allocates once) and viewed there until the next call with it.
// Builds the canonical copy as capnp::canonicalize does, without its second copy and its
// self-check that the copy is canonical: a caller comparing the view with stored canonical
// bytes would see any fault as a difference. With `expected_bytes` (the size of the bytes it
// will be compared with), the copy is first tried into that much space, which spares the walk
// that sizes the event; when it does not fit, the event is sized and copied again.
std::string_view CanonicalBytesInto(Event::Reader event, WordBuffer* buffer,
                                    size_t expected_bytes = 0);

// The chain value after an event: SHA-256(previous chain value || canonical bytes).
// Thread-safe; reuses one digest context per thread and the SHA-256 implementation fetched once.
Hash ChainHash(const Hash& previous, std::string_view canonical_bytes);
// SHA-256 of bytes (a snapshot's hash). Thread-safe, like ChainHash.
Hash Sha256Of(std::string_view bytes);
std::string HashHex(const Hash& hash);
Hash HashFromData(capnp::Data::Reader data);  // REQUIRES: data.size() == 32 (else all zero)
// A check state as Kueue writes it (Pending, Ready, Retry, Rejected; "Unknown" for a value this
// schema does not know), for people and labels.
const char* CheckStateName(CheckState state);

// An event decoded from bytes, owning an aligned copy of them (DecodeEvent) or viewing words
// the caller keeps (DecodeEventWords).
class DecodedEvent {
 public:
  Event::Reader root() const { return root_; }
  // The bytes were already in canonical form (what the ledger stores).
  bool canonical() const { return canonical_; }
  // The event's size in words, as it arrived (a builder copying it needs about as many).
  size_t word_count() const { return word_count_; }

 private:
  friend Result<DecodedEvent> DecodeEvent(std::string_view bytes);
  friend Result<DecodedEvent> DecodeEventWords(kj::ArrayPtr<const capnp::word> words);
  DecodedEvent() = default;
  // Decodes the words in segments_[0] (owned by words_ or by the caller).
  static Result<DecodedEvent> DecodeSegment(DecodedEvent decoded);
  std::unique_ptr<capnp::word[]> words_;
  size_t word_count_ = 0;
  kj::ArrayPtr<const capnp::word> segments_[1];
  std::unique_ptr<capnp::SegmentArrayMessageReader> reader_;
  Event::Reader root_;
  bool canonical_ = false;
};

// Decodes one event in the form every event travels and is stored in: canonical bytes (one
// segment, no segment table), as CanonicalBytes and EncodeEvent produce. Uses
// EventReaderOptions. Every pointer field the schema knows is read once, as the typed accessors
// read it (a walk planned once from the schema), so a malformed pointer, a text without its NUL
// or a list of the wrong element size is found here, not later in a caller that trusted a
// decoded event. Events in the plain canonical form take a one-pass check instead
// (IsPlainCanonicalEvent), which decides the same. Malformed, oversized or truncated bytes give
// kCorruption naming what failed; nothing throws.
Result<DecodedEvent> DecodeEvent(std::string_view bytes);
// The same over words the caller keeps alive and unchanged for the result's life: no copy.
Result<DecodedEvent> DecodeEventWords(kj::ArrayPtr<const capnp::word> words);

// What a reader of the ledger needs of an event without decoding it whole: its body's kind and
// the envelope fields replay reads. One bounded read of the root struct; the rest of the event
// is not checked (replay compares a decision's stored bytes whole instead).
struct EventEnvelope {
  Event::Body::Which body;
  uint32_t engine_version = 0;
  bool ends_batch = false;
  Hash prev_hash{};  // all zero unless prevHash has 32 bytes
};
// Errors: kCorruption (not a whole number of words, too large, or no readable root struct).
Result<EventEnvelope> PeekEvent(kj::ArrayPtr<const capnp::word> words);

// The one-pass check DecodeEvent tries first, on the raw words: true when `bytes` are in
// canonical form and every non-null pointer is a field the schema reads, of its type (so the
// general decode would accept them and find them canonical). False means "not in this form",
// not "malformed": DecodeEvent then decodes through a capnp reader and decides. Public for tests.
bool IsPlainCanonicalEvent(std::string_view bytes);

// The canonical bytes of the message's root Event, for handing events around.
std::string EncodeEvent(capnp::MessageBuilder& message);

// An event laid out as the ledger stores it, with `sequence` and `prevHash` still to be
// written: once FillStoredEvent has set them, `bytes` is exactly CanonicalBytes of the event
// with those two fields set. Where everything else lies depends only on the sequence being
// non-zero and prevHash having 32 bytes, which every stored event satisfies; so the ledger's
// serial step writes 40 bytes in place instead of rebuilding and canonicalizing the event.
struct StoredEventTemplate {
  std::string bytes;
  size_t sequence_offset = 0;   // 8 bytes, little-endian (capnp's byte order)
  size_t prev_hash_offset = 0;  // 32 bytes
};

// Lays out a decoded event for storage. Canonical input (what EncodeEvent produces) is spliced
// word by word: the root struct grows by the sequence word and the prevHash pointer if they
// were truncated away, and the 32 prevHash bytes take the place of whatever prevHash the input
// had; everything else is copied with its pointers' offsets moved. Other input is canonicalized
// first (the slow path). `bytes` must be the bytes `decoded` was decoded from.
// Errors (kInvalidArgument): the event cannot be canonicalized, or its stored form would
// exceed kEventBytesMax.
Result<StoredEventTemplate> MakeStoredEventTemplate(std::string_view bytes,
                                                    const DecodedEvent& decoded);

// The ledger's intake of one event in a single pass, for the form events normally arrive in
// (IsPlainCanonicalEvent): the checks DecodeEvent makes, the stored layout, and the two envelope
// fields sequencing needs; `idempotency_key` views `bytes` ("" when there is none). Returns
// false, for any other form or an event too large once sequenced, without a verdict: decode
// the general way then (DecodeEvent, MakeStoredEventTemplate).
bool TakePlainEvent(std::string_view bytes, StoredEventTemplate* stored,
                    int64_t* recorded_at_ns, std::string_view* idempotency_key);

// Writes sequence and prevHash into a template. REQUIRES: sequence != 0.
void FillStoredEvent(uint64_t sequence, const Hash& prev_hash, StoredEventTemplate* stored);

// Human and machine rendering through Cap'n Proto's JSON codec (Data as hex).
std::string EventToJson(Event::Reader event);
// Parses JSON into a new event message. Unknown fields and type mismatches are refused.
Result<std::string> EventFromJson(std::string_view json);

// Admission checks' podSetUpdates in one line, for logs and explain:
// "main: labels a=b, nodeSelector x=y, tolerations k=v:NoSchedule; other: ...".
std::string DescribePodSetUpdates(capnp::List<PodSetUpdate>::Reader updates);

// The name of the body's union member, e.g. "workloadSubmitted".
std::string BodyName(Event::Reader event);
bool IsDecision(Event::Body::Which which);

// The path of the first field where two events differ ("body.workloadSubmitted.workload.name"),
// ignoring the envelope fields the ledger and intake assign (sequence, recordedAtNs, prevHash).
// Empty when they are equal in every other field.
std::string FirstDifferingPayloadField(Event::Reader a, Event::Reader b);
// The same, also ignoring the actor and the idempotency key: whether `b` repeats the request
// that recorded `a` (found by that key; a retry may come through another identity).
std::string FirstDifferingRequestField(Event::Reader a, Event::Reader b);

}  // namespace admission::schema
