// ops::Service's request handling: request ids stamped into idempotency keys, retries, the
// actor a connection forces, and refusals of a retry that is not the same request.

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "ops/service/clock.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

class FixedClock final : public Clock {
 public:
  int64_t NowNs() override { return 1'795'910'400'000'000'000; }
};

// A node capacity report (an operator's input: one event, no decision).
std::string NodeReport(const std::string& node, int64_t cpu_milli, const std::string& actor = "",
                       const std::string& key = "") {
  capnp::MallocMessageBuilder message;
  schema::Event::Builder event = message.initRoot<schema::Event>();
  if (!actor.empty()) event.setActor(actor);
  if (!key.empty()) event.setIdempotencyKey(key);
  auto report = event.initBody().initNodeCapacityChanged();
  report.setNode(node);
  report.setFlavor("f");
  auto capacity = report.initCapacity(1);
  capacity[0].setName("cpu");
  capacity[0].setMilli(cpu_milli);
  return schema::EncodeEvent(message);
}

struct Fixture {
  ledger::MemoryLog log;
  FixedClock clock;
  std::unique_ptr<Service> service;
  Fixture() {
    auto opened = Service::Open(log, clock);
    ADM_CHECK(opened.ok(), "%s", opened.status().ToString().c_str());
    service = std::move(*opened);
  }
  schema::DecodedEvent Stored(uint64_t sequence) {
    auto read = log.Read(sequence, 1);
    ADM_CHECK(read.ok() && read->size() == 1, "no event %lu", static_cast<unsigned long>(sequence));
    auto decoded = schema::DecodeEvent(read->front().bytes);
    ADM_CHECK(decoded.ok(), "%s", decoded.status().ToString().c_str());
    return std::move(*decoded);
  }
};

IntakeOptions Options(const std::string& actor, const std::string& request_id,
                      bool force_actor = false) {
  IntakeOptions options;
  options.actor = actor;
  options.request_id = request_id;
  options.force_actor = force_actor;
  return options;
}

TEST(ServiceRequests, RequestIdStampsEachKeylessInputAndARetryWritesNothing) {
  Fixture f;
  std::vector<std::string> inputs = {NodeReport("n1", 1000), NodeReport("n2", 2000, "", "own-key")};
  auto first = f.service->Record(inputs, Options("ops", "r1"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->sequences, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(std::string(f.Stored(1).root().getIdempotencyKey().cStr()), RequestInputKey("ops", "r1", 0));
  // An input's own key is stored in its actor's namespace of keys.
  EXPECT_EQ(std::string(f.Stored(2).root().getIdempotencyKey().cStr()), "by/ops/own-key");
  EXPECT_EQ(std::string(f.Stored(1).root().getActor().cStr()), "ops");

  auto retry = f.service->Record(inputs, Options("ops", "r1"));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->retried);
  EXPECT_EQ(retry->sequences, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(f.log.GetHead().sequence, 2u);
}

TEST(ServiceRequests, SameRequestIdWithAnotherBodyIsAConflictNamingTheField) {
  Fixture f;
  ASSERT_TRUE(f.service->Record({NodeReport("n1", 1000)}, Options("ops", "r1")).ok());
  auto other = f.service->Record({NodeReport("n1", 3000)}, Options("ops", "r1"));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kConflict);
  EXPECT_NE(other.status().message().find("body.nodeCapacityChanged.capacity"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(f.log.GetHead().sequence, 1u);
}

// A key lives in the namespace of keys of the actor that recorded it: another actor's input
// under the same key is its own (neither a retry of the first nor refused for it), and the
// same actor's input with another body under the key is a conflict.
TEST(ServiceRequests, AKeyLivesInItsActorsNamespaceOfKeys) {
  Fixture f;
  ASSERT_TRUE(f.service->Record({NodeReport("n1", 1000, "", "k")}, Options("alice", "")).ok());
  auto bobs = f.service->Record({NodeReport("n1", 1000, "", "k")}, Options("bob", ""));
  ASSERT_TRUE(bobs.ok()) << bobs.status().ToString();
  EXPECT_FALSE(bobs->retried) << "bob's input was answered with alice's record";
  EXPECT_EQ(std::string(f.Stored(2).root().getIdempotencyKey().cStr()), "by/bob/k");
  auto again = f.service->Record({NodeReport("n1", 1000, "", "k")}, Options("alice", ""));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->retried);
  auto other = f.service->Record({NodeReport("n1", 5000, "", "k")}, Options("alice", ""));
  ASSERT_FALSE(other.ok()) << "a different body under the same key was taken for a retry";
  EXPECT_EQ(other.status().code(), Code::kConflict);
  EXPECT_EQ(f.log.GetHead().sequence, 2u);
  // An actor's '/' cannot make its keys another's.
  EXPECT_NE(PrincipalKey("a/b", "c"), PrincipalKey("a", "b/c"));
}

TEST(ServiceRequests, ForcedActorReplacesTheOneTheInputNames) {
  Fixture f;
  auto recorded = f.service->Record({NodeReport("n1", 1000, "someone-else")},
                                    Options("platform-ops", "r1", true));
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  EXPECT_EQ(std::string(f.Stored(1).root().getActor().cStr()), "platform-ops");
  auto kept = f.service->Record({NodeReport("n2", 1000, "named")}, Options("dev", "r2"));
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(std::string(f.Stored(2).root().getActor().cStr()), "named");
}

TEST(ServiceRequests, RequestIdTooLongForAKeyIsRefusedAndWritesNothing) {
  Fixture f;
  auto refused = f.service->Record({NodeReport("n1", 1000)}, Options("ops", std::string(600, 'x')));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("request id"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(f.log.GetHead().sequence, 0u);
}

}  // namespace
}  // namespace admission::ops
