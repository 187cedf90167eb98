#pragma once
// A ledger as a plain text file, for committing small ledgers (the golden corpus in
// tests/golden/) and moving them between machines: one line per event, in order,
//
//   SEQUENCE BODY-NAME HEX-OF-THE-STORED-CANONICAL-BYTES
//
// after a header line `# admission ledger v1` and comment lines (`#`). The last line is
// `# head SEQUENCE HASH` (the chain value after the head). Loading appends the events to a fresh
// log, whose Sequencer assigns sequence and prevHash again: so a file loads only if every event
// comes out byte for byte as written and the chain ends at the recorded head hash.

#include <string>

#include "ledger/event_log.h"
#include "schema/result.h"

namespace admission::replay {

// Limits: a ledger file is for small ledgers.
inline constexpr size_t kLedgerFileEventsMax = 1'000'000;

// Renders events [1, head] of `log` in the format above.
Result<std::string> ExportLedger(ledger::EventLog& log);

// Appends the events of a ledger file to `log`, which must be empty, and checks that the log
// stores each one byte for byte as the file holds it and ends at the file's head hash.
// Errors: kInvalidArgument (not a ledger file, a line out of order, a non-empty log),
// kCorruption (an event that does not store as written, a head hash that differs).
Status ImportLedger(const std::string& text, ledger::EventLog& log);

}  // namespace admission::replay
