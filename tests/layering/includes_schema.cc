// Must build: projections/ may use schema/.
#include "projections/engine_version.h"
#include "schema/event_codec.h"
int LayeringProbeAllowed() { return static_cast<int>(admission::projections::kEngineVersion); }
