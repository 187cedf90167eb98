#include "replay/snapshots.h"

#include <algorithm>
#include <map>
#include <set>

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <capnp/schema.h>
#include <kj/exception.h>

#include "ledger/verify.h"
#include "projections/engine_version.h"
#include "projections/snapshot.h"
#include "schema/snapshot_codec.h"

namespace admission::replay {

namespace {

std::string At(Sequence after) { return "snapshot at sequence " + std::to_string(after); }

// A list element's name for people: its `key` or `name` text field, else its index.
std::string ElementName(capnp::DynamicStruct::Reader element, unsigned index) {
  for (const char* field : {"key", "name"}) {
    KJ_IF_MAYBE(f, element.getSchema().findFieldByName(field)) {
      if (f->getType().isText()) return element.get(*f).as<capnp::Text>().cStr();
    }
  }
  return std::to_string(index);
}

std::string Canonical(capnp::DynamicStruct::Reader s) {
  kj::Array<capnp::word> words = s.as<capnp::AnyStruct>().canonicalize();
  return std::string(words.asChars().begin(), words.asChars().size());
}

// The first field where two structs of the same type differ, as a path below `prefix`;
// lists of structs are compared element by element and named by element.
std::string FirstDifference(capnp::DynamicStruct::Reader a, capnp::DynamicStruct::Reader b,
                            const std::string& prefix) {
  for (capnp::StructSchema::Field field : a.getSchema().getFields()) {
    const std::string path = prefix + field.getProto().getName().cStr();
    const capnp::Type type = field.getType();
    if (type.isList() && type.asList().getElementType().isStruct()) {
      auto la = a.get(field).as<capnp::DynamicList>();
      auto lb = b.get(field).as<capnp::DynamicList>();
      const unsigned n = std::min(la.size(), lb.size());
      for (unsigned i = 0; i < n; ++i) {
        auto ea = la[i].as<capnp::DynamicStruct>();
        auto eb = lb[i].as<capnp::DynamicStruct>();
        if (Canonical(ea) != Canonical(eb)) {
          return FirstDifference(ea, eb, path + "[" + ElementName(ea, i) + "].");
        }
      }
      if (la.size() != lb.size()) {
        return path + " (" + std::to_string(la.size()) + " elements stored, " +
               std::to_string(lb.size()) + " re-encoded)";
      }
      continue;
    }
    if (type.isStruct()) {
      auto sa = a.get(field).as<capnp::DynamicStruct>();
      auto sb = b.get(field).as<capnp::DynamicStruct>();
      if (Canonical(sa) != Canonical(sb)) return FirstDifference(sa, sb, path + ".");
      continue;
    }
    if (kj::str(a.get(field)) != kj::str(b.get(field))) return path;
  }
  return prefix.empty() ? "(no field differs, but the bytes do)" : prefix.substr(0, prefix.size() - 1);
}

std::string DescribeDifference(std::string_view stored, std::string_view fold) {
  auto a = schema::DecodeSnapshot(stored);
  if (!a.ok()) return "the stored snapshot does not decode: " + a.status().message();
  auto b = schema::DecodeSnapshot(fold);
  if (!b.ok()) return "the re-encoded state does not decode: " + b.status().message();
  std::string where;
  kj::Maybe<kj::Exception> error = kj::runCatchingExceptions([&]() {
    where = FirstDifference(capnp::DynamicStruct::Reader(a->root()),
                            capnp::DynamicStruct::Reader(b->root()), "");
  });
  KJ_IF_MAYBE(e, error) { return std::string("the snapshots differ (") + e->getDescription().cStr() + ")"; }
  return "differs from the state the fold reached there, first at " + where;
}

}  // namespace

Result<TakenSnapshot> TakeSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                   const projections::Engine& engine, Sequence after,
                                   const projections::DefinitionBodies& definitions) {
  auto boundary = IsBatchBoundary(log, after);
  if (!boundary.ok()) return boundary.status();
  if (!*boundary) {
    return Status(Code::kInvalidArgument, "sequence " + std::to_string(after) +
                                              " does not end an append; a snapshot stands after "
                                              "the last event of an append");
  }
  auto chain = ledger::ChainValueAfter(log, after);
  if (!chain.ok()) return chain.status();
  auto bytes = projections::EncodeSnapshot(engine, after, *chain, definitions);
  if (!bytes.ok()) return bytes.status();
  auto hash = store.Write(after, *bytes);
  if (!hash.ok()) return hash.status();
  return TakenSnapshot{after, bytes->size(), *hash};
}

