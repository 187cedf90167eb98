#pragma once
// Kueue's quota model over a tree of cohorts with ClusterQueues as leaves
// (pkg/cache resource_node.go): subtree quota, guaranteed quota, usage above guaranteed
// propagated to the parent, and the recursive `available` / `potentialAvailable`.

#include <map>
#include <string>
#include <vector>

#include "projections/model.h"

namespace admission::projections {

class QuotaTree {
 public:
  struct Node {
    std::string name;
    bool is_cluster_queue = false;
    // Parent links form a forest (Rebuild refuses a link that would close a cycle), so every
    // walk up from a node ends at its root within size() steps: the bound of each such loop.
    int parent = -1;
    std::vector<int> children;
    std::map<Fr, ResourceQuota> quota;   // the node's own quota
    FrQuantities subtree;                // own nominal + what the children lend
    FrQuantities usage;                  // CQ: reserved; cohort: children's above guaranteed
  };

  // Rebuilds the tree from the definitions. `cq_usage` is the reserved usage of each CQ.
  // Cohorts named by a ClusterQueue or as a parent but never defined exist with no quota.
  // A parent cycle is broken by ignoring the parent link that closes it (the cohort keeps
  // its children and becomes a root); see docs/semantics.md.
  void Rebuild(const std::map<std::string, ClusterQueueSpec>& cqs,
               const std::map<std::string, CohortSpec>& cohorts,
               const std::map<std::string, FrQuantities>& cq_usage);

  int FindClusterQueue(const std::string& name) const;   // -1 if absent
  int FindCohort(const std::string& name) const;         // -1 if absent
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  int Root(int id) const;

  int64_t Guaranteed(int id, Fr fr) const;
  int64_t Available(int id, Fr fr) const;
  int64_t PotentialAvailable(int id, Fr fr) const;
  int64_t Nominal(int id, Fr fr) const;    // the node's SubtreeQuota
  int64_t Usage(int id, Fr fr) const;
  // Borrowed by a node: usage above its subtree quota (0 if none).
  int64_t Borrowed(int id, Fr fr) const;
  // Kueue's FindHeightOfLowestSubtreeThatFits: 0 when the ClusterQueue holds `val` more of
  // `fr` within its own nominal quota (or has no cohort); else the height of the lowest
  // cohort on its path whose subtree holds it (a cohort whose children are ClusterQueues only
  // is 1; each level of cohorts below adds 1), or the root's height when none does.
  // `below_root` (Kueue's second result): whether that holding subtree is not the whole tree
  // (true when the ClusterQueue itself holds it and has a cohort), so quota may be reclaimed
  // from outside it.
  int BorrowingHeight(int cq, Fr fr, int64_t val, bool* below_root = nullptr) const;

  // Adds (or with negative values removes) reserved usage of a ClusterQueue and propagates
  // the change of its usage above guaranteed quota up to the root.
  void AddUsage(int cq, const FrQuantities& delta, int sign);

  // Reserved usage of a flavor-resource by every ClusterQueue of the forest together (what
  // the nodes of its flavor must hold).
  int64_t TotalUsage(Fr fr) const { return Get(total_usage_, fr); }

  // True when every flavor-resource of `request` fits what the ClusterQueue may use now.
  bool Fits(int cq, const FrQuantities& request) const;

  // ClusterQueues in the subtree of `id` (sorted by node id; computed by Rebuild).
  const std::vector<int>& ClusterQueuesUnder(int id) const {
    return cqs_under_[static_cast<size_t>(id)];
  }

 private:
  static int64_t Get(const FrQuantities& m, Fr fr) {
    auto it = m.find(fr);
    return it == m.end() ? 0 : it->second;
  }
  // Rebuild's steps, in its order (node ids follow it).
  // The node of a cohort, made (without quota) the first time a name is seen.
  int CohortNode(const std::string& name);
  // The cohorts (sorted by name) with their quotas, then their parent links.
  void AddCohorts(const std::map<std::string, CohortSpec>& cohorts);
  // The ClusterQueues (sorted by name) with their quotas, usage and cohort links.
  void AddClusterQueues(const std::map<std::string, ClusterQueueSpec>& cqs,
                        const std::map<std::string, FrQuantities>& cq_usage);
  void ComputeSubtree(int id);
  void ComputeHeights();
  void ComputeClusterQueuesUnder();
  std::vector<Node> nodes_;
  std::vector<std::vector<int>> cqs_under_;  // by node id
  std::vector<int> heights_;                 // by node id: Kueue's getNodeHeight
  std::map<std::string, int> cq_ids_;
  std::map<std::string, int> cohort_ids_;
  FrQuantities total_usage_;                 // TotalUsage, kept by Rebuild and AddUsage
};

}  // namespace admission::projections
