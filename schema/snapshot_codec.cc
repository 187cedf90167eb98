#include "schema/snapshot_codec.h"

#include <cstring>
#include <string>

#include <kj/exception.h>

namespace admission::schema {

capnp::ReaderOptions SnapshotReaderOptions(size_t bytes) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 4 * (bytes / sizeof(capnp::word)) + 1024;
  options.nestingLimit = kSnapshotNestingMax;
  return options;
}

Result<DecodedSnapshot> DecodeSnapshot(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return Status(Code::kCorruption, "snapshot of " + std::to_string(bytes.size()) +
                                         " bytes is not a whole number of 8-byte words");
  }
  if (bytes.size() > kSnapshotBytesMax) {
    return Status(Code::kCorruption, "snapshot of " + std::to_string(bytes.size()) +
                                         " bytes exceeds the limit of " +
                                         std::to_string(kSnapshotBytesMax));
  }
  DecodedSnapshot decoded;
  const size_t words = bytes.size() / sizeof(capnp::word);
  const capnp::word* start = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    decoded.copy_.reset(new capnp::word[words]);
    std::memcpy(decoded.copy_.get(), bytes.data(), bytes.size());
    start = decoded.copy_.get();
  }
  decoded.segments_[0] = kj::ArrayPtr<const capnp::word>(start, words);
  std::string failure;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    decoded.reader_ = std::make_unique<capnp::SegmentArrayMessageReader>(
        kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>(decoded.segments_, 1),
        SnapshotReaderOptions(bytes.size()));
    if (!decoded.reader_->isCanonical()) {
      failure = "snapshot bytes are not in canonical form";
      return;
    }
    decoded.root_ = decoded.reader_->getRoot<snap::Snapshot>();
  });
  KJ_IF_MAYBE(e, error) {
    return Status(Code::kCorruption,
                  std::string("snapshot does not decode: ") + e->getDescription().cStr());
  }
  if (!failure.empty()) return Status(Code::kCorruption, failure);
  return decoded;
}

Result<SnapshotHeader> ReadSnapshotHeader(std::string_view bytes) {
  auto decoded = DecodeSnapshot(bytes);
  if (!decoded.ok()) return decoded.status();
  SnapshotHeader header;
  std::string failure;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    snap::Snapshot::Reader root = decoded->root();
    header.format_version = root.getFormatVersion();
    header.engine_version = root.getEngineVersion();
    header.after = root.getAfterSequence();
    if (root.getChainHash().size() != header.chain_hash.size()) {
      failure = "snapshot's chainHash has " + std::to_string(root.getChainHash().size()) +
                " bytes, not 32";
      return;
    }
    header.chain_hash = HashFromData(root.getChainHash());
  });
  KJ_IF_MAYBE(e, error) {
    return Status(Code::kCorruption,
                  std::string("snapshot header does not decode: ") + e->getDescription().cStr());
  }
  if (!failure.empty()) return Status(Code::kCorruption, failure);
  return header;
}

}  // namespace admission::schema
