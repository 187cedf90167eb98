// Topology-aware scheduling (engine v26, docs/tas.md) over random topologies and workloads:
// blocks x racks x hosts with 4 or 8 GPUs each, pod sets requiring or preferring a level,
// unconstrained or implied, of random priority in a ClusterQueue that preempts lower
// priorities, with finishes in between. After every append, from the decider's state:
//   - Every TAS holder has a placement whose domain counts sum to its pod count.
//   - No host holds more GPUs (or pods) than it has: the placements of every holder, counted
//     independently of the decider's snapshot, fit each node.
//   - A required level is honoured: the hosts of such a placement share one domain of it.
//   - The state rebuilt by replaying the ledger places exactly as the decider did (restart).

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ledger/memory_log.h"
#include "tests/property/scenario_gen.h"

namespace admission::testing {
namespace {

const char* const kLevels[] = {"block", "rack", "kubernetes.io/hostname"};

struct TasGen {
  int blocks = 1, racks = 1, hosts = 1;
  std::vector<int> gpus;  // per host, in host order
  struct Op {
    bool finish = false;
    int count = 1, gpu = 1, priority = 0, level = 0, mode = 0;  // mode: 0 req, 1 pref, 2 unc, 3 none
    size_t target = 0;  // finish: an index into the submitted ones
  };
  std::vector<Op> ops;
};

rc::Gen<TasGen> GenTas() {
  return rc::gen::exec([] {
    TasGen g;
    g.blocks = *rc::gen::inRange(1, 4);
    g.racks = *rc::gen::inRange(1, 4);
    g.hosts = *rc::gen::inRange(1, 5);
    const int n = g.blocks * g.racks * g.hosts;
    for (int i = 0; i < n; ++i) g.gpus.push_back(*rc::gen::element(4, 8));
    const int steps = *rc::gen::inRange(1, 30);
    for (int i = 0; i < steps; ++i) {
      TasGen::Op op;
      op.finish = *rc::gen::inRange(0, 4) == 0;
      op.count = *rc::gen::inRange(1, 9);
      op.gpu = *rc::gen::element(1, 2, 4, 8);
      op.priority = *rc::gen::inRange(0, 3);
      op.level = *rc::gen::inRange(0, 3);
      op.mode = *rc::gen::inRange(0, 4);
      op.target = *rc::gen::inRange<size_t>(0, 64);
      g.ops.push_back(op);
    }
    return g;
  });
}

std::string HostName(int b, int r, int h) {
  return "b" + std::to_string(b) + "-r" + std::to_string(r) + "-h" + std::to_string(h);
}

std::vector<std::string> TasDefinitions(const TasGen& g) {
  std::vector<std::string> out;
  {
    capnp::MallocMessageBuilder m;
    auto t = m.initRoot<schema::Event>().initBody().initTopologyDefined();
    t.setName("default");
    auto levels = t.initLevels(3);
    for (unsigned i = 0; i < 3; ++i) levels.set(i, kLevels[i]);
    out.push_back(Encode(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto f = m.initRoot<schema::Event>().initBody().initFlavorDefined();
    f.setName("gpu");
    auto l = f.initNodeLabels(1)[0];
    l.setKey("pool");
    l.setValue("gpu");
    f.setTopologyName("default");
    out.push_back(Encode(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto cq = m.initRoot<schema::Event>().initBody().initClusterQueueDefined();
    cq.setName("cq");
    cq.initNamespaceSelector().setMatchesAll(true);
    cq.initPreemption().setWithinClusterQueue(schema::WithinClusterQueuePolicy::LOWER_PRIORITY);
    auto rg = cq.initResourceGroups(1)[0];
    rg.initCoveredResources(1).set(0, "nvidia.com/gpu");
    auto fq = rg.initFlavors(1)[0];
    fq.setName("gpu");
    auto q = fq.initResources(1)[0];
    q.setName("nvidia.com/gpu");
    q.setNominalQuotaMilli(1'000'000'000);
    out.push_back(Encode(m));
  }
  {
    capnp::MallocMessageBuilder m;
    auto lq = m.initRoot<schema::Event>().initBody().initLocalQueueDefined();
    lq.setNamespace("ns");
    lq.setName("lq");
    lq.setClusterQueue("cq");
    out.push_back(Encode(m));
  }
  size_t i = 0;
  for (int b = 0; b < g.blocks; ++b) {
    for (int r = 0; r < g.racks; ++r) {
      for (int h = 0; h < g.hosts; ++h) {
        capnp::MallocMessageBuilder m;
        auto n = m.initRoot<schema::Event>().initBody().initNodeCapacityChanged();
        const std::string host = HostName(b, r, h);
        n.setNode(host + "/gpu");
        n.setFlavor("gpu");
        auto cap = n.initCapacity(2);
        cap[0].setName("nvidia.com/gpu");
        cap[0].setMilli(g.gpus[i++] * 1000LL);
        cap[1].setName("pods");
        cap[1].setMilli(110'000);
        auto labels = n.initLabels(4);
        const std::string values[] = {"b" + std::to_string(b),
                                      "b" + std::to_string(b) + "-r" + std::to_string(r), host};
        for (unsigned k = 0; k < 3; ++k) {
          labels[k].setKey(kLevels[k]);
          labels[k].setValue(values[k]);
        }
        labels[3].setKey("pool");
        labels[3].setValue("gpu");
        n.setInventoryComplete(true);
        out.push_back(Encode(m));
      }
    }
  }
  return out;
}

std::string Submit(const TasGen::Op& op, size_t index) {
  capnp::MallocMessageBuilder m;
  auto w = m.initRoot<schema::Event>().initBody().initWorkloadSubmitted().initWorkload();
  w.setNamespace("ns");
  w.setName("w" + std::to_string(index));
  w.setUid("uid-" + std::to_string(index));
  w.setQueueName("lq");
  w.setHasPriority(true);
  w.setPriority(op.priority);
  auto ps = w.initPodSets(1)[0];
  ps.setName("main");
  ps.setCount(op.count);
  auto req = ps.initRequests(1)[0];
  req.setName("nvidia.com/gpu");
  req.setMilli(op.gpu * 1000LL);
  if (op.mode != 3) {
    auto t = ps.initTopologyRequest();
    if (op.mode == 0) t.setRequired(kLevels[op.level]);
    if (op.mode == 1) t.setPreferred(kLevels[op.level]);
    if (op.mode == 2) t.setUnconstrained(true);
  }
  return Encode(m);
}

std::string FinishInput(size_t index) {
  capnp::MallocMessageBuilder m;
  auto f = m.initRoot<schema::Event>().initBody().initWorkloadFinished().initWorkload();
  f.setNamespace("ns");
  f.setName("w" + std::to_string(index));
  f.setUid("uid-" + std::to_string(index));
  return Encode(m);
}

// The invariants, from the decider's state; returns how many TAS holders there were.
int CheckPlacements(const projections::Engine& engine) {
  std::map<std::string, std::map<std::string, int64_t>> used;  // host -> resource -> milli
  std::map<std::string, const projections::Engine::NodeState*> hosts;
  for (const auto& [name, node] : engine.nodes()) {
    hosts[node.labels.at("kubernetes.io/hostname")] = &node;
  }
  int holders = 0;
  for (const auto& [key, wl] : engine.workloads()) {
    if (!projections::HoldsQuota(wl.phase)) continue;
    ++holders;
    RC_ASSERT(wl.admission.pod_sets.size() == 1u);
    const projections::PodSetAssignment& a = wl.admission.pod_sets[0];
    RC_ASSERT(a.topology.has_value());
    int32_t total = 0;
    std::set<std::string> required_domains;
    const std::optional<projections::TopologyRequest>& req = wl.pod_sets[0].topology;
    for (const projections::TopologyDomain& d : a.topology->domains) {
      total += d.count;
      RC_ASSERT(d.values.size() == 1u);
      auto host = hosts.find(d.values[0]);
      RC_ASSERT(host != hosts.end());
      const int64_t per_pod = wl.pod_sets[0].requests.begin()->second;
      used[d.values[0]]["nvidia.com/gpu"] += per_pod * d.count;
      used[d.values[0]]["pods"] += 1000LL * d.count;
      if (req && !req->required.empty()) {
        required_domains.insert(host->second->labels.at(req->required));
      }
    }
    RC_ASSERT(total == a.count);
    RC_ASSERT(required_domains.size() <= 1u);
  }
  const auto& names = engine.resource_names();
  for (const auto& [host, resources] : used) {
    for (const auto& [resource, milli] : resources) {
      RC_ASSERT(milli <= hosts.at(host)->capacity.at(*names.Find(resource)));
    }
  }
  return holders;
}

RC_GTEST_PROP(Tas, PlacementsFitTheirNodesAndHonourRequiredLevels, ()) {
  const TasGen g = *GenTas();
  ledger::MemoryLog log;
  FixedClock clock;
  auto service = ops::Service::Open(log, clock);
  RC_ASSERT(service.ok());
  int64_t now = 1'800'000'000'000'000'000;
  int most = 0;
  auto record = [&](const std::vector<std::string>& inputs) {
    ops::IntakeOptions options;
    options.at_ns = now += 1'000'000'000;
    options.actor = "test";
    auto outcome = (*service)->Record(inputs, options);
    RC_ASSERT(outcome.ok());
    most = std::max(most, CheckPlacements((*service)->engine()));
  };
  record(TasDefinitions(g));
  std::vector<size_t> live;
  size_t submitted = 0;
  for (const TasGen::Op& op : g.ops) {
    if (op.finish && !live.empty()) {
      const size_t pick = op.target % live.size();
      const auto& wls = (*service)->engine().workloads();
      auto it = wls.find("ns/w" + std::to_string(live[pick]));
      if (it != wls.end() && projections::HoldsQuota(it->second.phase)) {
        record({FinishInput(live[pick])});
      }
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      continue;
    }
    record({Submit(op, submitted)});
    live.push_back(submitted++);
  }
  // A restart folds the ledger again: the same placements.
  auto again = ops::Service::Open(log, clock);
  RC_ASSERT(again.ok());
  for (const auto& [key, wl] : (*service)->engine().workloads()) {
    const auto& other = (*again)->engine().workloads().at(key);
    RC_ASSERT(other.phase == wl.phase);
    if (!projections::HoldsQuota(wl.phase)) continue;
    RC_ASSERT(other.admission.pod_sets[0].topology == wl.admission.pod_sets[0].topology);
  }
  RC_CLASSIFY(most > 1, "several TAS holders at once");
}

}  // namespace
}  // namespace admission::testing
