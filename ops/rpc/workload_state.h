#pragma once
// A workload's state as the typed RPC result `Ledger.workloadStates` carries it (the Kubernetes
// bridge's read of the ledger): the decider's fields typed, and Kueue's status as JSON beside
// them for the bridge to mirror.

#include "projections/engine.h"
#include "schema/admission_rpc.capnp.h"

namespace admission::ops::rpc {

void FillWorkloadState(::admission::rpc::WorkloadState::Builder out,
                       const projections::Engine& engine, const projections::WorkloadState& wl);

}  // namespace admission::ops::rpc
