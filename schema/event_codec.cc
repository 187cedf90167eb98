#include "schema/event_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include <capnp/any.h>
#include <capnp/compat/json.h>
#include <capnp/dynamic.h>
#include <capnp/schema.h>
#include <kj/exception.h>
// SHA256_Init and friends (see Sha256Digest).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

namespace admission {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kConflict: return "Conflict";
    case Code::kTimeWentBackwards: return "TimeWentBackwards";
    case Code::kCorruption: return "Corruption";
    case Code::kIoError: return "IoError";
    case Code::kBusy: return "Busy";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kOverloaded: return "Overloaded";
    case Code::kNoSpace: return "NoSpace";
    case Code::kUnavailable: return "Unavailable";
    case Code::kFailedPrecondition: return "FailedPrecondition";
    case Code::kDeadlineExceeded: return "DeadlineExceeded";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace admission

namespace admission::schema {

capnp::ReaderOptions EventReaderOptions() {
  capnp::ReaderOptions options;
  // Each word may be visited at most a few times (lists of structs share their tag word).
  options.traversalLimitInWords = 2 * (kEventBytesMax / sizeof(capnp::word));
  options.nestingLimit = kEventNestingMax;
  return options;
}

std::string CanonicalBytes(Event::Reader event) {
  kj::Array<capnp::word> words = capnp::canonicalize(event);
  kj::ArrayPtr<const char> chars = words.asChars();
  return std::string(chars.begin(), chars.size());
}

namespace {

// A canonical copy of `root` into a zeroed flat segment of `words` words; throws (kj) when it
// does not fit.
std::string_view CanonicalCopy(const capnp::_::StructReader& root, size_t words,
                               WordBuffer* buffer) {
  ZeroWords(buffer, words);
  capnp::FlatMessageBuilder builder(kj::arrayPtr(buffer->data(), words));
  capnp::_::PointerHelpers<capnp::AnyPointer>::getInternalBuilder(
      builder.initRoot<capnp::AnyPointer>())
      .setStruct(root, /*canonical=*/true);
  kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments = builder.getSegmentsForOutput();
  ADM_CHECK(segments.size() == 1, "a canonical copy took %zu segments", segments.size());
  kj::ArrayPtr<const char> chars = segments[0].asChars();
  return std::string_view(chars.begin(), chars.size());
}

}  // namespace

std::string_view CanonicalBytesInto(Event::Reader event, WordBuffer* buffer,
                                    size_t expected_bytes) {
  // capnp::canonicalize's own steps (StructReader::canonicalize): a zeroed flat segment as large
  // as the event plus its root pointer, and a canonical copy of the root struct into it.
  capnp::_::StructReader root = capnp::_::PointerHelpers<Event>::getInternalReader(event);
  if (expected_bytes > 0 && expected_bytes % sizeof(capnp::word) == 0) {
    std::string_view out;
    kj::Maybe<kj::Exception> too_small = kj::runCatchingExceptions([&]() {
      out = CanonicalCopy(root, expected_bytes / sizeof(capnp::word), buffer);
    });
    if (too_small == nullptr) return out;
  }
  return CanonicalCopy(root, root.totalSize().wordCount + 1, buffer);
}

namespace {

// SHA-256 through OpenSSL's SHA256_* functions, not EVP: they are deprecated in OpenSSL 3 but
// run the same implementation (SHA-NI where the CPU has it) without EVP's provider dispatch,
// which costs about a fifth of hashing a typical decision (replay hashes every one; measured
// with a 532-byte input: 0.36 against 0.44 us). The context lives on the stack.
Hash Sha256Digest(std::string_view a, std::string_view b) {
  Hash out{};
  SHA256_CTX ctx;
  ADM_CHECK(SHA256_Init(&ctx) == 1, "sha256 init");
  ADM_CHECK(SHA256_Update(&ctx, a.data(), a.size()) == 1, "sha256 update");
  if (!b.empty()) ADM_CHECK(SHA256_Update(&ctx, b.data(), b.size()) == 1, "sha256 update");
  ADM_CHECK(SHA256_Final(out.data(), &ctx) == 1, "sha256 final");
  return out;
}

}  // namespace

Hash ChainHash(const Hash& previous, std::string_view canonical_bytes) {
  return Sha256Digest(std::string_view(reinterpret_cast<const char*>(previous.data()),
                                       previous.size()),
                      canonical_bytes);
}

Hash Sha256Of(std::string_view bytes) { return Sha256Digest(bytes, std::string_view()); }

std::string HashHex(const Hash& hash) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(hash.size() * 2);
  for (uint8_t b : hash) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

const char* CheckStateName(CheckState state) {
  switch (state) {
    case CheckState::PENDING:
      return "Pending";
    case CheckState::READY:
      return "Ready";
    case CheckState::RETRY:
      return "Retry";
    case CheckState::REJECTED:
      return "Rejected";
  }
  return "Unknown";
}

Hash HashFromData(capnp::Data::Reader data) {
  Hash out{};
  if (data.size() == out.size()) std::memcpy(out.data(), data.begin(), out.size());
  return out;
}

namespace {

// The typed read of every pointer field of an event, planned once from the schema. Reading a
// field the way its generated accessor does is what finds a malformed pointer (out of bounds,
// wrong kind, a list of the wrong element size, text without its NUL); data fields cannot be
// malformed (out of range reads give the default), so only pointers are read. The plan follows
// the schema, so a field appended to events.capnp is checked without touching this code; a
// pointer type the walk does not know (AnyPointer, interfaces, lists of lists) aborts when the
// plan is built, i.e. at the first decode of any test run.

enum class PointerRead : uint8_t { kText, kData, kStruct, kList };
enum class ElementRead : uint8_t { kPrimitive, kText, kData, kStruct };

struct PointerField {
  uint32_t index = 0;  // in the pointer section
  PointerRead read = PointerRead::kText;
  ElementRead element = ElementRead::kPrimitive;                 // kList only
  capnp::ElementSize element_size = capnp::ElementSize::VOID;    // kList of primitives
  int plan = -1;  // the struct's plan (kStruct, or kList of structs)
};

// One scope of a struct: the struct itself, or one of its groups (same struct reader).
struct ScopePlan {
  std::vector<PointerField> pointers;  // pointer fields outside any union
  std::vector<int> groups;             // groups outside any union
  bool has_union = false;
  uint32_t discriminant_offset = 0;    // in 16-bit units into the data section
  std::vector<int> members;  // by discriminant: the member's scope (-1: no pointer to read)

  // The member scope a discriminant selects; -1 for none (no pointer, or a member this schema
  // does not know yet).
  int Member(uint16_t discriminant) const {
    return discriminant < members.size() ? members[discriminant] : -1;
  }
};

class WalkPlans {
 public:
  static const WalkPlans& Get() {
    static const WalkPlans plans;
    return plans;
  }
  int root() const { return root_; }
  const ScopePlan& plan(int index) const { return plans_[static_cast<size_t>(index)]; }

