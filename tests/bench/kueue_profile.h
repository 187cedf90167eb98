#pragma once
// Kueue's scheduler performance profiles (test/performance/scheduler/configs/*/generator.yaml):
// the fields decider_bench and replay_bench use, and the parser both share.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schema/events.capnp.h"
#include "schema/quantity.h"

namespace admission::bench {

struct WorkloadTemplate {
  std::string class_name;
  int64_t runtime_ms = 0;
  int32_t priority = 0;
  int64_t request_milli = 0;  // cpu, per pod
  // The TAS profile (Kueue's generator: podCount, tasConstraint required, preferred or balanced
  // (sliceRequiredTopology with sliceSize), tasLevel).
  int32_t pod_count = 1;
  std::string tas_constraint{}, tas_level{};
  int32_t slice_size = 0;
};

// The TAS profile's topology and flavor (Kueue's generator: topology.levels, each with a count
// of domains per parent; nodes at the last level with its capacity and 110 pods; the flavor's
// node label `nodeLabel: tas`).
struct TasLevel {
  std::string name, node_label;
  int count = 0;
};
struct TasTopology {
  std::string name;
  std::vector<TasLevel> levels;
  int64_t cpu_milli = 96'000, memory_milli = (int64_t{256} << 30) * 1000;  // 256Gi
  std::string flavor, flavor_node_label, flavor_topology;
};

struct WorkloadsSet {
  int count = 0;
  int64_t interval_ms = 0;
  std::vector<WorkloadTemplate> workloads;
};

struct QueuesSet {
  std::string class_name;
  int count = 0;
  int64_t nominal_milli = 0;
  std::optional<int64_t> borrowing_limit_milli;
  schema::ReclaimWithinCohortPolicy reclaim = schema::ReclaimWithinCohortPolicy::NEVER;
  schema::WithinClusterQueuePolicy within = schema::WithinClusterQueuePolicy::NEVER;
  std::vector<WorkloadsSet> sets;
};

struct CohortClass {
  std::string class_name;
  int count = 0;
  std::vector<QueuesSet> queues_sets;
};

// The ClusterQueue Kueue's generator makes for a queues set: one resource group, `cpu` on the
// flavor `rf` with the set's nominalQuota and borrowingLimit, BestEffortFIFO, every namespace,
// the set's preemption policies.
inline void FillProfileClusterQueue(schema::Event::Body::Builder body, const std::string& name,
                                    const std::string& cohort, int64_t nominal_milli,
                                    std::optional<int64_t> borrowing_limit_milli,
                                    schema::ReclaimWithinCohortPolicy reclaim,
                                    schema::WithinClusterQueuePolicy within,
                                    const std::string& flavor_name = "rf") {
  auto cq = body.initClusterQueueDefined();
  cq.setName(name);
  cq.setCohortName(cohort);
  auto group = cq.initResourceGroups(1)[0];
  group.initCoveredResources(1).set(0, "cpu");
  auto flavor = group.initFlavors(1)[0];
  flavor.setName(flavor_name);
  auto quota = flavor.initResources(1)[0];
  quota.setName("cpu");
  quota.setNominalQuotaMilli(nominal_milli);
  if (borrowing_limit_milli) {
    quota.setHasBorrowingLimit(true);
    quota.setBorrowingLimitMilli(*borrowing_limit_milli);
  }
  cq.setQueueingStrategy(schema::QueueingStrategy::BEST_EFFORT_FIFO);
  cq.initNamespaceSelector().setMatchesAll(true);  // namespaceSelector: {}
  auto preemption = cq.initPreemption();
  preemption.setReclaimWithinCohort(reclaim);
  preemption.setWithinClusterQueue(within);
}

// A quantity of the generator file (cpu: a decimal, or a Kubernetes quantity such as "500m"
// in the TAS profile) in milli-units.
inline int64_t Milli(const YAML::Node& n) {
  auto parsed = schema::ParseQuantityMilli(n.as<std::string>());
  if (!parsed.ok()) throw YAML::Exception(n.Mark(), parsed.status().message());
  return *parsed;
}

// Reads a generator file; workloadsSet counts are divided by `divide` (at least 1 each).
// On a YAML error or an unknown preemption policy, returns nullopt with `error` set.
inline std::optional<std::vector<CohortClass>> LoadKueueProfile(const std::string& path,
                                                                int divide, std::string* error) {
  std::vector<CohortClass> out;
  try {
    YAML::Node root = YAML::LoadFile(path);
    for (const YAML::Node& c : root["cohorts"]) {
      CohortClass cc;
      cc.class_name = c["className"].as<std::string>();
      cc.count = c["count"].as<int>();
      for (const YAML::Node& q : c["queuesSets"]) {
        QueuesSet qs;
        qs.class_name = q["className"].as<std::string>();
        qs.count = q["count"].as<int>();
        qs.nominal_milli = Milli(q["nominalQuota"]);
        if (q["borrowingLimit"]) qs.borrowing_limit_milli = Milli(q["borrowingLimit"]);
        const std::string reclaim = q["reclaimWithinCohort"].as<std::string>("Never");
        if (reclaim == "Any") {
          qs.reclaim = schema::ReclaimWithinCohortPolicy::ANY;
        } else if (reclaim == "LowerPriority") {
          qs.reclaim = schema::ReclaimWithinCohortPolicy::LOWER_PRIORITY;
        } else if (reclaim != "Never") {
          *error = "unknown reclaimWithinCohort " + reclaim;
          return std::nullopt;
        }
        const std::string within = q["withinClusterQueue"].as<std::string>("Never");
        if (within == "LowerPriority") {
          qs.within = schema::WithinClusterQueuePolicy::LOWER_PRIORITY;
        } else if (within == "LowerOrNewerEqualPriority") {
          qs.within = schema::WithinClusterQueuePolicy::LOWER_OR_NEWER_EQUAL_PRIORITY;
        } else if (within != "Never") {
          *error = "unknown withinClusterQueue " + within;
          return std::nullopt;
        }
        for (const YAML::Node& s : q["workloadsSets"]) {
          WorkloadsSet ws;
          ws.count = s["count"].as<int>();
          if (divide > 1) ws.count = std::max(1, ws.count / divide);
          ws.interval_ms = s["creationIntervalMs"].as<int64_t>();
          for (const YAML::Node& w : s["workloads"]) {
            WorkloadTemplate t{w["className"].as<std::string>(), w["runtimeMs"].as<int64_t>(),
                               w["priority"].as<int32_t>(), Milli(w["request"])};
            t.pod_count = w["podCount"].as<int32_t>(1);
            t.tas_constraint = w["tasConstraint"].as<std::string>("");
            t.tas_level = w["tasLevel"].as<std::string>("");
            t.slice_size = w["sliceSize"].as<int32_t>(0);
            ws.workloads.push_back(std::move(t));
          }
          qs.sets.push_back(std::move(ws));
        }
        cc.queues_sets.push_back(std::move(qs));
      }
      out.push_back(std::move(cc));
    }
  } catch (const YAML::Exception& e) {
    *error = e.what();
    return std::nullopt;
  }
  return out;
}

// The generator file's topology and resourceFlavor (the TAS profile); nullopt when it has no
// topology, or on a YAML error (with `error` set).
inline std::optional<TasTopology> LoadKueueTopology(const std::string& path, std::string* error) {
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root["topology"]) return std::nullopt;
    TasTopology t;
    t.name = root["topology"]["name"].as<std::string>();
    for (const YAML::Node& l : root["topology"]["levels"]) {
      t.levels.push_back(TasLevel{l["name"].as<std::string>(), l["nodeLabel"].as<std::string>(),
                                  l["count"].as<int>()});
      if (l["capacity"] && l["capacity"]["cpu"]) t.cpu_milli = Milli(l["capacity"]["cpu"]);
      if (l["capacity"] && l["capacity"]["memory"]) t.memory_milli = Milli(l["capacity"]["memory"]);
    }
    t.flavor = root["resourceFlavor"]["name"].as<std::string>();
    t.flavor_node_label = root["resourceFlavor"]["nodeLabel"].as<std::string>();
    t.flavor_topology = root["resourceFlavor"]["topologyName"].as<std::string>(t.name);
    return t;
  } catch (const YAML::Exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

}  // namespace admission::bench
