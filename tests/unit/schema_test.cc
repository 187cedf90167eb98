#include <algorithm>
#include <cstring>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "schema/enum_names.h"
#include "schema/event_codec.h"
#include "schema/workload_refs.h"
#include "tests/unit/event_gen.h"

namespace admission::schema {
namespace {

enum class Shade : uint8_t { kNone, kLight, kDark };
const char* ShadeName(Shade shade) {
  switch (shade) {
    case Shade::kNone: return "";
    case Shade::kLight: return "light";
    case Shade::kDark: return "dark";
  }
  return "?";
}

// EnumFromName finds exactly the enumerators of its range by their names (the first and the
// last included), and nothing for any other text or for an enumerator outside the range.
TEST(EnumFromName, FindsTheEnumeratorsOfItsRangeByName) {
  EXPECT_EQ(EnumFromName("light", Shade::kLight, Shade::kDark, ShadeName), Shade::kLight);
  EXPECT_EQ(EnumFromName("dark", Shade::kLight, Shade::kDark, ShadeName), Shade::kDark);
  EXPECT_EQ(EnumFromName("", Shade::kNone, Shade::kDark, ShadeName), Shade::kNone);
  EXPECT_FALSE(EnumFromName("", Shade::kLight, Shade::kDark, ShadeName));
  EXPECT_FALSE(EnumFromName("Dark", Shade::kLight, Shade::kDark, ShadeName));
  EXPECT_FALSE(EnumFromName("dark", Shade::kNone, Shade::kLight, ShadeName));
  const std::string_view with_nul("light\0", 6);
  EXPECT_FALSE(EnumFromName(with_nul, Shade::kLight, Shade::kDark, ShadeName));
}

using admission::testing::BuildEvent;
using admission::testing::EventSpec;
using admission::testing::GenEventSpec;

// ---------------------------------------------------------------------------------------------
// Random events beyond event_gen.h's: any envelope (a sequence and a prevHash of any length
// already set, or not), null or empty or filled texts, bodies with empty structs, lists and a
// union inside a group, no body at all; built in a random order, so that the bytes taken
// straight from the builder's segment are often not canonical.

std::string RandomText() {
  return *rc::gen::container<std::string>(*rc::gen::inRange<size_t>(0, 20),
                                          rc::gen::inRange('a', 'z'));
}

// Sets a text field to absent, "" or a random value.
template <typename SetFn>
void MaybeSetText(SetFn set) {
  switch (*rc::gen::inRange(0, 3)) {
    case 0: break;
    case 1: set(""); break;
    default: set(RandomText()); break;
  }
}

void BuildBody(Event::Builder event) {
  switch (*rc::gen::inRange(0, 7)) {
    case 0: break;  // no body: the union's first member, a null pointer
    case 1: {
      auto clock = event.initBody().initClockAdvanced();  // often an empty struct
      if (*rc::gen::arbitrary<bool>()) clock.setToNs(*rc::gen::arbitrary<int64_t>());
      break;
    }
    case 2: {
      auto w = event.initBody().initWorkloadDeleted().initWorkload();
      MaybeSetText([&](const std::string& t) { w.setUid(t); });
      MaybeSetText([&](const std::string& t) { w.setName(t); });
      MaybeSetText([&](const std::string& t) { w.setNamespace(t); });
      break;
    }
    case 3: {
      auto f = event.initBody().initFlavorDefined();
      const auto labels = *rc::gen::inRange<unsigned>(0, 4);
      auto list = f.initNodeLabels(labels);
      for (unsigned i = 0; i < labels; ++i) {
        MaybeSetText([&](const std::string& t) { list[i].setValue(t); });
        MaybeSetText([&](const std::string& t) { list[i].setKey(t); });
      }
      MaybeSetText([&](const std::string& t) { f.setName(t); });
      break;
    }
    case 4: {
      auto r = event.initBody().initRevocationRequested();
      switch (*rc::gen::inRange(0, 3)) {
        case 0: r.getTarget().initWorkload().setName(RandomText()); break;
        case 1: r.getTarget().setCheck(RandomText()); break;
        default: r.getTarget().setFlavor(RandomText()); break;
      }
      MaybeSetText([&](const std::string& t) { r.setReason(t); });
      r.setDrainDeadlineNs(*rc::gen::arbitrary<int64_t>());
      break;
    }
    case 5: {
      auto a = event.initBody().initAdmitted();
      const auto n = *rc::gen::inRange<unsigned>(0, 4);
      auto versions = a.initCheckVersions(n);
      for (unsigned i = 0; i < n; ++i) versions.set(i, *rc::gen::arbitrary<uint64_t>());
      MaybeSetText([&](const std::string& t) { a.setFencingToken(t); });
      break;
    }
    default: {
      auto q = event.initBody().initClusterQueueDefined();
      MaybeSetText([&](const std::string& t) { q.setName(t); });
      const auto groups = *rc::gen::inRange<unsigned>(0, 3);
      auto list = q.initResourceGroups(groups);
      for (unsigned g = 0; g < groups; ++g) {
        const auto covered = *rc::gen::inRange<unsigned>(0, 3);
        auto names = list[g].initCoveredResources(covered);
        for (unsigned i = 0; i < covered; ++i) names.set(i, RandomText());
        auto flavors = list[g].initFlavors(*rc::gen::inRange<unsigned>(0, 3));
        for (auto flavor : flavors) {
          MaybeSetText([&](const std::string& t) { flavor.setName(t); });
          if (*rc::gen::arbitrary<bool>()) flavor.initResources(1)[0].setNominalQuotaMilli(5);
        }
      }
      if (*rc::gen::arbitrary<bool>()) q.setFairSharingWeightMilli(0);
      break;
    }
  }
}

// Bytes of a random event and whether they were taken canonical (EncodeEvent) or raw.
std::string RandomEventBytes() {
  capnp::MallocMessageBuilder message;
  Event::Builder event = message.initRoot<Event>();
  std::vector<int> steps = {0, 1, 2, 3, 4, 5};
  if (*rc::gen::arbitrary<bool>()) steps = *rc::gen::arbitrary<std::vector<int>>();
  for (int step : steps) {
    switch (((step % 6) + 6) % 6) {
      case 0: MaybeSetText([&](const std::string& t) { event.setActor(t); }); break;
      case 1: MaybeSetText([&](const std::string& t) { event.setIdempotencyKey(t); }); break;
      case 2: {
        if (*rc::gen::arbitrary<bool>()) {
          const auto hash = *rc::gen::container<std::vector<uint8_t>>(
              *rc::gen::inRange<size_t>(0, 41), rc::gen::arbitrary<uint8_t>());
          event.setPrevHash(capnp::Data::Reader(hash.data(), hash.size()));
        }
        break;
      }
      case 3: BuildBody(event); break;
      case 4:
        if (*rc::gen::arbitrary<bool>()) event.setSequence(*rc::gen::arbitrary<uint64_t>());
        if (*rc::gen::arbitrary<bool>()) event.setRecordedAtNs(*rc::gen::arbitrary<int64_t>());
        break;
      default:
        if (*rc::gen::arbitrary<bool>()) event.setCausationSequence(*rc::gen::arbitrary<uint64_t>());
        if (*rc::gen::arbitrary<bool>()) event.setEngineVersion(*rc::gen::arbitrary<uint32_t>());
        if (*rc::gen::arbitrary<bool>()) event.setEndsBatch(true);
        break;
    }
  }
  if (*rc::gen::arbitrary<bool>()) return EncodeEvent(message);
  // Straight from the builder: pre-order only if the fields happened to be set in order.
  auto segments = message.getSegmentsForOutput();
  RC_PRE(segments.size() == 1u);
  kj::ArrayPtr<const char> chars = segments[0].asChars();
  return std::string(chars.begin(), chars.size());
}

TEST(EventCodec, DecodesWhatItEncoded) {
  EventSpec spec{0, "team-a", "train-1", "uid-1", 0, "key-1", "ops"};
  std::string bytes = BuildEvent(spec, 42);
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  Event::Reader event = decoded->root();
  EXPECT_TRUE(decoded->canonical());
  EXPECT_EQ(event.getRecordedAtNs(), 42);
  EXPECT_EQ(std::string(event.getIdempotencyKey().cStr()), "key-1");
  ASSERT_EQ(event.getBody().which(), Event::Body::WORKLOAD_DELETED);
  EXPECT_EQ(std::string(event.getBody().getWorkloadDeleted().getWorkload().getName().cStr()),
            "train-1");
  EXPECT_EQ(BodyName(event), "workloadDeleted");
  EXPECT_FALSE(IsDecision(event.getBody().which()));
}

// The history keys of a stored event, read by the history writer from one reused buffer, are
// HistoryKeysOf's: each once, in order, from aligned bytes or not; the buffer keeps nothing of
// the event before. A workload named by NS/NAME gets that key only; one referred to by uid
// alone gets its uid's.
TEST(HistoryKeys, TheWritersKeysAreHistoryKeysOfEachOnceFromAnyAlignment) {
  capnp::MallocMessageBuilder m;
  auto preempted = m.initRoot<Event>().initBody().initPreempted();
  auto victim = preempted.initWorkload();
  victim.setNamespace("team-a");
  victim.setName("train-1");
  victim.setUid("uid-1");
  preempted.initPreemptor().setUid("uid-2");  // by uid alone
  const std::string bytes = EncodeEvent(m);
  const std::vector<std::string> want = {"nteam-a/train-1", "uuid-2"};
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  ASSERT_TRUE(decoded.ok());
  std::vector<std::string> keys;
  HistoryKeysOf(decoded->root(), &keys);
  EXPECT_EQ(keys, want);

  capnp::MallocMessageBuilder twice;
  auto self = twice.initRoot<Event>().initBody().initPreempted();
  for (auto ref : {self.initWorkload(), self.initPreemptor()}) {
    ref.setNamespace("team-a");
    ref.setName("train-1");
    ref.setUid("uid-1");
  }
  HistoryKeysOf(twice.getRoot<Event>().asReader(), &keys);
  EXPECT_EQ(keys, std::vector<std::string>{"nteam-a/train-1"}) << "the same workload twice: one key";

  HistoryKeyTexts texts;
  HistoryKeysOfCanonical(BuildEvent(EventSpec{0, "ns", "other", "uid-9", 0, "", ""}, 1), &texts);
  ASSERT_EQ(texts.size(), 1u);
  for (size_t shift : {0, 1, 3}) {
    std::string shifted(shift, 'x');
    shifted += bytes;
    HistoryKeysOfCanonical(std::string_view(shifted).substr(shift), &texts);
    std::vector<std::string> got;
    for (size_t i = 0; i < texts.size(); ++i) got.emplace_back(texts[i]);
    EXPECT_EQ(got, want) << "shifted by " << shift;
  }
}

TEST(EventCodec, RefusesTruncatedAndOversizedBytes) {
  std::string bytes = BuildEvent(EventSpec{2, "h100", "H100", "eu", 0, "", ""}, 1);
  EXPECT_EQ(DecodeEvent(bytes.substr(0, bytes.size() - 8)).status().code(), Code::kCorruption);
  EXPECT_EQ(DecodeEvent("").status().code(), Code::kCorruption);
  EXPECT_EQ(DecodeEvent(std::string(7, 'x')).status().code(), Code::kCorruption);
  EXPECT_EQ(DecodeEvent(std::string(kEventBytesMax + 8, '\0')).status().code(),
            Code::kCorruption);
}

TEST(EventCodec, RendersAndParsesJson) {
  std::string bytes = BuildEvent(EventSpec{3, "w1", "image-scan", "ok", 7, "", "scanner"}, 5);
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  ASSERT_TRUE(decoded.ok());
  std::string json = EventToJson(decoded->root());
  EXPECT_NE(json.find("\"checkStateReported\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"state\":\"ready\""), std::string::npos) << json;
  Result<std::string> back = EventFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, bytes);
  EXPECT_EQ(EventFromJson("{\"body\":{\"noSuchEvent\":{}}}").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(EventFromJson("not json").status().code(), Code::kInvalidArgument);
}

TEST(EventCodec, NamesFirstDifferingPayloadField) {
  std::string a = BuildEvent(EventSpec{2, "h100", "H100", "eu", 0, "k", "ops"}, 1);
  std::string b = BuildEvent(EventSpec{2, "h100", "H100", "us", 0, "k", "ops"}, 2);
  std::string c = BuildEvent(EventSpec{1, "", "", "", 0, "k", "ops"}, 1);
  auto da = DecodeEvent(a), db = DecodeEvent(b), dc = DecodeEvent(c);
  EXPECT_EQ(FirstDifferingPayloadField(da->root(), db->root()),
            "body.flavorDefined.nodeLabels[1].value");
  EXPECT_EQ(FirstDifferingPayloadField(da->root(), dc->root()), "body.flavorDefined");
  // The recorded time is not payload: the same request at another time is the same payload.
  std::string a_later = BuildEvent(EventSpec{2, "h100", "H100", "eu", 0, "k", "ops"}, 99);
  EXPECT_EQ(FirstDifferingPayloadField(da->root(), DecodeEvent(a_later)->root()), "");
}

TEST(ChainHash, IsSha256OfPreviousAndBytes) {
  // python3 -c "import hashlib; print(hashlib.sha256(b'\\0' * 32 + b'abc').hexdigest())"
  EXPECT_EQ(HashHex(ChainHash(kGenesisHash, "abc")),
            "365aa7d8f7f9402c4b9434502b4cc89ddb09fe50d7cd95b493b834c62d5a5370");
  EXPECT_NE(ChainHash(ChainHash(kGenesisHash, "abc"), "abc"), ChainHash(kGenesisHash, "abc"));
}

RC_GTEST_PROP(EventCodec, CanonicalBytesSurviveDecodeAndReencode, ()) {
  EventSpec spec = *GenEventSpec();
  std::string bytes = BuildEvent(spec, *rc::gen::inRange<int64_t>(0, 1'000'000'000));
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  RC_ASSERT(decoded.ok());
  RC_ASSERT(decoded->canonical());
  RC_ASSERT(CanonicalBytes(decoded->root()) == bytes);
  RC_ASSERT(FirstDifferingPayloadField(decoded->root(), decoded->root()).empty());
}


// The layout into a reused buffer is capnp::canonicalize's, whatever size it is told to expect:
// the right one, too little (it sizes the event and lays it out again) or too much.
RC_GTEST_PROP(EventCodec, CanonicalBytesIntoIsCanonicalBytesWhateverSizeIsExpected, ()) {
  const std::string bytes = RandomEventBytes();
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  RC_PRE(decoded.ok());
  const std::string canonical = CanonicalBytes(decoded->root());
  WordBuffer buffer;
  if (*rc::gen::arbitrary<bool>()) buffer.resize(*rc::gen::inRange<size_t>(0, 64));  // reused
  const size_t expected = *rc::gen::element<size_t>(
      0, canonical.size(), canonical.size() - 8, canonical.size() + 8, 8, 3);
  RC_ASSERT(std::string(CanonicalBytesInto(decoded->root(), &buffer, expected)) == canonical);
  RC_ASSERT(std::string(CanonicalBytesInto(decoded->root(), &buffer)) == canonical);
}

// Decoding in place accepts and refuses what decoding a copy does, and reads the same event;
// the envelope peek reads the same envelope.
RC_GTEST_PROP(EventCodec, DecodeInPlaceAndPeekAgreeWithDecode, ()) {
  std::string bytes = RandomEventBytes();
  if (*rc::gen::arbitrary<bool>() && bytes.size() > 8) {
    const size_t at = *rc::gen::inRange<size_t>(0, bytes.size());
    bytes[at] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());  // often malformed
  }
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), words.size() * sizeof(capnp::word));
  const kj::ArrayPtr<const capnp::word> view(words.data(), words.size());
  Result<DecodedEvent> copy = DecodeEvent(bytes);
  Result<DecodedEvent> in_place = DecodeEventWords(view);
  RC_ASSERT(copy.ok() == in_place.ok());
  if (!copy.ok()) return;
  RC_ASSERT(in_place->canonical() == copy->canonical());
  RC_ASSERT(EventToJson(in_place->root()) == EventToJson(copy->root()));
  Result<EventEnvelope> peek = PeekEvent(view);
  RC_ASSERT(peek.ok());  // whatever decodes whole has a readable envelope
  Event::Reader e = copy->root();
  RC_ASSERT(peek->body == e.getBody().which());
  RC_ASSERT(peek->engine_version == e.getEngineVersion());
  RC_ASSERT(peek->ends_batch == e.getEndsBatch());
  RC_ASSERT(peek->prev_hash == HashFromData(e.getPrevHash()));
}

TEST(EventCodec, PeekRefusesWhatHasNoRootStruct) {
  EXPECT_EQ(PeekEvent(kj::ArrayPtr<const capnp::word>()).status().code(), Code::kCorruption);
  const capnp::word far_root[1] = {};  // a null root pointer reads as the default: fine
  EXPECT_TRUE(PeekEvent(kj::arrayPtr(far_root, 1)).ok());
  std::string bytes = BuildEvent(EventSpec{2, "h100", "H100", "eu", 0, "", ""}, 1);
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  // A root pointer whose struct lies beyond the segment.
  reinterpret_cast<uint32_t*>(words.data())[0] = 1000u << 2;
  EXPECT_EQ(PeekEvent(kj::arrayPtr(words.data(), words.size())).status().code(),
            Code::kCorruption);
}

// The stored bytes the ledger writes must be exactly the canonical bytes of the sequenced
// event: what the ledger computed before splicing (rebuild, set the two fields, canonicalize).
RC_GTEST_PROP(StoredEventTemplate, FilledTemplateIsCanonicalBytesOfTheSequencedEvent, ()) {
  const std::string bytes = RandomEventBytes();
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  RC_ASSERT(decoded.ok());
  RC_TAG(decoded->canonical() ? "canonical input (spliced)" : "other input (canonicalized)");
  Result<StoredEventTemplate> stored = MakeStoredEventTemplate(bytes, *decoded);
  RC_ASSERT(stored.ok());
  // The ledger's one-pass intake agrees with the general path wherever it applies.
  StoredEventTemplate plain;
  int64_t recorded_at_ns = 0;
  std::string_view key;
  if (TakePlainEvent(bytes, &plain, &recorded_at_ns, &key)) {
    RC_ASSERT(decoded->canonical());
    RC_ASSERT(plain.bytes == stored->bytes);
    RC_ASSERT(plain.sequence_offset == stored->sequence_offset);
    RC_ASSERT(plain.prev_hash_offset == stored->prev_hash_offset);
    RC_ASSERT(recorded_at_ns == decoded->root().getRecordedAtNs());
    RC_ASSERT(key == std::string_view(decoded->root().getIdempotencyKey().cStr()));
  }
  const uint64_t sequence = *rc::gen::inRange<uint64_t>(1, UINT64_MAX);
  Hash prev{};
  for (uint8_t& b : prev) b = *rc::gen::arbitrary<uint8_t>();
  FillStoredEvent(sequence, prev, &*stored);

  capnp::MallocMessageBuilder message;
  message.setRoot(decoded->root());
  Event::Builder root = message.getRoot<Event>();
  root.setSequence(sequence);
  root.setPrevHash(capnp::Data::Reader(prev.data(), prev.size()));
  RC_ASSERT(stored->bytes == CanonicalBytes(root.asReader()));

  Result<DecodedEvent> back = DecodeEvent(stored->bytes);
  RC_ASSERT(back.ok());
  RC_ASSERT(back->canonical());
  RC_ASSERT(back->root().getSequence() == sequence);
  RC_ASSERT(HashFromData(back->root().getPrevHash()) == prev);
  RC_ASSERT(FirstDifferingPayloadField(back->root(), decoded->root()).empty());
}

TEST(StoredEventTemplate, SplicesTheSmallestEventsAndRefusesSequenceZero) {
  capnp::MallocMessageBuilder message;
  message.initRoot<Event>();  // every field default: the root is the empty struct
  const std::string bytes = EncodeEvent(message);
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  Result<StoredEventTemplate> stored = MakeStoredEventTemplate(bytes, *decoded);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  FillStoredEvent(1, kGenesisHash, &*stored);
  Event::Builder root = message.getRoot<Event>();
  root.setSequence(1);
  root.setPrevHash(capnp::Data::Reader(kGenesisHash.data(), kGenesisHash.size()));
  EXPECT_EQ(stored->bytes, CanonicalBytes(root.asReader()));
  EXPECT_DEATH(FillStoredEvent(0, kGenesisHash, &*stored), "sequence 0");
}

// The reflective walk DecodeEvent used before its planned one: every field through the dynamic
// API. Kept here as the reference the planned walk must agree with.
void ReflectiveTouch(const capnp::DynamicValue::Reader& value);

void ReflectiveTouchStruct(const capnp::DynamicStruct::Reader& reader) {
  for (capnp::StructSchema::Field field : reader.getSchema().getNonUnionFields()) {
    ReflectiveTouch(reader.get(field));
  }
  KJ_IF_MAYBE(field, reader.which()) { ReflectiveTouch(reader.get(*field)); }
}

void ReflectiveTouch(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::TEXT: (void)value.as<capnp::Text>().cStr(); break;
    case capnp::DynamicValue::DATA: (void)value.as<capnp::Data>().size(); break;
    case capnp::DynamicValue::LIST:
      for (auto element : value.as<capnp::DynamicList>()) ReflectiveTouch(element);
      break;
    case capnp::DynamicValue::STRUCT: ReflectiveTouchStruct(value.as<capnp::DynamicStruct>()); break;
    default: break;
  }
}

