#include "ops/admitd/role_loop.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

namespace admission::ops::admitd {

Result<std::function<bool(std::string_view, uint64_t)>> DrillFromEnvironment() {
  const char* spec = std::getenv("ADMITD_KAFKA_DRILL");
  if (spec == nullptr || *spec == '\0') return std::function<bool(std::string_view, uint64_t)>();
  std::vector<std::string> parts;
  std::string part;
  for (const char* p = spec;; ++p) {
    if (*p == ':' || *p == '\0') {
      parts.push_back(part);
      part.clear();
      if (*p == '\0') break;
    } else {
      part.push_back(*p);
    }
  }
  const auto invalid = Status(Code::kInvalidArgument,
                              std::string("ADMITD_KAFKA_DRILL='") + spec +
                                  "': expected POINT:N:ACTION[:MS], POINT produced or committing, "
                                  "ACTION kill, stop or stall");
  if (parts.size() < 3 || parts.size() > 4) return invalid;
  const std::string point = parts[0];
  const std::string action = parts[2];
  uint64_t n = 0;
  int64_t ms = 0;
  try {
    n = std::stoull(parts[1]);
    if (parts.size() == 4) ms = std::stoll(parts[3]);
  } catch (const std::exception&) {
    return invalid;
  }
  if ((point != "produced" && point != "committing") ||
      (action != "kill" && action != "stop" && action != "stall")) {
    return invalid;
  }
  spdlog::warn("fault drill armed: {} of transaction {}: {} {} ms", point, n, action, ms);
  return std::function<bool(std::string_view, uint64_t)>(
      [point, n, action, ms](std::string_view at, uint64_t transaction) {
        if (at != point || transaction != n) return false;
        spdlog::warn("fault drill: {} at {} of transaction {}", action, point, transaction);
        if (action == "stop") {
          raise(SIGSTOP);
        } else if (action == "stall") {
          std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        } else if (ms == 0) {
          raise(SIGKILL);
        } else {
          std::thread([ms] {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms));
            raise(SIGKILL);
          }).detach();
        }
        return false;
      });
}

Status StandbyAnswer::Refusal(ledger::KafkaLog& kafka, ledger::KafkaLeadership* leadership) {
  const auto now = std::chrono::steady_clock::now();
  if (leadership != nullptr && now - asked_ > std::chrono::milliseconds(kHolderRefreshMs)) {
    asked_ = now;
    auto holder = leadership->Holder();
    holder_ = holder.ok() && holder->has_value() ? **holder : "";
  }
  return Status(Code::kUnavailable,
                "this admitd is a standby of the Kafka ledger " +
                    kafka.options().address.ToString() + ": it answers reads, and writes go to " +
                    (holder_.empty() ? std::string("the active writer (being chosen now)")
                                     : "the active writer at " + holder_));
}

void ReadyFile::Mark() {
  if (marked_) return;
  marked_ = true;
  if (path_.empty()) return;
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << lines_;
  }
  std::rename(tmp.c_str(), path_.c_str());
}

void ErrorThrottle::Error(const std::string& what, const Status& s) {
  const auto now = std::chrono::steady_clock::now();
  const std::string text = what + ": " + s.ToString();
  if (text == last_ && now - logged_ < std::chrono::milliseconds(kErrorRepeatMs)) return;
  spdlog::error("{}", text);
  last_ = text;
  logged_ = now;
}

kj::Promise<void> FollowOrLead(kj::AsyncIoContext& io, ledger::KafkaLog* kafka,
                               ledger::KafkaLeadership* leadership, Service& service,
                               rpc::Daemon& daemon, std::optional<Status>* halted,
                               ErrorThrottle& throttle, ReadyFile& ready) {
  if (kafka == nullptr) return kj::NEVER_DONE;
  if (kafka->writer() && !leadership->leader()) {
    // Kafka took the partition away (this member missed its session: stopped, cut off, or the
    // broker was away). Another member may write now; this one reads until it is given the
    // partition again, and then writes under a new producer epoch.
    kafka->Demote();
    spdlog::warn("this admitd lost the Kafka ledger's partition in group {}: standby now",
                 ledger::KafkaLeadershipGroup(kafka->options().address.topic));
  }
  if (auto why = kafka->Halted()) {
    *halted = *why;
    return kj::READY_NOW;
  }
  if (service.broken()) {
    // An append failed (the broker was away, or its outcome stayed unknown): the log settles
    // what the topic holds by reading its tail, then the decider is rebuilt on it.
    const uint64_t before = service.position();
    auto head = kafka->CatchUp();
    Status s = head.ok() ? service.Reload() : head.status();
    if (s.ok()) {
      spdlog::warn("the Kafka ledger answers again: decider rebuilt at sequence {}",
                   service.position());
      daemon.LedgerAdvanced(std::min(before, service.position()), service.position());
    } else {
      throttle.Error("recovering after a failed append", s);
    }
  }
  if (!kafka->writer()) {
    const uint64_t before = service.position();
    Status s = Status::Ok();
    if (leadership->leader()) {
      s = kafka->BecomeWriter();
      if (s.ok()) {
        spdlog::info("Kafka gave this admitd the ledger's partition: it is the writer now");
      }
    } else {
      auto head = kafka->CatchUp();
      if (!head.ok()) s = head.status();
    }
    if (s.ok()) {
      auto folded = service.Follow();
      if (!folded.ok()) s = folded.status();
    }
    if (!s.ok()) {
      throttle.Error("following the Kafka ledger", s);
      if (s.code() == Code::kCorruption || s.code() == Code::kInvalidArgument) {
        *halted = s;  // a fork, or a topic that may not be written: nothing to wait for
        return kj::READY_NOW;
      }
    }
    daemon.LedgerAdvanced(before, service.position());
  }
  if (!ready.marked()) {
    if (kafka->writer()) {
      ready.Mark();
    } else if (auto holder = leadership->Holder();
               holder.ok() && holder->has_value() && **holder != leadership->advertised()) {
      // A standby of a known writer. When the group names this daemon, the partition is on
      // its way here: ready once it writes, never as a standby that refuses writes naming
      // itself as the writer.
      ready.Mark();
    }
  }
  return io.provider->getTimer()
      .afterDelay(kRolePollMs * kj::MILLISECONDS)
      .then([&io, kafka, leadership, &service, &daemon, halted, &throttle, &ready]() {
        return FollowOrLead(io, kafka, leadership, service, daemon, halted, throttle, ready);
      });
}

}  // namespace admission::ops::admitd