 private:
  WalkPlans() { root_ = ForScope(capnp::Schema::from<Event>()); }

  // The plan of a struct or group, built once per schema node.
  int ForScope(capnp::StructSchema schema) {
    const uint64_t id = schema.getProto().getId();
    if (auto it = by_id_.find(id); it != by_id_.end()) return it->second;
    const int index = static_cast<int>(plans_.size());
    plans_.emplace_back();
    by_id_.emplace(id, index);
    ScopePlan plan;
    ADM_CHECK(schema.getProto().getStruct().getPointerCount() <= 64,
              "event walk: %s has more than 64 pointer fields",
              schema.getProto().getDisplayName().cStr());
    for (capnp::StructSchema::Field field : schema.getNonUnionFields()) {
      if (field.getProto().isGroup()) {
        plan.groups.push_back(ForScope(field.getType().asStruct()));
      } else if (std::optional<PointerField> p = ForSlot(field)) {
        plan.pointers.push_back(*p);
      }
    }
    capnp::StructSchema::FieldSubset union_fields = schema.getUnionFields();
    if (union_fields.size() > 0) {
      plan.has_union = true;
      plan.discriminant_offset = schema.getProto().getStruct().getDiscriminantOffset();
      for (capnp::StructSchema::Field field : union_fields) {
        int member = -1;
        if (field.getProto().isGroup()) {
          member = ForScope(field.getType().asStruct());
        } else if (std::optional<PointerField> p = ForSlot(field)) {
          member = static_cast<int>(plans_.size());
          plans_.emplace_back();
          plans_[static_cast<size_t>(member)].pointers.push_back(*p);
        }
        const uint16_t discriminant = field.getProto().getDiscriminantValue();
        if (plan.members.size() <= discriminant) plan.members.resize(discriminant + 1u, -1);
        plan.members[discriminant] = member;
      }
    }
    plans_[static_cast<size_t>(index)] = std::move(plan);
    return index;
  }

  // How to read a slot field, if it is a pointer.
  std::optional<PointerField> ForSlot(capnp::StructSchema::Field field) {
    PointerField p;
    p.index = field.getProto().getSlot().getOffset();
    capnp::Type type = field.getType();
    switch (type.which()) {
      case capnp::schema::Type::TEXT: p.read = PointerRead::kText; return p;
      case capnp::schema::Type::DATA: p.read = PointerRead::kData; return p;
      case capnp::schema::Type::STRUCT:
        p.read = PointerRead::kStruct;
        p.plan = ForScope(type.asStruct());
        return p;
      case capnp::schema::Type::LIST: {
        p.read = PointerRead::kList;
        capnp::Type element = type.asList().getElementType();
        switch (element.which()) {
          case capnp::schema::Type::TEXT: p.element = ElementRead::kText; break;
          case capnp::schema::Type::DATA: p.element = ElementRead::kData; break;
          case capnp::schema::Type::STRUCT:
            p.element = ElementRead::kStruct;
            p.plan = ForScope(element.asStruct());
            break;
          case capnp::schema::Type::VOID: p.element_size = capnp::ElementSize::VOID; break;
          case capnp::schema::Type::BOOL: p.element_size = capnp::ElementSize::BIT; break;
          case capnp::schema::Type::INT8:
          case capnp::schema::Type::UINT8: p.element_size = capnp::ElementSize::BYTE; break;
          case capnp::schema::Type::INT16:
          case capnp::schema::Type::UINT16:
          case capnp::schema::Type::ENUM:
            p.element_size = capnp::ElementSize::TWO_BYTES;
            break;
          case capnp::schema::Type::INT32:
          case capnp::schema::Type::UINT32:
          case capnp::schema::Type::FLOAT32:
            p.element_size = capnp::ElementSize::FOUR_BYTES;
            break;
          case capnp::schema::Type::INT64:
          case capnp::schema::Type::UINT64:
          case capnp::schema::Type::FLOAT64:
            p.element_size = capnp::ElementSize::EIGHT_BYTES;
            break;
          default:
            ADM_CHECK(false, "event walk: list of type %d in field %s is not supported",
                      static_cast<int>(element.which()), field.getProto().getName().cStr());
        }
        return p;
      }
      case capnp::schema::Type::ANY_POINTER:
      case capnp::schema::Type::INTERFACE:
        ADM_CHECK(false, "event walk: field %s has a pointer type the walk does not read",
                  field.getProto().getName().cStr());
        return std::nullopt;
      default: return std::nullopt;  // data field
    }
  }

