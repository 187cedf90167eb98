#pragma once
// The RocksDB options RocksDbLog opens a ledger with (docs/ledger.md, "RocksDB layout"), for
// the benchmarks' raw baselines, which must write through the same configuration.

#include <rocksdb/options.h>

namespace admission::ledger {

rocksdb::DBOptions LedgerDbOptions(bool create_if_missing);
// The default family: events and the head.
rocksdb::ColumnFamilyOptions LedgerEventsFamilyOptions();
// The `index` family: the idempotency index.
rocksdb::ColumnFamilyOptions LedgerIndexFamilyOptions();
// The `history` family: the history index, hashed by its prefix (one workload's history key).
rocksdb::ColumnFamilyOptions LedgerHistoryFamilyOptions();
// The default environment, but every file and folder RocksDB creates through it is private to the
// user (ledger/private_files.h). Lives as long as the process.
rocksdb::Env* PrivateFilesEnv();

}  // namespace admission::ledger
