#include "projections/quota_tree.h"

#include <algorithm>
#include <set>

#include "schema/result.h"

namespace admission::projections {

namespace {

void AddGroups(const std::vector<ResourceGroup>& groups, std::map<Fr, ResourceQuota>* out) {
  for (const ResourceGroup& group : groups) {
    for (const FlavorQuotas& flavor : group.flavors) {
      for (const auto& [resource, quota] : flavor.resources) {
        (*out)[MakeFr(flavor.flavor, resource)] = quota;
      }
    }
  }
}

}  // namespace

void QuotaTree::Rebuild(const std::map<std::string, ClusterQueueSpec>& cqs,
                        const std::map<std::string, CohortSpec>& cohorts,
                        const std::map<std::string, FrQuantities>& cq_usage) {
  nodes_.clear();
  cq_ids_.clear();
  cohort_ids_.clear();
  // Cohorts first (sorted by name), then their parents, then ClusterQueues (sorted by name):
  // node ids, and so every iteration below, are independent of arrival order.
  AddCohorts(cohorts);
  AddClusterQueues(cqs, cq_usage);
  for (Node& n : nodes_) std::sort(n.children.begin(), n.children.end());
  // Subtree quotas and cohort usage, bottom up from each root.
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (nodes_[id].parent == -1) ComputeSubtree(static_cast<int>(id));
  }
  ComputeHeights();
  ComputeClusterQueuesUnder();
  total_usage_.clear();
  for (const Node& n : nodes_) {
    if (!n.is_cluster_queue) continue;
    for (const auto& [fr, amount] : n.usage) total_usage_[fr] += amount;
  }
}

int QuotaTree::CohortNode(const std::string& name) {
  auto it = cohort_ids_.find(name);
  if (it != cohort_ids_.end()) return it->second;
  int id = static_cast<int>(nodes_.size());
  nodes_.push_back(Node{name, false, -1, {}, {}, {}, {}});
  cohort_ids_.emplace(name, id);
  return id;
}

void QuotaTree::AddCohorts(const std::map<std::string, CohortSpec>& cohorts) {
  for (const auto& [name, spec] : cohorts) {
    int id = CohortNode(name);
    AddGroups(spec.resource_groups, &nodes_[static_cast<size_t>(id)].quota);
  }
  for (const auto& [name, spec] : cohorts) {
    if (spec.parent.empty()) continue;
    int id = cohort_ids_.at(name);
    int parent = CohortNode(spec.parent);
    // Refuse a link that would close a cycle.
    bool cycle = false;
    for (int p = parent; p != -1; p = nodes_[static_cast<size_t>(p)].parent) {
      if (p == id) {
        cycle = true;
        break;
      }
    }
    if (!cycle) {
      nodes_[static_cast<size_t>(id)].parent = parent;
      nodes_[static_cast<size_t>(parent)].children.push_back(id);
    }
  }
}

void QuotaTree::AddClusterQueues(const std::map<std::string, ClusterQueueSpec>& cqs,
                                 const std::map<std::string, FrQuantities>& cq_usage) {
  for (const auto& [name, spec] : cqs) {
    int id = static_cast<int>(nodes_.size());
    Node node{name, true, -1, {}, {}, {}, {}};
    AddGroups(spec.resource_groups, &node.quota);
    if (auto it = cq_usage.find(name); it != cq_usage.end()) node.usage = it->second;
    nodes_.push_back(std::move(node));
    cq_ids_.emplace(name, id);
    if (!spec.cohort.empty()) {
      int parent = CohortNode(spec.cohort);
      nodes_[static_cast<size_t>(id)].parent = parent;
      nodes_[static_cast<size_t>(parent)].children.push_back(id);
    }
  }
}

void QuotaTree::ComputeHeights() {
  // Heights, leaves up: a node's height is only read after all its children's (a child cohort
  // may have a larger id than its parent, so repeat until no height grows; the tree depth
  // bounds the rounds).
  heights_.assign(nodes_.size(), 0);
  for (size_t round = 0; round <= nodes_.size(); ++round) {
    bool grew = false;
    for (size_t id = 0; id < nodes_.size(); ++id) {
      const Node& n = nodes_[id];
      if (n.is_cluster_queue) continue;
      int h = n.children.empty() ? 0 : 1;
      for (int child : n.children) {
        if (!nodes_[static_cast<size_t>(child)].is_cluster_queue) {
          h = std::max(h, heights_[static_cast<size_t>(child)] + 1);
        }
      }
      if (h != heights_[id]) {
        heights_[id] = h;
        grew = true;
      }
    }
    if (!grew) break;
  }
}

void QuotaTree::ComputeClusterQueuesUnder() {
  // Each ClusterQueue is under itself and its ancestors; ids ascend in every list.
  cqs_under_.assign(nodes_.size(), {});
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (!nodes_[id].is_cluster_queue) continue;
    for (int n = static_cast<int>(id); n != -1; n = nodes_[static_cast<size_t>(n)].parent) {
      cqs_under_[static_cast<size_t>(n)].push_back(static_cast<int>(id));
    }
  }
}

void QuotaTree::ComputeSubtree(int id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.subtree.clear();
  for (const auto& [fr, q] : n.quota) n.subtree[fr] = q.nominal;
  if (n.is_cluster_queue) return;
  n.usage.clear();
  for (int child : n.children) {
    ComputeSubtree(child);
    const Node& c = nodes_[static_cast<size_t>(child)];
    for (const auto& [fr, q] : c.subtree) {
      int64_t lent = q - Guaranteed(child, fr);
      if (lent != 0) nodes_[static_cast<size_t>(id)].subtree[fr] += lent;
    }
    for (const auto& [fr, u] : c.usage) {
      int64_t above = std::max<int64_t>(0, u - Guaranteed(child, fr));
      if (above != 0) nodes_[static_cast<size_t>(id)].usage[fr] += above;
    }
  }
}

