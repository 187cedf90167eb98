// Must NOT compile: ops/views may not use the service (views read projections and schema).
#include "ops/service/service.h"
int LayeringProbe_views_includes_service() { return 0; }
