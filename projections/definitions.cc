#include "projections/definitions.h"

#include <capnp/message.h>

#include "schema/event_codec.h"

namespace admission::projections {

std::string DefinitionKey(schema::Event::Reader event) {
  auto body = event.getBody();
  switch (body.which()) {
    case schema::Event::Body::FLAVOR_DEFINED:
      return std::string("ResourceFlavor//") + body.getFlavorDefined().getName().cStr();
    case schema::Event::Body::COHORT_DEFINED:
      return std::string("Cohort//") + body.getCohortDefined().getName().cStr();
    case schema::Event::Body::CLUSTER_QUEUE_DEFINED:
      return std::string("ClusterQueue//") + body.getClusterQueueDefined().getName().cStr();
    case schema::Event::Body::LOCAL_QUEUE_DEFINED:
      return std::string("LocalQueue/") + body.getLocalQueueDefined().getNamespace().cStr() + "/" +
             body.getLocalQueueDefined().getName().cStr();
    case schema::Event::Body::ADMISSION_CHECK_DEFINED:
      return std::string("AdmissionCheck//") + body.getAdmissionCheckDefined().getName().cStr();
    case schema::Event::Body::PRIORITY_CLASS_DEFINED:
      return std::string("WorkloadPriorityClass//") +
             body.getPriorityClassDefined().getName().cStr();
    case schema::Event::Body::BUDGET_POLICY_DEFINED:
      return std::string("BudgetPolicy//") + body.getBudgetPolicyDefined().getName().cStr();
    case schema::Event::Body::TOPOLOGY_DEFINED:
      return std::string("Topology//") + body.getTopologyDefined().getName().cStr();
    default:
      return "";
  }
}

std::string DefinitionBody(schema::Event::Reader event) {
  capnp::MallocMessageBuilder copy;
  copy.setRoot(event);
  schema::Event::Builder root = copy.getRoot<schema::Event>();
  root.setSequence(0);
  root.setRecordedAtNs(0);
  root.setActor("");
  root.setIdempotencyKey("");
  root.setPrevHash(capnp::Data::Reader());
  root.setEndsBatch(false);
  root.setCausationSequence(0);
  root.setEngineVersion(0);
  return schema::EncodeEvent(copy);
}

void TrackDefinition(schema::Event::Reader event, DefinitionBodies* bodies) {
  std::string key = DefinitionKey(event);
  if (!key.empty()) (*bodies)[key] = DefinitionBody(event);
}

}  // namespace admission::projections
