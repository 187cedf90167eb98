#include "consumers/billing/store.h"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <charconv>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "consumers/billing/report.h"
#include "ledger/private_files.h"
#include "ledger/rocksdb_options.h"

namespace admission::consumers::billing {

namespace {

// Keys: "cursor"; "f" + a fold entry's key; "a" + an aggregate's key (JSON); "o" + position
// (20 and 10 digits, so that byte order is position order).
constexpr char kCursorKey[] = "cursor";

std::string OutboxKey(const OutboxPosition& p) {
  char text[40];
  std::snprintf(text, sizeof text, "o%020llu.%010u", static_cast<unsigned long long>(p.sequence),
                p.index);
  return text;
}

std::string AggregateKeyText(const AggregateKey& k) {
  return "a" + nlohmann::json::array({k.bucket_ms, k.kind == UsageKind::kUsed ? "used" : "idle",
                                      k.to.ns, k.to.local_queue, k.to.cluster_queue, k.to.cohort,
                                      k.to.priority_class, k.to.flavor, k.to.resource})
                   .dump();
}

std::string Int128Text(__int128 v) { return ExactDecimal(v, 0); }

std::optional<__int128> ParseInt128(std::string_view text) {
  if (text.empty()) return std::nullopt;
  bool negative = text[0] == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  __int128 v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return negative ? -v : v;
}

Status Io(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return Status(Code::kIoError, "billing state: " + what + ": " + s.ToString());
}

}  // namespace

std::string OutboxPosition::ToString() const {
  return std::to_string(sequence) + "." + std::to_string(index);
}

std::optional<OutboxPosition> OutboxPosition::Parse(std::string_view text) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  OutboxPosition p;
  auto a = std::from_chars(text.data(), text.data() + dot, p.sequence);
  auto b = std::from_chars(text.data() + dot + 1, text.data() + text.size(), p.index);
  if (a.ec != std::errc() || a.ptr != text.data() + dot || b.ec != std::errc() ||
      b.ptr != text.data() + text.size()) {
    return std::nullopt;
  }
  return p;
}

BillingStore::~BillingStore() = default;

Result<std::unique_ptr<BillingStore>> BillingStore::Open(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.paranoid_checks = true;
  // Private to the user, as the ledger it is folded from (docs/operations.md, "Files and modes").
  options.env = ledger::PrivateFilesEnv();
  ADM_RETURN_IF_ERROR(ledger::CreatePrivateDirectory(dir));
  rocksdb::DB* raw = nullptr;
  ADM_RETURN_IF_ERROR(Io(rocksdb::DB::Open(options, dir, &raw), "opening " + dir));
  std::unique_ptr<BillingStore> store(new BillingStore());
  store->db_.reset(raw);
  std::string value;
  rocksdb::Status got = raw->Get(rocksdb::ReadOptions(), kCursorKey, &value);
  if (got.ok()) {
    if (value.size() != 8 + 32) {
      return Status(Code::kCorruption, "billing state in " + dir + ": the cursor is " +
                                           std::to_string(value.size()) + " bytes, not 40");
    }
    std::memcpy(&store->cursor_.sequence, value.data(), 8);
    std::memcpy(store->cursor_.hash.data(), value.data() + 8, 32);
  } else if (!got.IsNotFound()) {
    return Io(got, "reading the cursor");
  }
  std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("a"); it->Valid() && it->key().starts_with("a"); it->Next()) {
    const std::string key = it->key().ToString();
    auto amount = ParseInt128(it->value().ToString());
    AggregateKey k;
    try {
      const nlohmann::json j = nlohmann::json::parse(key.substr(1));
      k.bucket_ms = j.at(0).get<int64_t>();
      k.kind = j.at(1).get<std::string>() == "used" ? UsageKind::kUsed : UsageKind::kIdle;
      k.to = Attribution{j.at(2).get<std::string>(), j.at(3).get<std::string>(),
                         j.at(4).get<std::string>(), j.at(5).get<std::string>(),
                         j.at(6).get<std::string>(), j.at(7).get<std::string>(),
                         j.at(8).get<std::string>()};
    } catch (const nlohmann::json::exception& e) {
      amount.reset();
    }
    if (!amount) {
      return Status(Code::kCorruption, "billing state in " + dir + ": aggregate '" + key +
                                           "' does not parse");
    }
    store->aggregates_[k] = *amount;
  }
  ADM_RETURN_IF_ERROR(Io(it->status(), "reading the aggregates"));
  return store;
}

