// Must NOT compile: projections/ may use schema/ only, so ledger/ headers are not on its path.
#include "ledger/event_log.h"
int LayeringProbeLedger() { return 0; }
