#include "ops/rpc/transport.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace admission::ops::rpc {

capnp::ReaderOptions PeerReaderOptions() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kRequestWordsMax;
  options.nestingLimit = kRequestNestingMax;
  return options;
}

std::string Endpoint::KjAddress() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  return host + ":" + std::to_string(port);
}

Result<Endpoint> ParseEndpoint(std::string_view text) {
  Endpoint e;
  e.text = std::string(text);
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument,
                  "address '" + std::string(text) + "': " + why +
                      " (expected unix:PATH or tls:HOST:PORT, e.g. unix:/run/admitd.sock or "
                      "tls:127.0.0.1:7443)");
  };
  if (text.rfind("unix:", 0) == 0) {
    e.kind = Endpoint::Kind::kUnix;
    e.path = std::string(text.substr(5));
    if (e.path.empty()) return bad("no socket path");
    if (e.path.size() > 100) return bad("the socket path is longer than 100 bytes");
    return e;
  }
  if (text.rfind("tls:", 0) == 0) {
    e.kind = Endpoint::Kind::kTls;
    std::string_view rest = text.substr(4);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad("no HOST:PORT");
    e.host = std::string(rest.substr(0, colon));
    std::string_view port = rest.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value > 65535) {
      return bad("port '" + std::string(port) + "' is not a number from 0 to 65535");
    }
    e.port = static_cast<uint16_t>(value);
    return e;
  }
  return bad("unknown scheme");
}

Result<std::string> ReadFileText(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::kInvalidArgument, what + " " + path + ": cannot be read");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void ToError(const Status& status, Error::Builder error) {
  error.setCode(static_cast<uint8_t>(status.code()));
  error.setMessage(status.message());
  if (status.code() == Code::kOverloaded) error.setRetryAfterMs(kOverloadedRetryAfterMs);
}

std::optional<Status> FromAbort(std::string_view description) {
  constexpr std::string_view kRemote = "remote exception: ";
  const size_t at = description.find(kRemote);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view reason = description.substr(at + kRemote.size());
  for (int c = 1; c <= static_cast<int>(kCodeLast); ++c) {
    const std::string name = std::string(CodeName(static_cast<Code>(c))) + ": ";
    if (reason.substr(0, name.size()) == name) {
      return Status(static_cast<Code>(c), std::string(reason.substr(name.size())));
    }
  }
  return std::nullopt;
}

Status FromError(Error::Reader error) {
  if (error.getCode() == 0) return Status::Ok();
  if (error.getCode() > static_cast<uint8_t>(kCodeLast)) {
    return Status(Code::kUnavailable, "admitd answered an unknown error code " +
                                          std::to_string(error.getCode()) + ": " +
                                          error.getMessage().cStr());
  }
  std::string message = error.getMessage().cStr();
  if (error.getRetryAfterMs() > 0) {
    message += " (retry after " + std::to_string(error.getRetryAfterMs()) + " ms)";
  }
  return Status(static_cast<Code>(error.getCode()), message);
}

}  // namespace admission::ops::rpc
