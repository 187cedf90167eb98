// Must NOT compile: the YAML reader does not know the service.
#include "ops/service/service.h"
int LayeringProbe_kueue_yaml_includes_service() { return 0; }
