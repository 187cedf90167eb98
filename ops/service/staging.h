#pragma once
// Internal to ops/service: what the intake (intake.cc) hands group commit (group_commit.cc).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <capnp/message.h>

#include "ops/service/service.h"

namespace admission::ops {

// A call of a group after Stage: its outcome so far and its events, sequenced from
// `first_sequence` on (inputs, then the decisions they caused).
struct Service::Staged {
  RecordOutcome outcome;
  // The inputs to write, stamped, until Decide encodes them into `events`.
  std::vector<std::unique_ptr<capnp::MallocMessageBuilder>> laid_out;
  std::vector<std::string> events;   // until they move into group commit's run
  size_t event_count = 0;             // how many they were
  size_t inputs_written = 0;
  uint64_t first_sequence = 0;
  std::map<std::string, std::string> definitions;  // DefinitionKey -> body, once written
};

// What the inputs of one call staged so far add: their keys, the workloads they submit (which
// the decider cannot see yet), the inputs that were retries, and the next sequence.
struct Service::CallState {
  std::vector<std::string> fresh_keys;
  std::set<std::string> workloads;         // NS/NAME submitted by this call
  std::map<std::string, std::string> uids;  // their uids -> NS/NAME
  size_t key_duplicates = 0;
  uint64_t latest_duplicate = 0;
  uint64_t next_sequence = 0;
};

// What the calls staged so far in a group add to the head: the next sequence and time, the
// definitions and idempotency keys they write (key -> sequence and the input's bytes).
struct Service::GroupState {
  uint64_t next_sequence = 0;
  int64_t recorded_at_ns = 0;
  std::map<std::string, std::string> definitions;
  std::map<std::string, std::pair<uint64_t, std::string>> keys;
};

}  // namespace admission::ops
