// Must NOT build: a pure library (the decider) may not include storage headers; the purity
// check stops the build before the compiler runs.
#include <rocksdb/db.h>
int LayeringProbeRocksDb() { return 0; }
