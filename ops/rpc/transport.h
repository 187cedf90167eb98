#pragma once
// What both ends of admitd's RPC share: addresses, TLS material, limits, and the mapping of
// our Status onto the wire's Error. See docs/admitd.md.

#include <cstdint>
#include <string>
#include <string_view>

#include <capnp/message.h>

#include "schema/admission_rpc.capnp.h"
#include "schema/event_codec.h"
#include "schema/result.h"

namespace admission::ops::rpc {

// The wire types (schema/admission_rpc.capnp).
using ::admission::rpc::Error;
using ::admission::rpc::EventSink;
using ::admission::rpc::Ledger;
using ::admission::rpc::StoredEvent;
using ::admission::rpc::WatchHandle;

// Limits, each with its unit (docs/admitd.md, "Limits").
// A message a peer may make us read: Cap'n Proto's traversal limit, in 8-byte words.
inline constexpr uint64_t kRequestWordsMax = uint64_t{4} << 20;  // 32 MiB
inline constexpr int kRequestNestingMax = 64;
// Bytes of calls queued on one connection before the daemon stops reading from it (RPC flow
// limit): a connection's calls in flight.
inline constexpr size_t kConnectionFlowLimitBytes = size_t{8} << 20;
inline constexpr size_t kConnectionsMax = 1024;
inline constexpr size_t kConnectionsPerPrincipalMax = 512;
inline constexpr size_t kWatchersMax = 256;
// Events appended while a watcher still holds an unanswered push; past this it is ended with
// its resume sequence (it never holds the writer back).
inline constexpr uint64_t kWatchBufferEventsMax = 65536;
inline constexpr uint32_t kWatchPushEventsMax = 512;  // events in one push
// A page of the ledger in one message (a `read` reply, a watch push): events only up to this
// many stored bytes, but always at least one (an event is at most schema::kEventBytesMax), so a
// page fits in a message whatever its events' sizes; the client asks again for the rest.
inline constexpr size_t kReadPageBytesMax = size_t{8} << 20;  // 8 MiB
// Events in one `read` reply, however small they are: the work of one call on the event loop.
inline constexpr uint32_t kReadPageEventsMax = 4096;
// A full page (the byte budget, one more event that starts it, and each event's list entry) is
// well under what a peer reads in one message (the daemon sends nothing larger than it reads).
static_assert(kReadPageBytesMax + schema::kEventBytesMax + kReadPageEventsMax * 64 <
              kRequestWordsMax * sizeof(capnp::word) / 2);
inline constexpr size_t kPendingCallsMax = 4096;      // record calls waiting for a group
inline constexpr size_t kReadQueueMax = 16;           // explain calls waiting for the read worker
inline constexpr uint32_t kOverloadedRetryAfterMs = 100;
inline constexpr size_t kRequestIdBytesMax = 128;
// A TLS handshake that takes longer than this is dropped.
inline constexpr uint64_t kTlsAcceptTimeoutMs = 10'000;
// SIGTERM: at most this long to answer what is in flight and close watchers.
inline constexpr uint64_t kShutdownMaxMs = 5'000;

capnp::ReaderOptions PeerReaderOptions();

// unix:PATH or tls:HOST:PORT.
struct Endpoint {
  enum class Kind { kUnix, kTls } kind = Kind::kUnix;
  std::string path;  // unix
  std::string host;  // tls
  uint16_t port = 0;
  std::string text;  // as given
  // kj's address form ("unix:PATH", "HOST:PORT").
  std::string KjAddress() const;
};
// Errors: kInvalidArgument naming the address and what is wrong with it.
Result<Endpoint> ParseEndpoint(std::string_view text);

// PEM files of one side's TLS identity and the CA it trusts.
struct TlsFiles {
  std::string cert, key, ca;
};

// Reads a whole file (kInvalidArgument naming it when it cannot).
Result<std::string> ReadFileText(const std::string& path, const std::string& what);

void ToError(const Status& status, Error::Builder error);
// Status::Ok() for an unset error (code 0).
Status FromError(Error::Reader error);

}  // namespace admission::ops::rpc