  std::vector<ScopePlan> plans_;
  std::map<uint64_t, int> by_id_;
  int root_ = -1;
};

void WalkStruct(const WalkPlans& plans, int plan, capnp::AnyStruct::Reader reader);

void ReadList(const WalkPlans& plans, const PointerField& field, capnp::AnyPointer::Reader p) {
  switch (field.element) {
    case ElementRead::kText:
      for (capnp::Text::Reader text : p.getAs<capnp::List<capnp::Text>>()) (void)text;
      return;
    case ElementRead::kData:
      for (capnp::Data::Reader data : p.getAs<capnp::List<capnp::Data>>()) (void)data;
      return;
    case ElementRead::kStruct: {
      // What List(SomeStruct)'s accessor reads (capnp offers no typed getter for a list of
      // AnyStruct).
      capnp::List<capnp::AnyStruct>::Reader list(
          capnp::_::PointerHelpers<capnp::AnyPointer>::getInternalReader(p).getList(
              capnp::ElementSize::INLINE_COMPOSITE, nullptr));
      for (capnp::AnyStruct::Reader element : list) WalkStruct(plans, field.plan, element);
      return;
    }
    case ElementRead::kPrimitive:
      switch (field.element_size) {
        case capnp::ElementSize::VOID: (void)p.getAs<capnp::List<capnp::Void>>(); return;
        case capnp::ElementSize::BIT: (void)p.getAs<capnp::List<bool>>(); return;
        case capnp::ElementSize::BYTE: (void)p.getAs<capnp::List<uint8_t>>(); return;
        case capnp::ElementSize::TWO_BYTES: (void)p.getAs<capnp::List<uint16_t>>(); return;
        case capnp::ElementSize::FOUR_BYTES: (void)p.getAs<capnp::List<uint32_t>>(); return;
        case capnp::ElementSize::EIGHT_BYTES: (void)p.getAs<capnp::List<uint64_t>>(); return;
        default: ADM_CHECK(false, "element size %d", static_cast<int>(field.element_size));
      }
  }
}

// Reads the pointer fields of one scope (and of its groups and active union member), and marks
// each slot it read in `read` (bit i: pointer slot i; the plan asserts fewer than 64).
void WalkScope(const WalkPlans& plans, int index, capnp::List<capnp::AnyPointer>::Reader pointers,
               kj::ArrayPtr<const capnp::byte> data, uint64_t* read) {
  const ScopePlan& plan = plans.plan(index);
  for (const PointerField& field : plan.pointers) {
    if (field.index >= pointers.size()) continue;  // beyond the stored struct: null
    *read |= uint64_t{1} << field.index;
    capnp::AnyPointer::Reader p = pointers[field.index];
    switch (field.read) {
      case PointerRead::kText: (void)p.getAs<capnp::Text>(); break;
      case PointerRead::kData: (void)p.getAs<capnp::Data>(); break;
      case PointerRead::kStruct: WalkStruct(plans, field.plan, p.getAs<capnp::AnyStruct>()); break;
      case PointerRead::kList: ReadList(plans, field, p); break;
    }
  }
  for (int group : plan.groups) WalkScope(plans, group, pointers, data, read);
  if (plan.has_union) {
    uint16_t discriminant = 0;  // beyond the stored data section: the default, 0
    const size_t at = static_cast<size_t>(plan.discriminant_offset) * 2;
    if (at + 2 <= data.size()) {
      discriminant = static_cast<uint16_t>(data[at] | (static_cast<unsigned>(data[at + 1]) << 8));
    }
    if (const int member = plan.Member(discriminant); member >= 0) {
      WalkScope(plans, member, pointers, data, read);
    }
  }
}

// Reads a pointer no field reads, and everything it reaches, untyped (capnp checks bounds,
// nesting and the traversal limit on the way), refusing capabilities: an event holds none, and
// a copy of one (canonicalize) throws.
void ReadUntyped(capnp::AnyPointer::Reader p) {
  switch (p.getPointerType()) {
    case capnp::PointerType::NULL_: return;
    case capnp::PointerType::CAPABILITY:
      KJ_FAIL_REQUIRE("an event holds a capability pointer");
    case capnp::PointerType::STRUCT:
      for (capnp::AnyPointer::Reader q : p.getAs<capnp::AnyStruct>().getPointerSection()) {
        ReadUntyped(q);
      }
      return;
    case capnp::PointerType::LIST: {
      capnp::AnyList::Reader list = p.getAs<capnp::AnyList>();
      if (list.getElementSize() == capnp::ElementSize::POINTER) {
        for (capnp::AnyPointer::Reader q : list.as<capnp::List<capnp::AnyPointer>>()) {
          ReadUntyped(q);
        }
      } else if (list.getElementSize() == capnp::ElementSize::INLINE_COMPOSITE) {
        for (capnp::AnyStruct::Reader element : list.as<capnp::List<capnp::AnyStruct>>()) {
          for (capnp::AnyPointer::Reader q : element.getPointerSection()) ReadUntyped(q);
        }
      }
      return;
    }
  }
}

void WalkStruct(const WalkPlans& plans, int plan, capnp::AnyStruct::Reader reader) {
  capnp::List<capnp::AnyPointer>::Reader pointers = reader.getPointerSection();
  uint64_t read = 0;
  WalkScope(plans, plan, pointers, reader.getDataSection(), &read);
  // Every other slot is read untyped (ReadUntyped): a field this schema does not know (a
  // newer writer's, or an unknown union member's) or an inactive union member's slot. A copy
  // of the event (capnp::canonicalize, MessageBuilder::setRoot) follows every pointer of a
  // struct, so a malformed one here would throw there, in a caller that trusted the decoded
  // event.
  for (unsigned i = 0; i < pointers.size(); ++i) {
    if (i < 64 && (read >> i & 1) != 0) continue;
    ReadUntyped(pointers[i]);
  }
}

}  // namespace

namespace {

// Cap'n Proto's wire format, as much of it as splicing the envelope needs (encoding spec,
// "Structs" and "Lists"): a pointer is one little-endian word; bits 0-1 its kind, bits 2-31 a
// signed offset in words from the end of the pointer to the target; a struct pointer's upper
// half holds the data section's words (16 bits) then the pointer count (16 bits); a list
// pointer's upper half holds the element size (3 bits) then the element count (29 bits).
static_assert(std::endian::native == std::endian::little,
              "the envelope splice reads and writes wire words in host order");
constexpr uint64_t kKindStruct = 0;
constexpr uint64_t kKindList = 1;
constexpr uint64_t kElementSizeByte = 2;
constexpr uint64_t kEmptyStructPointer = 0xfffffffcu;  // offset -1, no data, no pointers
constexpr size_t kHashWords = sizeof(Hash) / sizeof(capnp::word);

uint64_t LoadWord(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void StoreWord(char* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

int64_t PointerOffset(uint64_t pointer) {
  return static_cast<int32_t>(static_cast<uint32_t>(pointer)) >> 2;
}

uint64_t WithOffset(uint64_t pointer, int64_t offset) {
  return (pointer & 0xffffffff00000003ull) |
         (static_cast<uint64_t>(static_cast<uint32_t>(offset << 2)) & 0xfffffffcull);
}

// The one-pass form of DecodeEvent's checks, for the form events travel and are stored in:
// canonical bytes whose every non-null pointer is a field the schema reads, of its type. It
// follows MessageReader::isCanonical's rules (one segment; every object exactly at the read head
// of a pre-order walk; data and pointer sections truncated; list padding zero; every word used)
// and reads each pointer as the field's accessor would (kind, element size, bounds, a text's
// NUL, the reader's nesting limit). Anything else (far pointers, a pointer the schema does not
// read, a list of another element size that the reader would upgrade, very long lists of empty
// structs, the empty root, more than kPointersMax pointers in one struct) is left to the general path:
// false means "not this form", never "malformed".
class CanonicalEventCheck {
 public:
  explicit CanonicalEventCheck(std::string_view bytes)
      : bytes_(bytes.data()), words_(bytes.size() / sizeof(capnp::word)),
        plans_(WalkPlans::Get()) {}

  bool Run() {
    if (words_ < 2) return false;
    const uint64_t root = Word(0);
    if (root == 0 || root == kEmptyStructPointer) return false;
    size_t head = 1;
    return StructPointer(0, root, &head, plans_.root(), kEventNestingMax) && head == words_;
  }

 private:
  static constexpr size_t kPointersMax = 64;
  static constexpr uint64_t kElementSizePointer = 6;
  static constexpr uint64_t kElementSizeComposite = 7;

  uint64_t Word(size_t i) const { return LoadWord(bytes_ + i * sizeof(capnp::word)); }

  // The word a pointer at `pos` points to; false if before the message.
  static bool Target(size_t pos, uint64_t pointer, size_t* target) {
    const int64_t t = static_cast<int64_t>(pos) + 1 + PointerOffset(pointer);
    if (t < 0) return false;
    *target = static_cast<size_t>(t);
    return true;
  }

  // Bytes [from, to) are all zero.
  bool ZeroBytes(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i) {
      if (bytes_[i] != 0) return false;
    }
    return true;
  }

  // Which field the schema reads at each pointer of one struct: the fields outside unions, and
  // in each union the member its discriminant (in the data section) selects.
  void Expect(int index, const char* data, size_t data_bytes, const PointerField** expected,
              size_t pointer_count) const {
    const ScopePlan& plan = plans_.plan(index);
    for (const PointerField& field : plan.pointers) {
      if (field.index < pointer_count) expected[field.index] = &field;
    }
    for (int group : plan.groups) Expect(group, data, data_bytes, expected, pointer_count);
    if (plan.has_union) {
      uint16_t discriminant = 0;
      const size_t at = static_cast<size_t>(plan.discriminant_offset) * 2;
      if (at + 2 <= data_bytes) {
        discriminant = static_cast<uint16_t>(static_cast<uint8_t>(data[at]) |
                                             (static_cast<unsigned>(static_cast<uint8_t>(data[at + 1])) << 8));
      }
      if (const int member = plan.Member(discriminant); member >= 0) {
        Expect(member, data, data_bytes, expected, pointer_count);
      }
    }
  }

  // A struct pointer read by a pointer reader whose nesting limit is `limit`.
  bool StructPointer(size_t pos, uint64_t pointer, size_t* head, int plan, int limit) {
    if ((pointer & 3) != kKindStruct || limit <= 0) return false;
    const size_t data_words = (pointer >> 32) & 0xffff;
    const size_t pointer_count = pointer >> 48;
    size_t target = 0;
    if (!Target(pos, pointer, &target)) return false;
    if (data_words == 0 && pointer_count == 0) return target == pos;  // canonical: offset -1
    bool data_truncated = false;
    bool pointers_truncated = false;
    return Struct(target, data_words, pointer_count, head, head, plan, limit - 1,
                  &data_truncated, &pointers_truncated) &&
           data_truncated && pointers_truncated;
  }

  // A struct at `at` with children laid out from *pointer_head; `limit` is its reader's.
  bool Struct(size_t at, size_t data_words, size_t pointer_count, size_t* read_head,
              size_t* pointer_head, int plan, int limit, bool* data_truncated,
              bool* pointers_truncated) {
    if (at != *read_head || at + data_words + pointer_count > words_) return false;
    *data_truncated = data_words == 0 || Word(at + data_words - 1) != 0;
    *pointers_truncated = pointer_count == 0 || Word(at + data_words + pointer_count - 1) != 0;
    *read_head += data_words + pointer_count;
    if (pointer_count == 0) return true;
    if (pointer_count > kPointersMax) return false;
    const PointerField* expected[kPointersMax];
    std::fill_n(expected, pointer_count, nullptr);
    Expect(plan, bytes_ + at * sizeof(capnp::word), data_words * sizeof(capnp::word), expected,
           pointer_count);
    for (size_t i = 0; i < pointer_count; ++i) {
      const size_t pos = at + data_words + i;
      const uint64_t pointer = Word(pos);
      if (pointer == 0) continue;
      if (expected[i] == nullptr) return false;  // not read by the schema: general path
      if (!Field(pos, pointer, *expected[i], pointer_head, limit)) return false;
    }
    return true;
  }

  bool Field(size_t pos, uint64_t pointer, const PointerField& field, size_t* head, int limit) {
    switch (field.read) {
      case PointerRead::kText: return Blob(pos, pointer, head, true);
      case PointerRead::kData: return Blob(pos, pointer, head, false);
      case PointerRead::kStruct: return StructPointer(pos, pointer, head, field.plan, limit);
      case PointerRead::kList: return List(pos, pointer, field, head, limit);
    }
    return false;
  }

  // Text or Data: a list of bytes; text ends with its NUL.
  bool Blob(size_t pos, uint64_t pointer, size_t* head, bool text) {
    if ((pointer & 3) != kKindList || ((pointer >> 32) & 7) != kElementSizeByte) return false;
    size_t target = 0;
    if (!Target(pos, pointer, &target) || target != *head) return false;
    const size_t count = pointer >> 35;
    const size_t words = (count + 7) / 8;
    if (target + words > words_) return false;
    const size_t begin = target * sizeof(capnp::word);
    if (text && (count == 0 || bytes_[begin + count - 1] != 0)) return false;
    if (!ZeroBytes(begin + count, begin + words * sizeof(capnp::word))) return false;
    *head = target + words;
    return true;
  }

  bool List(size_t pos, uint64_t pointer, const PointerField& field, size_t* head, int limit) {
    if ((pointer & 3) != kKindList || limit <= 0) return false;
    const int list_limit = limit - 1;
    const uint64_t element_size = (pointer >> 32) & 7;
    const size_t count = pointer >> 35;
    size_t target = 0;
    if (!Target(pos, pointer, &target) || target != *head) return false;
    switch (field.element) {
      case ElementRead::kText:
      case ElementRead::kData: {
        if (element_size != kElementSizePointer || target + count > words_) return false;
        *head = target + count;
        for (size_t i = 0; i < count; ++i) {
          const uint64_t element = Word(target + i);
          if (element == 0) continue;
          if (!Blob(target + i, element, head, field.element == ElementRead::kText)) return false;
        }
        return true;
      }
      case ElementRead::kStruct: {
        if (element_size != kElementSizeComposite || target + 1 > words_) return false;
        const uint64_t tag = Word(target);
        if ((tag & 3) != kKindStruct || PointerOffset(tag) < 0) return false;
        const size_t elements = static_cast<size_t>(PointerOffset(tag));
        const size_t data_words = (tag >> 32) & 0xffff;
        const size_t pointer_count = tag >> 48;
        const size_t element_words = data_words + pointer_count;
        size_t read_head = target + 1;
        if (elements * element_words != count || read_head + count > words_) return false;
        if (element_words == 0) {
          // Elements of no size: the reader counts each as a word read, against a traversal
          // limit of twice the largest event, and the general path traverses twice (the walk
          // and isCanonical). Within half of it they cannot be what makes it refuse.
          amplified_words_ += elements;
          if (amplified_words_ + words_ + 8 > kEventBytesMax / sizeof(capnp::word)) return false;
          *head = read_head;
          return true;
        }
        size_t pointer_head = read_head + count;
        bool list_data_truncated = false;
        bool list_pointers_truncated = false;
        for (size_t i = 0; i < elements; ++i) {
          if (list_limit <= 0) return false;
          bool data_truncated = false;
          bool pointers_truncated = false;
          if (!Struct(read_head, data_words, pointer_count, &read_head, &pointer_head, field.plan,
                      list_limit - 1, &data_truncated, &pointers_truncated)) {
            return false;
          }
          list_data_truncated = list_data_truncated || data_truncated;
          list_pointers_truncated = list_pointers_truncated || pointers_truncated;
        }
        *head = pointer_head;
        return list_data_truncated && list_pointers_truncated;
      }
      case ElementRead::kPrimitive: {
        if (element_size != static_cast<uint64_t>(field.element_size) ||
            element_size == static_cast<uint64_t>(capnp::ElementSize::VOID)) {
          return false;
        }
        static constexpr size_t kBits[] = {0, 1, 8, 16, 32, 64};
        const size_t bits = count * kBits[element_size];
        const size_t words = (bits + 63) / 64;
        if (target + words > words_) return false;
        const size_t begin = target * sizeof(capnp::word);
        size_t byte = begin + bits / 8;
        if (bits % 8 != 0) {
          const uint8_t unused = static_cast<uint8_t>(~((1u << (bits % 8)) - 1));
          if ((static_cast<uint8_t>(bytes_[byte]) & unused) != 0) return false;
          ++byte;
        }
        if (!ZeroBytes(byte, begin + words * sizeof(capnp::word))) return false;
        *head = target + words;
        return true;
      }
    }
    return false;
  }

  const char* const bytes_;
  const size_t words_;
  const WalkPlans& plans_;
  size_t amplified_words_ = 0;  // elements of no size seen so far
};

}  // namespace

bool IsPlainCanonicalEvent(std::string_view bytes) {
  if (bytes.size() > kEventBytesMax || bytes.size() % sizeof(capnp::word) != 0) return false;
  return CanonicalEventCheck(bytes).Run();
}

namespace {

Status CheckEventSize(size_t bytes) {
  if (bytes > kEventBytesMax) {
    return Status(Code::kCorruption, "event of " + std::to_string(bytes) +
                                         " bytes exceeds the limit of " +
                                         std::to_string(kEventBytesMax));
  }
  if (bytes == 0 || bytes % sizeof(capnp::word) != 0) {
    return Status(Code::kCorruption, "event of " + std::to_string(bytes) +
                                         " bytes is not a whole number of words");
  }
  return Status::Ok();
}

}  // namespace

Result<DecodedEvent> DecodeEvent(std::string_view bytes) {
  ADM_RETURN_IF_ERROR(CheckEventSize(bytes.size()));
  DecodedEvent decoded;
  decoded.word_count_ = bytes.size() / sizeof(capnp::word);
  decoded.words_ = std::make_unique<capnp::word[]>(decoded.word_count_);
  std::memcpy(decoded.words_.get(), bytes.data(), bytes.size());
  decoded.segments_[0] = kj::ArrayPtr<const capnp::word>(decoded.words_.get(), decoded.word_count_);
  return DecodedEvent::DecodeSegment(std::move(decoded));
}

Result<DecodedEvent> DecodeEventWords(kj::ArrayPtr<const capnp::word> words) {
  ADM_RETURN_IF_ERROR(CheckEventSize(words.size() * sizeof(capnp::word)));
  DecodedEvent decoded;
  decoded.word_count_ = words.size();
  decoded.segments_[0] = words;
  return DecodedEvent::DecodeSegment(std::move(decoded));
}

Result<EventEnvelope> PeekEvent(kj::ArrayPtr<const capnp::word> words) {
  ADM_RETURN_IF_ERROR(CheckEventSize(words.size() * sizeof(capnp::word)));
  EventEnvelope envelope;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    const kj::ArrayPtr<const capnp::word> segments[1] = {words};  // no segment table
    capnp::SegmentArrayMessageReader reader(kj::arrayPtr(segments, 1), EventReaderOptions());
    Event::Reader root = reader.getRoot<Event>();
    envelope.body = root.getBody().which();
    envelope.engine_version = root.getEngineVersion();
    envelope.ends_batch = root.getEndsBatch();
    envelope.prev_hash = HashFromData(root.getPrevHash());
  });
  KJ_IF_MAYBE(e, error) {
    return Status(Code::kCorruption,
                  std::string("malformed event: ") + e->getDescription().cStr());
  }
  return envelope;
}

Result<DecodedEvent> DecodedEvent::DecodeSegment(DecodedEvent decoded) {
  const std::string_view bytes(decoded.segments_[0].asChars().begin(),
                               decoded.segments_[0].asChars().size());
  const kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments(decoded.segments_, 1);
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    if (IsPlainCanonicalEvent(bytes)) {
      // Every field the schema knows was read as its type, the form is canonical, and one walk
      // costs at most half of a reader's traversal budget.
      decoded.canonical_ = true;
      return;
    }
    // Each check below walks the event in a reader of its own, so the reader handed out (made
    // last) keeps its whole traversal budget for the caller.
    //
    // A message whose pointers share their targets reaches more words than it holds, and every
    // walk of it (a copy, canonicalize) costs that much of a reader's traversal budget: a
    // caller's later copy would throw (found by tests/fuzz/event_fuzz.cc; a 488-byte event
    // reached about 60,000 words).
    {
      capnp::SegmentArrayMessageReader sizing(segments, EventReaderOptions());
      const uint64_t reached = sizing.getRoot<Event>().totalSize().wordCount + 1;
      KJ_REQUIRE(reached <= decoded.segments_[0].size(),
                 "pointers share their targets: the event reaches more words than it holds",
                 reached, decoded.segments_[0].size());
    }
    // One complete walk (canonicalize copies every pointer, known to the schema or not) within
    // half of the budget, as IsPlainCanonicalEvent requires of the canonical form: lists of
    // elements of no size hold no words but cost one each per walk (capnp's guard against
    // amplification), so a small event could otherwise spend a caller's whole budget in one
    // copy and make the next throw (found by tests/fuzz/rpc_fuzz.cc in Service::Stage). The same
    // walk decides canonical form: capnp 0.9's isCanonical() accepts an inline composite
    // list's tag whose count has its unused top bit set (found by tests/fuzz/event_fuzz.cc),
    // which MakeStoredEventTemplate would then splice into the ledger as it is.
    {
      capnp::ReaderOptions half = EventReaderOptions();
      half.traversalLimitInWords /= 2;
      capnp::SegmentArrayMessageReader walk(segments, half);
      kj::Array<capnp::word> words = capnp::canonicalize(walk.getRoot<Event>());
      decoded.canonical_ =
          std::string_view(words.asChars().begin(), words.asChars().size()) == bytes;
    }
    // Read every pointer field once, as its type, so a malformed pointer or text is found here,
    // not later in a caller that trusted a decoded event.
    {
      capnp::SegmentArrayMessageReader typed(segments, EventReaderOptions());
      const WalkPlans& plans = WalkPlans::Get();
      WalkStruct(plans, plans.root(), capnp::AnyStruct::Reader(typed.getRoot<Event>()));
    }
  });
  if (error == nullptr) {
    error = kj::runCatchingExceptions([&]() {
      decoded.reader_ = std::make_unique<capnp::SegmentArrayMessageReader>(segments,
                                                                           EventReaderOptions());
      decoded.root_ = decoded.reader_->getRoot<Event>();
    });
  }
  KJ_IF_MAYBE(e, error) {
    return Status(Code::kCorruption,
                  std::string("malformed event: ") + e->getDescription().cStr());
  }
  return Result<DecodedEvent>(std::move(decoded));
}

