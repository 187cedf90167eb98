#pragma once
// The snapshot round trip, checked at batch boundaries of any ledger: shared by the snapshot
// properties (random scenarios, the golden corpus) and the scenario tests (every Kueue scenario).

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ledger/event_log.h"
#include "ledger/verify.h"
#include "ops/views/render.h"
#include "projections/engine.h"
#include "projections/snapshot.h"
#include "replay/replayer.h"
#include "schema/event_codec.h"

namespace admission::testing {

// Every sequence an append ends at (the states a snapshot may stand at), ascending, with 0.
inline std::vector<ledger::Sequence> AppendEnds(ledger::EventLog& log) {
  std::vector<ledger::Sequence> out{0};
  const ledger::Sequence head = log.GetHead().sequence;
  bool previous_closes = false;  // the previous event was a decision or a batch's last input
  ledger::Sequence previous = 0;
  for (ledger::Sequence next = 1; next <= head;) {
    auto chunk = log.Read(next, ledger::kReadEventsMax);
    ADM_CHECK(chunk.ok() && !chunk->empty(), "ledger does not read at %llu",
              static_cast<unsigned long long>(next));
    for (const ledger::StoredEvent& e : *chunk) {
      auto decoded = schema::DecodeEvent(e.bytes);
      ADM_CHECK(decoded.ok(), "event %llu", static_cast<unsigned long long>(e.sequence));
      const bool decision = schema::IsDecision(decoded->root().getBody().which());
      if (previous != 0 && !decision && previous_closes) out.push_back(previous);
      previous_closes = decision || decoded->root().getEndsBatch();
      previous = e.sequence;
      next = e.sequence + 1;
    }
  }
  if (head > 0) out.push_back(head);
  return out;
}

// Everything a reader can see of a decider, derived members included: the read models, each
// ClusterQueue's admitted set, usage, pending count and queue, each queue entry's workload
// pointer, each workload's derived keys, and the quota tree node by node.
inline std::string EngineDump(const projections::Engine& engine) {
  std::ostringstream out;
  out << ops::WorkloadsJson(engine).dump() << "\n" << ops::ClusterQueuesJson(engine).dump() << "\n"
      << ops::LocalQueuesJson(engine).dump() << "\n" << ops::CohortsJson(engine).dump() << "\n";
  for (const auto& [name, cq] : engine.cluster_queues()) {
    out << "cq " << name << " spec=" << cq.spec.has_value() << " pending=" << cq.pending
        << " inactive=" << cq.inactive_reason << " admitted:";
    for (const projections::WorkloadState* wl : cq.AdmittedInKeyOrder()) {
      out << " " << wl->key << (wl == &engine.workloads().at(wl->key) ? "" : "(bad pointer)");
    }
    out << " usage:";
    for (const auto& [fr, amount] : cq.usage) out << " " << fr << "=" << amount;
    for (const auto& [key, cls] : cq.classes) {
      out << "\n  class " << key << " inadmissible=" << cls.inadmissible << ":";
      for (const projections::QueueKey& k : cls.members) {
        out << " " << k.wl->key << "/" << k.wl->uid << "/" << k.priority << "/" << k.timestamp
            << "/" << k.sequence << (k.wl == &engine.workloads().at(k.wl->key) ? "" : "(bad pointer)");
      }
    }
    out << "\n";
  }
  for (const auto& [key, wl] : engine.workloads()) {
    out << "wl " << key << " key=" << wl.key << " lq=" << wl.local_queue_key << "\n";
  }
  const projections::QuotaTree& tree = engine.tree();
  for (size_t i = 0; i < tree.size(); ++i) {
    const auto& n = tree.node(static_cast<int>(i));
    out << "node " << i << " " << n.name << " cq=" << n.is_cluster_queue << " parent=" << n.parent
        << " children:";
    for (int c : n.children) out << " " << c;
    out << " subtree:";
    for (const auto& [fr, v] : n.subtree) out << " " << fr << "=" << v;
    out << " usage:";
    for (const auto& [fr, v] : n.usage) out << " " << fr << "=" << v;
    out << "\n";
  }
  out << "decisions=" << engine.decisions_made() << "\n";
  return out.str();
}

// For each sequence in `at` (each the end of an append of `log`): the state the straight fold
// reaches there, encoded as a snapshot, must
//   - load into a fresh decider that re-encodes to the same bytes, and that shows the same
//     read models and derived state (EngineDump) as the straight one;
//   - continue the fold reproducing every recorded decision after it, byte for byte
//     (replay --verify from the snapshot), and reach a state at the head whose snapshot is
//     byte-identical to the straight fold's.
// Returns "" or the first failure, for people.
inline std::string CheckSnapshotsAt(ledger::EventLog& log, const std::vector<ledger::Sequence>& at) {
  const ledger::Sequence head = log.GetHead().sequence;
  const std::set<ledger::Sequence> wanted(at.begin(), at.end());
  std::map<ledger::Sequence, std::string> snapshots, dumps;
  auto take = [&](ledger::Sequence s, const projections::Engine& engine) {
    auto chain = ledger::ChainValueAfter(log, s);
    ADM_CHECK(chain.ok(), "%s", chain.status().ToString().c_str());
    auto bytes = projections::EncodeSnapshot(engine, s, *chain, {});
    ADM_CHECK(bytes.ok(), "%s", bytes.status().ToString().c_str());
    snapshots[s] = std::move(*bytes);
    dumps[s] = EngineDump(engine);
  };
  replay::Replayer straight(log, replay::Genesis());
  if (wanted.count(0)) take(0, straight.engine());
  if (head > 0) {
    replay::ReplayOptions options;
    options.verify = false;
    options.observer = [&](ledger::Sequence s, schema::Event::Reader) {
      if (wanted.count(s)) take(s, straight.engine());
    };
    auto report = straight.Run(options);
    if (!report.ok()) return "straight fold: " + report.status().ToString();
  }
  auto final_chain = ledger::ChainValueAfter(log, head);
  auto final_bytes = projections::EncodeSnapshot(straight.engine(), head, *final_chain, {});
  if (!final_bytes.ok()) return "final: " + final_bytes.status().ToString();

  for (const auto& [s, bytes] : snapshots) {
    const std::string where = "snapshot after " + std::to_string(s) + ": ";
    auto loaded = projections::LoadSnapshot(bytes);
    if (!loaded.ok()) return where + loaded.status().ToString();
    auto chain = ledger::ChainValueAfter(log, s);
    auto again = projections::EncodeSnapshot(*loaded->engine, s, *chain, {});
    if (!again.ok()) return where + again.status().ToString();
    if (*again != bytes) return where + "encode -> load -> encode is not byte-identical";
    const std::string dump = EngineDump(*loaded->engine);
    if (dump != dumps.at(s)) {
      return where + "the loaded decider differs from the straight one:\n--- straight\n" +
             dumps.at(s) + "--- loaded\n" + dump;
    }
    if (s == head) continue;
    replay::ReplayStart start;
    start.engine = std::move(loaded->engine);
    start.after = s;
    replay::Replayer continued(log, std::move(start));
    replay::ReplayOptions options;
    options.compare_from = s + 1;
    auto report = continued.Run(options);
    if (!report.ok()) return where + "continuing: " + report.status().ToString();
    if (report->divergence) {
      return where + "continuing diverges at sequence " +
             std::to_string(report->divergence->sequence) + ": " +
             report->divergence->first_differing_field;
    }
    auto end = projections::EncodeSnapshot(continued.engine(), head, *final_chain, {});
    if (!end.ok()) return where + end.status().ToString();
    if (*end != *final_bytes) {
      return where + "the state at the head differs from the straight fold's:\n--- straight\n" +
             EngineDump(straight.engine()) + "--- from the snapshot\n" +
             EngineDump(continued.engine());
    }
  }
  return "";
}

}  // namespace admission::testing