// What DecodeEvent must decide, read the slow way: accepted when the event reaches no more
// words than it holds (pointers that share their targets make every walk cost more than the
// event's size), every field reads through the dynamic API, and the whole event copies (as capnp::canonicalize and MessageBuilder::setRoot
// copy it: pointers no field reads included) within half of a reader's traversal budget, so
// that a caller can walk an accepted event twice (a list of elements of no size costs a word
// of budget per element per walk while holding none); canonical when that copy is the bytes
// and MessageReader::isCanonical agrees. Each walk has a reader of its own.
struct ReflectiveDecode {
  bool accepted = false;
  bool canonical = false;
};

ReflectiveDecode DecodeReflectively(const std::string& bytes) {
  ReflectiveDecode out;
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) return out;
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  kj::ArrayPtr<const capnp::word> segment(words.data(), words.size());
  auto reader = [&](uint64_t traversal_words) {
    capnp::ReaderOptions options = EventReaderOptions();
    options.traversalLimitInWords = traversal_words;
    return std::make_unique<capnp::SegmentArrayMessageReader>(kj::arrayPtr(&segment, 1), options);
  };
  const uint64_t budget = EventReaderOptions().traversalLimitInWords;
  out.accepted = kj::runCatchingExceptions([&]() {
                   auto touch = reader(budget);
                   KJ_REQUIRE(touch->getRoot<Event>().totalSize().wordCount + 1 <= words.size(),
                              "shared targets");
                   ReflectiveTouchStruct(capnp::DynamicStruct::Reader(touch->getRoot<Event>()));
                   auto copy = reader(budget / 2);
                   kj::Array<capnp::word> canonical = capnp::canonicalize(copy->getRoot<Event>());
                   out.canonical = std::string(canonical.asChars().begin(),
                                               canonical.asChars().size()) == bytes &&
                                   reader(budget)->isCanonical();
                 }) == nullptr;
  return out;
}