std::string EncodeEvent(capnp::MessageBuilder& message) {
  return CanonicalBytes(message.getRoot<Event>().asReader());
}

namespace {

// Where the envelope fields the ledger fills in lie in an Event's struct, from the schema.
struct EnvelopeSlots {
  uint32_t sequence_word;        // data section word of `sequence`
  uint32_t prev_hash_pointer;    // pointer section index of `prevHash`
  uint32_t recorded_at_word;     // data section word of `recordedAtNs`
  uint32_t key_pointer;          // pointer section index of `idempotencyKey`
};

const EnvelopeSlots& Slots() {
  static const EnvelopeSlots slots = [] {
    capnp::StructSchema schema = capnp::Schema::from<Event>();
    capnp::schema::Field::Reader sequence = schema.getFieldByName("sequence").getProto();
    capnp::schema::Field::Reader prev = schema.getFieldByName("prevHash").getProto();
    capnp::schema::Field::Reader at = schema.getFieldByName("recordedAtNs").getProto();
    capnp::schema::Field::Reader key = schema.getFieldByName("idempotencyKey").getProto();
    ADM_CHECK(sequence.getSlot().getType().isUint64() && prev.getSlot().getType().isData() &&
                  at.getSlot().getType().isInt64() && key.getSlot().getType().isText(),
              "an envelope field of Event changed type");
    return EnvelopeSlots{sequence.getSlot().getOffset(), prev.getSlot().getOffset(),
                         at.getSlot().getOffset(), key.getSlot().getOffset()};
  }();
  return slots;
}

// Splices a placeholder sequence and a 32-byte prevHash into canonical event bytes. Returns
// false, writing nothing, when the bytes are not laid out as canonical form lays them out
// (the caller then canonicalizes first).
//
// Canonical form (encoding spec, "Canonicalization") places the root struct right after the
// root pointer, with trailing zero data words and trailing null pointers truncated, and then
// every object reachable from it in pre-order: the subtree of pointer 0, then that of pointer 1,
// and so on, without gaps. So the subtrees of the pointers before prevHash form one block, the
// prevHash bytes the next, and the subtrees of the pointers after it the last; each moves as a
// whole, its internal pointers stay valid, and only the root's pointers into the blocks change.
bool SpliceEnvelope(std::string_view in, StoredEventTemplate* out) {
  const EnvelopeSlots& slots = Slots();
  const size_t n = in.size() / sizeof(capnp::word);
  if (n == 0 || in.size() % sizeof(capnp::word) != 0) return false;
  auto word = [&](size_t i) { return LoadWord(in.data() + i * sizeof(capnp::word)); };

  uint64_t root = word(0);
  if (n == 1 && (root == 0 || root == kEmptyStructPointer)) {
    root = 0;  // the empty root struct: a message of the root pointer alone
  } else if ((root & 3) != kKindStruct || PointerOffset(root) != 0) {
    return false;
  }
  const size_t data_words = (root >> 32) & 0xffff;
  const size_t pointer_count = root >> 48;
  const size_t children = 1 + data_words + pointer_count;  // first word after the root struct
  if (children > n) return false;

  // The block of prevHash's own bytes: [hash_begin, hash_end); empty when it is null.
  const size_t pi = slots.prev_hash_pointer;
  size_t hash_begin = n;
  size_t hash_end = n;
  bool hash_found = false;
  if (pi < pointer_count && word(1 + data_words + pi) != 0) {
    const uint64_t p = word(1 + data_words + pi);
    if ((p & 3) != kKindList || ((p >> 32) & 7) != kElementSizeByte) return false;
    const int64_t target = static_cast<int64_t>(1 + data_words + pi) + 1 + PointerOffset(p);
    const size_t bytes = p >> 35;
    if (target < static_cast<int64_t>(children)) return false;
    hash_begin = static_cast<size_t>(target);
    hash_end = hash_begin + (bytes + 7) / 8;
    if (hash_end > n) return false;
    hash_found = true;
  }
  // Every other root pointer must be null, the empty struct, or a struct or list pointer into
  // the right block; with a null prevHash the block of the pointers after it starts where
  // prevHash's would have.
  for (size_t i = 0; i < pointer_count; ++i) {
    if (i == pi) continue;
    const uint64_t p = word(1 + data_words + i);
    if (p == 0 || p == kEmptyStructPointer) continue;
    if ((p & 3) != kKindStruct && (p & 3) != kKindList) return false;  // far or capability
    const int64_t target = static_cast<int64_t>(1 + data_words + i) + 1 + PointerOffset(p);
    if (target < static_cast<int64_t>(children) || target > static_cast<int64_t>(n)) {
      return false;
    }
    if (i > pi && !hash_found && static_cast<size_t>(target) < hash_begin) {
      hash_begin = hash_end = static_cast<size_t>(target);
    }
  }
  for (size_t i = 0; i < pointer_count; ++i) {
    if (i == pi) continue;
    const uint64_t p = word(1 + data_words + i);
    if (p == 0 || p == kEmptyStructPointer) continue;
    const size_t target = 1 + data_words + i + 1 + static_cast<size_t>(PointerOffset(p));
    if (i < pi ? target > hash_begin : target < hash_end) return false;
  }

  // The stored layout: the root struct holds at least the sequence word and the prevHash
  // pointer (both non-zero once filled, so canonical form keeps them).
  const size_t new_data_words = std::max<size_t>(data_words, slots.sequence_word + 1);
  const size_t new_pointer_count = std::max<size_t>(pointer_count, pi + 1);
  const size_t old_hash_words = hash_end - hash_begin;
  const size_t new_children = 1 + new_data_words + new_pointer_count;
  const size_t new_hash_begin = hash_begin + (new_children - children);
  const size_t new_n = new_hash_begin + kHashWords + (n - hash_end);
  const int64_t prefix_shift = static_cast<int64_t>(new_pointer_count - pointer_count);
  const int64_t suffix_shift =
      prefix_shift + static_cast<int64_t>(kHashWords) - static_cast<int64_t>(old_hash_words);

  std::string& b = out->bytes;
  b.assign(new_n * sizeof(capnp::word), '\0');
  auto put = [&](size_t i, uint64_t v) { StoreWord(b.data() + i * sizeof(capnp::word), v); };
  put(0, kKindStruct | (static_cast<uint64_t>(new_data_words) << 32) |
             (static_cast<uint64_t>(new_pointer_count) << 48));
  std::memcpy(b.data() + sizeof(capnp::word), in.data() + sizeof(capnp::word),
              data_words * sizeof(capnp::word));
  put(1 + slots.sequence_word, 1);  // placeholder: any non-zero value
  for (size_t i = 0; i < new_pointer_count; ++i) {
    uint64_t p = i < pointer_count ? word(1 + data_words + i) : 0;
    if (i == pi) {
      const int64_t offset = static_cast<int64_t>(new_hash_begin) -
                             static_cast<int64_t>(1 + new_data_words + pi) - 1;
      p = WithOffset(kKindList | (static_cast<uint64_t>(sizeof(Hash) << 3 | kElementSizeByte)
                                  << 32),
                     offset);
    } else if (p != 0 && p != kEmptyStructPointer) {
      p = WithOffset(p, PointerOffset(p) + (i < pi ? prefix_shift : suffix_shift));
    }
    put(1 + new_data_words + i, p);
  }
  std::memcpy(b.data() + new_children * sizeof(capnp::word),
              in.data() + children * sizeof(capnp::word),
              (hash_begin - children) * sizeof(capnp::word));
  std::memcpy(b.data() + (new_hash_begin + kHashWords) * sizeof(capnp::word),
              in.data() + hash_end * sizeof(capnp::word), (n - hash_end) * sizeof(capnp::word));
  out->sequence_offset = (1 + slots.sequence_word) * sizeof(capnp::word);
  out->prev_hash_offset = new_hash_begin * sizeof(capnp::word);
  return true;
}

}  // namespace

