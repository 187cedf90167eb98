#pragma once
// The fencing token of an admission: "UID/GENERATION", the workload's uid (unique in the whole
// ledger) and its admission generation. The decider hands it out with each admission and checks
// it on every pod report; the bridge reads it from the ledger's workload status (fencingToken,
// or evictingToken while an evicted admission drains) and never builds one itself.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace admission::schema {

inline std::string FencingToken(std::string_view uid, uint64_t generation) {
  std::string token(uid);
  token.append("/").append(std::to_string(generation));
  return token;
}

// The parts of a token's text; nullopt when it is not UID/GENERATION (a nonempty uid, a
// decimal generation of at least 1).
struct FencingTokenParts {
  std::string_view uid;
  uint64_t generation = 0;
};
inline std::optional<FencingTokenParts> ParseFencingToken(std::string_view token) {
  const size_t slash = token.rfind('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == token.size()) return std::nullopt;
  const std::string_view digits = token.substr(slash + 1);
  if (digits.size() > 19) return std::nullopt;
  uint64_t generation = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    generation = generation * 10 + static_cast<uint64_t>(c - '0');
  }
  if (generation == 0) return std::nullopt;
  return FencingTokenParts{token.substr(0, slash), generation};
}

}  // namespace admission::schema
