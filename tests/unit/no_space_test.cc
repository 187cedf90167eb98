// RocksDB's own no-space error (no free-space floor): a file system that fails every write on
// demand stands for the full disk. The append is refused with kNoSpace, the process goes on, the
// service refuses further writes without touching the decider, and once writes work again the
// ledger takes appends by itself (RocksDB's recovery, then the service folds the ledger again):
// nothing acknowledged is lost and the chain verifies. Shown red by not folding again
// (broken_by_no_space_ ignored: every later write is refused).
#include <gtest/gtest.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "ledger/rocksdb_log.h"
#include "ledger/verify.h"
#include "ops/service/clock.h"
#include "ops/service/service.h"
#include "schema/event_codec.h"
#include "tests/unit/temp_dir.h"

namespace admission::testing {
namespace {

class FullDisk final : public rocksdb::FileSystemWrapper {
 public:
  explicit FullDisk(const std::shared_ptr<rocksdb::FileSystem>& base) : FileSystemWrapper(base) {}
  const char* Name() const override { return "FullDisk"; }
  std::atomic<bool> full{false};

  class File final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> file, const FullDisk& disk)
        : FSWritableFileOwnerWrapper(std::move(file)), disk_(disk) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
      if (disk_.full) return rocksdb::IOStatus::NoSpace("no space left on device (test)");
      return target()->Append(data, options, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                             const rocksdb::DataVerificationInfo& info,
                             rocksdb::IODebugContext* dbg) override {
      if (disk_.full) return rocksdb::IOStatus::NoSpace("no space left on device (test)");
      return target()->Append(data, options, info, dbg);
    }

   private:
    const FullDisk& disk_;
  };

  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options,
                                 uint64_t* free, rocksdb::IODebugContext* dbg) override {
    if (full) {
      *free = 0;
      return rocksdb::IOStatus::OK();
    }
    return target()->GetFreeSpace(path, options, free, dbg);
  }
  rocksdb::IOStatus NewWritableFile(const std::string& name, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    if (full) return rocksdb::IOStatus::NoSpace("no space left on device (test)");
    rocksdb::IOStatus s = target()->NewWritableFile(name, options, result, dbg);
    if (s.ok()) *result = std::make_unique<File>(std::move(*result), *this);
    return s;
  }
};

class FixedTime final : public ops::Clock {
 public:
  int64_t NowNs() override { return now += 1'000'000'000; }
  int64_t now = 1'800'000'000'000'000'000;
};

std::string Submission(int i) {
  capnp::MallocMessageBuilder m;
  auto e = m.initRoot<schema::Event>();
  auto wl = e.initBody().initWorkloadSubmitted().initWorkload();
  wl.setNamespace("ns");
  wl.setName("w" + std::to_string(i));
  wl.setUid("uid-" + std::to_string(i));
  wl.setQueueName("lq");
  auto ps = wl.initPodSets(1)[0];
  ps.setName("main");
  ps.setCount(1);
  e.setIdempotencyKey("submit/ns/w" + std::to_string(i));
  return schema::EncodeEvent(m);
}

TEST(RocksDbLedger, ANoSpaceWriteIsRefusedCleanlyAndWritesResume) {
  TempDir dir;
  auto disk = std::make_shared<FullDisk>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(disk);
  ledger::RocksDbLogOptions options;
  options.env = env.get();
  options.min_free_bytes = 0;  // only the disk itself refuses
  auto log = ledger::RocksDbLog::Open(dir.Sub("ledger"), options);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  FixedTime clock;
  auto service = ops::Service::Open(**log, clock);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  int acked = 0;
  auto submit = [&](int i) { return (*service)->Record({Submission(i)}, ops::IntakeOptions{}); };
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(submit(i).ok());
    ++acked;
  }
  const ledger::Sequence head = (*log)->GetHead().sequence;

  disk->full = true;
  auto refused = submit(100);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kNoSpace) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("bytes free"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE((*log)->Disk()->refusing);
  auto again = submit(101);
  EXPECT_EQ(again.status().code(), Code::kNoSpace) << again.status().ToString();
  EXPECT_EQ((*log)->GetHead().sequence, head) << "a refused append moved the head";
  EXPECT_GE((*log)->Disk()->appends_refused, 2u);

  disk->full = false;
  // RocksDB recovers by itself (its SstFileManager checks the free space every few seconds).
  Status last = Status(Code::kNoSpace, "not tried");
  for (int attempt = 0; attempt < 300 && !last.ok(); ++attempt) {
    auto r = submit(200);
    last = r.ok() ? Status::Ok() : r.status();
    if (!last.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(last.ok()) << "writes did not resume within 30 s: " << last.ToString();
  ++acked;
  EXPECT_FALSE((*log)->Disk()->refusing);
  for (int i = 300; i < 303; ++i) {
    ASSERT_TRUE(submit(i).ok());
    ++acked;
  }
  EXPECT_EQ((*service)->engine().workloads().size(), static_cast<size_t>(acked));
  auto verified = ledger::VerifyChain(**log, 1, schema::kGenesisHash, false);
  ASSERT_TRUE(verified.ok());
  EXPECT_FALSE(verified->fault.has_value());
  // The decider reopened from the ledger holds the same workloads.
  service->reset();
  log->reset();
  auto reopened = ledger::RocksDbLog::Open(dir.Sub("ledger"), options);
  ASSERT_TRUE(reopened.ok());
  auto fresh = ops::Service::Open(**reopened, clock);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->engine().workloads().size(), static_cast<size_t>(acked));
}

}  // namespace
}  // namespace admission::testing
