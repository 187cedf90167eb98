// The topology fragmentation gauges (docs/metrics.md: admission_tas_largest_free_domain and
// admission_tas_domains_fitting_largest_pending) on a small TAS platform built through the real
// intake: Kueue YAML (Topology, a TAS ResourceFlavor, ClusterQueue, LocalQueue, Workloads with
// topology requests) and node reports with labels, recorded by ops::Service.

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "consumers/metrics/ledger_metrics.h"
#include "ledger/memory_log.h"
#include "ops/kueue_yaml/kueue_yaml.h"
#include "ops/service/clock.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"

namespace admission::ops {
namespace {

class FixedClock final : public Clock {
 public:
  int64_t NowNs() override { return 1'795'910'400'000'000'000; }
};

constexpr const char* kBlock = "cloud.example.com/block";
constexpr const char* kRack = "cloud.example.com/rack";
constexpr const char* kHost = "kubernetes.io/hostname";

// A Topology (block, rack, host), a TAS flavor on it, a ClusterQueue with `quota` of `resource`
// on that flavor and a LocalQueue ml/lq.
std::string Platform(const std::string& flavor, const std::string& resource, int quota) {
  return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: default}\n"
         "spec:\n  levels:\n  - nodeLabel: " + std::string(kBlock) + "\n  - nodeLabel: " +
         kRack + "\n  - nodeLabel: " + kHost + "\n---\n"
         "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: " + flavor +
         "}\nspec: {nodeLabels: {pool: tas}, topologyName: default}\n---\n"
         "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
         "spec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [" +
         resource + "]\n    flavors:\n    - name: " + flavor + "\n      resources: [{name: " +
         resource + ", nominalQuota: " + std::to_string(quota) + "}]\n---\n"
         "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: "
         "ml}\nspec: {clusterQueue: cq}\n";
}

// A Workload of `count` pods of `per_pod` `resource` each, requiring one domain of `level`.
std::string Workload(const std::string& name, int count, const std::string& resource,
                     const std::string& per_pod, const std::string& level) {
  return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: " + name +
         ", namespace: ml}\nspec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: " +
         std::to_string(count) + "\n    topologyRequest: {required: " + level + "}\n"
         "    template:\n      spec:\n        containers:\n        - name: c\n"
         "          image: busybox\n          resources: {requests: {" + resource + ": \"" +
         per_pod + "\"}}\n";
}

struct Platform2x2x2 {
  ledger::MemoryLog log;
  FixedClock clock;
  std::unique_ptr<Service> service;

  Platform2x2x2() {
    auto opened = Service::Open(log, clock);
    ADM_CHECK(opened.ok(), "%s", opened.status().ToString().c_str());
    service = std::move(*opened);
  }

  void Record(const std::vector<std::string>& inputs, const std::string& actor) {
    IntakeOptions options;
    options.actor = actor;
    auto outcome = service->Record(inputs, options);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  }
  void Apply(const std::string& yaml) {
    auto objects = ParseApplyYaml(yaml);
    ASSERT_TRUE(objects.ok()) << objects.status().ToString();
    std::vector<std::string> inputs;
    for (const auto& o : *objects) inputs.push_back(o.event);
    Record(inputs, "operator");
  }
  void Submit(const std::string& yaml) {
    SubmitContext ctx;
    ctx.name_seed = std::to_string(log.GetHead().sequence);
    auto objects = ParseSubmitYaml(yaml, ctx);
    ASSERT_TRUE(objects.ok()) << objects.status().ToString();
    std::vector<std::string> inputs;
    for (const auto& o : *objects) inputs.push_back(o.event);
    Record(inputs, "submitter");
  }
  // 2 blocks x 2 racks x 2 hosts of the flavor (label pool=tas), each with `capacity` and 110
  // pods.
  void Nodes(const std::string& flavor, const std::map<std::string, int64_t>& capacity) {
    std::vector<std::string> inputs;
    for (const char* b : {"b1", "b2"}) {
      for (const char* r : {"r1", "r2"}) {
        for (const char* h : {"h1", "h2"}) {
          const std::string rack = std::string(b) + "-" + r, host = rack + "-" + h;
          capnp::MallocMessageBuilder m;
          auto node = m.initRoot<schema::Event>().initBody().initNodeCapacityChanged();
          node.setNode(host);
          node.setFlavor(flavor);
          auto list = node.initCapacity(static_cast<unsigned>(capacity.size() + 1));
          unsigned i = 0;
          for (const auto& [name, milli] : capacity) {
            list[i].setName(name);
            list[i++].setMilli(milli);
          }
          list[i].setName("pods");
          list[i].setMilli(110'000);
          auto labels = node.initLabels(4);
          const std::string values[] = {b, rack, host, "tas"};
          const char* keys[] = {kBlock, kRack, kHost, "pool"};
          for (unsigned l = 0; l < 4; ++l) {
            labels[l].setKey(keys[l]);
            labels[l].setValue(values[l]);
          }
          inputs.push_back(schema::EncodeEvent(m));
        }
      }
    }
    Record(inputs, "node-monitor");
  }
  std::string Metrics() {
    consumers::metrics::MetricsFold fold;
    auto events = log.Read(1, log.GetHead().sequence);
    ADM_CHECK(events.ok(), "%s", events.status().ToString().c_str());
    for (const auto& e : *events) {
      auto decoded = schema::DecodeEvent(e.bytes);
      ADM_CHECK(decoded.ok(), "%s", decoded.status().ToString().c_str());
      fold.Apply(e.sequence, decoded->root());
    }
    return fold.Render(service->engine());
  }
  const projections::WorkloadState& Wl(const std::string& key) {
    return service->engine().workloads().at(key);
  }
};

// The sample lines of one family, in order.
std::vector<std::string> Samples(const std::string& text, const std::string& family) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = text.find("\n" + family + "{", at)) != std::string::npos) {
    const size_t end = text.find('\n', at + 1);
    out.push_back(text.substr(at + 1, end - at - 1));
    at = end;
  }
  return out;
}