Result<SnapshotCheck> CheckSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                    Sequence after) {
  SnapshotCheck check;
  check.after = after;
  auto stored = store.Read(after);
  if (!stored.ok()) {
    if (stored.status().code() != Code::kCorruption) return stored.status();
    check.fault = stored.status().message();
    return check;
  }
  check.bytes = stored->bytes.size();
  check.hash = schema::SnapshotHash(stored->bytes);
  if (check.hash != stored->stored_hash) {
    check.fault = "its bytes do not match the hash stored with them (stored " +
                  schema::HashHex(stored->stored_hash) + ", bytes hash to " +
                  schema::HashHex(check.hash) + ")";
    return check;
  }
  auto header = schema::ReadSnapshotHeader(stored->bytes);
  if (!header.ok()) {
    check.fault = header.status().message();
    return check;
  }
  check.engine_version = header->engine_version;
  if (header->after != after) {
    check.fault = "its header says it stands after sequence " + std::to_string(header->after);
    return check;
  }
  const ledger::Head head = log.GetHead();
  if (after > head.sequence) {
    check.fault = "it stands after sequence " + std::to_string(after) + ", beyond the ledger's head " +
                  std::to_string(head.sequence);
    return check;
  }
  auto boundary = IsBatchBoundary(log, after);
  if (!boundary.ok()) {
    if (boundary.status().code() == Code::kIoError) return boundary.status();
    check.fault = "the ledger around it does not read: " + boundary.status().message();
    return check;
  }
  if (!*boundary) {
    check.fault = "sequence " + std::to_string(after) + " does not end an append";
    return check;
  }
  auto chain = ledger::ChainValueAfter(log, after);
  if (!chain.ok()) {
    if (chain.status().code() == Code::kIoError) return chain.status();
    check.fault = "the ledger's event " + std::to_string(after) + " does not read: " +
                  chain.status().message();
    return check;
  }
  if (*chain != header->chain_hash) {
    check.fault = "its chain hash " + schema::HashHex(header->chain_hash) +
                  " is not the ledger's chain value after sequence " + std::to_string(after) +
                  " (" + schema::HashHex(*chain) + "): it belongs to another ledger, or the "
                  "ledger was changed";
  }
  return check;
}

Result<std::vector<SnapshotCheck>> VerifySnapshots(ledger::EventLog& log,
                                                   ledger::SnapshotStore& store) {
  auto list = store.List();
  if (!list.ok()) return list.status();
  std::vector<SnapshotCheck> out;
  for (Sequence after : *list) {
    auto check = CheckSnapshot(log, store, after);
    if (!check.ok()) return check.status();
    out.push_back(std::move(*check));
  }
  return out;
}

