// libFuzzer target: bytes as a snapshot of the projection state (projections/snapshot.h,
// LoadSnapshot; schema/snapshot_codec.h underneath), as every command reads the newest one at
// startup. Asserts, besides no crash, no uncaught exception and no sanitizer report: a snapshot
// LoadSnapshot accepts re-encodes (EncodeSnapshot) into bytes it accepts again, with the same
// header, and whose state encodes to the same bytes once more (the encoding of a loaded state
// is a fixed point), so a state the loader let in is one the decider can keep snapshotting.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "projections/snapshot.h"
#include "schema/result.h"

namespace admission::fuzz {
namespace {

// Inputs beyond this teach the fuzzer nothing new (the codec's own limit is
// kSnapshotBytesMax); the seeds are a few KiB.
constexpr size_t kInputBytesMax = 256 << 10;

void RunOne(std::string_view bytes) {
  auto header = schema::ReadSnapshotHeader(bytes);
  auto loaded = projections::LoadSnapshot(bytes);
  if (!loaded.ok()) return;
  ADM_CHECK(header.ok(), "LoadSnapshot accepted a snapshot whose header does not read: %s",
            header.status().ToString().c_str());
  ADM_CHECK(header->after == loaded->header.after, "the header reads another sequence");
  auto encoded = projections::EncodeSnapshot(*loaded->engine, loaded->header.after,
                                             loaded->header.chain_hash, loaded->definitions);
  ADM_CHECK(encoded.ok(), "a loaded snapshot does not encode: %s",
            encoded.status().ToString().c_str());
  auto reloaded = projections::LoadSnapshot(*encoded);
  ADM_CHECK(reloaded.ok(), "the re-encoded snapshot is refused: %s",
            reloaded.status().ToString().c_str());
  ADM_CHECK(reloaded->header.after == loaded->header.after &&
                reloaded->header.chain_hash == loaded->header.chain_hash,
            "the re-encoded snapshot has another header");
  if (reloaded->definitions != loaded->definitions) {
    for (const auto& [key, body] : loaded->definitions) {
      auto it = reloaded->definitions.find(key);
      std::fprintf(stderr, "definition '%s' (%zu bytes): %s\n", key.c_str(), key.size(),
                   it == reloaded->definitions.end() ? "lost"
                   : it->second == body              ? "same"
                                                     : "changed");
    }
    ADM_CHECK(false, "definitions changed on re-encoding (%zu then %zu)",
              loaded->definitions.size(), reloaded->definitions.size());
  }
  auto again = projections::EncodeSnapshot(*reloaded->engine, reloaded->header.after,
                                           reloaded->header.chain_hash, reloaded->definitions);
  ADM_CHECK(again.ok() && *again == *encoded,
            "encoding a loaded state is no fixed point (%zu then %zu bytes)", encoded->size(),
            again.ok() ? again->size() : 0);
}

}  // namespace
}  // namespace admission::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > admission::fuzz::kInputBytesMax) return -1;
  admission::fuzz::RunOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
