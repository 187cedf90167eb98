#pragma once
// The compact `workloads:` form of a scenario step (tests/scenarios/README.md), expanded into
// Kueue Workload YAML so the real parser reads it. Shared by the scenario tests and the
// golden-corpus tool, which must expand scenarios identically.

#include <string>

#include <yaml-cpp/yaml.h>

namespace admission::testing {

inline std::string WorkloadYaml(const YAML::Node& list) {
  YAML::Emitter out;
  for (const auto& w : list) {
    const std::string key = w["name"].as<std::string>();
    const auto slash = key.find('/');
    YAML::Node doc;
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta2";
    doc["kind"] = "Workload";
    doc["metadata"]["namespace"] = key.substr(0, slash);
    doc["metadata"]["name"] = key.substr(slash + 1);
    doc["spec"]["queueName"] = w["queue"] ? w["queue"].as<std::string>() : "lq";
    if (w["priority"]) doc["spec"]["priority"] = w["priority"].as<int>();
    if (w["runtime"]) {  // our expected-runtime annotation (budgets, maintenance windows)
      doc["metadata"]["annotations"]["admission-ledger.io/expected-runtime"] =
          w["runtime"].as<std::string>();
    }
    if (w["maxExecution"]) {  // Kueue's spec.maximumExecutionTimeSeconds
      doc["spec"]["maximumExecutionTimeSeconds"] = w["maxExecution"].as<int>();
    }
    if (w["priorityClassName"]) {
      doc["spec"]["priorityClassRef"]["group"] = "kueue.x-k8s.io";
      doc["spec"]["priorityClassRef"]["kind"] = "WorkloadPriorityClass";
      doc["spec"]["priorityClassRef"]["name"] = w["priorityClassName"].as<std::string>();
    }
    YAML::Node pod_sets = w["podSets"] ? w["podSets"] : YAML::Node(YAML::NodeType::Sequence);
    if (!w["podSets"]) {
      YAML::Node main;
      main["name"] = "main";
      main["count"] = w["count"] ? w["count"].as<int>() : 1;
      if (w["minCount"]) main["minCount"] = w["minCount"];
      main["requests"] = w["requests"];
      if (w["nodeSelector"]) main["nodeSelector"] = w["nodeSelector"];
      if (w["tolerations"]) main["tolerations"] = w["tolerations"];
      if (w["topology"]) main["topology"] = w["topology"];
      pod_sets.push_back(main);
    }
    YAML::Node out_sets(YAML::NodeType::Sequence);
    for (const auto& ps : pod_sets) {
      YAML::Node p;
      p["name"] = ps["name"] ? ps["name"].as<std::string>() : "main";
      p["count"] = ps["count"] ? ps["count"].as<int>() : 1;
      if (ps["minCount"]) p["minCount"] = ps["minCount"].as<int>();
      YAML::Node container;
      container["name"] = "c";
      container["image"] = "busybox";
      container["resources"]["requests"] = ps["requests"];
      p["template"]["spec"]["containers"].push_back(container);
      if (ps["nodeSelector"]) p["template"]["spec"]["nodeSelector"] = ps["nodeSelector"];
      if (ps["tolerations"]) p["template"]["spec"]["tolerations"] = ps["tolerations"];
      // Kueue's spec.podSets[].topologyRequest, as written (engine v26).
      if (ps["topology"]) p["topologyRequest"] = ps["topology"];
      out_sets.push_back(p);
    }
    doc["spec"]["podSets"] = out_sets;
    out << YAML::BeginDoc << doc;
  }
  return out.c_str();
}

}  // namespace admission::testing