Result<StoredEventTemplate> MakeStoredEventTemplate(std::string_view bytes,
                                                    const DecodedEvent& decoded) {
  StoredEventTemplate stored;
  if (!decoded.canonical() || !SpliceEnvelope(bytes, &stored)) {
    // The slow path, for input that is not canonical: canonicalize, then splice.
    std::string canonical;
    kj::Maybe<kj::Exception> error =
        kj::runCatchingExceptions([&]() { canonical = CanonicalBytes(decoded.root()); });
    KJ_IF_MAYBE(e, error) {
      return Status(Code::kInvalidArgument,
                    std::string("event cannot be canonicalized: ") + e->getDescription().cStr());
    }
    ADM_CHECK(SpliceEnvelope(canonical, &stored),
              "canonical bytes of %zu bytes do not splice", canonical.size());
  }
  if (stored.bytes.size() > kEventBytesMax) {
    return Status(Code::kInvalidArgument,
                  "event of " + std::to_string(stored.bytes.size()) +
                      " bytes once sequenced exceeds the limit of " +
                      std::to_string(kEventBytesMax));
  }
  return stored;
}

bool TakePlainEvent(std::string_view bytes, StoredEventTemplate* stored,
                    int64_t* recorded_at_ns, std::string_view* idempotency_key) {
  if (!IsPlainCanonicalEvent(bytes) || !SpliceEnvelope(bytes, stored) ||
      stored->bytes.size() > kEventBytesMax) {
    return false;  // the general path decides, and names what is wrong
  }
  // The check above read both fields as their types; here they are only located.
  const EnvelopeSlots& slots = Slots();
  const uint64_t root = LoadWord(bytes.data());
  const size_t data_words = (root >> 32) & 0xffff;
  const size_t pointer_count = root >> 48;
  *recorded_at_ns = 0;
  if (slots.recorded_at_word < data_words) {
    *recorded_at_ns = static_cast<int64_t>(
        LoadWord(bytes.data() + (1 + slots.recorded_at_word) * sizeof(capnp::word)));
  }
  *idempotency_key = std::string_view();
  if (slots.key_pointer < pointer_count) {
    const size_t pos = 1 + data_words + slots.key_pointer;
    const uint64_t pointer = LoadWord(bytes.data() + pos * sizeof(capnp::word));
    if (pointer != 0) {
      const size_t target = static_cast<size_t>(static_cast<int64_t>(pos) + 1 +
                                                PointerOffset(pointer));
      const size_t count = pointer >> 35;  // with its NUL
      *idempotency_key = bytes.substr(target * sizeof(capnp::word), count - 1);
    }
  }
  return true;
}

