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

namespace admission::bench {

struct WorkloadTemplate {
  std::string class_name;
  int64_t runtime_ms = 0;
  int32_t priority = 0;
  int64_t request_milli = 0;
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
                                    schema::WithinClusterQueuePolicy within) {
  auto cq = body.initClusterQueueDefined();
  cq.setName(name);
  cq.setCohortName(cohort);
  auto group = cq.initResourceGroups(1)[0];
  group.initCoveredResources(1).set(0, "cpu");
  auto flavor = group.initFlavors(1)[0];
  flavor.setName("rf");
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

// A quantity of the generator file (cpu, a decimal) in milli-units.
inline int64_t Milli(const YAML::Node& n) {
  return static_cast<int64_t>(n.as<double>() * 1000.0 + 0.5);
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
            ws.workloads.push_back(WorkloadTemplate{
                w["className"].as<std::string>(), w["runtimeMs"].as<int64_t>(),
                w["priority"].as<int32_t>(), Milli(w["request"])});
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

}  // namespace admission::bench
