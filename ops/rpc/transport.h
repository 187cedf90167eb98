#pragma once
// What both ends of admitd's RPC share: addresses, TLS material, limits, and the mapping of
// our Status onto the wire's Error. See docs/admitd.md.

#include <cstdint>
#include <optional>
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
// Connections (docs/admitd.md, "Limits"). A connection past a limit is closed at once (after a
// one-message Abort naming the limit), never kept. Open connections of every principal but
// admin's reserve:
inline constexpr size_t kConnectionsMax = 1024;
// Of one principal the policy names (and of admin).
inline constexpr size_t kConnectionsPerPrincipalMax = 256;
// Of all principals the policy does not name, together (they may only call whoami and ping).
inline constexpr size_t kUnknownPeerConnectionsMax = 16;
// Admin's Unix connections accepted past kConnectionsMax, so that the daemon's own uid can
// always get in.
inline constexpr size_t kAdminReserveConnections = 16;
// TLS handshakes in progress. Past it the TLS listener accepts nothing more (new connections
// wait in the listen backlog) until one ends, or until the oldest has taken
// kTlsHandshakeEvictAfterMs: then it is dropped for the next (an honest handshake takes
// milliseconds; one that old has stalled).
inline constexpr size_t kTlsHandshakesMax = 256;
inline constexpr uint64_t kTlsHandshakeEvictAfterMs = 2'000;
// A connection's peer that stops in the middle of a message is closed after this long: its
// partial message would hold memory (the size its segment table claims, as it arrives).
inline constexpr uint64_t kPartialMessageTimeoutMs = 10'000;
// From a message's first byte to its last (a peer that sends a byte now and then).
inline constexpr uint64_t kMessageReceiveMaxMs = 60'000;
// Bytes received of messages not yet complete, all connections together: a read past it
// closes its connection.
inline constexpr uint64_t kPartialMessageBytesMax = uint64_t{256} << 20;
// Past-limit connections being told why (the Abort's write): more are closed without a word.
inline constexpr size_t kRefusalsInFlightMax = 64;
inline constexpr uint64_t kRefusalWriteTimeoutMs = 1'000;
// An accept that fails (file descriptors exhausted, ...) is retried after a backoff doubling
// from the first to the last value; the daemon is not ready meanwhile.
inline constexpr uint64_t kAcceptRetryFirstMs = 10;
inline constexpr uint64_t kAcceptRetryMaxMs = 1'000;
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
// Workloads in one `workloadStates` call (a client's batch of lookups, not a listing).
inline constexpr uint32_t kWorkloadStatesNamesMax = 1024;
// A full page (the byte budget, one more event that starts it, and each event's list entry) is
// well under what a peer reads in one message (the daemon sends nothing larger than it reads).
static_assert(kReadPageBytesMax + schema::kEventBytesMax + kReadPageEventsMax * 64 <
              kRequestWordsMax * sizeof(capnp::word) / 2);
inline constexpr size_t kPendingCallsMax = 4096;      // record calls waiting for a group
inline constexpr size_t kReadQueueMax = 16;           // explain calls waiting for the read worker
// recordManifest: one manifest's bytes (the parser's tree takes MEASURED times its size), the
// bytes of manifests waiting for the parser or being parsed (one thread), and their count.
inline constexpr size_t kManifestBytesMax = size_t{2} << 20;
inline constexpr size_t kManifestParseBytesMax = size_t{8} << 20;
inline constexpr size_t kManifestQueueMax = 16;
inline constexpr uint32_t kOverloadedRetryAfterMs = 100;
inline constexpr size_t kRequestIdBytesMax = 128;
// A TLS handshake (the time before a TLS peer is authenticated) that takes longer than this
// is dropped.
inline constexpr uint64_t kTlsAcceptTimeoutMs = 5'000;
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
// The Status a connection refused at a limit was told in an RPC Abort (Daemon::Refuse: the
// reason is `CODE: message`), read back from the exception Cap'n Proto turns it into
// ("remote exception: CODE: message"); nullopt when the exception is not one.
std::optional<Status> FromAbort(std::string_view exception_description);
// Status::Ok() for an unset error (code 0).
Status FromError(Error::Reader error);

}  // namespace admission::ops::rpc
