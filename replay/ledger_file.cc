#include "replay/ledger_file.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "schema/event_codec.h"

namespace admission::replay {

namespace {

constexpr const char* kHeader = "# admission ledger v1";
constexpr const char* kHeadPrefix = "# head ";

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool FromHex(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  out->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]);
    const int lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

Status Refuse(size_t line, const std::string& why) {
  return Status(Code::kInvalidArgument, "ledger file line " + std::to_string(line) + ": " + why);
}

}  // namespace

Result<std::string> ExportLedger(ledger::EventLog& log) {
  const ledger::Head head = log.GetHead();
  if (head.sequence > kLedgerFileEventsMax) {
    return Status(Code::kInvalidArgument,
                  "a ledger file holds at most " + std::to_string(kLedgerFileEventsMax) +
                      " events; this ledger has " + std::to_string(head.sequence));
  }
  std::ostringstream out;
  out << kHeader << "\n"
      << "# one event per line: SEQUENCE BODY HEX(canonical bytes as stored)\n";
  ledger::Sequence next = 1;
  while (next <= head.sequence) {
    auto chunk = log.Read(next, 4096);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) break;
    for (const ledger::StoredEvent& stored : *chunk) {
      auto decoded = schema::DecodeEvent(stored.bytes);
      if (!decoded.ok()) {
        return Status(Code::kCorruption, "event " + std::to_string(stored.sequence) + ": " +
                                             decoded.status().message());
      }
      out << stored.sequence << " " << schema::BodyName(decoded->root()) << " " << Hex(stored.bytes)
          << "\n";
      next = stored.sequence + 1;
    }
  }
  out << kHeadPrefix << head.sequence << " " << schema::HashHex(head.hash) << "\n";
  return out.str();
}

Status ImportLedger(const std::string& text, ledger::EventLog& log) {
  if (log.GetHead().sequence != 0) {
    return Status(Code::kInvalidArgument, "a ledger file loads only into an empty log");
  }
  std::istringstream in(text);
  std::string line;
  size_t line_number = 0;
  std::vector<std::string> events;
  std::string head_line;
  while (std::getline(in, line)) {
    ++line_number;
    if (line_number == 1) {
      if (line != kHeader)
        return Refuse(1, "not a ledger file (expected '" + std::string(kHeader) + "')");
      continue;
    }
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.rfind(kHeadPrefix, 0) == 0) head_line = line.substr(std::string(kHeadPrefix).size());
      continue;
    }
    if (events.size() >= kLedgerFileEventsMax) return Refuse(line_number, "too many events");
    std::istringstream fields(line);
    uint64_t sequence = 0;
    std::string body, hex;
    if (!(fields >> sequence >> body >> hex))
      return Refuse(line_number, "expected SEQUENCE BODY HEX");
    if (sequence != events.size() + 1) {
      return Refuse(line_number, "sequence " + std::to_string(sequence) + " where " +
                                     std::to_string(events.size() + 1) + " was expected");
    }
    std::string bytes;
    if (!FromHex(hex, &bytes)) return Refuse(line_number, "the event is not lower-case hex");
    events.push_back(std::move(bytes));
  }
  if (head_line.empty()) return Refuse(line_number, "no '# head SEQUENCE HASH' line");

  for (size_t i = 0; i < events.size(); i += ledger::kAppendBatchEventsMax) {
    const size_t n = std::min(ledger::kAppendBatchEventsMax, events.size() - i);
    auto ack = log.Append(std::span<const std::string>(events.data() + i, n));
    if (!ack.ok()) {
      return Status(ack.status().code(),
                    "loading events " + std::to_string(i + 1) + "..: " + ack.status().message());
    }
    if (ack->written != n) {
      return Status(Code::kCorruption, "events " + std::to_string(i + 1) + ".." +
                                           std::to_string(i + n) +
                                           " hold a repeated idempotency key");
    }
  }
  // The log's Sequencer rewrote sequence and prevHash: the file is a ledger only if that gives
  // back exactly the bytes written.
  ledger::Sequence next = 1;
  while (next <= events.size()) {
    auto chunk = log.Read(next, 4096);
    if (!chunk.ok()) return chunk.status();
    if (chunk->empty()) break;
    for (const ledger::StoredEvent& stored : *chunk) {
      if (stored.bytes != events[stored.sequence - 1]) {
        return Status(Code::kCorruption,
                      "event " + std::to_string(stored.sequence) +
                          " of the ledger file is not what the ledger stores for it (edited, or "
                          "its prevHash does not chain)");
      }
      next = stored.sequence + 1;
    }
  }
  const ledger::Head head = log.GetHead();
  const std::string expected = std::to_string(head.sequence) + " " + schema::HashHex(head.hash);
  if (head_line != expected) {
    return Status(Code::kCorruption, "the ledger file's head line says '" + head_line +
                                         "'; its events chain to '" + expected + "'");
  }
  return Status::Ok();
}

}  // namespace admission::replay