TEST(TasMetrics, LargestFreeDomainAndDomainsFittingTheLargestPendingRequest) {
  Platform2x2x2 p;
  p.Apply(Platform("tas-gpu", "nvidia.com/gpu", 12));
  p.Nodes("tas-gpu", {{"cpu", 32'000}, {"nvidia.com/gpu", 4'000}});
  // 2 pods of 4 GPUs in one rack: 8 GPUs of the quota's 12, a whole rack.
  p.Submit(Workload("rack", 2, "nvidia.com/gpu", "4", kRack));
  ASSERT_EQ(p.Wl("ml/rack").phase, projections::Phase::kAdmitted);
  // Pending by quota: 2 pods of 4 GPUs in a rack, and the largest, 3 pods of 4 in a block.
  p.Submit(Workload("pair", 2, "nvidia.com/gpu", "4", kRack));
  p.Submit(Workload("three", 3, "nvidia.com/gpu", "4", kBlock));
  ASSERT_EQ(p.Wl("ml/pair").phase, projections::Phase::kPending);
  ASSERT_EQ(p.Wl("ml/three").phase, projections::Phase::kPending);

  const std::string text = p.Metrics();
  // One rack is full: blocks hold 8 and 16 GPUs free, racks 8, hosts 4.
  EXPECT_EQ(Samples(text, "admission_tas_largest_free_domain"),
            (std::vector<std::string>{
                "admission_tas_largest_free_domain{flavor=\"tas-gpu\",level=\"" +
                    std::string(kBlock) + "\",resource=\"nvidia.com/gpu\"} 16",
                "admission_tas_largest_free_domain{flavor=\"tas-gpu\",level=\"" +
                    std::string(kRack) + "\",resource=\"nvidia.com/gpu\"} 8",
                "admission_tas_largest_free_domain{flavor=\"tas-gpu\",level=\"" +
                    std::string(kHost) + "\",resource=\"nvidia.com/gpu\"} 4"}))
      << text;
  // The largest pending request (3 pods of 4 GPUs) fits one block (b2), no rack and no host;
  // the smaller one's (2 pods) would fit 3 racks.
  EXPECT_EQ(Samples(text, "admission_tas_domains_fitting_largest_pending"),
            (std::vector<std::string>{
                "admission_tas_domains_fitting_largest_pending{flavor=\"tas-gpu\",level=\"" +
                    std::string(kBlock) + "\"} 1",
                "admission_tas_domains_fitting_largest_pending{flavor=\"tas-gpu\",level=\"" +
                    std::string(kRack) + "\"} 0",
                "admission_tas_domains_fitting_largest_pending{flavor=\"tas-gpu\",level=\"" +
                    std::string(kHost) + "\"} 0"}))
      << text;
  // Families in name order, after the other admission_* families; the same state renders the
  // same bytes.
  const size_t fitting = text.find("# HELP admission_tas_domains_fitting_largest_pending ");
  const size_t largest = text.find("# HELP admission_tas_largest_free_domain ");
  ASSERT_NE(fitting, std::string::npos);
  EXPECT_LT(text.find("# HELP admission_starvation_alerts_total "), fitting);
  EXPECT_LT(fitting, largest);
  EXPECT_LT(largest, text.find("# HELP kueue_"));
  EXPECT_EQ(p.Metrics(), text);
}

TEST(TasMetrics, NodesWithoutAnExtendedResourceCountPodsAndNothingPendingHasNoFitSeries) {
  Platform2x2x2 p;
  p.Apply(Platform("tas-cpu", "cpu", 64));
  p.Nodes("tas-cpu", {{"cpu", 8'000}});
  // 3 pods of 2 cpu on one host: 107 pod slots left there, 110 on the others.
  p.Submit(Workload("host", 3, "cpu", "2", kHost));
  ASSERT_EQ(p.Wl("ml/host").phase, projections::Phase::kAdmitted);
  const std::string text = p.Metrics();
  EXPECT_EQ(Samples(text, "admission_tas_largest_free_domain"),
            (std::vector<std::string>{
                "admission_tas_largest_free_domain{flavor=\"tas-cpu\",level=\"" +
                    std::string(kBlock) + "\",resource=\"pods\"} 440",
                "admission_tas_largest_free_domain{flavor=\"tas-cpu\",level=\"" +
                    std::string(kRack) + "\",resource=\"pods\"} 220",
                "admission_tas_largest_free_domain{flavor=\"tas-cpu\",level=\"" +
                    std::string(kHost) + "\",resource=\"pods\"} 110"}))
      << text;
  EXPECT_TRUE(Samples(text, "admission_tas_domains_fitting_largest_pending").empty()) << text;
  EXPECT_NE(text.find("# TYPE admission_tas_domains_fitting_largest_pending gauge"),
            std::string::npos);
}

}  // namespace
}  // namespace admission::ops
