#include "ops/service/intake.h"

#include <algorithm>

#include <capnp/message.h>

#include "schema/time_format.h"

namespace admission::ops {

Result<int64_t> Intake::StampTime() {
  const ledger::Head head = log_.GetHead();
  if (options_.at_ns) {
    if (*options_.at_ns < head.recorded_at_ns) {
      return Status(Code::kTimeWentBackwards,
                    "--at " + FormatRfc3339(*options_.at_ns) +
                        " is earlier than the ledger's last event at " +
                        FormatRfc3339(head.recorded_at_ns) +
                        " (sequence " + std::to_string(head.sequence) +
                        "); time never goes backwards in a ledger");
    }
    return *options_.at_ns;
  }
  return std::max(clock_.NowNs(), head.recorded_at_ns);
}

Result<ledger::AppendAck> Intake::Submit(const std::vector<std::string>& events) {
  Result<int64_t> at = StampTime();
  if (!at.ok()) return at.status();
  std::vector<std::string> stamped;
  stamped.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    Result<schema::DecodedEvent> decoded = schema::DecodeEvent(events[i]);
    if (!decoded.ok()) {
      return Status(Code::kInvalidArgument, "event " + std::to_string(i) + ": " +
                                                decoded.status().message());
    }
    capnp::MallocMessageBuilder message;
    message.setRoot(decoded->root());
    schema::Event::Builder root = message.getRoot<schema::Event>();
    root.setRecordedAtNs(*at);
    if (root.getActor().size() == 0) root.setActor(options_.actor);
    stamped.push_back(schema::EncodeEvent(message));
  }
  return log_.Append(stamped);
}

}  // namespace admission::ops