void FillStoredEvent(uint64_t sequence, const Hash& prev_hash, StoredEventTemplate* stored) {
  ADM_CHECK(sequence != 0, "sequence 0 is never stored");
  ADM_CHECK(stored->sequence_offset + sizeof(uint64_t) <= stored->bytes.size() &&
                stored->prev_hash_offset + prev_hash.size() <= stored->bytes.size(),
            "template of %zu bytes, sequence at %zu, prevHash at %zu", stored->bytes.size(),
            stored->sequence_offset, stored->prev_hash_offset);
  StoreWord(stored->bytes.data() + stored->sequence_offset, sequence);  // capnp is little-endian
  std::memcpy(stored->bytes.data() + stored->prev_hash_offset, prev_hash.data(),
              prev_hash.size());
}

namespace {

capnp::JsonCodec& Codec() {
  thread_local std::unique_ptr<capnp::JsonCodec> codec = [] {
    auto c = std::make_unique<capnp::JsonCodec>();
    c->handleByAnnotation<Event>();
    c->setHasMode(capnp::HasMode::NON_DEFAULT);
    return c;
  }();
  return *codec;
}

}  // namespace

std::string EventToJson(Event::Reader event) {
  kj::String json = Codec().encode(event);
  return std::string(json.cStr(), json.size());
}

