// Must NOT compile: ops/views reads no storage.
#include "ledger/event_log.h"
int LayeringProbe_views_includes_ledger() { return 0; }
