// The policy's bearer tokens for the dashboard (ops/rpc/policy.h, docs/dashboard.md).

#include <gtest/gtest.h>

#include "ops/rpc/policy.h"
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

}  // namespace
}  // namespace admission::ops::rpc
