// The policy's bearer tokens for the dashboard (ops/rpc/policy.h, docs/dashboard.md), and the
// bridge role (docs/admitd.md, "Policy").

#include <functional>

#include <capnp/message.h>
#include <gtest/gtest.h>

#include "ops/rpc/policy.h"
#include "projections/engine.h"
#include "schema/event_codec.h"

namespace admission::ops::rpc {
namespace {

std::string Sha(const std::string& token) { return schema::HashHex(schema::Sha256Of(token)); }

TEST(PolicyTokens, ATokenNamesItsPrincipal) {
  auto policy = Policy::Parse("principals:\n"
                              "- {name: ops, roles: [operator], tokenSha256: " + Sha("s3cret") + "}\n"
                              "- {name: ml, roles: [tenant], namespaces: [ml], tokenSha256: " +
                                  Sha("other") + "}\n"
                              "- {name: scanner, roles: [check-controller]}\n",
                              "test");
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  ASSERT_NE(policy->FindByToken("s3cret"), nullptr);
  EXPECT_EQ(policy->FindByToken("s3cret")->name, "ops");
  EXPECT_EQ(policy->FindByToken("other")->name, "ml");
  EXPECT_EQ(policy->FindByToken("s3cret "), nullptr);
  EXPECT_EQ(policy->FindByToken(""), nullptr);
  EXPECT_EQ(policy->FindByToken(Sha("s3cret")), nullptr);  // the hash is not the token
}

TEST(PolicyTokens, BadTokensAreRefusedNamingTheField) {
  auto bad = Policy::Parse("principals:\n- {name: ops, roles: [operator], tokenSha256: abc}\n", "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("principals[0].tokenSha256"), std::string::npos)
      << bad.status().message();
  auto upper = Policy::Parse("principals:\n- {name: ops, roles: [operator], tokenSha256: " +
                                 std::string(64, 'A') + "}\n",
                             "p.yaml");
  EXPECT_FALSE(upper.ok());
  auto twice = Policy::Parse("principals:\n"
                             "- {name: a, roles: [operator], tokenSha256: " + Sha("x") + "}\n"
                             "- {name: b, roles: [auditor], tokenSha256: " + Sha("x") + "}\n",
                             "p.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("principals[1].tokenSha256"), std::string::npos);
  EXPECT_NE(twice.status().message().find("'a'"), std::string::npos);
}

// One input event, built by `fill`.
class Input {
 public:
  explicit Input(const std::function<void(schema::Event::Builder)>& fill) {
    auto e = message_.initRoot<schema::Event>();
    e.setSequence(1);
    fill(e);
  }
  schema::Event::Reader get() { return message_.getRoot<schema::Event>().asReader(); }

 private:
  capnp::MallocMessageBuilder message_;
};

void Ref(schema::WorkloadRef::Builder ref, const char* ns) {
  ref.setNamespace(ns);
  ref.setName("job-a");
}

class BridgeRole : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parsed = Policy::Parse("principals:\n"
                                "- {name: admit-k8s, roles: [bridge]}\n"
                                "- {name: ml, roles: [tenant], namespaces: [ml]}\n"
                                "- {name: example.com/scan, roles: [check-controller]}\n"
                                "- {name: ops, roles: [operator]}\n",
                                "test");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    policy_ = std::move(*parsed);
    Input check([](schema::Event::Builder e) {
      auto c = e.initBody().initAdmissionCheckDefined();
      c.setName("scan");
      c.setControllerName("example.com/scan");
    });
    engine_.ApplyInput(check.get());
  }
  Status Record(const std::string& principal,
                const std::function<void(schema::Event::Builder)>& fill) {
    Input input(fill);
    return policy_.MayRecord(principal, input.get(), engine_);
  }
  static std::function<void(schema::Event::Builder)> Report(const char* via) {
    return [via](schema::Event::Builder e) {
      auto r = e.initBody().initCheckStateReported();
      Ref(r.initWorkload(), "ml");
      r.setCheck("scan");
      r.setState(schema::CheckState::READY);
      r.setViaFieldManager(via);
    };
  }
  Policy policy_;
  projections::Engine engine_;
};

TEST_F(BridgeRole, SubmitsDeletesFinishesAndReportsPodsInEveryNamespace) {
  for (const char* ns : {"ml", "team-b", "default"}) {
    EXPECT_TRUE(Record("admit-k8s", [&](schema::Event::Builder e) {
                  auto w = e.initBody().initWorkloadSubmitted().initWorkload();
                  w.setNamespace(ns);
                  w.setName("job-a");
                }).ok());
    EXPECT_TRUE(Record("admit-k8s", [&](schema::Event::Builder e) {
                  Ref(e.initBody().initWorkloadDeleted().initWorkload(), ns);
                }).ok());
    EXPECT_TRUE(Record("admit-k8s", [&](schema::Event::Builder e) {
                  Ref(e.initBody().initWorkloadFinished().initWorkload(), ns);
                }).ok());
  }
  EXPECT_TRUE(Record("admit-k8s", [](schema::Event::Builder e) {
                auto r = e.initBody().initPodsReported();
                Ref(r.initWorkload(), "ml");
                r.setReport(schema::PodsReport::RELEASED);
              }).ok());
  // A tenant still only in its own namespaces.
  Status other = Record("ml", [](schema::Event::Builder e) {
    Ref(e.initBody().initWorkloadDeleted().initWorkload(), "team-b");
  });
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
}

TEST_F(BridgeRole, RecordsDefinitionsButNotOperatorsOtherInputs) {
  EXPECT_TRUE(Record("admit-k8s", [](schema::Event::Builder e) {
                e.initBody().initFlavorDefined().setName("default-flavor");
              }).ok());
  EXPECT_TRUE(Record("admit-k8s", [](schema::Event::Builder e) {
                e.initBody().initClusterQueueDefined().setName("cq");
              }).ok());
  EXPECT_TRUE(Record("admit-k8s", [](schema::Event::Builder e) {
                e.initBody().initAdmissionCheckDefined().setName("scan");
              }).ok());
  // Revocations, configuration and clock ticks stay the operator's.
  Status revoke = Record("admit-k8s", [](schema::Event::Builder e) {
    Ref(e.initBody().initRevocationRequested().initTarget().initWorkload(), "ml");
  });
  EXPECT_EQ(revoke.code(), Code::kPermissionDenied);
  EXPECT_NE(revoke.message().find("needs the operator role"), std::string::npos)
      << revoke.message();
  EXPECT_EQ(Record("admit-k8s", [](schema::Event::Builder e) {
              e.initBody().initEngineConfigDefined();
            }).code(),
            Code::kPermissionDenied);
  EXPECT_EQ(Record("admit-k8s", [](schema::Event::Builder e) {
              e.initBody().initClockAdvanced();
            }).code(),
            Code::kPermissionDenied);
  // A tenant records no definition.
  Status tenant = Record("ml", [](schema::Event::Builder e) {
    e.initBody().initFlavorDefined().setName("f");
  });
  EXPECT_EQ(tenant.code(), Code::kPermissionDenied);
  EXPECT_NE(tenant.message().find("needs the operator role (or the bridge role)"), std::string::npos)
      << tenant.message();
}

TEST_F(BridgeRole, ForwardsCheckReportsOnlyForTheOwnersFieldManager) {
  EXPECT_TRUE(Record("admit-k8s", Report("example.com/scan")).ok());
  Status wrong = Record("admit-k8s", Report("someone-else"));
  EXPECT_EQ(wrong.code(), Code::kPermissionDenied);
  EXPECT_NE(wrong.message().find("its spec.controllerName is 'example.com/scan'"), std::string::npos)
      << wrong.message();
  // Not marked as forwarded: a bridge is no check controller.
  Status direct = Record("admit-k8s", Report(""));
  EXPECT_EQ(direct.code(), Code::kPermissionDenied);
  EXPECT_NE(direct.message().find("viaFieldManager"), std::string::npos) << direct.message();
  // Only a bridge forwards: the check's own controller reports directly, nobody else vouches.
  EXPECT_TRUE(Record("example.com/scan", Report("")).ok());
  Status controller_via = Record("example.com/scan", Report("example.com/scan"));
  EXPECT_EQ(controller_via.code(), Code::kPermissionDenied);
  EXPECT_NE(controller_via.message().find("only the bridge role forwards"), std::string::npos)
      << controller_via.message();
  EXPECT_EQ(Record("ops", Report("example.com/scan")).code(), Code::kPermissionDenied);
}

TEST_F(BridgeRole, ReadsAndWatchesEverythingButNotTheLog) {
  EXPECT_TRUE(policy_.MaySee("admit-k8s", "get", "").ok());
  EXPECT_TRUE(policy_.MaySee("admit-k8s", "explain", "team-b").ok());
  EXPECT_TRUE(policy_.ScopeOf("admit-k8s").empty());
  std::vector<std::string> namespaces, checks;
  EXPECT_TRUE(policy_.MayWatch("admit-k8s", &namespaces, &checks, engine_).ok());
  EXPECT_TRUE(namespaces.empty());
  EXPECT_TRUE(checks.empty());
  EXPECT_EQ(policy_.MayRead("admit-k8s", "read the log").code(), Code::kPermissionDenied);
  EXPECT_EQ(policy_.MayOperate("admit-k8s", "snapshot").code(), Code::kPermissionDenied);
  EXPECT_EQ(policy_.RolesOf("admit-k8s"), std::vector<std::string>{"bridge"});
}

TEST_F(BridgeRole, TheEngineTakesAForwardedReportOnlyForTheOwner) {
  // Intake's own rule, whoever the policy let through: the field manager must be the owner.
  Input wrong([](schema::Event::Builder e) {
    e.setActor("admit-k8s");
    auto r = e.initBody().initCheckStateReported();
    Ref(r.initWorkload(), "ml");
    r.setCheck("scan");
    r.setViaFieldManager("someone-else");
  });
  auto verdict = engine_.Validate(wrong.get());
  EXPECT_FALSE(verdict.status.ok());
  EXPECT_NE(verdict.status.message().find("field manager 'someone-else', not by its owner"),
            std::string::npos)
      << verdict.status.message();
  Input unmarked([](schema::Event::Builder e) {
    e.setActor("admit-k8s");
    auto r = e.initBody().initCheckStateReported();
    Ref(r.initWorkload(), "ml");
    r.setCheck("scan");
  });
  verdict = engine_.Validate(unmarked.get());
  EXPECT_NE(verdict.status.message().find("does not own check scan"), std::string::npos)
      << verdict.status.message();
}

}  // namespace
}  // namespace admission::ops::rpc