Status BillingStore::LoadFold(UsageFold* fold) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("f"); it->Valid() && it->key().starts_with("f"); it->Next()) {
    std::string_view key(it->key().data() + 1, it->key().size() - 1);
    ADM_RETURN_IF_ERROR(fold->Restore(key, std::string_view(it->value().data(), it->value().size())));
  }
  return Io(it->status(), "reading the fold");
}

Status BillingStore::Commit(
    const Cursor& cursor,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& fold,
    const std::vector<std::pair<OutboxPosition, UsageRecord>>& records,
    const std::optional<OutboxPosition>& published) {
  rocksdb::WriteBatch batch;
  std::string c(8 + 32, '\0');
  std::memcpy(c.data(), &cursor.sequence, 8);
  std::memcpy(c.data() + 8, cursor.hash.data(), 32);
  batch.Put(kCursorKey, c);
  for (const auto& [key, value] : fold) {
    if (value) {
      batch.Put("f" + key, *value);
    } else {
      batch.Delete("f" + key);
    }
  }
  std::map<AggregateKey, __int128> changed;
  for (const auto& [position, record] : records) {
    const AggregateKey k{record.bucket_ms, record.kind, record.to};
    auto it = changed.find(k);
    if (it == changed.end()) {
      auto stored = aggregates_.find(k);
      it = changed.emplace(k, stored == aggregates_.end() ? 0 : stored->second).first;
    }
    it->second += record.milli_ms;
    if (!published || position > *published) {
      batch.Put(OutboxKey(position), nlohmann::json::array({record.id, record.json}).dump());
    }
  }
  for (const auto& [k, v] : changed) batch.Put(AggregateKeyText(k), Int128Text(v));
  rocksdb::WriteOptions sync;
  sync.sync = true;
  ADM_RETURN_IF_ERROR(Io(db_->Write(sync, &batch), "writing a batch"));
  cursor_ = cursor;
  for (auto& [k, v] : changed) aggregates_[k] = v;
  return Status::Ok();
}

Result<std::vector<OutboxEntry>> BillingStore::ReadOutbox(size_t max_count) const {
  std::vector<OutboxEntry> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("o"); it->Valid() && it->key().starts_with("o") && out.size() < max_count;
       it->Next()) {
    const std::string key = it->key().ToString();
    OutboxEntry e;
    std::string text = key.substr(1);
    auto position = OutboxPosition::Parse(text);
    bool ok = position.has_value();
    if (ok) {
      e.position = *position;
      try {
        const nlohmann::json j = nlohmann::json::parse(it->value().ToString());
        e.id = j.at(0).get<std::string>();
        e.json = j.at(1).get<std::string>();
      } catch (const nlohmann::json::exception&) {
        ok = false;
      }
    }
    if (!ok) return Status(Code::kCorruption, "billing state: outbox entry '" + key + "'");
    out.push_back(std::move(e));
  }
  ADM_RETURN_IF_ERROR(Io(it->status(), "reading the outbox"));
  return out;
}

Status BillingStore::RemoveOutboxThrough(const OutboxPosition& last) {
  OutboxPosition end = last;
  if (++end.index == 0) ++end.sequence;  // the first position after `last`
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::WriteBatch batch;
  batch.DeleteRange("o", OutboxKey(end));
  return Io(db_->Write(sync, &batch), "removing published outbox entries");
}

Result<uint64_t> BillingStore::OutboxSize() const {
  uint64_t n = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("o"); it->Valid() && it->key().starts_with("o"); it->Next()) ++n;
  ADM_RETURN_IF_ERROR(Io(it->status(), "reading the outbox"));
  return n;
}

}  // namespace admission::consumers::billing
