// Must NOT compile: the service does not know the HTTP listener.
#include "ops/http/http_listener.h"
int LayeringProbe_service_includes_http() { return 0; }