namespace {

// Cap'n Proto's JSON decoder skips unknown fields; a typo in an event must not vanish silently,
// so every object member is checked against the schema first. Returns the path of the first
// unknown field, or empty.
std::string FirstUnknownField(capnp::JsonValue::Reader value, capnp::Type type,
                              const std::string& path) {
  if (type.isList() && value.isArray()) {
    capnp::Type element = type.asList().getElementType();
    uint32_t i = 0;
    for (capnp::JsonValue::Reader item : value.getArray()) {
      std::string bad = FirstUnknownField(item, element, path + "[" + std::to_string(i++) + "]");
      if (!bad.empty()) return bad;
    }
    return "";
  }
  if (!type.isStruct() || !value.isObject()) return "";
  capnp::StructSchema schema = type.asStruct();
  for (capnp::JsonValue::Field::Reader member : value.getObject()) {
    std::string name = member.getName().cStr();
    std::string here = path.empty() ? name : path + "." + name;
    KJ_IF_MAYBE(field, schema.findFieldByName(member.getName())) {
      std::string bad = FirstUnknownField(member.getValue(), field->getType(), here);
      if (!bad.empty()) return bad;
    } else {
      return here;
    }
  }
  return "";
}

}  // namespace

Result<std::string> EventFromJson(std::string_view json) {
  std::string out;
  std::string unknown;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    capnp::MallocMessageBuilder raw;
    capnp::JsonValue::Builder value = raw.initRoot<capnp::JsonValue>();
    Codec().decodeRaw(kj::ArrayPtr<const char>(json.data(), json.size()), value);
    unknown = FirstUnknownField(value.asReader(), capnp::Type(capnp::Schema::from<Event>()), "");
    if (!unknown.empty()) return;
    capnp::MallocMessageBuilder message;
    Event::Builder root = message.initRoot<Event>();
    Codec().decode(value.asReader(), capnp::DynamicStruct::Builder(root));
    out = EncodeEvent(message);
  });
  if (!unknown.empty()) {
    return Status(Code::kInvalidArgument, "event JSON refused: unknown field " + unknown);
  }
  KJ_IF_MAYBE(e, error) {
    return Status(Code::kInvalidArgument,
                  std::string("event JSON refused: ") + e->getDescription().cStr());
  }
  return out;
}

