// Quota: the resourceGroups of a ClusterQueue or Cohort, and the fairSharing weight of a
// ClusterQueue, Cohort or LocalQueue.

#include "ops/kueue_yaml/parser.h"
#include "schema/quantity.h"

namespace admission::ops::kueue_yaml_internal {

// resourceGroups of a ClusterQueue or Cohort, validated as Kueue's webhook and CRD do.
// `can_borrow`: the object has a cohort (a parent), so borrowing and lending limits apply.
template <typename DefBuilder>
bool DocumentParser::ParseResourceGroups(const YAML::Node& spec, const std::string& sp,
                                         bool can_borrow, std::string_view needs,
                                         DefBuilder def) {
  const YAML::Node groups = Child(spec, "resourceGroups");
  if (Absent(groups)) return true;
  const std::string gp = Join(sp, "resourceGroups");
  if (!ExpectSequence(groups, gp, kResourceGroupsMax)) return false;
  auto groups_builder = def.initResourceGroups(static_cast<unsigned>(groups.size()));
  // Across all groups: each resource and each flavor belongs to one group.
  std::set<std::string> all_resources;
  std::set<std::string> all_flavors;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!ParseResourceGroup(groups[g], Index(gp, g), can_borrow, needs,
                            groups_builder[static_cast<unsigned>(g)], &all_resources,
                            &all_flavors)) {
      return false;
    }
  }
  return true;
}

template bool DocumentParser::ParseResourceGroups(const YAML::Node&, const std::string&, bool,
                                                  std::string_view,
                                                  schema::ClusterQueueDef::Builder);
template bool DocumentParser::ParseResourceGroups(const YAML::Node&, const std::string&, bool,
                                                  std::string_view, schema::CohortDef::Builder);

bool DocumentParser::ParseResourceGroup(const YAML::Node& group, const std::string& gpi,
                                        bool can_borrow, std::string_view needs,
                                        schema::ResourceGroup::Builder group_builder,
                                        std::set<std::string>* all_resources,
                                        std::set<std::string>* all_flavors) {
  if (!ExpectMap(group, gpi)) return false;
  std::vector<std::string> covered;
  if (!ParseCoveredResources(group, gpi, group_builder, all_resources, &covered)) return false;
  const std::string cp = Join(gpi, "coveredResources");
  const YAML::Node flavors = Child(group, "flavors");
  const std::string fp = Join(gpi, "flavors");
  if (Absent(flavors)) {
    return Fail(group, fp, "required: the flavors that give quota for " + cp);
  }
  if (!ExpectSequence(flavors, fp, kGroupFlavorsMax)) return false;
  if (flavors.size() == 0) return Fail(flavors, fp, "must list at least one flavor");
  auto flavors_builder = group_builder.initFlavors(static_cast<unsigned>(flavors.size()));
  for (size_t f = 0; f < flavors.size(); ++f) {
    if (!ParseFlavorQuotas(flavors[f], Index(fp, f), can_borrow, needs, covered,
                           flavors_builder[static_cast<unsigned>(f)], all_flavors)) {
      return false;
    }
  }
  return true;
}

bool DocumentParser::ParseCoveredResources(const YAML::Node& group, const std::string& gpi,
                                           schema::ResourceGroup::Builder group_builder,
                                           std::set<std::string>* all_resources,
                                           std::vector<std::string>* covered) {
  const YAML::Node covered_node = Child(group, "coveredResources");
  const std::string cp = Join(gpi, "coveredResources");
  if (Absent(covered_node)) {
    return Fail(group, cp, "required: the resources this group's flavors give quota for");
  }
  if (!ReadStringList(covered_node, cp, kGroupResourcesMax, covered)) return false;
  if (covered->empty()) return Fail(covered_node, cp, "must list at least one resource");
  for (size_t r = 0; r < covered->size(); ++r) {
    const std::string& resource = (*covered)[r];
    if (!IsResourceName(resource)) {
      return Fail(covered_node[r], Index(cp, r), Quote(resource) + " is not a resource name");
    }
    if (!all_resources->insert(resource).second) {
      return Fail(covered_node[r], Index(cp, r),
                  "resource " + Quote(resource) +
                      " is covered more than once; each resource belongs to one resource group");
    }
  }
  if (all_resources->size() > kCoveredResourcesTotalMax) {
    return Fail(covered_node, cp,
                "more than " + std::to_string(kCoveredResourcesTotalMax) +
                    " covered resources in all resource groups");
  }
  auto covered_builder = group_builder.initCoveredResources(static_cast<unsigned>(covered->size()));
  for (size_t r = 0; r < covered->size(); ++r) {
    covered_builder.set(static_cast<unsigned>(r), T((*covered)[r]));
  }
  return true;
}

