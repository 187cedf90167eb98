#include "consumers/billing/usage.h"

#include "schema/event_codec.h"

namespace admission::consumers::billing {

Result<UsageFold> FoldLedger(ledger::EventLog& log) {
  UsageFold fold;
  const ledger::Head head = log.GetHead();
  ledger::Sequence next = 1;
  Status failure;
  while (next <= head.sequence && failure.ok()) {
    auto shown = log.Scan(next, 4096, [&](ledger::Sequence sequence, std::string_view bytes) {
      auto decoded = schema::DecodeEvent(bytes);
      if (!decoded.ok()) {
        failure = Status(Code::kCorruption, "event " + std::to_string(sequence) + ": " +
                                                decoded.status().message());
        return false;
      }
      fold.Apply(sequence, decoded->root());
      next = sequence + 1;
      return true;
    });
    if (!shown.ok()) return shown.status();
    if (*shown == 0) break;
  }
  if (!failure.ok()) return failure;
  return fold;
}

}  // namespace admission::consumers::billing
