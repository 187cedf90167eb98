#pragma once
// The current body of every definition the ledger holds, by "kind/namespace/name". Intake
// (ops::Service) records a definition identical to the current one as a no-op, so this read
// model decides what a write does, like the decider's state; snapshots carry it for that
// reason. Pure.

#include <map>
#include <string>

#include "schema/events.capnp.h"

namespace admission::projections {

using DefinitionBodies = std::map<std::string, std::string>;

// "kind/namespace/name" of a definition input (ResourceFlavor, Cohort, ClusterQueue, LocalQueue,
// AdmissionCheck, WorkloadPriorityClass); empty for every other event.
std::string DefinitionKey(schema::Event::Reader event);

// The event with its envelope cleared, canonical: what "identical definition" compares.
std::string DefinitionBody(schema::Event::Reader event);

// Records the body of a definition input; other events change nothing.
void TrackDefinition(schema::Event::Reader event, DefinitionBodies* bodies);

}  // namespace admission::projections