bool ReflectiveWalkAccepts(const std::string& bytes) { return DecodeReflectively(bytes).accepted; }

// Random bytes near valid events: a random event with up to 3 edited bytes.
std::string EditedEventBytes() {
  std::string bytes = RandomEventBytes();
  const int edits = *rc::gen::inRange(0, 4);
  for (int i = 0; i < edits; ++i) {
    const size_t offset = *rc::gen::inRange<size_t>(0, bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ *rc::gen::inRange<int>(1, 256));
  }
  return bytes;
}

// The one-pass check claims only what the general decode would confirm.
RC_GTEST_PROP(EventCodec, PlainCanonicalCheckImpliesReflectiveAcceptanceAndCanonicalForm, ()) {
  const std::string bytes = EditedEventBytes();
  const bool plain = IsPlainCanonicalEvent(bytes);
  const ReflectiveDecode reference = DecodeReflectively(bytes);
  RC_TAG(plain ? "plain canonical" : reference.accepted ? "other, accepted" : "other, refused");
  if (plain) {
    RC_ASSERT(reference.accepted);
    RC_ASSERT(reference.canonical);
  }
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  RC_ASSERT(decoded.ok() == reference.accepted);
  if (decoded.ok()) RC_ASSERT(decoded->canonical() == reference.canonical);
}