std::string BodyName(Event::Reader event) {
  capnp::DynamicStruct::Reader body =
      capnp::DynamicStruct::Reader(event).get("body").as<capnp::DynamicStruct>();
  KJ_IF_MAYBE(field, body.which()) {
    return std::string(field->getProto().getName().cStr());
  }
  return "unknown(" + std::to_string(static_cast<int>(event.getBody().which())) + ")";
}

bool IsDecision(Event::Body::Which which) {
  // The decisions are the union's members from quotaReserved to drainDeadlinePassed, and those
  // added since after the inputs added since (workloadActivationSet, budgetPolicyDefined, topologyDefined).
  if (which == Event::Body::BUDGET_DECIDED || which == Event::Body::TOPOLOGY_REPLACED) return true;
  return static_cast<int>(which) >= static_cast<int>(Event::Body::QUOTA_RESERVED) &&
         static_cast<int>(which) <= static_cast<int>(Event::Body::DRAIN_DEADLINE_PASSED);
}

namespace {

std::string Differ(const capnp::DynamicValue::Reader& a, const capnp::DynamicValue::Reader& b,
                   const std::string& path);

// Which top-level envelope fields a comparison skips.
enum class Envelope { kNone, kPayload, kRequest };

std::string DifferStruct(const capnp::DynamicStruct::Reader& a,
                         const capnp::DynamicStruct::Reader& b, const std::string& path,
                         Envelope skip) {
  auto join = [&](capnp::StructSchema::Field f) {
    std::string name = f.getProto().getName().cStr();
    return path.empty() ? name : path + "." + name;
  };
  for (capnp::StructSchema::Field field : a.getSchema().getNonUnionFields()) {
    std::string name = field.getProto().getName().cStr();
    if (skip != Envelope::kNone && (name == "sequence" || name == "recordedAtNs" ||
                                    name == "prevHash" || name == "endsBatch")) {
      continue;
    }
    // A request retried is the same request whoever sends it and whichever decider version
    // sequenced it (intake stamps engineVersion on inputs).
    if (skip == Envelope::kRequest &&
        (name == "actor" || name == "idempotencyKey" || name == "engineVersion")) {
      continue;
    }
    std::string d = Differ(a.get(field), b.get(field), join(field));
    if (!d.empty()) return d;
  }
  if (a.getSchema().getUnionFields().size() > 0) {
    KJ_IF_MAYBE(fa, a.which()) {
      KJ_IF_MAYBE(fb, b.which()) {
        if (*fa != *fb) return join(*fa);
        return Differ(a.get(*fa), b.get(*fb), join(*fa));
      }
      return join(*fa);
    }
    KJ_IF_MAYBE(fb, b.which()) { return join(*fb); }
  }
  return "";
}

std::string Differ(const capnp::DynamicValue::Reader& a, const capnp::DynamicValue::Reader& b,
                   const std::string& path) {
  if (a.getType() != b.getType()) return path;
  switch (a.getType()) {
    case capnp::DynamicValue::VOID: return "";
    case capnp::DynamicValue::BOOL: return a.as<bool>() == b.as<bool>() ? "" : path;
    case capnp::DynamicValue::INT: return a.as<int64_t>() == b.as<int64_t>() ? "" : path;
    case capnp::DynamicValue::UINT: return a.as<uint64_t>() == b.as<uint64_t>() ? "" : path;
    case capnp::DynamicValue::TEXT:
      return a.as<capnp::Text>() == b.as<capnp::Text>() ? "" : path;
    case capnp::DynamicValue::DATA:
      return a.as<capnp::Data>() == b.as<capnp::Data>() ? "" : path;
    case capnp::DynamicValue::ENUM:
      return a.as<capnp::DynamicEnum>().getRaw() == b.as<capnp::DynamicEnum>().getRaw() ? ""
                                                                                        : path;
    case capnp::DynamicValue::LIST: {
      auto la = a.as<capnp::DynamicList>();
      auto lb = b.as<capnp::DynamicList>();
      for (uint32_t i = 0; i < la.size() && i < lb.size(); ++i) {
        std::string d = Differ(la[i], lb[i], path + "[" + std::to_string(i) + "]");
        if (!d.empty()) return d;
      }
      return la.size() == lb.size() ? "" : path + ".length";
    }
    case capnp::DynamicValue::STRUCT:
      return DifferStruct(a.as<capnp::DynamicStruct>(), b.as<capnp::DynamicStruct>(), path,
                          Envelope::kNone);
    default:
      // FLOAT, ANY_POINTER, CAPABILITY do not occur in this schema.
      ADM_CHECK(false, "unexpected field type %d at %s", static_cast<int>(a.getType()),
                path.c_str());
  }
  return path;
}

}  // namespace

std::string FirstDifferingPayloadField(Event::Reader a, Event::Reader b) {
  return DifferStruct(capnp::DynamicStruct::Reader(a), capnp::DynamicStruct::Reader(b), "",
                      Envelope::kPayload);
}

std::string FirstDifferingRequestField(Event::Reader a, Event::Reader b) {
  return DifferStruct(capnp::DynamicStruct::Reader(a), capnp::DynamicStruct::Reader(b), "",
                      Envelope::kRequest);
}

std::string DescribePodSetUpdates(capnp::List<PodSetUpdate>::Reader updates) {
  std::string out;
  auto pairs = [](const char* what, capnp::List<Label>::Reader list, std::string* into) {
    if (list.size() == 0) return;
    *into += std::string(into->back() == ':' ? " " : ", ") + what;
    for (auto l : list) *into += std::string(" ") + l.getKey().cStr() + "=" + l.getValue().cStr();
  };
  for (auto u : updates) {
    out += (out.empty() ? "" : "; ") + std::string(u.getPodSet().cStr()) + ":";
    pairs("labels", u.getLabels(), &out);
    pairs("annotations", u.getAnnotations(), &out);
    pairs("nodeSelector", u.getNodeSelector(), &out);
    if (u.getTolerations().size() > 0) {
      out += std::string(out.back() == ':' ? " " : ", ") + "tolerations";
      for (auto t : u.getTolerations()) {
        out += std::string(" ") + t.getKey().cStr();
        if (t.getValue().size() > 0) out += std::string("=") + t.getValue().cStr();
        if (t.getOperator() == "Exists") out += "(Exists)";
        if (t.getEffect().size() > 0) out += std::string(":") + t.getEffect().cStr();
      }
    }
  }
  return out;
}

}  // namespace admission::schema
