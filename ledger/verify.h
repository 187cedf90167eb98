#pragma once
// Walking the hash chain. Used by `admitctl verify` (the whole chain) and by RocksDbLog::Open
// (the tail).

#include <functional>
#include <optional>
#include <string>

#include "ledger/event_log.h"

namespace admission::ledger {

// The first event found edited or corrupt, with the reason.
struct ChainFault {
  Sequence sequence = 0;
  std::string reason;
};

struct VerifyReport {
  Sequence events_checked = 0;
  Sequence head = 0;
  schema::Hash head_hash{};
  std::optional<ChainFault> fault;
};

// Called every so often with (events checked, total), for progress display.
using VerifyProgress = std::function<void(Sequence done, Sequence total)>;

// Checks events [from, head] of `log`. `from_hash` must be the chain value after event
// from-1 (kGenesisHash for from == 1). Also checks that every keyed event is the one its
// idempotency key finds. Errors only for I/O failures; a bad chain is a fault in the report.
Result<VerifyReport> VerifyChain(EventLog& log, Sequence from, const schema::Hash& from_hash,
                                 bool check_index, const VerifyProgress& progress = nullptr);

// The chain value after event `after`: H(after) = SHA-256(prevHash recorded by event `after` ||
// its stored bytes), kGenesisHash for 0. What a snapshot records to tie itself to its ledger.
// It trusts the event's recorded prevHash; VerifyChain checks those. Errors: kInvalidArgument
// (beyond the head), kCorruption (missing or undecodable event), kIoError.
Result<schema::Hash> ChainValueAfter(EventLog& log, Sequence after);

}  // namespace admission::ledger
