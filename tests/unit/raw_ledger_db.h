#pragma once
// A closed RocksDB ledger opened as a plain RocksDB database with all of its column families,
// for tests that edit storage on purpose (tamper, smuggle, old layouts).

#include <rocksdb/db.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ledger/rocksdb_log.h"
#include "schema/result.h"

namespace admission::testing {

struct RawLedgerDb {
  std::unique_ptr<rocksdb::DB> db;
  std::unique_ptr<rocksdb::ColumnFamilyHandle> events;  // default family: events and head
  std::unique_ptr<rocksdb::ColumnFamilyHandle> index;   // the idempotency index
  std::unique_ptr<rocksdb::ColumnFamilyHandle> history;  // the history index (null: none yet)

  RawLedgerDb() = default;
  RawLedgerDb(RawLedgerDb&&) = default;
  RawLedgerDb& operator=(RawLedgerDb&&) = default;
  ~RawLedgerDb() {
    history.reset();
    index.reset();
    events.reset();
    db.reset();
  }
};

inline RawLedgerDb OpenRawLedgerDb(const std::string& dir) {
  rocksdb::DBOptions options;
  std::vector<std::string> existing;
  (void)rocksdb::DB::ListColumnFamilies(options, dir, &existing);
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {ledger::RocksDbLog::kIndexFamily, rocksdb::ColumnFamilyOptions()},
  };
  const bool history = std::find(existing.begin(), existing.end(),
                                 ledger::RocksDbLog::kHistoryFamily) != existing.end();
  if (history) families.push_back({ledger::RocksDbLog::kHistoryFamily, rocksdb::ColumnFamilyOptions()});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, families, &handles, &raw);
  ADM_CHECK(s.ok(), "opening %s raw: %s", dir.c_str(), s.ToString().c_str());
  RawLedgerDb out;
  out.db.reset(raw);
  out.events.reset(handles[0]);
  out.index.reset(handles[1]);
  if (history) out.history.reset(handles[2]);
  return out;
}

}  // namespace admission::testing
