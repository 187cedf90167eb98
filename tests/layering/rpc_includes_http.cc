// Must NOT compile: the RPC room does not know the HTTP listener (http uses rpc).
#include "ops/http/http_listener.h"
int LayeringProbe_rpc_includes_http() { return 0; }