// One flavor of a resource group: a nominalQuota (and limits) for every covered resource.
bool DocumentParser::ParseFlavorQuotas(const YAML::Node& flavor, const std::string& fpi,
                                       bool can_borrow, std::string_view needs,
                                       const std::vector<std::string>& covered,
                                       schema::FlavorQuotas::Builder flavor_builder,
                                       std::set<std::string>* all_flavors) {
  if (!ExpectMap(flavor, fpi)) return false;
  std::string flavor_name;
  if (!ReqString(flavor, "name", fpi, &flavor_name, "the ResourceFlavor's name")) return false;
  if (!CheckSubdomain(Child(flavor, "name"), Join(fpi, "name"), flavor_name)) return false;
  if (!all_flavors->insert(flavor_name).second) {
    return Fail(Child(flavor, "name"), Join(fpi, "name"),
                "flavor " + Quote(flavor_name) +
                    " appears more than once; each flavor belongs to one resource group");
  }
  if (all_flavors->size() > kFlavorsTotalMax) {
    return Fail(flavor, fpi,
                "more than " + std::to_string(kFlavorsTotalMax) + " flavors in all resource groups");
  }
  flavor_builder.setName(T(flavor_name));

  const YAML::Node resources = Child(flavor, "resources");
  const std::string rp = Join(fpi, "resources");
  std::string covered_list;
  for (const std::string& r : covered) covered_list += (covered_list.empty() ? "" : ", ") + r;
  if (Absent(resources)) {
    return Fail(flavor, rp,
                "required: flavor " + Quote(flavor_name) +
                    " needs a nominalQuota for every covered resource (" + covered_list + ")");
  }
  if (!ExpectSequence(resources, rp, kGroupResourcesMax)) return false;
  if (resources.size() != covered.size()) {
    return Fail(resources, rp,
                "flavor " + Quote(flavor_name) + " gives quota for " +
                    std::to_string(resources.size()) + " resources but coveredResources lists " +
                    std::to_string(covered.size()) + " (" + covered_list +
                    "): every flavor needs a nominalQuota for every covered resource, in "
                    "the same order");
  }
  auto resources_builder = flavor_builder.initResources(static_cast<unsigned>(resources.size()));
  for (size_t r = 0; r < resources.size(); ++r) {
    if (!ParseResourceQuota(resources[r], Index(rp, r), can_borrow, needs, flavor_name, covered[r],
                            r, resources_builder[static_cast<unsigned>(r)])) {
      return false;
    }
  }
  return true;
}

// The quota of one flavor for one resource: resources[r] must name covered_name, the group's
// coveredResources[r].
bool DocumentParser::ParseResourceQuota(const YAML::Node& resource, const std::string& rpi,
                                        bool can_borrow, std::string_view needs,
                                        const std::string& flavor_name,
                                        const std::string& covered_name, size_t r,
                                        schema::ResourceQuota::Builder quota) {
  if (!ExpectMap(resource, rpi)) return false;
  std::string resource_name;
  if (!ReqString(resource, "name", rpi, &resource_name, "the resource's name")) return false;
  if (resource_name != covered_name) {
    return Fail(Child(resource, "name"), Join(rpi, "name"),
                Quote(resource_name) + " is not coveredResources[" + std::to_string(r) + "] " +
                    Quote(covered_name) +
                    ": every flavor lists exactly the covered "
                    "resources, in the same order");
  }
  quota.setName(T(resource_name));
  const YAML::Node nominal = Child(resource, "nominalQuota");
  if (Absent(nominal)) {
    return Fail(resource, Join(rpi, "nominalQuota"),
                "required: flavor " + Quote(flavor_name) + " needs a nominalQuota for " +
                    Quote(resource_name));
  }
  int64_t nominal_milli = 0;
  if (!ReadQuantity(nominal, Join(rpi, "nominalQuota"), &nominal_milli)) return false;
  quota.setNominalQuotaMilli(nominal_milli);
  const YAML::Node borrowing = Child(resource, "borrowingLimit");
  if (!Absent(borrowing)) {
    if (!can_borrow) {
      return Fail(borrowing, Join(rpi, "borrowingLimit"),
                  "must not be set without " + std::string(needs));
    }
    int64_t milli = 0;
    if (!ReadQuantity(borrowing, Join(rpi, "borrowingLimit"), &milli)) return false;
    quota.setHasBorrowingLimit(true);
    quota.setBorrowingLimitMilli(milli);
  }
  const YAML::Node lending = Child(resource, "lendingLimit");
  if (!Absent(lending)) {
    if (!can_borrow) {
      return Fail(lending, Join(rpi, "lendingLimit"),
                  "must not be set without " + std::string(needs));
    }
    int64_t milli = 0;
    if (!ReadQuantity(lending, Join(rpi, "lendingLimit"), &milli)) return false;
    if (milli > nominal_milli) {
      return Fail(lending, Join(rpi, "lendingLimit"),
                  "must not exceed nominalQuota (" +
                      schema::FormatQuantityMilli(nominal_milli, resource_name) + ")");
    }
    quota.setHasLendingLimit(true);
    quota.setLendingLimitMilli(milli);
  }
  return true;
}

// fairSharing.weight, a quantity; absent leaves Kueue's default of 1.
template <typename DefBuilder>
bool DocumentParser::ParseFairSharing(const YAML::Node& spec, const std::string& sp,
                                      DefBuilder def) {
  const YAML::Node fair = Child(spec, "fairSharing");
  if (Absent(fair)) return true;
  const std::string fp = Join(sp, "fairSharing");
  if (!ExpectMap(fair, fp)) return false;
  const YAML::Node weight = Child(fair, "weight");
  if (Absent(weight)) return true;
  int64_t milli = 0;
  if (!ReadQuantity(weight, Join(fp, "weight"), &milli)) return false;
  def.setFairSharingWeightMilli(milli);
  return true;
}

template bool DocumentParser::ParseFairSharing(const YAML::Node&, const std::string&,
                                               schema::ClusterQueueDef::Builder);
template bool DocumentParser::ParseFairSharing(const YAML::Node&, const std::string&,
                                               schema::CohortDef::Builder);
template bool DocumentParser::ParseFairSharing(const YAML::Node&, const std::string&,
                                               schema::LocalQueueDef::Builder);

}  // namespace admission::ops::kueue_yaml_internal
