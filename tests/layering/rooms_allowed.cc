// Must compile: the control for the ops/ room probes (a room sees its own headers and
// those of the rooms it links).
#include "ops/rpc/server.h"
#include "ops/service/service.h"
#include "ops/views/render.h"
#include "ops/kueue_yaml/kueue_yaml.h"
int LayeringProbeRoomsAllowed() { return 0; }
