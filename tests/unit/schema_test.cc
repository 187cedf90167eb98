#include <capnp/message.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "schema/event_codec.h"
#include "tests/unit/event_gen.h"

namespace admission::schema {
namespace {

using admission::testing::BuildEvent;
using admission::testing::EventSpec;
using admission::testing::GenEventSpec;

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

}  // namespace
}  // namespace admission::schema