// Events as EncodeEvent makes them take the one-pass check (else the write path would pay the
// general decode), unless their root is the empty struct.
RC_GTEST_PROP(EventCodec, EncodedEventsTakeThePlainCanonicalCheck, ()) {
  std::string bytes = RandomEventBytes();
  Result<DecodedEvent> decoded = DecodeEvent(bytes);
  RC_ASSERT(decoded.ok());
  RC_PRE(decoded->canonical() && bytes.size() > sizeof(capnp::word));
  RC_ASSERT(IsPlainCanonicalEvent(bytes));
}

// Whatever the bytes, DecodeEvent refuses exactly what reading every field through the dynamic
// API and copying the event refuse: the planned walk is as strict as the reflective one was,
// and no stricter.
RC_GTEST_PROP(EventCodec, DecodeRefusesExactlyWhatTheReflectiveWalkRefuses, ()) {
  const std::string bytes = EditedEventBytes();
  const bool accepted = DecodeEvent(bytes).ok();
  RC_TAG(accepted ? "accepted" : "refused");
  RC_ASSERT(accepted == ReflectiveWalkAccepts(bytes));
}

// Found by tests/fuzz/event_fuzz.cc and rpc_fuzz.cc: a malformed pointer in a slot no field of
// the event's current shape reads (another union member's, or an unknown member's) was
// accepted, and copying the decoded event then threw (Service::Stage's setRoot, through
// admitd's record, or CanonicalBytes).
TEST(EventCodec, RefusesMalformedPointersInSlotsNoFieldReads) {
  capnp::MallocMessageBuilder message;
  Event::Builder event = message.initRoot<Event>();
  event.setActor("a");
  event.initBody().initWorkloadDeleted().initWorkload().setName("w");
  const std::string good = EncodeEvent(message);
  ASSERT_TRUE(DecodeEvent(good).ok());
  // The body's member slot: the one pointer slot of the union (every member shares it).
  capnp::StructSchema body = capnp::Schema::from<Event::Body>();
  const uint32_t slot = body.getFieldByName("workloadDeleted").getProto().getSlot().getOffset();
  const uint32_t discriminant_offset = body.getProto().getStruct().getDiscriminantOffset();
  uint64_t root;
  std::memcpy(&root, good.data(), sizeof root);
  const uint32_t data_words = static_cast<uint32_t>(root >> 32) & 0xffff;
  const size_t pointer_at = (1 + data_words + slot) * sizeof(capnp::word);
  ASSERT_LT(pointer_at + 8, good.size());
  // A struct pointer far past the end of the message.
  const uint64_t out_of_bounds = uint64_t{0x10000} << 2 | uint64_t{1} << 32;
  // A member this schema does not know (a newer writer's): no field reads its slot.
  for (const uint16_t member : {uint16_t{127}, uint16_t{1000}}) {
    std::string bad = good;
    std::memcpy(bad.data() + pointer_at, &out_of_bounds, sizeof out_of_bounds);
    std::memcpy(bad.data() + sizeof(capnp::word) + discriminant_offset * 2, &member, 2);
    Result<DecodedEvent> decoded = DecodeEvent(bad);
    EXPECT_FALSE(decoded.ok()) << "member " << member;
    if (decoded.ok()) {
      EXPECT_NO_THROW((void)CanonicalBytes(decoded->root())) << "member " << member;
    }
  }
}