Result<SnapshotStart> StartFromNewestSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                              Sequence at_most) {
  SnapshotStart start;
  const Sequence head = log.GetHead().sequence;
  const Sequence limit = at_most == 0 ? head : std::min(at_most, head);
  auto list = store.List();
  if (!list.ok()) return list.status();
  for (auto it = list->rbegin(); it != list->rend(); ++it) {
    const Sequence after = *it;
    if (after > limit) {
      if (after > head) {
        start.skipped.push_back(At(after) + ": beyond the ledger's head " + std::to_string(head));
      }
      continue;
    }
    auto check = CheckSnapshot(log, store, after);
    if (!check.ok()) return check.status();
    if (check->fault) {
      start.skipped.push_back(At(after) + ": " + *check->fault);
      continue;
    }
    auto stored = store.Read(after);
    if (!stored.ok()) {
      start.skipped.push_back(At(after) + ": " + stored.status().message());
      continue;
    }
    auto loaded = projections::LoadSnapshot(stored->bytes);
    if (!loaded.ok()) {
      start.skipped.push_back(At(after) + ": " + loaded.status().message());
      continue;
    }
    start.start.engine = std::move(loaded->engine);
    start.start.after = after;
    start.definitions = std::move(loaded->definitions);
    start.loaded = after;
    return start;
  }
  start.start = Genesis();
  return start;
}

Result<StateAt> FoldToSequenceFromSnapshot(ledger::EventLog& log, ledger::SnapshotStore& store,
                                           Sequence at, const ReplayProgress& progress,
                                           std::vector<std::string>* skipped) {
  StateAt state;
  state.requested = at == 0 ? log.GetHead().sequence : at;
  auto end = EndOfAppend(log, state.requested);
  if (!end.ok()) return end.status();
  state.at = *end;
  auto start = StartFromNewestSnapshot(log, store, state.at);
  if (!start.ok()) return start.status();
  if (skipped != nullptr) *skipped = start->skipped;
  Replayer replayer(log, std::move(start->start));
  if (replayer.position() < state.at) {
    ReplayOptions options;
    options.verify = false;
    options.to = state.at;
    options.progress = progress;
    auto report = replayer.Run(options);
    if (!report.ok()) return report.status();
  }
  state.engine = replayer.TakeEngine();
  return state;
}

Result<ComparedReplay> RunComparingSnapshots(Replayer& replayer, const ReplayOptions& options,
                                             ledger::EventLog& log, ledger::SnapshotStore& store,
                                             projections::DefinitionBodies definitions) {
  ComparedReplay out;
  const Sequence to = options.to == 0 ? log.GetHead().sequence : options.to;
  auto list = store.List();
  if (!list.ok()) return list.status();
  std::set<Sequence> targets;
  for (Sequence after : *list) {
    if (after > replayer.position() && after <= to) targets.insert(after);
  }
  Status failure;
  ReplayOptions with = options;
  // Sees inputs only (and each decision's sequence): the caller's own observer, if any, still
  // sees every event whole.
  with.fold_observer = [&](Sequence sequence, const schema::Event::Reader* input) {
    if (options.fold_observer) options.fold_observer(sequence, input);
    if (input != nullptr) projections::TrackDefinition(*input, &definitions);
    if (targets.empty() || targets.count(sequence) == 0 || !failure.ok()) return;
    SnapshotComparison c;
    c.after = sequence;
    auto stored = store.Read(sequence);
    auto chain = ledger::ChainValueAfter(log, sequence);
    if (!stored.ok()) {
      if (stored.status().code() == Code::kIoError) failure = stored.status();
      c.mismatch = stored.status().message();
    } else if (schema::SnapshotHash(stored->bytes) != stored->stored_hash) {
      c.mismatch = "its bytes do not match the hash stored with them";
    } else if (!chain.ok()) {
      c.mismatch = "the ledger's chain value there does not read: " + chain.status().message();
    } else {
      auto mine = projections::EncodeSnapshot(replayer.engine(), sequence, *chain, definitions);
      if (!mine.ok()) {
        c.mismatch = "the state there cannot be encoded: " + mine.status().message();
      } else if (*mine != stored->bytes) {
        c.mismatch = DescribeDifference(stored->bytes, *mine);
      }
    }
    out.snapshots.push_back(std::move(c));
  };
  auto report = replayer.Run(with);
  if (!report.ok()) return report.status();
  if (!failure.ok()) return failure;
  out.report = std::move(*report);
  return out;
}

}  // namespace admission::replay