int QuotaTree::FindClusterQueue(const std::string& name) const {
  auto it = cq_ids_.find(name);
  return it == cq_ids_.end() ? -1 : it->second;
}

int QuotaTree::FindCohort(const std::string& name) const {
  auto it = cohort_ids_.find(name);
  return it == cohort_ids_.end() ? -1 : it->second;
}

int QuotaTree::Root(int id) const {
  while (nodes_[static_cast<size_t>(id)].parent != -1) id = nodes_[static_cast<size_t>(id)].parent;
  return id;
}

int64_t QuotaTree::Guaranteed(int id, Fr fr) const {
  const Node& n = nodes_[static_cast<size_t>(id)];
  auto it = n.quota.find(fr);
  if (it == n.quota.end() || !it->second.lending_limit) return 0;
  return std::max<int64_t>(0, Get(n.subtree, fr) - *it->second.lending_limit);
}

int64_t QuotaTree::Available(int id, Fr fr) const {
  const Node& n = nodes_[static_cast<size_t>(id)];
  if (n.parent == -1) return Get(n.subtree, fr) - Get(n.usage, fr);
  const int64_t guaranteed = Guaranteed(id, fr);
  const int64_t usage = Get(n.usage, fr);
  const int64_t local = std::max<int64_t>(0, guaranteed - usage);
  int64_t from_parent = Available(n.parent, fr);
  auto it = n.quota.find(fr);
  if (it != n.quota.end() && it->second.borrowing_limit) {
    const int64_t stored_in_parent = Get(n.subtree, fr) - guaranteed;
    const int64_t used_in_parent = std::max<int64_t>(0, usage - guaranteed);
    from_parent = std::min(stored_in_parent - used_in_parent + *it->second.borrowing_limit,
                           from_parent);
  }
  return local + from_parent;
}

int64_t QuotaTree::PotentialAvailable(int id, Fr fr) const {
  const Node& n = nodes_[static_cast<size_t>(id)];
  if (n.parent == -1) return Get(n.subtree, fr);
  int64_t available = Guaranteed(id, fr) + PotentialAvailable(n.parent, fr);
  auto it = n.quota.find(fr);
  if (it != n.quota.end() && it->second.borrowing_limit) {
    available = std::min(available, Get(n.subtree, fr) + *it->second.borrowing_limit);
  }
  return available;
}

int64_t QuotaTree::Nominal(int id, Fr fr) const {
  return Get(nodes_[static_cast<size_t>(id)].subtree, fr);
}

int64_t QuotaTree::Usage(int id, Fr fr) const {
  return Get(nodes_[static_cast<size_t>(id)].usage, fr);
}

int64_t QuotaTree::Borrowed(int id, Fr fr) const {
  return std::max<int64_t>(0, Usage(id, fr) - Nominal(id, fr));
}

int QuotaTree::BorrowingHeight(int cq, Fr fr, int64_t val, bool* below_root) const {
  const Node& c = nodes_[static_cast<size_t>(cq)];
  if (below_root != nullptr) *below_root = c.parent != -1;
  if (c.parent == -1 || Usage(cq, fr) + val <= Nominal(cq, fr)) return 0;
  // What the ClusterQueue keeps from lending covers part of it; the rest must come from the
  // first ancestor whose subtree still has room.
  int64_t remaining = val - std::max<int64_t>(0, Guaranteed(cq, fr) - Usage(cq, fr));
  for (int id = c.parent; id != -1; id = nodes_[static_cast<size_t>(id)].parent) {
    if (Usage(id, fr) + remaining <= Nominal(id, fr)) {
      if (below_root != nullptr) *below_root = nodes_[static_cast<size_t>(id)].parent != -1;
      return heights_[static_cast<size_t>(id)];
    }
    remaining -= std::max<int64_t>(0, Guaranteed(id, fr) - Usage(id, fr));
  }
  if (below_root != nullptr) *below_root = false;
  return heights_[static_cast<size_t>(Root(cq))];
}

void QuotaTree::AddUsage(int cq, const FrQuantities& delta, int sign) {
  ADM_CHECK(nodes_[static_cast<size_t>(cq)].is_cluster_queue, "node %d is not a ClusterQueue", cq);
  for (const auto& [fr, amount] : delta) {
    int64_t change = sign * amount;
    if (change != 0) {
      const int64_t total = (total_usage_[fr] += change);
      if (total == 0) total_usage_.erase(fr);
    }
    int id = cq;
    while (change != 0) {
      Node& n = nodes_[static_cast<size_t>(id)];
      const int64_t guaranteed = Guaranteed(id, fr);
      const int64_t before = Get(n.usage, fr);
      const int64_t after = before + change;
      ADM_CHECK(after >= 0, "usage of %s below zero: %lld", n.name.c_str(),
                static_cast<long long>(after));
      if (after == 0) {
        n.usage.erase(fr);
      } else {
        n.usage[fr] = after;
      }
      if (n.parent == -1) break;
      change = std::max<int64_t>(0, after - guaranteed) - std::max<int64_t>(0, before - guaranteed);
      id = n.parent;
    }
  }
}

bool QuotaTree::Fits(int cq, const FrQuantities& request) const {
  for (const auto& [fr, amount] : request) {
    if (amount > Available(cq, fr)) return false;
  }
  return true;
}


}  // namespace admission::projections