TEST(EventCodec, RefusesTextWithoutNulAndPointersOfTheWrongKind) {
  capnp::MallocMessageBuilder message;
  Event::Builder event = message.initRoot<Event>();
  event.setActor("ab");
  event.initBody().initWorkloadDeleted().initWorkload().setName("name");
  const std::string good = EncodeEvent(message);
  ASSERT_TRUE(DecodeEvent(good).ok());
  // Word 5 is the actor pointer (after the root pointer and the four data words); its text
  // "ab\0" is the first object after the root struct.
  const size_t actor_text = (1 + 4 + 4) * sizeof(capnp::word);
  ASSERT_EQ(good.substr(actor_text, 3), std::string("ab\0", 3));
  std::string no_nul = good;
  no_nul[actor_text + 2] = 'c';
  EXPECT_EQ(DecodeEvent(no_nul).status().code(), Code::kCorruption);
  std::string struct_kind = good;
  struct_kind[5 * sizeof(capnp::word)] = static_cast<char>(struct_kind[5 * sizeof(capnp::word)] & ~3);
  EXPECT_EQ(DecodeEvent(struct_kind).status().code(), Code::kCorruption);
  std::string word_elements = good;  // element size 2 (bytes) -> 5 (eight bytes)
  word_elements[5 * sizeof(capnp::word) + 4] =
      static_cast<char>((word_elements[5 * sizeof(capnp::word) + 4] & ~7) | 5);
  EXPECT_EQ(DecodeEvent(word_elements).status().code(), Code::kCorruption);
}
}  // namespace
}  // namespace admission::schema

