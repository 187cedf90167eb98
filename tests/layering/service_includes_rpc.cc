// Must NOT compile: the service does not know its transport.
#include "ops/rpc/server.h"
int LayeringProbe_service_includes_rpc() { return 0; }
