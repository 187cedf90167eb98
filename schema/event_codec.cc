#include "schema/event_codec.h"

#include <cstring>

#include <capnp/compat/json.h>
#include <capnp/dynamic.h>
#include <capnp/schema.h>
#include <kj/exception.h>
#include <openssl/evp.h>

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

// One digest context per thread, reused: creating an EVP context per event costs more than
// hashing a small event.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { ADM_CHECK(ctx_ != nullptr, "EVP_MD_CTX_new"); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Hash Digest(std::string_view a, std::string_view b) {
    Hash out{};
    unsigned int length = 0;
    ADM_CHECK(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1, "sha256 init");
    ADM_CHECK(EVP_DigestUpdate(ctx_, a.data(), a.size()) == 1, "sha256 update");
    ADM_CHECK(EVP_DigestUpdate(ctx_, b.data(), b.size()) == 1, "sha256 update");
    ADM_CHECK(EVP_DigestFinal_ex(ctx_, out.data(), &length) == 1 && length == out.size(),
              "sha256 final: %u", length);
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

Hash ChainHash(const Hash& previous, std::string_view canonical_bytes) {
  thread_local Sha256 sha;
  return sha.Digest(std::string_view(reinterpret_cast<const char*>(previous.data()),
                                     previous.size()),
                    canonical_bytes);
}

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

Hash HashFromData(capnp::Data::Reader data) {
  Hash out{};
  if (data.size() == out.size()) std::memcpy(out.data(), data.begin(), out.size());
  return out;
}

namespace {

void TouchValue(const capnp::DynamicValue::Reader& value);

void TouchAll(const capnp::DynamicStruct::Reader& reader) {
  for (capnp::StructSchema::Field field : reader.getSchema().getNonUnionFields()) {
    TouchValue(reader.get(field));
  }
  KJ_IF_MAYBE(field, reader.which()) { TouchValue(reader.get(*field)); }
}

void TouchValue(const capnp::DynamicValue::Reader& value) {
  switch (value.getType()) {
    case capnp::DynamicValue::TEXT: {
      capnp::Text::Reader text = value.as<capnp::Text>();
      (void)text.cStr();
      break;
    }
    case capnp::DynamicValue::DATA: (void)value.as<capnp::Data>().size(); break;
    case capnp::DynamicValue::LIST:
      for (auto element : value.as<capnp::DynamicList>()) TouchValue(element);
      break;
    case capnp::DynamicValue::STRUCT: TouchAll(value.as<capnp::DynamicStruct>()); break;
    default: break;
  }
}

}  // namespace


Result<DecodedEvent> DecodeEvent(std::string_view bytes) {
  if (bytes.size() > kEventBytesMax) {
    return Status(Code::kCorruption, "event of " + std::to_string(bytes.size()) +
                                         " bytes exceeds the limit of " +
                                         std::to_string(kEventBytesMax));
  }
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Status(Code::kCorruption, "event of " + std::to_string(bytes.size()) +
                                         " bytes is not a whole number of words");
  }
  DecodedEvent decoded;
  decoded.word_count_ = bytes.size() / sizeof(capnp::word);
  decoded.words_ = std::make_unique<capnp::word[]>(decoded.word_count_);
  std::memcpy(decoded.words_.get(), bytes.data(), bytes.size());
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    decoded.segments_[0] =
        kj::ArrayPtr<const capnp::word>(decoded.words_.get(), decoded.word_count_);
    decoded.reader_ = std::make_unique<capnp::SegmentArrayMessageReader>(
        kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>(decoded.segments_, 1),
        EventReaderOptions());
    decoded.root_ = decoded.reader_->getRoot<Event>();
    // Read every field once, so a malformed pointer or text is found here, not later in a
    // caller that trusted a decoded event.
    TouchAll(capnp::DynamicStruct::Reader(decoded.root_));
    decoded.canonical_ = decoded.reader_->isCanonical();
  });
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
  return static_cast<int>(which) >= static_cast<int>(Event::Body::QUOTA_RESERVED);
}

namespace {

std::string Differ(const capnp::DynamicValue::Reader& a, const capnp::DynamicValue::Reader& b,
                   const std::string& path);

std::string DifferStruct(const capnp::DynamicStruct::Reader& a,
                         const capnp::DynamicStruct::Reader& b, const std::string& path,
                         bool top_level) {
  auto join = [&](capnp::StructSchema::Field f) {
    std::string name = f.getProto().getName().cStr();
    return path.empty() ? name : path + "." + name;
  };
  for (capnp::StructSchema::Field field : a.getSchema().getNonUnionFields()) {
    std::string name = field.getProto().getName().cStr();
    if (top_level && (name == "sequence" || name == "recordedAtNs" || name == "prevHash")) {
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
                          false);
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
                      true);
}

}  // namespace admission::schema