namespace admission::schema {
namespace {

// An event holding a list of `count` labels that are all empty: canonical form truncates each
// to a struct of no size, so the bytes stay small while every walk of the list costs `count`
// words of its reader's traversal budget (capnp's guard against amplification).
std::string EventWithEmptyLabels(uint32_t count) {
  capnp::MallocMessageBuilder message;
  Event::Builder event = message.initRoot<Event>();
  event.setActor("a");
  ResourceFlavorDef::Builder flavor = event.initBody().initFlavorDefined();
  flavor.setName("f");
  flavor.initNodeLabels(count);
  return EncodeEvent(message);
}

// Found by tests/fuzz/rpc_fuzz.cc: an accepted event whose one walk cost more than a third of
// the budget left a caller's copy (Service::Stage's setRoot) to throw, because the decode's own
// walks had spent the reader it handed out. An accepted event now costs at most half of the
// budget per walk, in a reader whose whole budget is the caller's; a costlier one is refused.
TEST(EventCodec, AcceptedEventsCanBeWalkedTwiceAndCostlierOnesAreRefused) {
  const uint64_t half = EventReaderOptions().traversalLimitInWords / 2;
  const std::string fits = EventWithEmptyLabels(static_cast<uint32_t>(half - 64));
  ASSERT_LT(fits.size(), 1024u);  // small bytes, a costly walk
  Result<DecodedEvent> decoded = DecodeEvent(fits);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(decoded->canonical());
  std::string first;
  std::string second;
  EXPECT_NO_THROW(first = CanonicalBytes(decoded->root()));
  EXPECT_NO_THROW(second = CanonicalBytes(decoded->root()));
  EXPECT_EQ(first, fits);
  EXPECT_EQ(second, fits);

  // Not in canonical form (an extra zero word at the end), so the general path decides: the
  // same walks are owed to the caller.
  std::string padded = fits + std::string(sizeof(capnp::word), '\0');
  Result<DecodedEvent> general = DecodeEvent(padded);
  ASSERT_TRUE(general.ok()) << general.status().ToString();
  EXPECT_FALSE(general->canonical());
  EXPECT_NO_THROW(first = CanonicalBytes(general->root()));
  EXPECT_NO_THROW(second = CanonicalBytes(general->root()));
  EXPECT_EQ(first, fits);

  for (const std::string& costly :
       {EventWithEmptyLabels(static_cast<uint32_t>(half + 64)),
        EventWithEmptyLabels(static_cast<uint32_t>(half + 64)) + std::string(8, '\0')}) {
    Result<DecodedEvent> refused = DecodeEvent(costly);
    EXPECT_EQ(refused.status().code(), Code::kCorruption) << costly.size() << " bytes";
  }
}

}  // namespace
}  // namespace admission::schema
