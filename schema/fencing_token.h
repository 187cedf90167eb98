#pragma once
// The fencing token of an admission: "UID/GENERATION", the workload's uid (unique in the whole
// ledger) and its admission generation. The decider hands it out with each admission and checks
// it on every pod report; the bridge reads it from the ledger's workload status (fencingToken,
// or evictingToken while an evicted admission drains) and never builds one itself.

#include <cstdint>
#include <string>
#include <string_view>

namespace admission::schema {

inline std::string FencingToken(std::string_view uid, uint64_t generation) {
  std::string token(uid);
  token.append("/").append(std::to_string(generation));
  return token;
}

}  // namespace admission::schema
